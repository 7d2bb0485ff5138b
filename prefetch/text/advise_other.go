//go:build !linux

package text

// adviseRandom is a no-op where syscall has no madvise.
func adviseRandom([]byte) {}
