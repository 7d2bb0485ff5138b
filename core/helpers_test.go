package core_test

import (
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
)

// The synthetic task shared by these tests: x [n, 4] float32 standard normal, y [n, 1] float32 =
// x·w + 0.5, a linear regression a single Dense layer learns exactly. Deterministic in its seed.
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

// arrays builds an ArrayBatches over the synthetic task, failing the test on error.
func arrays(t testing.TB, n, batch int, seed uint64, opts prefetch.ArrayOptions) *prefetch.ArrayBatches {
	t.Helper()
	x, y := synthetic(n, seed)
	a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, batch, opts)
	if err != nil {
		t.Fatalf("NewArrayBatches: %v", err)
	}
	return a
}

// data is a train split (64 samples, batch 16, partial dropped) and a val split of valN samples
// (batch 16, short final batch kept) when valN > 0.
func data(t testing.TB, valN int) prefetch.Data {
	t.Helper()
	d := prefetch.Data{"train": arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true})}
	if valN > 0 {
		d["val"] = arrays(t, valN, 16, 2, prefetch.ArrayOptions{})
	}
	return d
}

// In is what Forward reads; Tgt what Loss and Metrics read.
type In struct {
	X *graph.Node `batch:"x"`
}

type Tgt struct {
	Y *graph.Node `batch:"y"`
}

func mse(pred, y *graph.Node) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(pred, y)))
}

// base holds the required hooks of a one-Dense-layer regression; the experiment types of these
// tests embed it and add the methods or fields under test.
type base struct{}

func (*base) BuildModel(ctx *context.Context) error { return nil }

func (*base) Forward(ctx *context.Context, in In) core.Outputs {
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), in.X, true, 1)}
}

func (*base) Loss(out core.Outputs, in Tgt) *graph.Node { return mse(out["pred"], in.Y) }

// Reg is the plain experiment: the required hooks and nothing else.
type Reg struct{ base }

// Deep has two Dense layers (two scopes), for parameter groups.
type Deep struct{ base }

func (*Deep) Forward(ctx *context.Context, in In) core.Outputs {
	h := layers.Dense(ctx.In("backbone"), in.X, true, 8)
	return core.Outputs{"pred": layers.Dense(ctx.In("head"), h, true, 1)}
}

// goOpts are the options every test uses: pure-Go backend, silent, a private compile cache, no
// logger and no checkpoints, so a test leaves no runs/ folder behind (the logger and checkpoint
// tests pass their own, or a RunDir under t.TempDir(); a later WithLogger or WithCheckpointer
// wins).
func goOpts(c *compilecache.Cache, more ...core.Option) []core.Option {
	if c == nil {
		c = compilecache.New()
	}
	return append([]core.Option{core.WithBackend("go"), core.Quiet(), core.WithCache(c), core.WithoutLogger(), core.WithoutCheckpoints()}, more...)
}

// mustNew sets up e on the go backend with a private cache, failing the test on error.
func mustNew(t testing.TB, e any, d prefetch.Data, opts ...core.Option) *core.Nitro {
	t.Helper()
	n, err := core.New(e, append(goOpts(nil, core.WithData(d)), opts...)...)
	if err != nil {
		t.Fatalf("core.New(%T): %v", e, err)
	}
	return n
}

// newErr sets up e expecting an error and returns it.
func newErr(t testing.TB, e any, d prefetch.Data, opts ...core.Option) error {
	t.Helper()
	var all []core.Option
	if d != nil {
		all = append(all, core.WithData(d))
	}
	n, err := core.New(e, append(goOpts(nil, all...), opts...)...)
	if err == nil {
		t.Fatalf("core.New(%T) succeeded (%v); want an error", e, n != nil)
	}
	return err
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

// wantContains fails unless s contains every want.
func wantContains(t testing.TB, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, s)
		}
	}
}

func newCache() *compilecache.Cache { return compilecache.New() }

// must returns v, panicking on err (for values a test builds from known-good inputs).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
