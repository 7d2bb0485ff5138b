package engine

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/prefetch"
)

// accumMLP is a two-layer ReLU regression: four parameter arrays, and dead units whose gradients
// are exact (possibly negative) zeros, the case where adding to zeros and starting from the
// gradient could differ in a zero's sign.
type accumMLP struct{}

func accumForward(_ any, ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
	h := activations.Relu(layers.Dense(ctx.In("h0"), in["x"], true, 16))
	return map[string]*graph.Node{"y": layers.Dense(ctx.In("out"), h, true, 1)}
}

func accumLoss(_ any, out, in map[string]*graph.Node) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(out["y"], in["y"])))
}

func newAccumEngine(t *testing.T, accum int) (*Engine, *prefetch.ArrayBatches) {
	t.Helper()
	const rows = 128
	rng := rand.New(rand.NewPCG(3, 4))
	xs, ys := make([]float32, rows*8), make([]float32, rows)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	for i := range ys {
		ys[i] = float32(rng.NormFloat64())
	}
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(xs, rows, 8),
		"y": tensors.FromFlatDataAndDimensions(ys, rows, 1),
	}, 8, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEngine(t, testRun{exp: &accumMLP{}, forward: accumForward, loss: accumLoss, data: src,
		backend: "go", accum: accum, cache: compilecache.New()})
	return e, src
}

// trainWithHostZeros is the loop before the sums started on the device: each optimizer step
// uploads parameter-sized zeros from the host and every micro-batch adds to its input sums. It
// is the reference the device-side start must match bit for bit.
func trainWithHostZeros(t *testing.T, e *Engine, src *prefetch.ArrayBatches, epochs int) {
	t.Helper()
	keys := []string{"x", "y"}
	to := src.Len() / e.accum * e.accum
	step := 0
	for range epochs {
		for i := 0; i < to; i += e.accum {
			var acc []*tensors.Tensor
			for _, g := range e.groups {
				for s := range g.segs {
					acc = append(acc, tensors.FromShape(g.segShape(s)))
				}
			}
			for k := range e.accum {
				b, err := src.BatchAt(i + k)
				if err != nil {
					t.Fatal(err)
				}
				placed, err := e.Place(b, keys)
				if err != nil {
					t.Fatal(err)
				}
				e.CountBatchUploads(len(keys))
				if _, acc, err = e.gradientStep(placed, keys, acc, false); err != nil {
					t.Fatal(err)
				}
			}
			step++
			if err := e.optimizerStep(acc, step); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func paramBits(t *testing.T, e *Engine) []uint32 {
	t.Helper()
	var bits []uint32
	for _, g := range e.st.groups {
		for _, p := range g.params {
			tensors.ConstFlatData(p, func(f []float32) {
				for _, x := range f {
					bits = append(bits, math.Float32bits(x))
				}
			})
		}
	}
	return bits
}

// TestAccumStartsTheSumsOnTheDevice: at accum 4 an optimizer step uploads nothing
// parameter-sized (only each micro-batch's two batch fields and scalars), and the parameters it
// trains are bitwise those of the loop that uploaded zeros for the sums every step.
func TestAccumStartsTheSumsOnTheDevice(t *testing.T) {
	const accum, epochs = 4, 3
	n, src := newAccumEngine(t, accum)
	before := n.Uploads()
	steps := 0
	trainEpochs(t, n, src, epochs, &steps)
	if steps != epochs*16/accum {
		t.Fatalf("%d optimizer steps, want %d", steps, epochs*16/accum)
	}
	after := n.Uploads()
	if d := after.Params - before.Params; d != 0 {
		t.Errorf("%d parameter-sized uploads in %d optimizer steps at accum %d, want 0 (uploads %+v -> %+v)", d, steps, accum, before, after)
	}
	if d, want := after.Batch-before.Batch, steps*accum*2; d != want {
		t.Errorf("%d batch uploads in %d optimizer steps, want %d (two fields per micro-batch, nothing else)", d, steps, want)
	}
	if d := after.OptState - before.OptState; d != 0 {
		t.Errorf("%d optimizer state uploads during training, want 0", d)
	}

	ref, refSrc := newAccumEngine(t, accum)
	refBefore := ref.Uploads()
	trainWithHostZeros(t, ref, refSrc, epochs)
	// The reference really is the host-zeros loop: one upload per segment's sums per step.
	if d, want := ref.Uploads().Params-refBefore.Params, steps*ref.segmentCount(); d != want {
		t.Fatalf("the reference loop uploaded %d parameter-sized arrays in %d steps, want %d", d, steps, want)
	}
	got, want := paramBits(t, n), paramBits(t, ref)
	if len(got) != len(want) {
		t.Fatalf("%d parameter elements, the reference has %d", len(got), len(want))
	}
	diff := 0
	for i := range got {
		if got[i] != want[i] {
			diff++
		}
	}
	if diff > 0 {
		t.Errorf("%d of %d parameter elements differ bitwise from the host-zeros loop after %d steps at accum %d", diff, len(got), steps, accum)
	}
}
