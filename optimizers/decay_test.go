package optimizers_test

import (
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

// paramSizedSubs counts parameter-sized subtraction nodes in the SGD+Decay update graph.
func decayGraph(t *testing.T, anchor optimizers.Anchor, mask *optimizers.NoDecayMask) (subs, muls, params int) {
	t.Helper()
	c := mustChain(t, buildRule(t, optimizers.NewSGD()), optimizers.Decay(anchor, mask))
	g := graph.NewGraph(goBackend(t), "decay")
	s := shapes.Make(dtypes.Float32, 6)
	p := graph.Parameter(g, "p", s)
	var st []*graph.Node
	for range c.StateNames() {
		st = append(st, graph.Parameter(g, "s", s))
	}
	hp := optimizers.Hyper{"eta": graph.Parameter(g, "eta", shapes.Make(dtypes.Float32)), "lambda": graph.Parameter(g, "lambda", shapes.Make(dtypes.Float32))}
	c.Apply(p, graph.Parameter(g, "g", s), st, hp, graph.Parameter(g, "step", shapes.Make(dtypes.Int32)))
	for _, n := range g.Nodes() {
		if n.Shape().Size() != 6 {
			continue
		}
		switch n.Type() {
		case graph.NodeTypeSub:
			subs++
		case graph.NodeTypeMul:
			muls++
		case graph.NodeTypeParameter:
			params++
		}
	}
	return subs, muls, params
}

// TestZeroAnchorEmitsNoSubtractionAndNoBuffer: AnchorZero is resolved at build time, so plain
// decay has no (p - 0) subtraction and no parameter-sized zero buffer; w0 adds exactly one of
// each, and a mask adds one multiply and one buffer.
func TestZeroAnchorEmitsNoSubtractionAndNoBuffer(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	zSubs, zMuls, zParams := decayGraph(t, optimizers.AnchorZero, nil)
	wSubs, _, wParams := decayGraph(t, optimizers.AnchorW0, nil)
	_, mMuls, mParams := decayGraph(t, optimizers.AnchorZero, l.NoDecayMask(nil))
	if wSubs != zSubs+1 || wParams != zParams+1 {
		t.Errorf("w0 vs zero anchor: subs %d vs %d, param-sized inputs %d vs %d; want exactly one more of each", wSubs, zSubs, wParams, zParams)
	}
	if zParams != 2 { // p and g only
		t.Errorf("zero anchor without mask has %d parameter-sized inputs, want 2 (params, grads)", zParams)
	}
	if mMuls != zMuls+1 || mParams != zParams+1 {
		t.Errorf("mask: muls %d vs %d, inputs %d vs %d; want one more of each", mMuls, zMuls, mParams, zParams)
	}
	if names := mustChain(t, optimizers.Decay(optimizers.AnchorZero, nil)).StateNames(); len(names) != 0 {
		t.Errorf("zero-anchor, unmasked Decay has state %v, want none", names)
	}
}

// TestMaskDominatesAnchor: excluded leaves do not move under decay toward zero, w0 or an explicit
// array, while decayed ones move by lambda*(p - anchor).
func TestMaskDominatesAnchor(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float64)
	p0 := []float64{1, 2, 3, 4, 5, 6}
	target := []float64{0.5, 0.5, 0.5, 0.5, 9, 9}
	for _, tc := range []struct {
		anchor optimizers.Anchor
		ref    []float64
	}{
		{optimizers.AnchorZero, make([]float64, 6)},
		{optimizers.AnchorW0, p0},
		{optimizers.AnchorArray(tensor64(target)), target},
	} {
		c := mustChain(t, buildRule(t, optimizers.NewSGD()), optimizers.Decay(tc.anchor, l.NoDecayMask(nil)))
		prog, err := optimizers.NewProgram([]*optimizers.Chain{c}, 0)
		if err != nil {
			t.Fatal(err)
		}
		// Start from shifted parameters so w0 decay has something to pull back.
		start := tensor64([]float64{2, 3, 4, 5, 6, 7})
		st, err := prog.Init([]*tensors.Tensor{tensor64(p0)})
		if err != nil {
			t.Fatal(err)
		}
		sp := compileStep(t, prog, []shapes.Shape{l.FlatShape()}, dtypes.Float64, dtypes.Int32)
		const lambda = 0.25
		out, _ := sp.run(t, []*tensors.Tensor{start}, []*tensors.Tensor{tensor64(make([]float64, 6))}, st,
			[]map[string]float64{{"eta": 1, "lambda": lambda}}, dtypes.Float64, int32(1))
		got := f64(t, out[0])
		s := f64(t, start)
		for i := range 6 {
			want := s[i] - lambda*(s[i]-tc.ref[i])
			if i >= 4 { // the biases are excluded
				want = s[i]
			}
			if relErr(got[i], want) > 1e-12 {
				t.Errorf("anchor %s element %d: got %v, want %v", tc.anchor, i, got[i], want)
			}
		}
	}
}

func TestDecayInitErrors(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float64)
	_, err := mustChain(t, optimizers.Decay(optimizers.AnchorArray(tensor64([]float64{1, 2})), nil)).Init(tensor64(make([]float64, 6)))
	mustContain(t, err, "decay anchor array has shape", "same element count and dtype", "Layout")
	_, err = mustChain(t, optimizers.Decay(optimizers.AnchorArray(nil), nil)).Init(tensor64(make([]float64, 6)))
	mustContain(t, err, "AnchorArray(nil)", "AnchorZero or AnchorW0")
	_, err = mustChain(t, optimizers.Decay(optimizers.AnchorZero, l.NoDecayMask(nil))).Init(tensor64(make([]float64, 5)))
	mustContain(t, err, `mask of group "default" covers 6 elements`, "same Layout")
}

func TestAnchorArrayReshapesToTheGroupBuffer(t *testing.T) {
	a := tensors.FromFlatDataAndDimensions([]float64{1, 2, 3, 4, 5, 6}, 2, 3)
	init, err := mustChain(t, optimizers.Decay(optimizers.AnchorArray(a), nil)).Init(tensor64(make([]float64, 6)))
	if err != nil {
		t.Fatal(err)
	}
	st := init.Leaves()
	if got := st[0].Shape().Dimensions; !slices.Equal(got, []int{6}) {
		t.Errorf("anchor shape %v, want the flat [6]", got)
	}
	if got := f64(t, st[0]); !slices.Equal(got, []float64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("anchor = %v", got)
	}
}

func TestNoDecayMask(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	m := l.NoDecayMask(nil)
	if ex := m.Excluded(); len(ex) != 1 || !slices.Equal(ex[0], []string{"dense", "biases"}) {
		t.Errorf("default excludes %v, want [[dense biases]] (every 1-D leaf)", ex)
	}
	mt, err := m.Tensor(l.FlatShape())
	if err != nil {
		t.Fatal(err)
	}
	if mt.DType() != dtypes.Float32 {
		t.Errorf("mask dtype %s, want the parameters' float32", mt.DType())
	}
	if got := tensors.MustCopyFlatData[float32](mt); !slices.Equal(got, []float32{1, 1, 1, 1, 0, 0}) {
		t.Errorf("mask = %v", got)
	}
	// Another dtype gets its own ones, not float32's bytes.
	l64 := twoLeafLayout(t, dtypes.Float64)
	mt64, err := l64.NoDecayMask(nil).Tensor(l64.FlatShape())
	if err != nil {
		t.Fatal(err)
	}
	if got := tensors.MustCopyFlatData[float64](mt64); !slices.Equal(got, []float64{1, 1, 1, 1, 0, 0}) {
		t.Errorf("float64 mask = %v", got)
	}
	// Extend rather than replace: the default no-decay list stays in force.
	all := l.NoDecayMask(func(kp []string, s shapes.Shape) bool {
		return optimizers.DefaultNoDecay(kp, s) || slices.Contains(kp, "weights")
	})
	if len(all.Excluded()) != 2 || all.ExcludesNothing() {
		t.Errorf("extended rule excludes %v", all.Excluded())
	}
	none := l.NoDecayMask(func([]string, shapes.Shape) bool { return false })
	if !none.ExcludesNothing() {
		t.Error("a rule excluding nothing should report ExcludesNothing")
	}
	if got := mustChain(t, optimizers.Decay(optimizers.AnchorZero, none)).StateNames(); len(got) != 0 {
		t.Errorf("Decay with a mask excluding nothing carries %v, want no mask buffer", got)
	}
}
