package exportbundle

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestEndToEnd: the MLP captured at batch sizes 1 and 4, written with its weights, opened with the
// runner (gopjrt alone) and run; the outputs equal GoMLX's own execution to 1e-5.
func TestEndToEnd(t *testing.T) {
	r, _, b := openMLP(t)
	if got := r.BatchSizes(); len(got) != 2 || got[0] != 1 || got[1] != 4 {
		t.Fatalf("batch sizes %v", got)
	}
	if r.Provenance()["model"] != "mlp" || r.Name() != "mlp_test" {
		t.Errorf("provenance %v, name %q", r.Provenance(), r.Name())
	}
	ref := gomlxBackend(t)
	for _, batch := range []int{1, 4, 1} { // 1 again: the compiled program is reused
		x := mlpInput(batch, uint64(10+batch))
		out, err := r.Run(batch, map[string]Tensor{"x": x})
		if err != nil {
			t.Fatalf("batch %d: %v", batch, err)
		}
		wantLogits, wantProbs := runGoMLX(t, ref, x, b.Weights)
		for name, want := range map[string][]float32{"logits": wantLogits, "probs": wantProbs} {
			got := out[name]
			if len(got.Shape) != 2 || got.Shape[0] != batch || got.Shape[1] != nOut {
				t.Fatalf("batch %d: %s has shape %v", batch, name, got.Shape)
			}
			g, err := Values[float32](got)
			if err != nil {
				t.Fatal(err)
			}
			d, err := maxAbsDiff(g, want)
			if err != nil || d > 1e-5 {
				t.Errorf("batch %d: %s differs from GoMLX by %g (%v)", batch, name, d, err)
			}
			t.Logf("batch %d: %s: max |runner - GoMLX| = %g", batch, name, d)
		}
	}
}

func TestRunRefusesInputs(t *testing.T) {
	plugin := requirePlugin(t)
	dir, _ := mlpBundleDir(t)
	r, err := Open(dir, plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f64, _ := NewTensor([]int{1, nIn}, make([]float64, nIn))
	short := mlpInput(1, 1)
	short.Data = short.Data[:8]
	cases := map[string]struct {
		batch  int
		inputs map[string]Tensor
		input  string
		says   string
	}{
		"wrong dtype":     {1, map[string]Tensor{"x": f64}, "x", "dtype F64, the bundle takes F32"},
		"wrong shape":     {1, map[string]Tensor{"x": mlpInput(4, 1)}, "x", "shape [4 4], the bundle takes [1 4]"},
		"missing":         {1, map[string]Tensor{}, "x", "missing"},
		"unknown":         {1, map[string]Tensor{"x": mlpInput(1, 1), "y": mlpInput(1, 1)}, "y", "not an input"},
		"short data":      {1, map[string]Tensor{"x": short}, "x", "bytes of data"},
		"no program":      {3, map[string]Tensor{"x": mlpInput(3, 1)}, "", "batch size 3"},
		"non-batch shape": {4, map[string]Tensor{"x": mlpInput(4, 1)}, "", ""}, // fine: the control
	}
	for name, c := range cases {
		_, err := r.Run(c.batch, c.inputs)
		if c.says == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		var ie *InputError
		if !errors.As(err, &ie) || ie.Input != c.input || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: got %v, want an InputError on %q saying %q", name, err, c.input, c.says)
		}
	}
}

func TestRunnerConcurrentAndClose(t *testing.T) {
	plugin := requirePlugin(t)
	dir, _ := mlpBundleDir(t)
	r, err := Open(dir, plugin)
	if err != nil {
		t.Fatal(err)
	}
	want, err := r.Run(4, map[string]Tensor{"x": mlpInput(4, 5)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(batch int) {
			defer wg.Done()
			out, err := r.Run(batch, map[string]Tensor{"x": mlpInput(batch, 5)})
			if err == nil && batch == 4 && string(out["probs"].Data) != string(want["probs"].Data) {
				err = errors.New("concurrent run differs")
			}
			errs <- err
		}([]int{1, 4}[i%2])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := r.Run(1, map[string]Tensor{"x": mlpInput(1, 1)}); err == nil {
		t.Error("Run after Close succeeded")
	}
}

// A bundle whose program disagrees with its manifest is caught when the program is compiled.
func TestRunnerProgramManifestDisagree(t *testing.T) {
	plugin := requirePlugin(t)
	_, b := mlpBundleDir(t)
	bad := *b
	bad.Outputs = bad.Outputs[:1] // the program returns two
	r, err := NewRunner(&bad, plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Run(1, map[string]Tensor{"x": mlpInput(1, 1)}); err == nil || !strings.Contains(err.Error(), "returns 2 outputs") {
		t.Errorf("got %v", err)
	}
	// Open refuses what Read refuses, before loading any plugin.
	dir := filepath.Join(t.TempDir(), "b")
	if err := Write(dir, b); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "program-b4.mlir"), []byte("module {}"), 0o644)
	if _, err := Open(dir, plugin); err == nil || !strings.Contains(err.Error(), "program-b4.mlir") {
		t.Errorf("Open of a tampered bundle: %v", err)
	}
}
