package integration_test

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/export"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/tensorfile"
)

// tinyMNIST is the MNIST example's tiny preset on a slice of the data, one epoch, reading MNIST
// from dataDir.
func tinyMNIST(t testing.TB, dataDir string) *mnist.MLP {
	t.Helper()
	e, err := markers.FromPreset[mnist.MLP]("tiny", map[string]any{"TrainLimit": 2000, "TestLimit": 200, "ValSize": 400, "DataDir": dataDir, "MaxEpochs": 1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mnistData finds MNIST in the module cache, or skips.
func mnistData(t testing.TB) string {
	t.Helper()
	dir, err := mnist.DataDir("")
	if err != nil {
		prereq.MNIST.Absent(t, err)
	}
	return dir
}

// pixels turns [N, 784] float32 images in [0, 1] (MNIST's p/255) back into their uint8 pixels.
func pixels(t testing.TB, x *tensors.Tensor) exportbundle.Tensor {
	t.Helper()
	flat := tensors.MustCopyFlatData[float32](x)
	px := make([]uint8, len(flat))
	for i, v := range flat {
		px[i] = uint8(math.Round(float64(v) * 255))
	}
	bt, err := exportbundle.NewTensor(x.Shape().Dimensions, px)
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

// TestExportPreprocessMNIST: the MNIST example exported with a Preprocess, so the bundle takes
// uint8 pixels (its manifest input is the wire input) and normalizes them inside the program;
// at batch sizes 1 and 32 the runner on the pixels equals Predict on the normalized images to
// 1e-5, and an echo returns the wire pixels as sent.
func TestExportPreprocessMNIST(t *testing.T) {
	r := requireXLA(t)
	dataDir := mnistData(t)
	n := build(t, tinyMNIST(t, dataDir), core.WithCache(compilecache.New()), core.WithPreset("tiny"))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mnist_u8")
	eager := 0
	_, err := export.Export(n, dir, export.ExportSpec{
		Name:       "mnist_u8",
		BatchSizes: []int{1, 32},
		WireInputs: []prefetch.FieldSpec{{Name: "pixels", DType: dtypes.Uint8, Shape: []int{784}}},
		Preprocess: func(w map[string]*graph.Node) map[string]*graph.Node {
			eager++
			return map[string]*graph.Node{"image": graph.DivScalar(graph.ConvertDType(w["pixels"], dtypes.Float32), 255)}
		},
		Outputs: []export.ExportOutput{{Name: "logits"}, {Name: "pixels_sent", From: "pixels"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Called eagerly once, traced twice per batch size by the Host check (the experiment as it is
	// and its Host-zeroed view), then once to probe and once per batch size.
	if eager != 8 {
		t.Errorf("Preprocess called %d times, want 8 (eager check, Host check 2 x two batch sizes, probe, two batch sizes)", eager)
	}
	got, err := exportbundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Inputs) != 1 || got.Inputs[0].Name != "pixels" || got.Inputs[0].DType != tensorfile.U8 || !slices.Equal(got.Inputs[0].Shape, []int{-1, 784}) {
		t.Fatalf("manifest inputs %+v, want the wire input pixels U8 [-1 784]", got.Inputs)
	}
	for _, size := range []int{1, 32} {
		if a := mainArity(t, got.Programs[size].Code); a != 1+len(got.Weights) {
			t.Errorf("the batch-%d program takes %d arguments, want 1 wire input + %d weights", size, a, len(got.Weights))
		}
	}

	run, err := exportbundle.Open(dir, r.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	test, err := mnist.Load(dataDir, "t10k", 64)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	check := func(size, from int) {
		x := rowsOf(test.Images, from, from+size)
		want, err := n.Predict(prefetch.Batch{"image": x})
		if err != nil {
			t.Fatal(err)
		}
		px := pixels(t, x)
		out, err := run.Run(size, map[string]exportbundle.Tensor{"pixels": px})
		if err != nil {
			t.Fatal(err)
		}
		d := maxAbsDiff(t, fmt.Sprintf("batch %d at %d", size, from), out["logits"], want["logits"])
		worst = max(worst, d)
		if d > 1e-5 {
			t.Errorf("batch size %d, images %d..%d: runner on uint8 pixels vs Predict on normalized images: max |diff| %g > 1e-5", size, from, from+size, d)
		}
		if !slices.Equal(out["pixels_sent"].Data, px.Data) || out["pixels_sent"].DType != tensorfile.U8 {
			t.Errorf("the echo is not the wire pixels as sent")
		}
	}
	check(32, 0)
	check(32, 32)
	for i := range 4 {
		check(1, i)
	}
	t.Logf("MNIST tiny with a uint8 Preprocess: runner (pixels) vs Predict (normalized), batch sizes 32 and 1: max |diff| %g", worst)
}

// TestExportFromCheckpointNoData: a Nitro built from a checkpoint with no data (WithInputSpecs
// and WithCheckpoint; its DataDir points nowhere, so BuildData would fail if it were called)
// predicts and exports what the trained Nitro predicts: its Predict equals the trained one's,
// and its bundle's outputs equal them to 1e-5 at batch sizes 1 and 32. The bundle is the MLP's
// declared ExportContract (the ExportSpec sets only a name and batch sizes): uint8 pixels in, the
// probabilities and the class out, the class exactly Predict's. The bundle's provenance names
// the checkpoint.
func TestExportFromCheckpointNoData(t *testing.T) {
	r := requireXLA(t)
	dataDir := mnistData(t)
	runDir := t.TempDir()
	trained, err := core.New(tinyMNIST(t, dataDir), core.WithBackend("xla"), core.Quiet(), core.WithoutLogger(),
		core.WithCache(compilecache.New()), core.WithRunDir(runDir), core.WithPreset("tiny"))
	if err != nil {
		t.Fatal(err)
	}
	if err := trained.Train(); err != nil {
		t.Fatal(err)
	}

	e := tinyMNIST(t, dataDir)
	e.DataDir = filepath.Join(t.TempDir(), "no-mnist-here")
	n, err := core.New(e, core.WithBackend("xla"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(),
		core.WithCache(compilecache.New()), core.WithPreset("tiny"),
		core.WithInputSpecs(prefetch.FieldSpec{Name: "image", DType: dtypes.Float32, Shape: []int{784}}),
		core.WithCheckpoint(runDir))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mnist_from_ckpt")
	b, err := export.Export(n, dir, export.ExportSpec{Name: "mnist_from_ckpt", BatchSizes: []int{1, 32}})
	if err != nil {
		t.Fatal(err)
	}
	// The run dir given resolves to its newest checkpoint file, which the provenance names.
	if abs, _ := filepath.Abs(runDir); b.Provenance["checkpoint_arg"] != abs || filepath.Dir(b.Provenance["checkpoint"]) != abs || len(b.Provenance["checkpoint_sha256"]) != 64 {
		t.Errorf("provenance checkpoint %q (sha256 %q, argument %q), want a file in %q with its sha256", b.Provenance["checkpoint"], b.Provenance["checkpoint_sha256"], b.Provenance["checkpoint_arg"], abs)
	}
	if len(b.Inputs) != 1 || b.Inputs[0].Name != "pixels" || b.Inputs[0].DType != tensorfile.U8 || !slices.Equal(b.Inputs[0].Shape, []int{-1, 784}) {
		t.Errorf("inputs %+v, want the contract's pixels U8 [-1 784]", b.Inputs)
	}
	if len(b.Outputs) != 2 || b.Outputs[0].Name != "probs" || b.Outputs[1].Name != "class" || b.Outputs[1].DType != tensorfile.I32 {
		t.Errorf("outputs %+v, want the contract's probs, then class I32", b.Outputs)
	}

	run, err := exportbundle.Open(dir, r.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	test, err := mnist.Load(dataDir, "t10k", 64)
	if err != nil {
		t.Fatal(err)
	}
	worst, predWorst := 0.0, 0.0
	check := func(size, from int) {
		x := rowsOf(test.Images, from, from+size)
		want, err := trained.Predict(prefetch.Batch{"image": x})
		if err != nil {
			t.Fatal(err)
		}
		mine, err := n.Predict(prefetch.Batch{"image": x})
		if err != nil {
			t.Fatal(err)
		}
		pd := maxAbsDiff(t, "Predict", f32Tensor(t, mine["logits"]), want["logits"])
		predWorst = max(predWorst, pd)
		if pd > 1e-5 {
			t.Errorf("batch %d at %d: the no-data Nitro's Predict differs from the trained one's by %g", size, from, pd)
		}
		out, err := run.Run(size, map[string]exportbundle.Tensor{"pixels": pixels(t, x)})
		if err != nil {
			t.Fatal(err)
		}
		d := maxAbsDiff(t, fmt.Sprintf("batch %d at %d", size, from), out["probs"], want["probs"])
		worst = max(worst, d)
		if d > 1e-5 {
			t.Errorf("batch size %d, images %d..%d: no-data bundle vs the trained Nitro's Predict: max |diff| %g > 1e-5", size, from, from+size, d)
		}
		if class := tensors.MustCopyFlatData[int32](want["class"]); fmt.Sprint(mustValues[int32](t, out["class"])) != fmt.Sprint(class) {
			t.Errorf("batch size %d, images %d..%d: the bundle's classes %v, Predict's %v", size, from, from+size, mustValues[int32](t, out["class"]), class)
		}
	}
	check(32, 0)
	check(32, 32)
	for i := range 4 {
		check(1, i)
	}
	t.Logf("export from checkpoint with no data: Predict vs trained Predict max |diff| %g; runner vs trained Predict, batch sizes 32 and 1: max |diff| %g", predWorst, worst)
	if err := n.Train(); err == nil {
		t.Error("Train on the no-data Nitro succeeded")
	}
}

// mustValues is a bundle tensor's elements as T.
func mustValues[T exportbundle.Element](t testing.TB, x exportbundle.Tensor) []T {
	t.Helper()
	v, err := exportbundle.Values[T](x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
