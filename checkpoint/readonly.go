package checkpoint

import "errors"

// ReadOnly is a view of c that reads and never writes, for a process that shares c's directory
// with the one writer (a rank other than 0 of a multi-process run): Save writes nothing and
// returns "" and no error; Load and Latest read as c does. For TopK and EveryN they read
// without finishing the removals a killed save left pending (the writer's next open does that),
// so the view touches no file. Another checkpointer's Load and Latest are its own. nil is nil.
func ReadOnly(c Checkpointer) Checkpointer {
	if c == nil {
		return nil
	}
	if r, ok := c.(*readOnly); ok {
		return r
	}
	return &readOnly{c: c}
}

// readOnly is ReadOnly's view; it keeps the wrapped checkpointer's directory (InDir) for the
// messages that name where a resume looked.
type readOnly struct{ c Checkpointer }

var (
	_ Checkpointer = (*readOnly)(nil)
	_ InDir        = (*readOnly)(nil)
)

// storeOf is the file store of TopK and EveryN, nil for any other checkpointer.
func storeOf(c Checkpointer) *store {
	switch v := c.(type) {
	case *TopK:
		return &v.store
	case *EveryN:
		return &v.store
	}
	return nil
}

func (r *readOnly) Save(*Record) (string, error) { return "", nil }

func (r *readOnly) Load(path string) (*Record, error) {
	if s := storeOf(r.c); s != nil {
		return readRecord(s.o.fs, path)
	}
	return r.c.Load(path)
}

func (r *readOnly) Latest() (string, bool, error) {
	s := storeOf(r.c)
	if s == nil {
		return r.c.Latest()
	}
	dir := s.getDir()
	if dir == "" {
		return "", false, errors.New("checkpoint: no directory: pass one or adopt the run directory")
	}
	return newest(s.o.fs, dir)
}

// Dir is the wrapped checkpointer's directory, "" when it keeps none.
func (r *readOnly) Dir() string {
	if d, ok := r.c.(InDir); ok {
		return d.Dir()
	}
	return ""
}
