//go:build !unix

package tensorfile

import "os"

const openReadFlags = os.O_RDONLY
