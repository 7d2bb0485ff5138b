package cli

import "github.com/nitro-go/nitro/backend"

// SetPinnedForTest makes `nitro setup` install w instead of the real pin, until restore is called.
func SetPinnedForTest(w backend.Wheel) (restore func()) {
	old := pinned
	pinned = func() backend.Wheel { return w }
	return func() { pinned = old }
}

// SetPinsForTest makes table the plugins `nitro setup --plugin NAME` chooses from, until restore
// is called.
func SetPinsForTest(table map[string]backend.Wheel) (restore func()) {
	old := pins
	pins = func() map[string]backend.Wheel { return table }
	return func() { pins = old }
}

// SetCUDAPinsForTest makes `nitro setup --cuda` install plugin and libs instead of the real pins,
// until restore is called.
func SetCUDAPinsForTest(plugin backend.Wheel, libs []backend.Wheel) (restore func()) {
	oldP, oldL := cudaPin, cudaLibs
	cudaPin = func() backend.Wheel { return plugin }
	cudaLibs = func() []backend.Wheel { return libs }
	return func() { cudaPin, cudaLibs = oldP, oldL }
}
