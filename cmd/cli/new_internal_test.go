package cli

// SetSourceRootForTest makes `nitro new` believe this binary was built from root ("" for a build
// with no checkout behind it), until restore is called.
func SetSourceRootForTest(root string) (restore func()) {
	old := sourceRoot
	sourceRoot = func() string { return root }
	return func() { sourceRoot = old }
}
