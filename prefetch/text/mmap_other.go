//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package text

import (
	"io"
	"os"
)

// mapFile reads size bytes of f into memory, where memory mapping is not implemented: such a
// "mapping" costs its size in memory, so keep MaxMapped low for a corpus of large files.
func mapFile(f *os.File, size int64) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), b); err != nil {
		return nil, err
	}
	return b, nil
}

// unmapFile drops a buffer made by mapFile.
func unmapFile([]byte) error { return nil }

// unlinkOpen is false where an open file may not be removable: a spill is removed by Close.
const unlinkOpen = false
