package exportbundle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/stablehlo"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/tensorfile"
)

const pluginFile = "pjrt_c_api_cpu_plugin.so"

// requirePlugin returns the plugin path nitro's backend resolver would load (prereq.Plugin runs
// the same search, pluginsearch, which this module can use and backend calls), or stops the
// test: a skip without one (a failure under CI), a failure when the search refuses a place.
func requirePlugin(t testing.TB) string {
	t.Helper()
	return prereq.Plugin(t)
}

var (
	mainOnce    sync.Once
	mainBackend backends.Backend
	mainErr     error
)

// gomlxBackend is an ordinary GoMLX backend on the real plugin (the process's "main" one, as core
// would hold), the reference the captured programs are compared with.
func gomlxBackend(t testing.TB) backends.Backend {
	t.Helper()
	plugin := requirePlugin(t)
	mainOnce.Do(func() { mainBackend, mainErr = stablehlo.New(plugin) })
	if mainErr != nil {
		t.Fatalf("GoMLX backend on %s: %v", plugin, mainErr)
	}
	return mainBackend
}

// The test MLP: 4 features, 8 hidden (tanh), 3 classes; outputs logits and softmax probabilities.
const nIn, nHidden, nOut = 4, 8, 3

func mlpGraph(x, w1, b1, w2, b2 *graph.Node) (*graph.Node, *graph.Node) {
	h := graph.Tanh(graph.Add(graph.Dot(x, w1), graph.InsertAxes(b1, 0)))
	logits := graph.Add(graph.Dot(h, w2), graph.InsertAxes(b2, 0))
	return logits, graph.Softmax(logits)
}

func randF32(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64())
	}
	return out
}

// mlpWeights returns the weights in argument order.
func mlpWeights() []Weight {
	r := rand.New(rand.NewPCG(1, 2))
	mk := func(name string, shape ...int) Weight {
		n := 1
		for _, d := range shape {
			n *= d
		}
		t, err := NewTensor(shape, randF32(r, n))
		if err != nil {
			panic(err)
		}
		return Weight{Name: name, Tensor: t}
	}
	return []Weight{mk("w1", nIn, nHidden), mk("b1", nHidden), mk("w2", nHidden, nOut), mk("b2", nOut)}
}

func mlpInput(batch int, seed uint64) Tensor {
	t, err := NewTensor([]int{batch, nIn}, randF32(rand.New(rand.NewPCG(seed, 7)), batch*nIn))
	if err != nil {
		panic(err)
	}
	return t
}

// gomlxTensor converts a Tensor (F32 only, as the MLP uses) to a GoMLX host tensor.
func gomlxTensor(t Tensor) *tensors.Tensor {
	v, err := Values[float32](t)
	if err != nil {
		panic(err)
	}
	return tensors.FromFlatDataAndDimensions(v, t.Shape...)
}

func flatF32(t *tensors.Tensor) []float32 {
	var out []float32
	tensors.MustConstFlatData(t, func(flat []float32) { out = append(out, flat...) })
	return out
}

// runGoMLX executes the MLP with GoMLX on b and returns its two outputs flat.
func runGoMLX(t testing.TB, b backends.Backend, x Tensor, ws []Weight) (logits, probs []float32) {
	t.Helper()
	e, err := graph.NewExec(b, mlpGraph)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	args := []any{gomlxTensor(x)}
	for _, w := range ws {
		args = append(args, gomlxTensor(w.Tensor))
	}
	out, err := e.Exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	return flatF32(out[0]), flatF32(out[1])
}

var mlpSpecs = struct{ inputs, outputs []TensorSpec }{
	inputs: []TensorSpec{{Name: "x", DType: tensorfile.F32, Shape: []int{-1, nIn}, BatchAxis: 0, AxisLetters: "f"}},
	outputs: []TensorSpec{
		{Name: "logits", DType: tensorfile.F32, Shape: []int{-1, nOut}, BatchAxis: 0, AxisLetters: "k"},
		{Name: "probs", DType: tensorfile.F32, Shape: []int{-1, nOut}, BatchAxis: 0},
	},
}

// captureMLP captures the MLP's program at each batch size, one Capture per size.
func captureMLP(t testing.TB, batches ...int) map[int]Program {
	t.Helper()
	progs, err := captureMLPErr(requirePlugin(t), batches...)
	if err != nil {
		t.Fatal(err)
	}
	return progs
}

func captureMLPErr(plugin string, batches ...int) (map[int]Program, error) {
	ws := mlpWeights()
	out := map[int]Program{}
	for _, n := range batches {
		progs, err := Capture(plugin, func(b backends.Backend) error {
			e, err := graph.NewExec(b, mlpGraph)
			if err != nil {
				return err
			}
			defer e.Finalize()
			args := []any{gomlxTensor(mlpInput(n, 1))}
			for _, w := range ws {
				args = append(args, gomlxTensor(w.Tensor))
			}
			_, err = e.Exec(args...)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("Capture at batch %d: %w", n, err)
		}
		if len(progs) != 1 {
			return nil, fmt.Errorf("Capture at batch %d: %d programs, want 1", n, len(progs))
		}
		out[n] = progs[0]
	}
	return out, nil
}

var (
	mlpOnce   sync.Once
	mlpDir    string
	mlpBundle *Bundle
	mlpErr    error
)

// mlpBundleDir writes (once per process) the MLP bundle at batch sizes 1 and 4.
func mlpBundleDir(t testing.TB) (string, *Bundle) {
	t.Helper()
	plugin := requirePlugin(t)
	mlpOnce.Do(func() {
		var progs map[int]Program
		if progs, mlpErr = captureMLPErr(plugin, 1, 4); mlpErr != nil {
			return
		}
		mlpBundle = &Bundle{
			Name:       "mlp_test",
			Inputs:     mlpSpecs.inputs,
			Outputs:    mlpSpecs.outputs,
			Weights:    mlpWeights(),
			Programs:   progs,
			Provenance: map[string]string{"model": "mlp", "preset": "test"},
		}
		var tmp string
		if tmp, mlpErr = os.MkdirTemp("", "exportbundle-test-"); mlpErr != nil {
			return
		}
		tmpDirs = append(tmpDirs, tmp)
		mlpDir = filepath.Join(tmp, "bundle")
		mlpErr = Write(mlpDir, mlpBundle)
	})
	if mlpErr != nil {
		t.Fatal(mlpErr)
	}
	return mlpDir, mlpBundle
}

var tmpDirs []string

// openMLP opens the MLP bundle on the plugin, closed when the test ends, and returns the plugin
// path and the bundle as written too.
func openMLP(t testing.TB) (*Runner, string, *Bundle) {
	t.Helper()
	plugin := requirePlugin(t)
	dir, b := mlpBundleDir(t)
	r, err := Open(dir, plugin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, plugin, b
}

func TestMain(m *testing.M) {
	if dir := os.Getenv(rssChildEnv); dir != "" { // BenchmarkServeRSS's server
		os.Exit(rssChild(dir))
	}
	code := m.Run()
	for _, d := range tmpDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

func maxAbsDiff(a, b []float32) (float64, error) {
	if len(a) != len(b) {
		return 0, fmt.Errorf("lengths %d and %d", len(a), len(b))
	}
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d, nil
}
