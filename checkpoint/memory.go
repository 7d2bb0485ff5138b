package checkpoint

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sync"
)

// Memory is an in-memory Checkpointer for other modules' tests: it keeps a deep copy of every
// record saved, under paths "mem:N/<Filename>". It is safe for concurrent use.
type Memory struct {
	mu    sync.Mutex
	paths []string
	recs  map[string]*Record
	err   error
}

// NewMemory returns an empty Memory checkpointer.
func NewMemory() *Memory { return &Memory{recs: map[string]*Record{}} }

// FailSaves makes every later Save fail with err (nil: succeed again).
func (m *Memory) FailSaves(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.err = err
}

// Save stores a copy of r.
func (m *Memory) Save(r *Record) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return "", m.err
	}
	if r == nil {
		return "", fmt.Errorf("checkpoint: Save of a nil record")
	}
	if _, err := encodeHeader(r); err != nil { // the same rules as a file
		return "", err
	}
	path := fmt.Sprintf("mem:%d/%s", len(m.paths), Filename(NameArgs{Epoch: r.Epoch, Step: r.Step}))
	m.paths = append(m.paths, path)
	m.recs[path] = r.Clone()
	return path, nil
}

// Load returns a copy of the record saved under path.
func (m *Memory) Load(path string) (*Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[path]
	if !ok {
		return nil, fmt.Errorf("checkpoint: load %s: %w", path, fs.ErrNotExist)
	}
	return r.Clone(), nil
}

// Latest is the path of the last record saved.
func (m *Memory) Latest() (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.paths) == 0 {
		return "", false, nil
	}
	return m.paths[len(m.paths)-1], true, nil
}

// Paths lists every saved path, oldest first.
func (m *Memory) Paths() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.paths)
}

// Clone is a deep copy of r.
func (r *Record) Clone() *Record {
	c := *r
	c.Tensors = make([]Tensor, len(r.Tensors))
	for i, t := range r.Tensors {
		c.Tensors[i] = Tensor{Name: t.Name, DType: t.DType, Shape: slices.Clone(t.Shape), Data: bytes.Clone(t.Data)}
	}
	if r.Tensors == nil {
		c.Tensors = nil
	}
	c.Metrics = maps.Clone(r.Metrics)
	c.Values = Values{GraphConst: maps.Clone(r.Values.GraphConst), Device: maps.Clone(r.Values.Device), Host: maps.Clone(r.Values.Host)}
	c.Derived = maps.Clone(r.Derived)
	c.AnchorChecksums = maps.Clone(r.AnchorChecksums)
	c.LoggerState = bytes.Clone(r.LoggerState)
	c.RNGState = bytes.Clone(r.RNGState)
	c.Control = bytes.Clone(r.Control)
	return &c
}
