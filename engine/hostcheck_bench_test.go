package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/prefetch"
)

// hostCheckMLP (also the optimizer benchmark's model, Depth 2 Width 512: 670k parameters in 6
// arrays) is an MLP of Depth hidden Dense layers of Width units (2 arrays each, plus the
// output layer's 2): Depth 2, Width 256 is the MNIST example's shape; Depth 49, Width 32 has 100
// parameter arrays.
type hostCheckMLP struct {
	Depth int `nitro:"graphconst"`
	Width int `nitro:"graphconst"`
	Note  string
}

func (e *hostCheckMLP) Forward(ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
	h := in["x"]
	for i := range e.Depth {
		h = activations.Relu(layers.Dense(ctx.In(fmt.Sprintf("hidden_%d", i)), h, true, e.Width))
	}
	return map[string]*graph.Node{"logits": layers.Dense(ctx.In("output"), h, true, 10)}
}

func newHostCheckEngine(b testing.TB, exp *hostCheckMLP, src *prefetch.ArrayBatches, cache *compilecache.Cache) *Engine {
	return newTestEngine(b, testRun{exp: exp, data: src, backend: "xla", cache: cache,
		forward: func(view any, ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
			return view.(*hostCheckMLP).Forward(ctx, in)
		},
		loss: func(_ any, out, _ map[string]*graph.Node) *graph.Node {
			return graph.ReduceAllMean(graph.Square(out["logits"]))
		},
	})
}

// benchMLPData is the benchmarks' train split: 256 seeded random 784-pixel rows (zero targets)
// in batches of 128.
func benchMLPData(b *testing.B) *prefetch.ArrayBatches {
	const rows = 256
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float32, rows*784)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(xs, rows, 784),
		"y": tensors.FromFlatDataAndDimensions(make([]float32, rows), rows),
	}, 128, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		b.Fatal(err)
	}
	return src
}

// BenchmarkHostCheckCost prints what the compile check costs a handle that finds its programs in
// the cache (one trace of the gradient program, compared with the cached fingerprint) and what
// the Forward check costs every New, beside a compile of the same program, on XLA, for the
// MNIST MLP and a 100-array MLP. Ratios come from one run.
func BenchmarkHostCheckCost(b *testing.B) {
	src := benchMLPData(b)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	median := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	for _, m := range []struct {
		name         string
		depth, width int
	}{{"mnist-mlp 784-256-256-10", 2, 256}, {"mlp 49x32 (100 arrays)", 49, 32}} {
		c := compilecache.New()
		newHandle := func() *Engine {
			return newHostCheckEngine(b, &hostCheckMLP{Depth: m.depth, Width: m.width, Note: "host value"}, src, c)
		}
		first := newHandle()
		keys := []string{"x", "y"}
		start := time.Now()
		if _, err := first.gradientProgram(128, keys); err != nil {
			b.Fatal(err)
		}
		compile := ms(time.Since(start))
		var hit, fwd, newAll []float64
		for range 7 {
			start := time.Now()
			n := newHandle()
			newAll = append(newAll, ms(time.Since(start)))
			start = time.Now()
			if err := n.checkForwardHostIndependent(128, keys); err != nil {
				b.Fatal(err)
			}
			fwd = append(fwd, ms(time.Since(start)))
			start = time.Now()
			if _, err := n.gradientProgram(128, keys); err != nil {
				b.Fatal(err)
			}
			hit = append(hit, ms(time.Since(start)))
		}
		if st := c.Stats(); st.Hits != 7 || st.Entries != 1 {
			b.Fatalf("%s: the handles did not hit the cache: %+v", m.name, st)
		}
		arrays := 0
		for _, g := range first.groups {
			arrays += len(g.vars)
		}
		h, f := median(hit), median(fwd)
		fmt.Printf("host check cost, %s (%d parameter arrays): New %.1f ms (its Forward check %.2f ms); gradient program from the cache with the check %.2f ms; "+
			"compiling it %.0f ms; check on a hit / compile = %.3f\n", m.name, arrays, median(newAll), f, h, compile, h/compile)
	}
}
