package tensorfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// FS is what a durable write needs of a file system; OS is the operating system's. A test
// passes one that fails on purpose.
type FS interface {
	// CreateTemp creates a new file in dir whose name starts with prefix, open for writing.
	CreateTemp(dir, prefix string) (File, error)
	// Rename atomically replaces newpath with oldpath.
	Rename(oldpath, newpath string) error
	// Remove deletes a file.
	Remove(path string) error
	// SyncDir makes dir's entries (creations, renames, removals) durable.
	SyncDir(dir string) error
}

// File is a file being written.
type File interface {
	io.Writer
	Sync() error
	Close() error
	Name() string // the full path
}

// OS is the operating system's file system; files are created with Perm less the umask (0
// means 0o666, as os.Create).
type OS struct{ Perm fs.FileMode }

var _ FS = OS{}

// CreateTemp creates the file exclusively under a random name (os.CreateTemp would force 0600).
func (o OS) CreateTemp(dir, prefix string) (File, error) {
	perm := o.Perm
	if perm == 0 {
		perm = 0o666
	}
	for range 100 {
		var b [8]byte
		rand.Read(b[:])
		name := filepath.Join(dir, prefix+hex.EncodeToString(b[:]))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	return nil, &fs.PathError{Op: "createtemp", Path: filepath.Join(dir, prefix+"*"), Err: fs.ErrExist}
}

func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
func (OS) Remove(path string) error             { return os.Remove(path) }

// SyncDir fsyncs the directory; where folders cannot be synced (Windows, and file systems that
// answer EINVAL or ENOTSUP) it counts as done.
func (OS) SyncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP) {
		return nil
	}
	return err
}

// TempPrefix starts the name of every temporary file and folder a durable write makes, so that a
// reader of a directory can skip them (IsTemp) and a cleanup can find a crash's leftovers.
const TempPrefix = ".nitro-tmp-"

// IsTemp reports whether a base name is a durable write's temporary file or folder.
func IsTemp(base string) bool { return strings.HasPrefix(base, TempPrefix) }

// WriteError is a durable write that failed at one step: Op is "create temporary file",
// "write", "fsync", "close", "rename" or "fsync directory" (WriteDir adds "check target" and
// "remove empty target"); Err is the cause (from write, when Op is "write"). Before "fsync
// directory" nothing is left behind: no temporary file, and Path as it was.
type WriteError struct {
	Path string
	Op   string
	Err  error
}

func (e *WriteError) Error() string { return fmt.Sprintf("write %s: %s: %v", e.Path, e.Op, e.Err) }
func (e *WriteError) Unwrap() error { return e.Err }

// WriteFile writes data to path durably, as WriteStream does.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return WriteStream(path, perm, func(w io.Writer) error { _, err := w.Write(data); return err })
}

// WriteStream writes path durably with perm (less the umask): complete under that name or
// absent (the previous file intact), even across a crash. See WriteFS.
func WriteStream(path string, perm fs.FileMode, write func(io.Writer) error) error {
	return WriteFS(OS{Perm: perm}, path, write)
}

// WriteFS writes path through fsys: write fills a temporary file in path's directory, which is
// fsynced, closed, renamed onto path, and then the directory is fsynced, so that path is always
// either the old file or the whole new one. On a failure before the rename the temporary file
// is removed. Retrying is the caller's: a failed fsync must be retried by writing anew.
func WriteFS(fsys FS, path string, write func(io.Writer) error) error {
	dir, base := filepath.Split(path)
	dir = filepath.Clean(dir)
	f, err := fsys.CreateTemp(dir, TempPrefix+base+".")
	if err != nil {
		return &WriteError{path, "create temporary file", err}
	}
	tmp := f.Name()
	step, err := "write", write(f)
	if err == nil {
		step, err = "fsync", f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		step, err = "close", cerr
	}
	if err == nil {
		step, err = "rename", fsys.Rename(tmp, path)
	}
	if err != nil {
		fsys.Remove(tmp) // best effort; IsTemp finds a leftover
		return &WriteError{path, step, err}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return &WriteError{path, "fsync directory", err}
	}
	return nil
}

// DirFile is one file WriteDir writes: a base name and its bytes.
type DirFile struct {
	Name string
	Data []byte
}

// WriteDir writes files, in the order given, as the folder dir (0755; files 0644 less the
// umask), durably: into a temporary sibling folder whose files and itself are fsynced, renamed
// onto dir, then the parent is fsynced, so that dir is absent (or left empty) or complete. dir
// must not exist or be an empty folder; each name must be a plain base name, once. On a failure
// before the rename the temporary folder is removed.
func WriteDir(dir string, files []DirFile) error {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		if f.Name == "" || f.Name == "." || f.Name == ".." || strings.ContainsAny(f.Name, `/\`) || seen[f.Name] {
			return &WriteError{dir, "check names", fmt.Errorf("file name %q is not a distinct base name", f.Name)}
		}
		seen[f.Name] = true
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return &WriteError{dir, "check target", errors.New("the folder exists and is not empty: name a new folder or empty this one")}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &WriteError{dir, "check target", err}
	}
	parent := filepath.Dir(filepath.Clean(dir))
	tmp, err := os.MkdirTemp(parent, TempPrefix+filepath.Base(dir)+".")
	if err != nil {
		return &WriteError{dir, "create temporary folder", err}
	}
	fail := func(op string, err error) error {
		os.RemoveAll(tmp)
		return &WriteError{dir, op, err}
	}
	for _, f := range files {
		if op, err := writeSynced(filepath.Join(tmp, f.Name), f.Data); err != nil {
			return fail(op+" "+f.Name, err)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp made it 0700
		return fail("chmod", err)
	}
	if err := (OS{}).SyncDir(tmp); err != nil {
		return fail("fsync", err)
	}
	if existing, err := os.ReadDir(dir); err == nil && len(existing) == 0 {
		if err := os.Remove(dir); err != nil { // os.Rename does not replace a folder
			return fail("remove empty target", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fail("rename", err)
	}
	if err := (OS{}).SyncDir(parent); err != nil {
		return &WriteError{dir, "fsync directory", err}
	}
	return nil
}

func writeSynced(path string, data []byte) (op string, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "create", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "write", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "fsync", err
	}
	return "close", f.Close()
}
