//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package text

import (
	"os"
	"syscall"
)

// mapFile maps size bytes of f read-only. The mapping outlives f, which the caller may close.
func mapFile(f *os.File, size int64) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}

// unmapFile releases a mapping made by mapFile.
func unmapFile(b []byte) error { return syscall.Munmap(b) }

// unlinkOpen is true where an open file can be removed and still read: a spill is removed as
// soon as it is written, so that nothing is left behind if the process dies.
const unlinkOpen = true
