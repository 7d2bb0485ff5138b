package backend

// SetExecutable makes the search look beside path instead of beside the test binary, so a
// plugin installed above the build folder cannot leak into a test's isolated search.
func SetExecutable(path string) (restore func()) {
	old := executable
	executable = func() (string, error) { return path, nil }
	return func() { executable = old }
}
