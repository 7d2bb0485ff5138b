package engine

import (
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/prefetch"
)

// twinRanks is an AllReducer for a run of w processes that all hold this one's buffer: the sum
// is w times it, so after the division by w a step must end where one process's does.
type twinRanks struct {
	w     int
	calls int
	n     int // the last call's length
}

var _ AllReducer = (*twinRanks)(nil)

func (r *twinRanks) AllReduceSum(buf []float32) error {
	r.calls++
	r.n = len(buf)
	for i := range buf {
		buf[i] *= float32(r.w)
	}
	return nil
}

func (r *twinRanks) Size() int { return r.w }

// wideMLP is a model with one array past packRun (its own segment) and three small ones (one
// shared segment), so the reduced gradients come back as segments of both kinds.
type wideMLP struct{}

const wideIn, wideHidden = 256, 512 // w1: 131072 elements, past packRun

func newWideEngine(t testing.TB, src *prefetch.ArrayBatches, reducer AllReducer, cache *compilecache.Cache) *Engine {
	return newTestEngine(t, testRun{exp: &wideMLP{}, data: src, backend: "xla", cache: cache, reducer: reducer,
		forward: func(_ any, ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
			h := graph.Tanh(layers.Dense(ctx.In("l0"), in["x"], true, wideHidden))
			return map[string]*graph.Node{"y": layers.Dense(ctx.In("l1"), h, true, 10)}
		},
		loss: func(_ any, out, _ map[string]*graph.Node) *graph.Node {
			return graph.ReduceAllMean(graph.Square(out["y"]))
		},
	})
}

func wideData(t testing.TB) *prefetch.ArrayBatches {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 8*32*wideIn)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": tensors.FromFlatDataAndDimensions(x, 8*32, wideIn)}, 32, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// stepper runs e's optimizer steps over src, one batch each, from step *at on.
func stepper(t testing.TB, e *Engine, src *prefetch.ArrayBatches) func(n int) {
	keys, at := []string{"x"}, 0
	next := func() (map[string]*tensors.Tensor, error) {
		b, err := src.BatchAt(at % src.Len())
		at++
		if err != nil {
			return nil, err
		}
		return e.Place(b, keys)
	}
	step := 0
	return func(n int) {
		for range n {
			step++
			if _, err := e.Step(step, keys, next, false); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReduceStepMatchesOneProcess: a step whose gradients cross a two-rank all-reduce (two ranks
// with this one's batch) ends where the same step on one process does, every parameter within
// 1e-6 after 6 steps, with one collective per step over the gradients' elements and the scalars.
func TestReduceStepMatchesOneProcess(t *testing.T) {
	src, cache := wideData(t), compilecache.New()
	r := &twinRanks{w: 2}
	multi, single := newWideEngine(t, src, r, cache), newWideEngine(t, src, nil, cache)
	stepper(t, multi, src)(6)
	stepper(t, single, src)(6)
	if r.calls != 6 {
		t.Errorf("%d all-reduce calls over 6 steps, want one per step", r.calls)
	}
	if want := paramElems(multi) + 2; r.n != want { // the loss and the stop vote
		t.Errorf("the all-reduce summed %d values, want %d (the gradients, the loss, the vote)", r.n, want)
	}
	got, err := multi.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	want, err := single.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		g, worst := tensors.MustCopyFlatData[float32](got[name]), 0.0
		for i, v := range tensors.MustCopyFlatData[float32](w) {
			worst = math.Max(worst, math.Abs(float64(g[i]-v)))
		}
		if worst > 1e-6 {
			t.Errorf("%s: %g apart after 6 steps over two ranks and on one process", name, worst)
		}
	}
}

// TestReduceStepAllocatesNoGradients: the all-reduce path moves the gradients device -> the one
// host buffer -> device, so what a step allocates on the host over one process's step is a few
// small headers per segment, not the gradients again (before: one host tensor per segment, the
// gradients' size, every step). Printed: bytes and allocations per step, both ways.
func TestReduceStepAllocatesNoGradients(t *testing.T) {
	src, cache := wideData(t), compilecache.New()
	multi, single := newWideEngine(t, src, &twinRanks{w: 2}, cache), newWideEngine(t, src, nil, cache)
	const steps = 20
	perStep := func(e *Engine) (bytes, allocs float64) {
		run := stepper(t, e, src)
		run(3) // compiles, and the host buffer's first allocation
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		run(steps)
		runtime.ReadMemStats(&b)
		return float64(b.TotalAlloc-a.TotalAlloc) / steps, float64(b.Mallocs-a.Mallocs) / steps
	}
	mb, ma := perStep(multi)
	sb, sa := perStep(single)
	grads := float64(4 * paramElems(multi))
	t.Logf("host allocation per step: two ranks %.0f B in %.0f allocations, one process %.0f B in %.0f; extra %.0f B (the gradients are %.0f B)",
		mb, ma, sb, sa, mb-sb, grads)
	if mb-sb > grads/8 {
		t.Errorf("the all-reduce step allocates %.0f B per step more than one process's, the gradients are %.0f B: they are copied into new host memory each step", mb-sb, grads)
	}
}

// paramElems counts the parameters' elements over every group's segments.
func paramElems(e *Engine) int {
	n := 0
	for _, g := range e.groups {
		for _, s := range g.segs {
			n += s.size
		}
	}
	return n
}

// Gradients whose sizes add up to the segments' but come in another order are refused: the
// upload cuts the buffer by the segments, so the sums would land in other parameters' places.
func TestReduceStepRefusesMisplacedSegments(t *testing.T) {
	src := wideData(t)
	e := newWideEngine(t, src, &twinRanks{w: 2}, nil)
	var grads []*tensors.Tensor
	for _, g := range e.groups {
		for _, seg := range g.segs {
			grads = append(grads, tensors.FromShape(shapes.Make(dtypes.Float32, seg.size)))
		}
	}
	if len(grads) < 2 {
		t.Fatalf("%d segments: the test needs two of different sizes", len(grads))
	}
	buf := make([]float32, paramElems(e))
	if _, err := e.downloadSegments(grads, buf); err != nil {
		t.Fatalf("segments in order: %v", err)
	}
	if err := e.checkReducible(grads); err != nil {
		t.Fatalf("segments in order: %v", err)
	}
	grads[0], grads[len(grads)-1] = grads[len(grads)-1], grads[0]
	if err := e.checkReducible(grads); err == nil || !strings.Contains(err.Error(), "do not match parameter group") {
		t.Fatalf("segments out of order: %v; want a refusal naming the group", err)
	}
	if err := e.checkReducible(grads[1:]); err == nil {
		t.Fatal("one segment short: no error")
	}
}
