package integration_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/layers/batchnorm"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/export"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/tensorfile"
)

// phaseLog records every phase a run publishes.
type phaseLog struct {
	mu     sync.Mutex
	phases []string
}

func (l *phaseLog) Observe(p monitors.Phase, _ monitors.Progress, _ monitors.Info) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phases = append(l.phases, p.String())
	return nil
}

func (l *phaseLog) since(k int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.phases[k:])
}

func (l *phaseLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.phases)
}

// f32Tensor converts a float32 GoMLX tensor to a bundle tensor.
func f32Tensor(t testing.TB, x *tensors.Tensor) exportbundle.Tensor {
	t.Helper()
	bt, err := exportbundle.NewTensor(x.Shape().Dimensions, tensors.MustCopyFlatData[float32](x))
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

// maxAbsDiff compares a bundle output with a Predict output, element for element.
func maxAbsDiff(t testing.TB, what string, got exportbundle.Tensor, want *tensors.Tensor) float64 {
	t.Helper()
	g, err := exportbundle.Values[float32](got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	w := tensors.MustCopyFlatData[float32](want)
	if !slices.Equal(got.Shape, want.Shape().Dimensions) || len(g) != len(w) {
		t.Fatalf("%s: runner shape %v, Predict shape %v", what, got.Shape, want.Shape().Dimensions)
	}
	var m float64
	for i := range g {
		m = max(m, math.Abs(float64(g[i])-float64(w[i])))
	}
	return m
}

// rowsOf keeps rows [from, to) of a [N, ...] float32 tensor.
func rowsOf(x *tensors.Tensor, from, to int) *tensors.Tensor {
	dims := x.Shape().Dimensions
	row := 1
	for _, d := range dims[1:] {
		row *= d
	}
	flat := tensors.MustCopyFlatData[float32](x)
	return tensors.FromFlatDataAndDimensions(slices.Clone(flat[from*row:to*row]), append([]int{to - from}, dims[1:]...)...)
}

// mainArity counts the arguments of the program's entry function, from the StableHLO text.
func mainArity(t testing.TB, code []byte) int {
	t.Helper()
	text := string(code)
	i := strings.Index(text, "@main(")
	if i < 0 {
		t.Fatalf("no @main in the program:\n%.400s", text)
	}
	sig := text[i:]
	if j := strings.Index(sig, "\n"); j >= 0 {
		sig = sig[:j]
	}
	if j := strings.Index(sig, ") ->"); j >= 0 {
		sig = sig[:j]
	}
	return len(regexp.MustCompile(`%[A-Za-z0-9_.$-]+\s*:\s*tensor<`).FindAllString(sig, -1))
}

// TestExportMNIST: the MNIST example (tiny preset, one epoch) exported at batch sizes 1 and 32;
// the bundle, opened with exportbundle alone, returns what Predict returns to 1e-5 at both; it
// takes the one declared input and the four weights Forward reads (no layer state: eval mode
// reads no RNG state), published ExportCompiling around the compile, and carries the framework's
// provenance and no repository keys (no ProvenanceRoot was given).
func TestExportMNIST(t *testing.T) {
	r := requireXLA(t)
	dataDir, err := mnist.DataDir("")
	if err != nil {
		prereq.MNIST.Absent(t, err)
	}
	e, err := markers.FromPreset[mnist.MLP]("tiny", map[string]any{"TrainLimit": 2000, "TestLimit": 200, "ValSize": 400, "DataDir": dataDir, "MaxEpochs": 1})
	if err != nil {
		t.Fatal(err)
	}
	phases := &phaseLog{}
	n := build(t, e, core.WithCache(compilecache.New()), core.WithMonitor(phases), core.WithPreset("tiny"))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mnist_tiny")
	before, k := n.Phase(), phases.len()
	// The call site chooses the batch-field contract over the MLP's declared one (uint8 pixels in,
	// probabilities and class out; TestExportFromCheckpointNoData exports that): a spec that sets
	// a contract field is used as given.
	b, err := export.Export(n, dir, export.ExportSpec{Name: "mnist_tiny", BatchSizes: []int{32, 1},
		Inputs: []string{"image"}, Outputs: []export.ExportOutput{{Name: "logits"}}})
	if err != nil {
		t.Fatal(err)
	}
	during := phases.since(k)
	if !slices.Contains(during, "ExportCompiling") || during[len(during)-1] != "Repl" || n.Phase() != before {
		t.Errorf("phases during export %v, phase after %v (before %v): want ExportCompiling, then the previous phase restored and Repl", during, n.Phase(), before)
	}

	got, err := exportbundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Inputs) != 1 || got.Inputs[0].Name != "image" || got.Inputs[0].DType != tensorfile.F32 || !slices.Equal(got.Inputs[0].Shape, []int{-1, 784}) {
		t.Errorf("inputs %+v, want image F32 [-1 784]", got.Inputs)
	}
	if len(got.Outputs) != 1 || got.Outputs[0].Name != "logits" || !slices.Equal(got.Outputs[0].Shape, []int{-1, 10}) {
		t.Errorf("outputs %+v, want logits [-1 10]", got.Outputs)
	}
	var names []string
	for _, w := range got.Weights {
		names = append(names, w.Name)
	}
	if len(names) != 4 || !slices.IsSorted(names) || slices.ContainsFunc(names, func(s string) bool { return !strings.HasPrefix(s, "param/") }) {
		t.Errorf("weights %v: want the 4 parameters (biases and weights of hidden_0 and output), no layer state", names)
	}
	for _, size := range []int{1, 32} {
		if a := mainArity(t, got.Programs[size].Code); a != 1+len(got.Weights) {
			t.Errorf("the batch-%d program takes %d arguments, want %d (1 input + %d weights)", size, a, 1+len(got.Weights), len(got.Weights))
		}
	}
	p := got.Provenance
	for k, want := range map[string]string{"framework": "nitro", "experiment": "MLP", "preset": "tiny", "backend": "xla", "step": fmt.Sprint(n.Step()), "epoch": "1", "graphconst.Hidden": "64"} {
		if p[k] != want {
			t.Errorf("provenance %s = %q, want %q", k, p[k], want)
		}
	}
	for _, k := range []string{"git_commit", "git_tree", "git_dirty", "git_patch"} {
		if _, ok := p[k]; ok {
			t.Errorf("provenance has %s with no ProvenanceRoot", k)
		}
	}
	if len(b.Programs) != 2 || len(got.Extra) != 0 {
		t.Errorf("%d programs, extra files %v", len(b.Programs), got.Extra)
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
		out, err := run.Run(size, map[string]exportbundle.Tensor{"image": f32Tensor(t, x)})
		if err != nil {
			t.Fatal(err)
		}
		d := maxAbsDiff(t, fmt.Sprintf("batch %d at %d", size, from), out["logits"], want["logits"])
		worst = max(worst, d)
		if d > 1e-5 {
			t.Errorf("batch size %d, images %d..%d: runner vs Predict max |diff| %g > 1e-5", size, from, from+size, d)
		}
	}
	check(32, 0)
	check(32, 32)
	for i := range 4 {
		check(1, i)
	}
	t.Logf("MNIST tiny, 1 epoch (step %d): runner vs Predict, batch sizes 32 and 1: max |diff| %g; weights %v", n.Step(), worst, names)
}

// Tempered has Device fields of both kinds: Scale and Shift are read by Forward (they must bake
// into the export as their values at export time), ClassWeight only by Loss (nothing of it may
// reach the program).
type Tempered struct {
	Scale       markers.Device[float32]
	Shift       markers.Device[[]float32]
	ClassWeight markers.Device[[]float32]
}

func newTempered() *Tempered {
	return &Tempered{
		Scale:       markers.NewDevice[float32](1),
		Shift:       markers.NewDevice([]float32{0, 0}),
		ClassWeight: markers.NewDevice([]float32{777.25, 777.25}),
	}
}

func (e *Tempered) BuildModel(ctx *context.Context) error { return nil }
func (e *Tempered) BuildData() (prefetch.Data, error)     { return splits(64, 0, 16) }

func (e *Tempered) Forward(ctx *context.Context, in Inputs) core.Outputs {
	logits := graph.Mul(mlp(ctx, in.X, 8), e.Scale.Node())
	logits = graph.Add(logits, graph.ExpandAxes(e.Shift.Node(), 0))
	return core.Outputs{"logits": logits, "prob": graph.Softmax(logits, -1)}
}

func (e *Tempered) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.Mul(graph.ReduceAllMean(xent(out["logits"], in.Y)), graph.ReduceAllMean(e.ClassWeight.Node()))
}

// ExportProvenance is the model-layer hook: it wins over the framework's "experiment" and loses
// to the explicit argument's "note".
func (e *Tempered) ExportProvenance() map[string]string {
	return map[string]string{"model": "tempered", "experiment": "from-hook", "note": "hook"}
}

// TestExportFreezesDeviceFields: after SetDevice, the export takes exactly its declared input and
// the weights (the manifest, the program's arity and the runner agree), its outputs are Predict's
// at the values set (a rename and an echo declared with From), a later SetDevice does not reach
// it, a Device field Forward does not read leaves no trace in the program, and the provenance
// sources merge in their precedence (framework, then site, then the hook, then explicit keys).
func TestExportFreezesDeviceFields(t *testing.T) {
	r := requireXLA(t)
	n := build(t, newTempered(), core.WithCache(compilecache.New()), core.WithMaxEpochs(1))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if err := n.SetDevice("Scale", float32(3)); err != nil {
		t.Fatal(err)
	}
	if err := n.SetDevice("Shift", []float32{0.5, -0.25}); err != nil {
		t.Fatal(err)
	}
	x, _ := synthetic(4, 9)
	want, err := n.Predict(prefetch.Batch{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tempered")
	_, err = export.Export(n, dir, export.ExportSpec{
		Name:       "tempered",
		BatchSizes: []int{4},
		Outputs: []export.ExportOutput{
			{Name: "scores", From: "logits", DType: tensorfile.F32, Shape: []int{-1, classes}, AxisLetters: "k"},
			{Name: "x", From: "x"},
		},
		Provenance:    map[string]string{"note": "explicit"},
		Postprocess:   "label = argmax(scores, axis=1)\n",
		ClientOutputs: []exportbundle.TensorSpec{{Name: "label", DType: tensorfile.I32, Shape: []int{1}, BatchAxis: 0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := exportbundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Inputs) != 1 || got.Inputs[0].Name != "x" {
		t.Fatalf("inputs %+v, want exactly x", got.Inputs)
	}
	if len(got.Weights) != 4 {
		t.Errorf("%d weights, want the 4 parameters", len(got.Weights))
	}
	code := got.Programs[4].Code
	if a := mainArity(t, code); a != 1+len(got.Weights) {
		t.Errorf("the program takes %d arguments, want %d: the declared input and the weights, no Device field", a, 1+len(got.Weights))
	}
	if strings.Contains(string(code), "7.772500e+02") || strings.Contains(string(code), "777.25") {
		t.Errorf("ClassWeight, which Forward never reads, reached the program")
	}
	if len(got.Outputs) != 2 || got.Outputs[0].Name != "scores" || got.Outputs[0].AxisLetters != "k" || got.Outputs[1].Name != "x" || !slices.Equal(got.Outputs[1].Shape, []int{-1, dim}) {
		t.Errorf("outputs %+v, want scores [-1 2] (k) and the echo x [-1 8]", got.Outputs)
	}
	if got.Postprocess != "label = argmax(scores, axis=1)\n" || len(got.ClientOutputs) != 1 || !slices.Equal(got.ClientOutputs[0].Shape, []int{-1}) {
		t.Errorf("postprocess %q, client outputs %+v", got.Postprocess, got.ClientOutputs)
	}
	p := got.Provenance
	if p["experiment"] != "from-hook" || p["note"] != "explicit" || p["model"] != "tempered" || p["framework"] != "nitro" {
		t.Errorf("provenance precedence: %v", p)
	}

	run, err := exportbundle.Open(dir, r.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	xin := f32Tensor(t, x)
	out, err := run.Run(4, map[string]exportbundle.Tensor{"x": xin})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(t, "scores", out["scores"], want["logits"]); d > 1e-5 {
		t.Errorf("scores vs Predict's logits at Scale 3: max |diff| %g", d)
	} else {
		t.Logf("scores vs Predict at Scale 3, Shift [0.5 -0.25]: max |diff| %g", d)
	}
	if !slices.Equal(out["x"].Data, xin.Data) {
		t.Errorf("the echo x differs from the input sent")
	}
	_, err = run.Run(4, map[string]exportbundle.Tensor{"x": xin, "Scale": xin})
	var ie *exportbundle.InputError
	if !errors.As(err, &ie) || ie.Input != "Scale" {
		t.Errorf("passing a Device field as an input: %v, want an InputError naming it", err)
	}

	// The export froze Scale and Shift: a later SetDevice moves Predict, not the bundle.
	if err := n.SetDevice("Scale", float32(1)); err != nil {
		t.Fatal(err)
	}
	now, err := n.Predict(prefetch.Batch{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(t, "scores", out["scores"], now["logits"]); d < 1e-3 {
		t.Errorf("Predict at Scale 1 equals the bundle (max |diff| %g): Scale did not reach the program", d)
	}
}

// TestExportRefusals on XLA: the refusals that need the trace (a From that names nothing, an
// assertion the traced output breaks) and those that do not (a client spec without a
// postprocess, an undeclared echo, a batch size 0), each naming the field; no bundle is written.
func TestExportRefusals(t *testing.T) {
	requireXLA(t)
	n := build(t, newTempered(), core.WithCache(compilecache.New()))
	cases := []struct {
		name string
		spec export.ExportSpec
		want string
	}{
		{"client spec without postprocess", export.ExportSpec{Name: "t", ClientOutputs: []exportbundle.TensorSpec{{Name: "label", DType: tensorfile.I32, Shape: []int{1}}}},
			"ExportSpec.ClientOutputs given without a Postprocess"},
		{"undeclared echo", export.ExportSpec{Name: "t", Outputs: []export.ExportOutput{{Name: "logits"}, {Name: "x"}}},
			`ExportSpec.Outputs[1] "x": the name is a declared input, and an echo must be declared: set From: "x"`},
		{"batch size 0", export.ExportSpec{Name: "t", BatchSizes: []int{0}}, "ExportSpec.BatchSizes[0] is 0"},
		{"From names nothing", export.ExportSpec{Name: "t", Outputs: []export.ExportOutput{{Name: "scores", From: "score"}}},
			`ExportSpec.Outputs[0] "scores": From "score" is neither a Forward output (Forward returns [logits prob]) nor a declared input ([x])`},
		{"no such output", export.ExportSpec{Name: "t", Outputs: []export.ExportOutput{{Name: "probs"}}},
			`ExportSpec.Outputs[0] "probs": Forward returns no output "probs"`},
		{"shape assertion", export.ExportSpec{Name: "t", Outputs: []export.ExportOutput{{Name: "prob", Shape: []int{-1, 3}}}},
			`ExportSpec.Outputs "prob" (from "prob"): the program returns shape [-1 2], ExportOutput.Shape asserts [-1 3]`},
		{"dtype assertion", export.ExportSpec{Name: "t", Outputs: []export.ExportOutput{{Name: "prob", DType: tensorfile.F64}}},
			`ExportOutput.DType asserts F64`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			_, err := export.Export(n, dir, c.spec)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, c.want)
			}
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Errorf("a bundle directory exists after a refusal (%v)", serr)
			}
		})
	}
}

// TestExportSiteProvenance: with a ProvenanceRoot inside a git repository whose tracked file was
// changed after the commit, the bundle records the commit, the tree hash and dirtiness, and holds
// the working-tree patch as its own checksummed file.
func TestExportSiteProvenance(t *testing.T) {
	r := requireXLA(t)
	if _, err := exec.LookPath("git"); err != nil {
		prereq.Git.Absent(t, err)
	}
	repo := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=nitro", "-c", "user.email=nitro@example.invalid", "-c", "commit.gpgsign=false"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	src := filepath.Join(repo, "tempered.go")
	if err := os.WriteFile(src, []byte("package tempered\n\nconst Scale = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "tempered")
	commit, tree := git("rev-parse", "HEAD"), git("rev-parse", "HEAD^{tree}")
	if err := os.WriteFile(src, []byte("package tempered\n\nconst Scale = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	n := build(t, newTempered(), core.WithCache(compilecache.New()))
	dir := filepath.Join(t.TempDir(), "tempered")
	if _, err := export.Export(n, dir, export.ExportSpec{Name: "tempered", ProvenanceRoot: repo}); err != nil {
		t.Fatal(err)
	}
	got, err := exportbundle.Read(dir) // verifies every checksum, the patch's included
	if err != nil {
		t.Fatal(err)
	}
	p := got.Provenance
	if p["git_commit"] != commit || p["git_tree"] != tree || p["git_dirty"] != "true" || p["git_patch"] != export.PatchFile {
		t.Errorf("provenance %v; want commit %s, tree %s, dirty, patch %s", p, commit, tree, export.PatchFile)
	}
	patch := string(got.Extra[export.PatchFile])
	for _, w := range []string{"diff --git a/tempered.go b/tempered.go", "-const Scale = 1", "+const Scale = 3"} {
		if !strings.Contains(patch, w) {
			t.Errorf("%s does not contain %q:\n%s", export.PatchFile, w, patch)
		}
	}
	run, err := exportbundle.Open(dir, r.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	x, _ := synthetic(1, 3)
	if _, err := run.Run(1, map[string]exportbundle.Tensor{"x": f32Tensor(t, x)}); err != nil {
		t.Fatal(err)
	}
}

// Normed reads layer state in eval mode (batch normalization's running statistics) and has a
// dropout, which draws from the RNG state only in training.
type Normed struct{}

func (e *Normed) BuildModel(ctx *context.Context) error { return nil }
func (e *Normed) BuildData() (prefetch.Data, error)     { return splits(64, 0, 16) }

func (e *Normed) Forward(ctx *context.Context, in Inputs) core.Outputs {
	h := layers.Dense(ctx.In("hidden"), in.X, true, 8)
	h = activations.Relu(batchnorm.New(ctx.In("norm"), h, -1).Done())
	h = layers.DropoutStatic(ctx, h, 0.25)
	return core.Outputs{"logits": layers.Dense(ctx.In("output"), h, true, classes)}
}

func (e *Normed) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.ReduceAllMean(xent(out["logits"], in.Y))
}

// TestExportLayerState: the layer state Forward reads in eval mode ships as weights, named as a
// checkpoint names it, after the parameters; the programs at batch sizes 2 and 8 take the input
// and exactly those weights, and equal Predict after training moved the running statistics.
func TestExportLayerState(t *testing.T) {
	r := requireXLA(t)
	n := build(t, &Normed{}, core.WithCache(compilecache.New()), core.WithMaxEpochs(2))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "normed")
	if _, err := export.Export(n, dir, export.ExportSpec{Name: "normed", BatchSizes: []int{8, 2}}); err != nil {
		t.Fatal(err)
	}
	got, err := exportbundle.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names, state []string
	for _, w := range got.Weights {
		names = append(names, w.Name)
		if strings.HasPrefix(w.Name, "state/") {
			state = append(state, w.Name)
		}
	}
	if len(state) == 0 || !strings.HasPrefix(names[0], "param/") || !strings.HasPrefix(names[len(names)-1], "state/") {
		t.Errorf("weights %v: want the parameters, then the layer state batch normalization reads", names)
	}
	for _, size := range []int{2, 8} {
		if a := mainArity(t, got.Programs[size].Code); a != 1+len(names) {
			t.Errorf("the batch-%d program takes %d arguments, want %d (1 input + %d weights)", size, a, 1+len(names), len(names))
		}
	}
	run, err := exportbundle.Open(dir, r.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	x, _ := synthetic(8, 11)
	worst := 0.0
	for _, size := range []int{2, 8} {
		xs := rowsOf(x, 0, size)
		want, err := n.Predict(prefetch.Batch{"x": xs})
		if err != nil {
			t.Fatal(err)
		}
		out, err := run.Run(size, map[string]exportbundle.Tensor{"x": f32Tensor(t, xs)})
		if err != nil {
			t.Fatal(err)
		}
		worst = max(worst, maxAbsDiff(t, "logits", out["logits"], want["logits"]))
	}
	if worst > 1e-5 {
		t.Errorf("runner vs Predict: max |diff| %g > 1e-5", worst)
	}
	t.Logf("weights %v; runner vs Predict at batch sizes 2 and 8: max |diff| %g", names, worst)
}

// TestExportFromCheckpoint: a Nitro built with WithCheckpoint (weights restored, never trained in
// this process) exports the restored weights: its bundle returns what the trained Nitro predicts,
// and its provenance names the checkpoint.
func TestExportFromCheckpoint(t *testing.T) {
	r := requireXLA(t)
	runDir := t.TempDir()
	first := build(t, newTempered(), core.WithCache(compilecache.New()), core.WithRunDir(runDir), core.WithMaxEpochs(2),
		core.WithCheckpointer(must(checkpoint.NewEveryN(1, "", nil))))
	if err := first.Train(); err != nil {
		t.Fatal(err)
	}
	x, _ := synthetic(4, 21)
	want, err := first.Predict(prefetch.Batch{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	restored := build(t, newTempered(), core.WithCache(compilecache.New()), core.WithCheckpoint(runDir))
	if restored.Step() != 0 {
		t.Fatalf("restored Nitro at step %d", restored.Step())
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if _, err := export.Export(restored, dir, export.ExportSpec{Name: "restored", BatchSizes: []int{4}}); err != nil {
		t.Fatal(err)
	}
	run, err := exportbundle.Open(dir, r.Plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if names := []string{run.Outputs()[0].Name, run.Outputs()[1].Name}; !slices.Equal(names, []string{"logits", "prob"}) {
		t.Errorf("default outputs %v, want every Forward output, sorted", names)
	}
	out, err := run.Run(4, map[string]exportbundle.Tensor{"x": f32Tensor(t, x)})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"logits", "prob"} {
		if d := maxAbsDiff(t, name, out[name], want[name]); d > 1e-5 {
			t.Errorf("%s: the restored Nitro's bundle vs the trained Nitro's Predict: max |diff| %g", name, d)
		}
	}
	if p := run.Provenance()["checkpoint"]; p == "" || !strings.HasPrefix(p, runDir) {
		t.Errorf("provenance checkpoint = %q, want the path under %s", p, runDir)
	}
}
