package engine

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/nitro-go/nitro/compilecache"
)

// TestProgramsTakeOneBufferPerGroup: with two parameter groups of small arrays, the optimizer
// program's inputs are per group one flat buffer each of parameters, gradient and state leaf
// (plus its hyperparameters), whatever the group's array count; the gradient program returns one
// flat gradient per group; and training through them moves every array of both groups, which
// Parameters still returns one by one.
func TestProgramsTakeOneBufferPerGroup(t *testing.T) {
	_, src := newAccumEngine(t, 1)
	two := newTestEngine(t, testRun{exp: &accumMLP{}, forward: accumForward, loss: accumLoss, data: src, backend: "go",
		cache: compilecache.New(), grouper: func(kp []string) string { return kp[0] }})
	if got := two.GroupNames(); !slices.Equal(got, []string{"h0", "out"}) {
		t.Fatalf("groups %v, want [h0 out]", got)
	}
	before, err := two.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.BatchAt(0)
	if err != nil {
		t.Fatal(err)
	}
	placed, err := two.Place(b, []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	_, grads, err := two.gradientStep(placed, []string{"x", "y"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(grads) != 2 || !slices.Equal(grads[0].Shape().Dimensions, []int{8*16 + 16}) || !slices.Equal(grads[1].Shape().Dimensions, []int{16 + 1}) {
		t.Errorf("the gradient program returned %v, want one flat gradient per group's one segment: [144] and [17]", grads)
	}
	if err := freeTensors(grads); err != nil {
		t.Fatal(err)
	}
	runSteps(t, two, src, 1, 3)
	p, err := two.optimizerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range p.inputs {
		if !strings.HasPrefix(in.Name, "hyper/") {
			names = append(names, in.Name)
		}
	}
	want := []string{"params/h0/0", "grads/h0/0", "opt/h0/0.radam.mu/0", "opt/h0/0.radam.nu/0", "params/out/0", "grads/out/0", "opt/out/0.radam.mu/0", "opt/out/0.radam.nu/0", "step"}
	if !slices.Equal(names, want) {
		t.Errorf("optimizer program inputs (hyperparameters aside) %v, want %v", names, want)
	}
	for _, in := range p.inputs {
		if g := strings.TrimPrefix(in.Name, "params/"); g != in.Name {
			size := map[string]int{"h0/0": 8*16 + 16, "out/0": 16 + 1}[g]
			if !slices.Equal(in.Shape, []int{size}) {
				t.Errorf("%s has shape %v, want the group's flat [%d]", in.Name, in.Shape, size)
			}
		}
	}
	after, err := two.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 4 {
		t.Fatalf("Parameters returned %d arrays, want the model's 4", len(after))
	}
	for k, v := range before {
		if after[k] == nil || !after[k].Shape().Equal(v.Shape()) {
			t.Errorf("%s: shape %v after training, %v before", k, after[k], v.Shape())
		} else if after[k].Equal(v) {
			t.Errorf("%s did not change in three steps", k)
		}
	}
}

// TestLargeArraysKeepTheirOwnBuffer: a 256x256 kernel (packRun elements) between small arrays
// gets a segment of its own, and three steps through two segments (the kernel a reshape of its
// input, the rest views of the other), two-program and fused, end with parameters and optimizer
// state bitwise those of one segment holding every array (the kernel a slice of it): the segments
// only move bytes. (On the pure-Go backend, whose products do not depend on where their operands
// live; XLA's may round differently, by some 1e-7 relative.)
func TestLargeArraysKeepTheirOwnBuffer(t *testing.T) {
	src := rampBatches(t, 256, 17)
	forward := func(_ any, ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
		h := activations.Relu(layers.Dense(ctx.In("h0"), in["x"], true, 256))
		return map[string]*graph.Node{"y": layers.Dense(ctx.In("out"), h, true, 1)}
	}
	trained := func(run, segments int, fused bool) []StateTensor {
		t.Helper()
		defer func(old int) { packRun = old }(packRun)
		packRun = run
		e := newTestEngine(t, testRun{exp: &accumMLP{}, forward: forward, loss: accumLoss, data: src, backend: "go", cache: compilecache.New()})
		e.fused = fused
		if got := len(e.groups[0].segs); got != segments {
			t.Fatalf("packRun %d: %d segments, want %d", run, got, segments)
		}
		runSteps(t, e, src, 1, 3)
		st, err := e.StateTensors(WholePart)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, fused := range []bool{false, true} {
		apart, together := trained(1<<16, 2, fused), trained(math.MaxInt, 1, fused)
		if len(apart) != len(together) {
			t.Fatalf("fused %v: %d tensors, %d with one segment", fused, len(apart), len(together))
		}
		for i := range apart {
			if apart[i].Name != together[i].Name || !bytes.Equal(apart[i].Data, together[i].Data) {
				t.Errorf("fused %v: %s differs from %s trained through one segment", fused, apart[i].Name, together[i].Name)
			}
		}
		// The tensors share their segment's read-back buffer, each capped at its own bytes: an
		// append to one must not write into the next.
		for i, x := range together[:len(together)-1] {
			next := bytes.Clone(together[i+1].Data)
			_ = append(x.Data, 0xff, 0xff, 0xff, 0xff)
			if cap(x.Data) != len(x.Data) || !bytes.Equal(together[i+1].Data, next) {
				t.Fatalf("fused %v: %s has capacity %d beyond its %d bytes, or appending to it changed %s", fused, x.Name, cap(x.Data), len(x.Data), together[i+1].Name)
			}
		}
	}
}

// With decay, the no-decay mask's segments that hold one value (each large array alone; here the
// 256-wide layer's weights, decayed) go to the device as a scalar, and training is bit for bit
// what the parameter-sized mask gives: parameters and Adam's moments after 3 steps.
func TestUniformMaskSegmentsAreScalars(t *testing.T) {
	_, src := newAccumEngine(t, 1)
	forward := func(_ any, ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
		h := activations.Relu(layers.Dense(ctx.In("h0"), in["x"], true, 256))
		h = activations.Relu(layers.Dense(ctx.In("h1"), h, true, 256))
		return map[string]*graph.Node{"y": layers.Dense(ctx.In("out"), h, true, 1)}
	}
	trained := func(scalar bool) ([]StateTensor, *Engine) {
		t.Helper()
		defer func(old bool) { scalarMasks = old }(scalarMasks)
		scalarMasks = scalar
		e := newTestEngine(t, testRun{exp: &accumMLP{}, forward: forward, loss: accumLoss, data: src, backend: "go", cache: compilecache.New(), lambda: 0.1})
		runSteps(t, e, src, 1, 3)
		st, err := e.StateTensors(WholePart)
		if err != nil {
			t.Fatal(err)
		}
		return st, e
	}
	full, _ := trained(false)
	got, e := trained(true)
	g := e.groups[0]
	scalars := 0
	for l, segs := range g.scalar {
		for s, sc := range segs {
			if sc {
				scalars++
				if d := e.st.groups[0].opt[l][s].Shape().Dimensions; len(d) != 0 {
					t.Errorf("leaf %d segment %d is marked scalar but holds shape %v", l, s, d)
				}
			}
		}
	}
	if scalars == 0 {
		t.Fatalf("no mask segment held as a scalar (segments %d)", len(g.segs))
	}
	if len(got) != len(full) {
		t.Fatalf("%d tensors, %d with full masks", len(got), len(full))
	}
	for i := range got {
		if got[i].Name != full[i].Name || !bytes.Equal(got[i].Data, full[i].Data) {
			t.Errorf("%s differs from the run with parameter-sized masks", got[i].Name)
		}
	}
}
