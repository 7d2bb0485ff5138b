package tensorfile

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// OpenRegular opens path for reading only when it is a regular file, and returns it with its
// FileInfo. The open does not wait for a writer (O_NONBLOCK where the system has one), so a named
// pipe left in a run dir or a bundle costs an error, not a reader stuck forever; the check is on
// the opened file, so nothing swapped in between a stat and the open slips through. A directory
// is a *fs.PathError wrapping syscall.EISDIR, anything else not regular one naming its type.
func OpenRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, openReadFlags, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		var why error = syscall.EISDIR
		if !st.IsDir() {
			why = fmt.Errorf("not a regular file (%s)", st.Mode().Type())
		}
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: why}
	}
	return f, st, nil
}
