package coretest

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

// Features is the width of x.
const Features = 4

// TrueW is the weight vector y is drawn with; a trained Reg's kernel approaches it.
var TrueW = [Features]float32{1, -2, 0.5, 1.5}

// Synthetic returns n samples of the task, the same for the same seed.
func Synthetic(n int, seed uint64) (x, y *tensors.Tensor) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	xs := make([]float32, n*Features)
	ys := make([]float32, n)
	for i := range n {
		dot := float32(0.5)
		for j := range Features {
			v := float32(r.NormFloat64())
			xs[i*Features+j] = v
			dot += v * TrueW[j]
		}
		ys[i] = dot
	}
	return tensors.FromFlatDataAndDimensions(xs, n, Features), tensors.FromFlatDataAndDimensions(ys, n, 1)
}

// Arrays is n samples of the task (fields "x" and "y") cut into batches of batch.
func Arrays(t testing.TB, n, batch int, seed uint64, opts prefetch.ArrayOptions) *prefetch.ArrayBatches {
	t.Helper()
	x, y := Synthetic(n, seed)
	a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, batch, opts)
	if err != nil {
		t.Fatalf("NewArrayBatches: %v", err)
	}
	return a
}

// Data is a train split (64 samples, batch 16, partial dropped) and, when valN > 0, a val split
// of valN samples (batch 16, short final batch kept).
func Data(t testing.TB, valN int) prefetch.Data {
	t.Helper()
	d := prefetch.Data{"train": Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true})}
	if valN > 0 {
		d["val"] = Arrays(t, valN, 16, 2, prefetch.ArrayOptions{})
	}
	return d
}

// In is what Forward reads; Tgt what Loss and Metrics read.
type In struct {
	X *graph.Node `batch:"x"`
}

// Tgt is the target field.
type Tgt struct {
	Y *graph.Node `batch:"y"`
}

// MSE is the mean squared error of pred against y.
func MSE(pred, y *graph.Node) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(pred, y)))
}

// Base holds the required hooks of a one-Dense-layer regression; a test's experiment embeds it
// and adds the methods or fields under test.
type Base struct{}

// BuildModel has nothing to check: Forward creates the layer's variables.
func (*Base) BuildModel(ctx *context.Context) error { return nil }

// Forward is one Dense layer, scope "dense_0", to output "pred".
func (*Base) Forward(ctx *context.Context, in In) core.Outputs {
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), in.X, true, 1)}
}

// Loss is MSE of "pred" against y.
func (*Base) Loss(out core.Outputs, in Tgt) *graph.Node { return MSE(out["pred"], in.Y) }

// Reg is the plain experiment: the required hooks and nothing else.
type Reg struct{ Base }

// GoOpts are the options a test starts from: the pure-Go backend, silent, the compile cache c
// (a private one when nil), no logger and no checkpoints; more come after, so a later
// WithLogger or WithCheckpointer wins.
func GoOpts(c *compilecache.Cache, more ...core.Option) []core.Option {
	if c == nil {
		c = compilecache.New()
	}
	return append([]core.Option{core.WithBackend("go"), core.Quiet(), core.WithCache(c), core.WithoutLogger(), core.WithoutCheckpoints()}, more...)
}

// CkptOpts are GoOpts with checkpoints on: the default checkpointer adopts dir as the run dir.
// There is no console; a later WithConsole gets the notices.
func CkptOpts(dir string, more ...core.Option) []core.Option {
	return append([]core.Option{core.WithBackend("go"), core.WithConsole(nil), core.WithCache(compilecache.New()), core.WithoutLogger(), core.WithRunDir(dir)}, more...)
}

// New is core.New, failing the test on error.
func New(t testing.TB, e any, opts ...core.Option) *core.Nitro {
	t.Helper()
	n, err := core.New(e, opts...)
	if err != nil {
		t.Fatalf("core.New(%T): %v", e, err)
	}
	return n
}

// MustNew sets e up on d with GoOpts (a private cache), then opts.
func MustNew(t testing.TB, e any, d prefetch.Data, opts ...core.Option) *core.Nitro {
	t.Helper()
	return New(t, e, append(GoOpts(nil, core.WithData(d)), opts...)...)
}

// Train runs n.Train, failing the test on error.
func Train(t testing.TB, n *core.Nitro) {
	t.Helper()
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
}

// WantErr fails unless err is non-nil and its text contains every want.
func WantErr(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error; want one containing %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q\n  does not contain %q", err, w)
		}
	}
}

// HostCheckBackends are the backends the Host check is proven on: XLA (what users run) and pure
// Go. XLA absent is a failure under CI, and a broken plugin always is.
func HostCheckBackends(t *testing.T) []string {
	t.Helper()
	if _, err := core.New(&Reg{}, append(GoOpts(nil, core.WithData(Data(t, 0))), core.WithBackend("xla"))...); err != nil {
		if prereq.CI() || !prereq.IsAbsent(err) {
			prereq.XLAPlugin.Need(t, err)
		}
		t.Logf("XLA backend absent, checking on pure Go only: %v", err)
		return []string{"go"}
	}
	return []string{"xla", "go"}
}

// WantHostRead fails unless err is a *markers.HostReadError naming field alone.
func WantHostRead(t testing.TB, err error, field string) {
	t.Helper()
	var hre *markers.HostReadError
	if !errors.As(err, &hre) || !slices.Equal(hre.Fields, []string{field}) {
		t.Fatalf("got %v; want a *markers.HostReadError naming %s", err, field)
	}
}
