//go:build unix

package tensorfile

import (
	"os"
	"syscall"
)

// O_NONBLOCK returns at once from opening a FIFO with no writer; on a regular file it changes
// nothing.
const openReadFlags = os.O_RDONLY | syscall.O_NONBLOCK
