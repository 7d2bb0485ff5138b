package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

// FS is the file-system seam every write and read of this package goes through: OSFS in
// production, MemFS (with injected faults and simulated power loss) in tests. Its durable-write
// half is tensorfile.FS, so that a record is written by tensorfile.WriteFS.
type FS interface {
	tensorfile.FS
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string) error
	// Open opens a file for reading and reports its size.
	Open(path string) (io.ReadCloser, int64, error)
	// ReadDir lists the names in dir, sorted.
	ReadDir(dir string) ([]string, error)
}

// File is a file being written (tensorfile's).
type File = tensorfile.File

// OSFS is the operating system's file system.
type OSFS struct{}

var _ FS = OSFS{}

func (OSFS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

// CreateTemp creates the file with mode 0666 less the umask (os.CreateTemp would use 0600).
func (OSFS) CreateTemp(dir, prefix string) (File, error) {
	return tensorfile.OS{}.CreateTemp(dir, prefix)
}

func (OSFS) Open(path string) (io.ReadCloser, int64, error) {
	f, st, err := tensorfile.OpenRegular(path) // a FIFO is refused, not waited on
	if err != nil {
		return nil, 0, err
	}
	return f, st.Size(), nil
}

func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (OSFS) Remove(path string) error             { return os.Remove(path) }

// SyncDir fsyncs the directory; file systems that cannot (EINVAL, ENOTSUP) count as done.
func (OSFS) SyncDir(dir string) error { return tensorfile.OS{}.SyncDir(dir) }

func (OSFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

// tmpPrefix starts every temporary file's name (tensorfile's); readers of a directory ignore
// such files and a checkpointer removes leftovers (from a crash) before its first write.
const tmpPrefix = tensorfile.TempPrefix

// IsTemp reports whether a base name is one of this package's temporary files.
func IsTemp(base string) bool { return tensorfile.IsTemp(base) }

// retry is the with_io_retry policy: attempts tries in all, sleeping base, 2*base, 4*base …
// (capped at 5 s) between tries, retrying only transient errors.
type retry struct {
	attempts int
	base     time.Duration
	sleep    func(time.Duration)
}

var defaultRetry = retry{attempts: 3, base: 100 * time.Millisecond, sleep: time.Sleep}

func (r retry) do(op func() error) error {
	var err error
	for i := range max(r.attempts, 1) {
		if i > 0 {
			d := min(r.base<<(i-1), 5*time.Second)
			if d > 0 {
				r.sleep(d)
			}
		}
		if err = op(); err == nil || !Transient(err) {
			return err
		}
	}
	return err
}

// Transient reports whether an I/O error may go away on a retry of the whole operation:
// EINTR, EAGAIN, EBUSY, ETIMEDOUT and EIO (a failed fsync is retried by rewriting the file
// from scratch, never by a second fsync). A full disk, a permission or a missing path is not.
func Transient(err error) bool {
	for _, e := range []error{syscall.EINTR, syscall.EAGAIN, syscall.EBUSY, syscall.ETIMEDOUT, syscall.EIO} {
		if errors.Is(err, e) {
			return true
		}
	}
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// writeDurable writes path through fsys so that it is either absent or complete, even across
// a crash (tensorfile.WriteFS: a temporary file in the same directory, fsync, close, rename onto
// path, fsync of the directory). The whole sequence is retried on transient errors; the
// temporary file is removed after a failure. The error names path and the step that failed.
func writeDurable(fsys FS, rt retry, path string, write func(io.Writer) error) error {
	return rt.do(func() error {
		if err := tensorfile.WriteFS(fsys, path, write); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		return nil
	})
}
