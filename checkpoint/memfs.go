package checkpoint

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// Op names a MemFS operation, for fault injection.
type Op string

// The operations a fault can target.
const (
	OpMkdir   Op = "mkdir"
	OpCreate  Op = "create"
	OpWrite   Op = "write"
	OpSync    Op = "fsync"
	OpClose   Op = "close"
	OpOpen    Op = "open"
	OpRename  Op = "rename"
	OpRemove  Op = "remove"
	OpSyncDir Op = "syncdir"
	OpReadDir Op = "readdir"
)

// MemFS is an in-memory FS for tests, with fault injection and a pessimistic model of power
// loss: a file's content is durable only up to its last Sync, and a directory's entries
// (creations, renames, removals) only up to its last SyncDir. Crash discards everything else.
// It is safe for concurrent use.
type MemFS struct {
	mu       sync.Mutex
	dirs     map[string]*memDir
	capacity int64 // 0: unlimited
	faults   []*memFault
	budget   int // ops left before every op fails with budgetErr; -1: no limit
	budgetEr error
	seq      int
}

type memDir struct {
	live, durable map[string]*memInode
}

type memInode struct {
	data, synced []byte
}

// Fault makes matching operations fail: operation Op on a path containing Match (any path
// when ""), after Skip matching operations went through, Count times (0: every time).
type Fault struct {
	Op    Op
	Match string
	Err   error
	Skip  int
	Count int
}

type memFault struct {
	Fault
	forever bool
}

var _ FS = (*MemFS)(nil)

// NewMemFS returns an empty in-memory file system.
func NewMemFS() *MemFS { return &MemFS{dirs: map[string]*memDir{}, budget: -1} }

// Fail injects a fault; it stays until it has fired Count times or ClearFaults.
func (m *MemFS) Fail(f Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults = append(m.faults, &memFault{Fault: f, forever: f.Count == 0})
}

// FailAfter lets n more operations of any kind through, then fails every one with err, as if
// the process had died at that point.
func (m *MemFS) FailAfter(n int, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.budget, m.budgetEr = n, err
}

// ClearFaults removes every injected fault and the FailAfter budget.
func (m *MemFS) ClearFaults() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults, m.budget = nil, -1
}

// SetCapacity bounds the bytes all files may hold together (0: unlimited); a write past the
// bound writes what fits and fails with ENOSPC.
func (m *MemFS) SetCapacity(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = n
}

// Crash simulates power loss: each directory reverts to its last synced entries and each file
// to its last synced content. Faults stay as they are.
func (m *MemFS) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.dirs {
		d.live = make(map[string]*memInode, len(d.durable))
		for name, ino := range d.durable {
			ino.data = bytes.Clone(ino.synced)
			d.live[name] = ino
		}
	}
}

// WriteFile stores a file directly (durably), for setting up tests.
func (m *MemFS) WriteFile(path string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	path = filepath.Clean(path)
	d := m.mkdirLocked(filepath.Dir(path))
	ino := &memInode{data: bytes.Clone(data), synced: bytes.Clone(data)}
	d.live[filepath.Base(path)] = ino
	d.durable[filepath.Base(path)] = ino
}

// ReadFile returns a file's current content.
func (m *MemFS) ReadFile(path string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, err := m.lookup("open", path)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(ino.data), nil
}

// check applies the budget and the faults to one operation.
func (m *MemFS) check(op Op, path string) error {
	if m.budget == 0 {
		return &fs.PathError{Op: string(op), Path: path, Err: m.budgetEr}
	}
	if m.budget > 0 {
		m.budget--
	}
	for _, f := range m.faults {
		if f.Op != op || !strings.Contains(path, f.Match) || (!f.forever && f.Count == 0) {
			continue
		}
		if f.Skip > 0 {
			f.Skip--
			continue
		}
		if !f.forever {
			f.Count--
		}
		return &fs.PathError{Op: string(op), Path: path, Err: f.Err}
	}
	return nil
}

func (m *MemFS) mkdirLocked(dir string) *memDir {
	d := m.dirs[dir]
	if d == nil {
		d = &memDir{live: map[string]*memInode{}, durable: map[string]*memInode{}}
		m.dirs[dir] = d
		if parent := filepath.Dir(dir); parent != dir {
			m.mkdirLocked(parent)
		}
	}
	return d
}

func (m *MemFS) dir(op, dir string) (*memDir, error) {
	d := m.dirs[filepath.Clean(dir)]
	if d == nil {
		return nil, &fs.PathError{Op: op, Path: dir, Err: fs.ErrNotExist}
	}
	return d, nil
}

func (m *MemFS) lookup(op, path string) (*memInode, error) {
	path = filepath.Clean(path)
	d, err := m.dir(op, filepath.Dir(path))
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: path, Err: fs.ErrNotExist}
	}
	ino := d.live[filepath.Base(path)]
	if ino == nil {
		return nil, &fs.PathError{Op: op, Path: path, Err: fs.ErrNotExist}
	}
	return ino, nil
}

func (m *MemFS) used() int64 {
	var n int64
	for _, d := range m.dirs {
		for _, ino := range d.live {
			n += int64(len(ino.data))
		}
	}
	return n
}

func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpMkdir, dir); err != nil {
		return err
	}
	m.mkdirLocked(filepath.Clean(dir)) // directories are durable at once in this model
	return nil
}

func (m *MemFS) CreateTemp(dir, prefix string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	if err := m.check(OpCreate, filepath.Join(dir, prefix)); err != nil {
		return nil, err
	}
	d, err := m.dir("create", dir)
	if err != nil {
		return nil, err
	}
	m.seq++
	name := fmt.Sprintf("%s%06d", prefix, m.seq)
	ino := &memInode{}
	d.live[name] = ino
	return &memFile{fs: m, ino: ino, path: filepath.Join(dir, name)}, nil
}

func (m *MemFS) Open(path string) (io.ReadCloser, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpOpen, path); err != nil {
		return nil, 0, err
	}
	if m.dirs[filepath.Clean(path)] != nil {
		return nil, 0, &fs.PathError{Op: "open", Path: path, Err: syscall.EISDIR}
	}
	ino, err := m.lookup("open", path)
	if err != nil {
		return nil, 0, err
	}
	data := bytes.Clone(ino.data)
	return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
}

func (m *MemFS) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRename, newpath); err != nil {
		return err
	}
	ino, err := m.lookup("rename", oldpath)
	if err != nil {
		return err
	}
	nd, err := m.dir("rename", filepath.Dir(filepath.Clean(newpath)))
	if err != nil {
		return err
	}
	od, _ := m.dir("rename", filepath.Dir(filepath.Clean(oldpath)))
	delete(od.live, filepath.Base(oldpath))
	nd.live[filepath.Base(newpath)] = ino
	return nil
}

func (m *MemFS) Remove(path string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpRemove, path); err != nil {
		return err
	}
	if _, err := m.lookup("remove", path); err != nil {
		return err
	}
	d, _ := m.dir("remove", filepath.Dir(filepath.Clean(path)))
	delete(d.live, filepath.Base(path))
	return nil
}

func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpSyncDir, dir); err != nil {
		return err
	}
	d, err := m.dir("syncdir", dir)
	if err != nil {
		return err
	}
	d.durable = make(map[string]*memInode, len(d.live))
	for name, ino := range d.live {
		d.durable[name] = ino
	}
	return nil
}

func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	d, err := m.dir("readdir", dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(d.live))
	for name := range d.live {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

type memFile struct {
	fs     *MemFS
	ino    *memInode
	path   string
	closed bool
}

func (f *memFile) Name() string { return f.path }

func (f *memFile) Write(p []byte) (int, error) {
	m := f.fs
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.closed {
		return 0, &fs.PathError{Op: "write", Path: f.path, Err: fs.ErrClosed}
	}
	if err := m.check(OpWrite, f.path); err != nil {
		return 0, err
	}
	if m.capacity > 0 {
		if room := m.capacity - m.used(); int64(len(p)) > room {
			room = max(room, 0)
			f.ino.data = append(f.ino.data, p[:room]...)
			return int(room), &fs.PathError{Op: "write", Path: f.path, Err: syscall.ENOSPC}
		}
	}
	f.ino.data = append(f.ino.data, p...)
	return len(p), nil
}

func (f *memFile) Sync() error {
	m := f.fs
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "sync", Path: f.path, Err: fs.ErrClosed}
	}
	if err := m.check(OpSync, f.path); err != nil {
		return err
	}
	f.ino.synced = bytes.Clone(f.ino.data)
	return nil
}

func (f *memFile) Close() error {
	m := f.fs
	m.mu.Lock()
	defer m.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.path, Err: fs.ErrClosed}
	}
	f.closed = true
	return m.check(OpClose, f.path)
}
