package exportbundle

import (
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
	const script = `
import json, sys
from safetensors import deserialize
with open(sys.argv[1], "rb") as f:
    out = [{"name": n, "dtype": t["dtype"], "shape": t["shape"], "hex": bytes(t["data"]).hex()} for n, t in deserialize(f.read())]
print(json.dumps(out))
`
	out, err := exec.Command(py, "-c", script, filepath.Join(dir, WeightsFile)).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var got []struct {
		Name  string `json:"name"`
		DType string `json:"dtype"`
		Shape []int  `json:"shape"`
		Hex   string `json:"hex"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got) != len(b.Weights) {
		t.Fatalf("python read %d tensors, want %d", len(got), len(b.Weights))
	}
	byName := map[string]int{}
	for i, g := range got {
		byName[g.Name] = i
	}
	for _, w := range b.Weights {
		g := got[byName[w.Name]]
		if g.Name != w.Name || g.DType != string(w.DType) || len(g.Shape) != len(w.Shape) || g.Hex != hex.EncodeToString(w.Data) {
			t.Errorf("python read %+v for %s %s%v", g, w.Name, w.DType, w.Shape)
		}
	}
}
