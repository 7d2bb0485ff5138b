package optimizers_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

func TestProgramErrors(t *testing.T) {
	_, err := optimizers.NewProgram(nil, 0)
	mustContain(t, err, "no chains", "one per parameter group")
	_, err = optimizers.NewProgram([]*optimizers.Chain{nil}, 0)
	mustContain(t, err, "group 0 is nil or empty", "NewChain")
	prog, err := optimizers.NewProgram([]*optimizers.Chain{mustChain(t, buildRule(t, optimizers.NewSGD()))}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = prog.Init(nil)
	mustContain(t, err, "got 0 parameter buffers for 1 groups")
	g := graph.NewGraph(goBackend(t), "prog")
	p := graph.Parameter(g, "p", shapes.Make(dtypes.Float32, 2))
	msg := mustPanic(t, func() { prog.Apply([]*graph.Node{p}, nil, nil, nil, p) })
	if !strings.Contains(msg, "1 groups but got 1 params, 0 grads") {
		t.Errorf("panic %s", msg)
	}
}

// TestProgramFloat32Training runs a few float32 RAdam steps as training would and checks the
// parameters keep their dtype (a type fixed point across the step) and move against the gradient.
func TestProgramFloat32Training(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	c, err := optimizers.BuildRuleChain(nil, optimizers.GroupSetup{Name: "default", Layout: l, Lambda: 1e-2, NoDecay: l.NoDecayMask(nil)})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := optimizers.NewProgram([]*optimizers.Chain{c}, 1)
	if err != nil {
		t.Fatal(err)
	}
	params := []*tensors.Tensor{tensors.FromFlatDataAndDimensions([]float32{1, 1, 1, 1, 1, 1}, 6)}
	states, err := prog.Init(params)
	if err != nil {
		t.Fatal(err)
	}
	sp := compileStep(t, prog, []shapes.Shape{l.FlatShape()}, dtypes.Float32, dtypes.Int32)
	grad := []*tensors.Tensor{tensors.FromFlatDataAndDimensions([]float32{1, -1, 2, -2, 0.5, -0.5}, 6)}
	for step := 1; step <= 10; step++ {
		params, states = sp.run(t, params, grad, states, []map[string]float64{{"eta": 1e-2, "lambda": 1e-4}}, dtypes.Float32, int32(step))
	}
	if params[0].DType() != dtypes.Float32 {
		t.Fatalf("params became %s", params[0].DType())
	}
	got := tensors.MustCopyFlatData[float32](params[0])
	for i, sign := range []float32{1, -1, 1, -1, 1, -1} {
		if (got[i]-1)*sign >= 0 {
			t.Errorf("element %d = %v did not move against the gradient", i, got[i])
		}
	}
}

// TestProgramApplyArraysEqualsApply: the per-array form core runs (clip over every array, each
// group's chain array by array, scalars shared per group) computes exactly what Apply computes on
// each group's flat buffer: RAdam past its switch, decay toward w0 with a no-decay mask, a clip
// that bites, two groups.
func TestProgramApplyArraysEqualsApply(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float64)
	chain := func() *optimizers.Chain {
		return mustChain(t, buildRule(t, optimizers.NewRAdam()), optimizers.Decay(optimizers.AnchorW0, l.NoDecayMask(nil)))
	}
	prog, err := optimizers.NewProgram([]*optimizers.Chain{chain(), chain()}, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	g := graph.NewGraph(goBackend(t), "arrays")
	step := graph.Scalar(g, dtypes.Float64, 7)
	leaf := func(_ string, j, seed int) *graph.Node {
		n := graph.IotaFull(g, l.Leaves[j].Shape)
		return graph.AddScalar(graph.MulScalar(n, 0.1*float64(seed)), float64(seed))
	}
	var flatP, flatG []*graph.Node
	var arrP, arrG [][]*graph.Node
	var flatS [][]*graph.Node
	var arrS [][][]*graph.Node
	var hyper []optimizers.Hyper
	for grp := range 2 {
		var ps, gs []*graph.Node
		for j := range l.Leaves {
			ps = append(ps, leaf("p", j, grp+1+j))
			gs = append(gs, graph.MulScalar(leaf("g", j, grp+2+j), 0.7))
		}
		arrP, arrG = append(arrP, ps), append(arrG, gs)
		fp := graph.Concatenate([]*graph.Node{graph.Reshape(ps[0], 4), ps[1]}, 0)
		flatP = append(flatP, fp)
		flatG = append(flatG, graph.Concatenate([]*graph.Node{graph.Reshape(gs[0], 4), gs[1]}, 0))
		// State: mu, nu (nonzero, as after some steps), the w0 anchor and the mask, flat and split.
		mu := graph.MulScalar(fp, 0.01)
		nu := graph.AddScalar(graph.MulScalar(fp, 0.001), 0.01)
		anchor := graph.MulScalar(fp, 0.5)
		mask := graph.Concatenate([]*graph.Node{graph.OnesLike(graph.Reshape(ps[0], 4)), graph.ZerosLike(ps[1])}, 0)
		flat := []*graph.Node{mu, nu, anchor, mask}
		flatS = append(flatS, flat)
		var split [][]*graph.Node
		for _, s := range flat {
			split = append(split, []*graph.Node{graph.Reshape(graph.Slice(s, graph.AxisRange(0, 4)), 2, 2), graph.Slice(s, graph.AxisRange(4, 6))})
		}
		arrS = append(arrS, split)
		hyper = append(hyper, optimizers.Hyper{"eta": graph.Scalar(g, dtypes.Float64, 1e-2), "lambda": graph.Scalar(g, dtypes.Float64, 1e-3)})
	}
	fp, fs := prog.Apply(flatP, flatG, flatS, hyper, step)
	ap, as := prog.ApplyArrays(arrP, arrG, arrS, hyper, step)
	var outs []*graph.Node
	for grp := range 2 {
		outs = append(outs, fp[grp], graph.Concatenate([]*graph.Node{graph.Reshape(ap[grp][0], 4), ap[grp][1]}, 0))
		for s := range fs[grp] {
			outs = append(outs, fs[grp][s], graph.Concatenate([]*graph.Node{graph.Reshape(as[grp][s][0], 4), as[grp][s][1]}, 0))
		}
	}
	g.Compile(outs...)
	res := g.Run()
	for i := 0; i < len(res); i += 2 {
		want, got := tensors.MustCopyFlatData[float64](res[i]), tensors.MustCopyFlatData[float64](res[i+1])
		for k := range want {
			if d := want[k] - got[k]; d > 1e-12 || d < -1e-12 {
				t.Fatalf("output %d element %d: Apply %v, ApplyArrays %v", i/2, k, want[k], got[k])
			}
		}
	}
}
