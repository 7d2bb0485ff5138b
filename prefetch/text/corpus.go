package text

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// blob is one file of a corpus: a text file, or a spilled Parquet column.
type blob struct {
	path string   // where it is opened from
	rel  string   // its path relative to the corpus root, slash-separated: names it, splits by it
	size int64    // its size at Open; mapping checks it still holds
	f    *os.File // a spill, kept open (it may already be removed); nil: opened by path to map
}

// mapping is a blob's mapped bytes, nil while unmapped, and who is reading them.
type mapping struct {
	data []byte
	refs int  // readers between acquire and release
	used bool // read since the clock hand last passed
}

// corpus is a set of blobs mapped lazily, at most max at once (a clock picks which to unmap),
// shared by the sources cut from it and released when the last of them closes.
type corpus struct {
	blobs []blob

	mu       sync.Mutex
	maps     []mapping
	resident []int // the mapped blobs, in the clock's order
	hand     int
	max      int
	users    int // open sources
	closed   bool
}

// randomAccessSize is the size from which a file's mapping is advised as read at random.
const randomAccessSize = 16 << 20

var errClosed = errors.New("text: the source is closed")

func newCorpus(blobs []blob, maxMapped int) *corpus {
	if maxMapped == 0 {
		maxMapped = DefaultMaxMapped
	}
	return &corpus{blobs: blobs, maps: make([]mapping, len(blobs)), max: maxMapped}
}

// acquire returns blob b's bytes, mapping it if need be; the caller must release it.
func (c *corpus) acquire(b int) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	m := &c.maps[b]
	if m.data == nil {
		c.makeRoom()
		data, err := c.mapBlob(&c.blobs[b])
		if err != nil {
			return nil, err
		}
		m.data = data
		c.resident = append(c.resident, b)
	}
	m.refs++
	m.used = true
	return m.data, nil
}

// release ends a read of blob b begun by acquire.
func (c *corpus) release(b int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.maps[b]
	m.refs--
	if c.closed && m.refs == 0 && m.data != nil {
		_ = unmapFile(m.data)
		m.data = nil
	}
}

// makeRoom unmaps blobs until one more fits under max: the first the clock hand finds neither
// in use nor read since it last passed. Blobs in use are never unmapped; if every mapped blob is
// in use (more readers than max), the new one is mapped beyond max. Called with mu held.
func (c *corpus) makeRoom() {
	for steps := 0; len(c.resident) >= c.max && steps < 2*len(c.resident); steps++ {
		if c.hand >= len(c.resident) {
			c.hand = 0
		}
		b := c.resident[c.hand]
		m := &c.maps[b]
		if m.refs > 0 || m.used {
			m.used = false
			c.hand++
			continue
		}
		_ = unmapFile(m.data)
		m.data = nil
		last := len(c.resident) - 1
		c.resident[c.hand] = c.resident[last]
		c.resident = c.resident[:last]
	}
}

// mapBlob maps one blob, refusing a file whose size changed since Open (reading past a shrunk
// file's end would fault).
func (c *corpus) mapBlob(b *blob) ([]byte, error) {
	f := b.f
	if f == nil {
		var err error
		if f, err = os.Open(b.path); err != nil {
			return nil, fmt.Errorf("text: %w", err)
		}
		defer f.Close()
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("text: %s: %w", b.path, err)
	}
	if st.Size() != b.size {
		return nil, fmt.Errorf("text: %s: %d bytes, %d at Open: the corpus changed while in use", b.path, st.Size(), b.size)
	}
	data, err := mapFile(f, b.size)
	if err != nil {
		return nil, fmt.Errorf("text: mapping %s (%d bytes): %w", b.path, b.size, err)
	}
	if b.size >= randomAccessSize {
		adviseRandom(data)
	}
	return data, nil
}

// mapped is how many blobs are mapped now.
func (c *corpus) mapped() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.resident)
}

// use counts one more source of the corpus.
func (c *corpus) use() {
	c.mu.Lock()
	c.users++
	c.mu.Unlock()
}

// done ends one source's use; the last unmaps every blob no read holds, closes and removes the
// spills, and fails every later acquire.
func (c *corpus) done() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users--
	if c.users > 0 || c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, b := range c.resident {
		if m := &c.maps[b]; m.refs == 0 {
			errs = append(errs, unmapFile(m.data))
			m.data = nil
		}
	}
	c.resident = nil
	for _, b := range c.blobs {
		if b.f != nil {
			errs = append(errs, b.f.Close())
			if err := os.Remove(b.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// walk lists the corpus files of a path: path itself when it is a file, else the regular files
// below it (links to regular files included) whose names end in one of exts (any, when exts is
// nil), in sorted order, skipping names that start with a dot. why says where exts came from.
func walk(path string, exts []string, why string) (_ []blob, single bool, _ error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, false, fmt.Errorf("text: Config.Path: %w", err)
	}
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return nil, false, fmt.Errorf("text: Config.Path %s is a %s, not a regular file or a folder", path, st.Mode().Type())
		}
		return []blob{{path: path, rel: filepath.Base(path), size: st.Size()}}, true, nil
	}
	root := path
	if lst, err := os.Lstat(path); err == nil && lst.Mode()&fs.ModeSymlink != 0 {
		root += string(filepath.Separator) // a link to a folder: walk what it points to
	}
	var out []blob
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || (exts != nil && !slices.ContainsFunc(exts, func(e string) bool { return strings.HasSuffix(d.Name(), e) })) {
			return nil
		}
		info, err := os.Stat(p) // follows a link
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out = append(out, blob{path: p, rel: filepath.ToSlash(rel), size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("text: walking Config.Path %s: %w", path, err)
	}
	if len(out) == 0 {
		which := "no regular file"
		if exts != nil {
			which = fmt.Sprintf("no file ending in %s (%s)", strings.Join(exts, ", "), why)
		}
		return nil, false, fmt.Errorf("text: Config.Path %s holds %s: the corpus is empty", path, which)
	}
	return out, false, nil
}
