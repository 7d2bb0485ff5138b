package export_test

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

// The synthetic task these tests export (as core's tests train it): x [n, 4] float32 standard
// normal, y [n, 1] float32 = x·w + 0.5, which a single Dense layer learns exactly.
const features = 4

var trueW = [features]float32{1, -2, 0.5, 1.5}

func synthetic(n int, seed uint64) (x, y *tensors.Tensor) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	xs := make([]float32, n*features)
	ys := make([]float32, n)
	for i := range n {
		dot := float32(0.5)
		for j := range features {
			v := float32(r.NormFloat64())
			xs[i*features+j] = v
			dot += v * trueW[j]
		}
		ys[i] = dot
	}
	return tensors.FromFlatDataAndDimensions(xs, n, features), tensors.FromFlatDataAndDimensions(ys, n, 1)
}

func arrays(t testing.TB, n, batch int, seed uint64, opts prefetch.ArrayOptions) *prefetch.ArrayBatches {
	t.Helper()
	x, y := synthetic(n, seed)
	a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, batch, opts)
	if err != nil {
		t.Fatalf("NewArrayBatches: %v", err)
	}
	return a
}

// data is a train split (64 samples, batch 16) and a val split of valN samples when valN > 0.
func data(t testing.TB, valN int) prefetch.Data {
	t.Helper()
	d := prefetch.Data{"train": arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true})}
	if valN > 0 {
		d["val"] = arrays(t, valN, 16, 2, prefetch.ArrayOptions{})
	}
	return d
}

type In struct {
	X *graph.Node `batch:"x"`
}

type Tgt struct {
	Y *graph.Node `batch:"y"`
}

func mse(pred, y *graph.Node) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(pred, y)))
}

// base is a one-Dense-layer regression; experiments embed it and override a hook.
type base struct{}

func (*base) BuildModel(ctx *context.Context) error { return nil }

func (*base) Forward(ctx *context.Context, in In) core.Outputs {
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), in.X, true, 1)}
}

func (*base) Loss(out core.Outputs, in Tgt) *graph.Node { return mse(out["pred"], in.Y) }

type Reg struct{ base }

// goOpts: the pure-Go backend, quiet, no logger, no checkpoints, a private cache (or c).
func goOpts(c *compilecache.Cache, more ...core.Option) []core.Option {
	if c == nil {
		c = compilecache.New()
	}
	return append([]core.Option{core.WithBackend("go"), core.Quiet(), core.WithCache(c), core.WithoutLogger(), core.WithoutCheckpoints()}, more...)
}

// ckptOpts: the pure-Go backend, checkpointing into dir.
func ckptOpts(dir string, more ...core.Option) []core.Option {
	return append([]core.Option{core.WithBackend("go"), core.WithConsole(nil), core.WithCache(compilecache.New()), core.WithoutLogger(), core.WithRunDir(dir)}, more...)
}

func newNitro(t testing.TB, e any, opts ...core.Option) *core.Nitro {
	t.Helper()
	n, err := core.New(e, opts...)
	if err != nil {
		t.Fatalf("core.New(%T): %v", e, err)
	}
	return n
}

func mustNew(t testing.TB, e any, d prefetch.Data, opts ...core.Option) *core.Nitro {
	t.Helper()
	return newNitro(t, e, append(goOpts(nil, core.WithData(d)), opts...)...)
}

func train(t testing.TB, n *core.Nitro) {
	t.Helper()
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless err is non-nil and its text contains every want.
func wantErr(t testing.TB, err error, want ...string) {
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

// hostCheckBackends are the backends the Host check is proven on: XLA (what users run) and pure
// Go. XLA absent is a failure under CI, and a broken plugin always is.
func hostCheckBackends(t *testing.T) []string {
	t.Helper()
	if _, err := core.New(&Reg{}, append(goOpts(nil, core.WithData(data(t, 0))), core.WithBackend("xla"))...); err != nil {
		if prereq.CI() || !prereq.IsAbsent(err) {
			prereq.XLAPlugin.Need(t, err)
		}
		t.Logf("XLA backend absent, checking on pure Go only: %v", err)
		return []string{"go"}
	}
	return []string{"xla", "go"}
}

func wantHostRead(t *testing.T, err error, field string) {
	t.Helper()
	var hre *markers.HostReadError
	if !errors.As(err, &hre) || !slices.Equal(hre.Fields, []string{field}) {
		t.Fatalf("got %v; want a *markers.HostReadError naming %s", err, field)
	}
}
