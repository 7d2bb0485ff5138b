package checkpoint

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

// pendingRemoval leaves /run on a MemFS with a removal pending: epoch 1's file displaced by a
// better epoch 2 and listed as displaced, as a save killed after its manifest leaves it.
func pendingRemoval(t *testing.T) (m *MemFS, first, newest string) {
	t.Helper()
	m = NewMemFS()
	tk, err := NewTopK(1, "val_loss", "min", "/run", nil, WithFS(m), fast)
	if err != nil {
		t.Fatal(err)
	}
	if first, err = tk.Save(epochRecord(1, 8, 0.5)); err != nil {
		t.Fatal(err)
	}
	m.Fail(Fault{Op: OpRemove, Match: filepath.Base(first), Err: errors.New("killed")})
	newest, err = tk.Save(epochRecord(2, 8, 0.25)) // better: epoch 1 is displaced
	if !errors.Is(err, ErrNotRotated) {
		t.Fatalf("save with the removal killed: %v", err)
	}
	m.Crash()
	m.ClearFaults()
	return m, first, newest
}

// TestReadOnlyTouchesNothing leaves a directory with a removal pending (as TestPendingRotationFinished
// does) and opens it through ReadOnly: Latest and Load read the newest checkpoint, the displaced
// file and the manifest stay as they were, and Save writes nothing.
func TestReadOnlyTouchesNothing(t *testing.T) {
	m, _, newest := pendingRemoval(t)
	before, _ := m.ReadDir("/run")

	next, _ := NewTopK(1, "val_loss", "min", "/run", nil, WithFS(m), fast)
	ro := ReadOnly(next)
	if p, ok, err := ro.Latest(); err != nil || !ok || p != newest {
		t.Fatalf("Latest = %s, %v, %v; want %s", p, ok, err, newest)
	}
	r, err := ro.Load(newest)
	if err != nil || r.Epoch != 2 {
		t.Fatalf("Load = %v, %v", r, err)
	}
	if p, err := ro.Save(epochRecord(3, 8, 0.1)); p != "" || err != nil {
		t.Errorf("Save = %q, %v; want nothing written", p, err)
	}
	after, _ := m.ReadDir("/run")
	if !slices.Equal(before, after) {
		t.Errorf("directory %v became %v: a read-only view changed it", before, after)
	}
	if mf, err := readManifest(m, "/run"); err != nil || len(mf.Displaced) != 1 || len(mf.Checkpoints) != 1 {
		t.Errorf("manifest %+v, %v: want the pending removal left to the writer", mf, err)
	}
	if d := ro.(InDir).Dir(); d != "/run" {
		t.Errorf("Dir = %q", d)
	}
	if ReadOnly(ro) != ro || ReadOnly(nil) != nil {
		t.Error("ReadOnly of a view or of nil")
	}
}

// A checkpointer ReadOnly does not know reads through its own Load and Latest.
func TestReadOnlyOther(t *testing.T) {
	mem := NewMemory()
	p, err := mem.Save(epochRecord(1, 8, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	ro := ReadOnly(mem)
	if got, ok, err := ro.Latest(); err != nil || !ok || got != p {
		t.Errorf("Latest = %s, %v, %v", got, ok, err)
	}
	if _, err := ro.Load(p); err != nil {
		t.Error(err)
	}
	if _, err := ro.Save(epochRecord(2, 8, 0.5)); err != nil {
		t.Error(err)
	}
	if got, _, _ := mem.Latest(); got != p {
		t.Errorf("Save through the view reached the checkpointer: newest %s", got)
	}
	if ro.(InDir).Dir() != "" {
		t.Error("Dir of a checkpointer with none")
	}
}
