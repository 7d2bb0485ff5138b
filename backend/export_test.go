package backend

import "github.com/gomlx/gomlx/backends"

// SetExecutable makes the search look beside path instead of beside the test binary, so a
// plugin installed above the build folder cannot leak into a test's isolated search.
func SetExecutable(path string) (restore func()) {
	old := executable
	executable = func() (string, error) { return path, nil }
	return func() { executable = old }
}

// SetCUDAStarter replaces the CUDA plugin's start (gopjrt's load and client creation).
func SetCUDAStarter(start func(plugin string) (backends.Backend, error)) (restore func()) {
	old := startCUDA
	startCUDA = start
	return func() { startCUDA = old }
}

// SetCUDAHost makes the no-device message read the driver version from driverFile and the device
// files from glob, so a test can stage a host with (or without) a driver.
func SetCUDAHost(driverFile, glob string) (restore func()) {
	oldF, oldG := driverVersionFile, deviceGlob
	driverVersionFile, deviceGlob = driverFile, glob
	return func() { driverVersionFile, deviceGlob = oldF, oldG }
}
