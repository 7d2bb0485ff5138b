package checkpoint

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/tensorfile"
)

// TestPythonSafetensors checks the file against the reference Python safetensors package, in
// both directions. It needs a python with safetensors and numpy, named by
// NITRO_SAFETENSORS_PYTHON:
//
//	./scripts/ckpt/setup-venv.sh   # pinned scripts/ckpt/requirements.txt into .nitro/ckpt-venv
//	NITRO_SAFETENSORS_PYTHON=$PWD/.nitro/ckpt-venv/bin/python go test -run Python -v ./checkpoint/
func TestPythonSafetensors(t *testing.T) {
	py := os.Getenv("NITRO_SAFETENSORS_PYTHON")
	if py == "" {
		prereq.SafetensorsPython.Absent(t, "NITRO_SAFETENSORS_PYTHON is not set (see the test's comment to run it alone)")
	}
	dir := t.TempDir()
	r := sampleRecord()
	path := filepath.Join(dir, Filename(NameArgs{Epoch: r.Epoch, Step: r.Step, Metric: "val_loss", Score: r.Metrics["val_loss"], Scored: true}))
	if err := Write(path, r); err != nil {
		t.Fatal(err)
	}
	type want struct {
		Name  string           `json:"name"`
		DType tensorfile.DType `json:"dtype"`
		Shape []int            `json:"shape"`
		Hex   string           `json:"hex"`
	}
	exp := struct {
		Tensors []want         `json:"tensors"`
		Record  map[string]any `json:"record"`
	}{Record: map[string]any{"epoch": 6, "step": 4500, "preset": "mnist-tiny", "run_id": r.RunID, "stop_reason": "early_stop"}}
	for _, tn := range r.Tensors {
		exp.Tensors = append(exp.Tensors, want{tn.Name, tn.DType, tn.Shape, hex.EncodeToString(tn.Data)})
	}
	expPath := filepath.Join(dir, "expected.json")
	b, _ := json.Marshal(exp)
	os.WriteFile(expPath, b, 0o644)
	pyOut := filepath.Join(dir, "from-python.safetensors")

	out, err := exec.Command(py, filepath.Join("testdata", "interop.py"), path, expPath, pyOut).CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("python: %v", err)
	}

	// The file Python wrote reads here at the tensor level (it carries no nitro record).
	data, err := os.ReadFile(pyOut)
	if err != nil {
		t.Fatal(err)
	}
	p, ts, err := decodeTensors(pyOut, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Meta["written_by"] != "python" {
		t.Errorf("metadata %v", p.Meta)
	}
	got := map[string]Tensor{}
	for _, tn := range ts {
		got[tn.Name] = tn
	}
	var a []byte
	for i := range 6 {
		a = binary.LittleEndian.AppendUint32(a, math.Float32bits(float32(i)))
	}
	var bb []byte
	for _, v := range []int64{1, -2, 3} {
		bb = binary.LittleEndian.AppendUint64(bb, uint64(v))
	}
	for name, w := range map[string]Tensor{
		"a": {DType: tensorfile.F32, Shape: []int{2, 3}, Data: a},
		"b": {DType: tensorfile.I64, Shape: []int{3}, Data: bb},
		"c": {DType: tensorfile.BOOL, Shape: []int{2}, Data: []byte{1, 0}},
		"h": {DType: tensorfile.F16, Shape: []int{1}, Data: []byte{0x00, 0x3e}},
		"s": {DType: tensorfile.F64, Shape: []int{}, Data: binary.LittleEndian.AppendUint64(nil, math.Float64bits(3.25))},
	} {
		g := got[name]
		if g.DType != w.DType || !slicesEqual(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("tensor %s from python: %+v, want %+v", name, g, w)
		}
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
