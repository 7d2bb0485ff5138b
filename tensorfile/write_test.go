package tensorfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// fakeFS is a file system in memory that logs every operation and fails the one named by fail.
type fakeFS struct {
	files map[string][]byte // the visible names
	log   []string
	fail  string // an op: "create", "write", "sync", "close", "rename", "syncdir"
	n     int
}

type fakeFile struct {
	fs   *fakeFS
	name string
	buf  bytes.Buffer
}

var errInjected = errors.New("injected")

func (f *fakeFS) op(name string) error {
	f.log = append(f.log, name)
	if f.fail == name {
		return errInjected
	}
	return nil
}

func (f *fakeFS) CreateTemp(dir, prefix string) (File, error) {
	if err := f.op("create"); err != nil {
		return nil, err
	}
	f.n++
	name := filepath.Join(dir, prefix+strings.Repeat("x", f.n))
	f.files[name] = nil
	return &fakeFile{fs: f, name: name}, nil
}

func (f *fakeFile) Write(p []byte) (int, error) {
	if err := f.fs.op("write"); err != nil {
		return 0, err
	}
	f.buf.Write(p)
	f.fs.files[f.name] = bytes.Clone(f.buf.Bytes())
	return len(p), nil
}
func (f *fakeFile) Sync() error  { return f.fs.op("sync") }
func (f *fakeFile) Close() error { return f.fs.op("close") }
func (f *fakeFile) Name() string { return f.name }

func (f *fakeFS) Rename(oldpath, newpath string) error {
	if err := f.op("rename"); err != nil {
		return err
	}
	f.files[newpath] = f.files[oldpath]
	delete(f.files, oldpath)
	return nil
}

func (f *fakeFS) Remove(path string) error {
	f.log = append(f.log, "remove")
	if _, ok := f.files[path]; !ok {
		return fs.ErrNotExist
	}
	delete(f.files, path)
	return nil
}

func (f *fakeFS) SyncDir(string) error { return f.op("syncdir") }

// WriteFS's order is create, write, fsync, close, rename, fsync of the directory; a failure at
// any step before the rename removes the temporary file and leaves the old file as it was; a
// failed directory fsync comes after the rename, so the new file is in place.
func TestWriteFSOrderAndFailures(t *testing.T) {
	const path = "/d/f.bin"
	write := func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }
	ok := &fakeFS{files: map[string][]byte{path: []byte("old")}}
	if err := WriteFS(ok, path, write); err != nil {
		t.Fatal(err)
	}
	if want := []string{"create", "write", "sync", "close", "rename", "syncdir"}; !slices.Equal(ok.log, want) {
		t.Errorf("operations %v, want %v", ok.log, want)
	}
	if string(ok.files[path]) != "new" || len(ok.files) != 1 {
		t.Errorf("after the write: %v", ok.files)
	}
	for _, tc := range []struct{ fail, op string }{
		{"create", "create temporary file"}, {"write", "write"}, {"sync", "fsync"}, {"close", "close"}, {"rename", "rename"},
	} {
		f := &fakeFS{files: map[string][]byte{path: []byte("old")}, fail: tc.fail}
		err := WriteFS(f, path, write)
		var we *WriteError
		if !errors.As(err, &we) || we.Path != path || we.Op != tc.op || !errors.Is(err, errInjected) {
			t.Errorf("%s fails: error %v, want a *WriteError on %s at %q wrapping the cause", tc.fail, err, path, tc.op)
		}
		if !strings.Contains(err.Error(), "write "+path+": "+tc.op+": injected") {
			t.Errorf("%s fails: message %q", tc.fail, err)
		}
		if len(f.files) != 1 || string(f.files[path]) != "old" {
			t.Errorf("%s fails: files %v, want the old file alone", tc.fail, f.files)
		}
		if slices.Contains(f.log, "syncdir") {
			t.Errorf("%s fails: the directory was synced after a failure (%v)", tc.fail, f.log)
		}
	}
	f := &fakeFS{files: map[string][]byte{path: []byte("old")}, fail: "syncdir"}
	err := WriteFS(f, path, write)
	var we *WriteError
	if !errors.As(err, &we) || we.Op != "fsync directory" || string(f.files[path]) != "new" || len(f.files) != 1 {
		t.Errorf("a failed directory fsync: %v, files %v; want the new file in place and the step named", err, f.files)
	}
	// write's own error is the cause, under the step "write".
	f = &fakeFS{files: map[string][]byte{}}
	cause := errors.New("encoder refused")
	if err := WriteFS(f, path, func(io.Writer) error { return cause }); !errors.Is(err, cause) || len(f.files) != 0 {
		t.Errorf("write's error: %v, files %v", err, f.files)
	}
}

// On the real file system: the file is complete with its mode, a failed rewrite keeps the old
// one, and no temporary file is left in either case.
func TestWriteFileOS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.txt")
	if err := WriteFile(path, []byte("one"), 0o640); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&^0o640 != 0 || st.Mode().Perm()&0o600 != 0o600 {
		t.Fatalf("mode %v, %v; want 0640 less the umask", st.Mode(), err)
	}
	if err := WriteStream(path, 0o644, func(w io.Writer) error {
		w.Write([]byte("half"))
		return syscall.ENOSPC
	}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a failing write: %v", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "one" {
		t.Errorf("after a failed rewrite the file holds %q, want the old %q", got, "one")
	}
	if err := WriteFile(path, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "two" {
		t.Errorf("rewrite: %q", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("the directory holds %v, want a.txt alone", ents)
	}
	err = WriteFile(filepath.Join(dir, "missing", "b"), nil, 0o644)
	var we *WriteError
	if !errors.As(err, &we) || we.Op != "create temporary file" || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("under a missing folder: %v", err)
	}
	if !IsTemp(TempPrefix+"x") || IsTemp("x") {
		t.Error("IsTemp disagrees with TempPrefix")
	}
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// WriteDir makes a complete folder or nothing: an empty target is replaced, a non-empty one or a
// bad name is refused before anything is created, and a failure halfway removes the temporary
// folder and leaves no target.
func TestWriteDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "bundle")
	files := []DirFile{{"b.bin", []byte{1, 2}}, {"manifest.json", []byte("{}")}}
	if err := WriteDir(dir, files); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"b.bin", "manifest.json"}) {
		t.Errorf("folder holds %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.bin")); !bytes.Equal(b, []byte{1, 2}) {
		t.Errorf("b.bin holds %v", b)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o755 {
		t.Errorf("folder mode %v, want 0755", st.Mode().Perm())
	}
	err := WriteDir(dir, files)
	var we *WriteError
	if !errors.As(err, &we) || we.Op != "check target" || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a non-empty target: %v", err)
	}
	empty := filepath.Join(root, "empty")
	os.Mkdir(empty, 0o755)
	if err := WriteDir(empty, files); err != nil {
		t.Fatalf("an empty target: %v", err)
	}
	for _, bad := range [][]DirFile{{{"a/b", nil}}, {{"..", nil}}, {{"", nil}}, {{"x", nil}, {"x", nil}}} {
		if err := WriteDir(filepath.Join(root, "bad"), bad); err == nil {
			t.Errorf("names %v accepted", bad)
		}
	}
	// The second file's name is too long for the file system: the first was written already.
	long := []DirFile{{"a", []byte("x")}, {strings.Repeat("n", 300), nil}}
	if err := WriteDir(filepath.Join(root, "half"), long); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("a name too long: %v", err)
	}
	if got := listDir(t, root); !slices.Equal(got, []string{"bundle", "empty"}) {
		t.Errorf("after the refusals and the failure the parent holds %v, want bundle and empty", got)
	}
}
