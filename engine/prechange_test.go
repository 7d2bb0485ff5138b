package engine

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/tensorfile"
)

// writePrechange rewrites the golden training states this test resumes from. They were written
// by the engine whose parameters and optimizer state were one device buffer per array (before
// the flat layout): keep them, so the test goes on proving that such a record still resumes.
var writePrechange = flag.Bool("prechange.write", false, "rewrite testdata/prechange_*.safetensors from this engine")

// TestResumesAPerArrayRecordBitwise: the training state at step 3 of a run recorded by the
// per-array engine installs exactly (read back, every tensor is the recorded bytes), and three
// more steps from it end bitwise at the state the per-array engine recorded at step 6: the record
// format did not change, and neither did the math.
func TestResumesAPerArrayRecordBitwise(t *testing.T) {
	at3, at6 := filepath.Join("testdata", "prechange_step3.safetensors"), filepath.Join("testdata", "prechange_step6.safetensors")
	if *writePrechange {
		e, src := newAccumEngine(t, 1)
		runSteps(t, e, src, 1, 3)
		writeState(t, e, at3)
		runSteps(t, e, src, 4, 6)
		writeState(t, e, at6)
	}
	e, src := newAccumEngine(t, 1)
	want3 := readState(t, at3)
	staged, err := e.StageState(want3, WholePart, at3)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.InstallState(staged, at3); err != nil {
		t.Fatal(err)
	}
	sameState(t, "installed", e, want3)
	runSteps(t, e, src, 4, 6)
	sameState(t, "three steps on", e, readState(t, at6))
}

// runSteps runs optimizer steps from..to (1-based), step k on batch k-1.
func runSteps(t *testing.T, e *Engine, src *prefetch.ArrayBatches, from, to int) {
	t.Helper()
	keys := []string{"x", "y"}
	for step := from; step <= to; step++ {
		next := func() (map[string]*tensors.Tensor, error) {
			b, err := src.BatchAt(step - 1)
			if err != nil {
				return nil, err
			}
			return e.Place(b, keys)
		}
		if _, err := e.Step(step, keys, next, false); err != nil {
			t.Fatal(err)
		}
	}
}

func writeState(t *testing.T, e *Engine, path string) {
	t.Helper()
	st, err := e.StateTensors(WholePart)
	if err != nil {
		t.Fatal(err)
	}
	ts := make([]tensorfile.Tensor, len(st))
	for i, s := range st {
		ts[i] = s.Tensor
	}
	var b bytes.Buffer
	if err := tensorfile.Encode(&b, ts, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readState(t *testing.T, path string) []checkpoint.Tensor {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: the golden state is written by go test -run TestResumesAPerArrayRecordBitwise -prechange.write", err)
	}
	ts, _, err := tensorfile.Decode(path, data)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// sameState fails unless the engine's whole training state reads back as want, name for name and
// byte for byte.
func sameState(t *testing.T, when string, e *Engine, want []checkpoint.Tensor) {
	t.Helper()
	got, err := e.StateTensors(WholePart)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d tensors, the record has %d", when, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Tensor.DType != w.DType || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("%s: tensor %d is %s %s, the record's %s %s; bytes equal: %v", when, i, g.Name, g.Tensor.DType, w.Name, w.DType, bytes.Equal(g.Data, w.Data))
		}
	}
}
