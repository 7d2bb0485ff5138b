package exportbundle

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/nitro-go/nitro/internal/prereq"
)

// TestPythonSafetensors opens a bundle's weights.safetensors with the reference Python
// implementation (the checkpoint module's interop venv): names, dtypes, shapes and bytes agree.
// Run alone: NITRO_SAFETENSORS_PYTHON=$PWD/.nitro/ckpt-venv/bin/python go test -run Python ./exportbundle/
func TestPythonSafetensors(t *testing.T) {
	py := os.Getenv("NITRO_SAFETENSORS_PYTHON")
	if py == "" {
		prereq.SafetensorsPython.Absent(t, "NITRO_SAFETENSORS_PYTHON is not set")
	}
	dir := filepath.Join(t.TempDir(), "b")
	b := tinyBundle()
	if err := Write(dir, b); err != nil {
		t.Fatal(err)
	}
	// Python reports each tensor twice: safetensors' raw view (dtype, shape, bytes) and the
	// numpy array it loads (shape and values), so a tensor written transposed, in the wrong byte
	// order or under another name shows in one or the other.
	const script = `
import json, sys
from safetensors import deserialize
from safetensors.numpy import load_file
path = sys.argv[1]
arrays = load_file(path)
with open(path, "rb") as f:
    out = [{"name": n, "dtype": t["dtype"], "shape": list(t["shape"]), "hex": bytes(t["data"]).hex(),
            "np_shape": list(arrays[n].shape), "values": arrays[n].tolist()} for n, t in deserialize(f.read())]
print(json.dumps(out))
`
	out, err := exec.Command(py, "-c", script, filepath.Join(dir, WeightsFile)).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var got []struct {
		Name    string          `json:"name"`
		DType   string          `json:"dtype"`
		Shape   []int           `json:"shape"`
		Hex     string          `json:"hex"`
		NPShape []int           `json:"np_shape"`
		Values  json.RawMessage `json:"values"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The expected file contents, written out by hand from tinyBundle's values rather than taken
	// from the Tensors the writer was given.
	le := binary.LittleEndian
	var wBytes, bBytes []byte
	for _, v := range []float32{1, 2, 3, 4, 5, 6} {
		wBytes = le.AppendUint32(wBytes, math.Float32bits(v))
	}
	for _, v := range []int32{7, 8, 9} {
		bBytes = le.AppendUint32(bBytes, uint32(v))
	}
	want := map[string]struct {
		dtype  string
		shape  []int
		data   []byte
		values string
	}{
		"w": {"F32", []int{2, 3}, wBytes, "[[1.0,2.0,3.0],[4.0,5.0,6.0]]"},
		"b": {"I32", []int{3}, bBytes, "[7,8,9]"},
	}
	if len(got) != len(want) || len(b.Weights) != len(want) {
		t.Fatalf("python read %d tensors, the bundle has %d, want %d", len(got), len(b.Weights), len(want))
	}
	for _, g := range got {
		w, ok := want[g.Name]
		if !ok {
			t.Errorf("python read a tensor %q the bundle does not have", g.Name)
			continue
		}
		if g.DType != w.dtype || !slices.Equal(g.Shape, w.shape) || !slices.Equal(g.NPShape, w.shape) || g.Hex != hex.EncodeToString(w.data) {
			t.Errorf("python read %s as %s%v (numpy %v), bytes %s; want %s%v, bytes %x", g.Name, g.DType, g.Shape, g.NPShape, g.Hex, w.dtype, w.shape, w.data)
		}
		var vals, wantVals any
		if err := json.Unmarshal(g.Values, &vals); err != nil {
			t.Fatal(err)
		}
		json.Unmarshal([]byte(w.values), &wantVals)
		if !reflect.DeepEqual(vals, wantVals) {
			t.Errorf("numpy loads %s as %s, want %s", g.Name, g.Values, w.values)
		}
	}
}
