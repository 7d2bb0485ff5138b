package core_test

import (
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/fnn"
	"github.com/gomlx/gomlx/pkg/ml/layers/regularizers"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/prefetch"
)

// l2Reg is the regression through fnn, whose layers add an L2 term of their weights with
// train.AddLoss when the context's regularizers.ParamL2 is set.
type l2Reg struct {
	coretest.Base
	l2 float64
}

func (e *l2Reg) BuildModel(ctx *context.Context) error {
	ctx.SetParam(regularizers.ParamL2, e.l2)
	return nil
}

func (*l2Reg) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return core.Outputs{"pred": fnn.New(ctx.In("fnn"), in.X, 1).Done()}
}

// XY is the whole regression batch, for TrainStep.
type XY struct {
	X *graph.Node `batch:"x"`
	Y *graph.Node `batch:"y"`
}

// l2Manual trains the same model in manual mode; outside also runs the layers outside
// Backward's objective, collecting a term no gradient includes.
type l2Manual struct {
	l2Reg
	Outside bool `nitro:"graphconst"`
}

func (e *l2Manual) TrainStep(s hooks.ManualStep, in XY) hooks.StepResult {
	if e.Outside {
		fnn.New(s.Ctx().In("fnn"), in.X, 1).Done()
	}
	loss, grads := s.Backward(func(ctx *context.Context) *graph.Node {
		return coretest.MSE(fnn.New(ctx.In("fnn"), in.X, 1).Done(), in.Y)
	}, "default")
	s.StepOptimizer("default", grads)
	return hooks.StepResult{Loss: loss}
}

// kernelL2 is the sum of squares of the parameters the L2 regularizer covers (the kernels).
func kernelL2(t *testing.T, n *core.Nitro) float64 {
	t.Helper()
	params, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for k, p := range params {
		if strings.HasSuffix(k, "weights") {
			for _, v := range tensors.MustCopyFlatData[float32](p) {
				sum += float64(v) * float64(v)
			}
		}
	}
	if sum == 0 {
		t.Fatalf("no kernel among the parameters %v", keys(params))
	}
	return sum
}

// TestCollectedLossesTrained: the terms GoMLX layers collect with train.AddLoss (fnn's L2) are
// added to the train loss, differentiated and reported, in the two-program step, the fused step
// and manual mode's Backward; val_loss stays the plain Loss.
func TestCollectedLossesTrained(t *testing.T) {
	for _, mode := range []string{"two-program", "fused", "manual"} {
		t.Run(mode, func(t *testing.T) {
			run := func(l2, lr float64) *core.Nitro {
				var e any = &l2Reg{l2: l2}
				var opts []core.Option
				switch mode {
				case "fused":
					opts = append(opts, core.WithFusedStep())
				case "manual":
					e = &l2Manual{l2Reg: l2Reg{l2: l2}}
				}
				n := coretest.MustNew(t, e, coretest.Data(t, 32), append(opts, core.WithMaxEpochs(1), core.WithLearningRate(lr))...)
				coretest.Train(t, n)
				return n
			}
			// The weights follow the L2 term's gradient.
			p0, p10 := must(run(0, 1e-2).Parameters()), must(run(10, 1e-2).Parameters())
			same := true
			for k := range p0 {
				a, b := tensors.MustCopyFlatData[float32](p0[k]), tensors.MustCopyFlatData[float32](p10[k])
				for i := range a {
					same = same && a[i] == b[i]
				}
			}
			if same {
				t.Errorf("L2 = 10 trained the same parameters as L2 = 0")
			}
			// With a learning rate too small to move the weights, the train losses differ by
			// the L2 term of the (initial) kernels, and val_loss not at all.
			n0, n10 := run(0, 1e-12), run(10, 1e-12)
			got := n10.History()[0].TrainLoss - n0.History()[0].TrainLoss
			want := 10 * kernelL2(t, n10)
			if math.Abs(got-want) > 1e-3*want {
				t.Errorf("train loss with L2 = 10 minus without: %g; want the L2 term %g", got, want)
			}
			v0, v10 := n0.History()[0].Val[core.ValLoss], n10.History()[0].Val[core.ValLoss]
			if math.Abs(v10-v0) > 1e-6*math.Abs(v0) {
				t.Errorf("val_loss %g with L2 = 10, %g without: want the plain Loss in both", v10, v0)
			}
		})
	}
}

// TestCollectedLossOutsideBackwardWarns: a term collected outside every Backward objective
// belongs to no gradient, and building the step program says so.
func TestCollectedLossOutsideBackwardWarns(t *testing.T) {
	var warned []string
	n := coretest.MustNew(t, &l2Manual{l2Reg: l2Reg{l2: 1}, Outside: true}, coretest.Data(t, 0), core.WithMaxEpochs(1),
		core.WithWarn(func(m string) { warned = append(warned, m) }))
	coretest.Train(t, n)
	wantContains(t, "warnings", strings.Join(warned, "\n"), "outside every Backward objective", "Backward(f, groups...)")
}

type unexpTagged struct {
	Y *graph.Node `batch:"y"`
	w *graph.Node `batch:"y,optional"`
}

type unexpPlain struct {
	Y *graph.Node `batch:"y"`
	y *graph.Node
}

type unexpHelper struct {
	Y    *graph.Node `batch:"y"`
	note string      // not a batch field: no tag, not a node
}

type unexpTaggedExp struct{ coretest.Base }

func (*unexpTaggedExp) Loss(out core.Outputs, in unexpTagged) *graph.Node {
	return coretest.MSE(out["pred"], in.w)
}

type unexpPlainExp struct{ coretest.Base }

func (*unexpPlainExp) Loss(out core.Outputs, in unexpPlain) *graph.Node {
	return coretest.MSE(out["pred"], in.y)
}

type unexpHelperExp struct{ coretest.Base }

func (*unexpHelperExp) Loss(out core.Outputs, in unexpHelper) *graph.Node {
	_ = in.note
	return coretest.MSE(out["pred"], in.Y)
}

// TestUnexportedBatchFieldRefused: an unexported *graph.Node field, or any unexported field with
// a batch tag, would read nil in every program: New refuses it, naming the fix. An unexported
// helper field that is neither stays allowed.
func TestUnexportedBatchFieldRefused(t *testing.T) {
	coretest.WantErr(t, newErr(t, &unexpTaggedExp{}, coretest.Data(t, 0)),
		"hook unexpTaggedExp.Loss", "batch struct unexpTagged's field w is unexported", "export it, e.g. W *graph.Node `batch:\"y,optional\"`")
	coretest.WantErr(t, newErr(t, &unexpPlainExp{}, coretest.Data(t, 0)),
		"hook unexpPlainExp.Loss", "batch struct unexpPlain's field y is unexported", "export it, e.g. Y *graph.Node `batch:\"y\"`")
	coretest.MustNew(t, &unexpHelperExp{}, coretest.Data(t, 0))
}

type optTgt struct {
	Y *graph.Node `batch:"y"`
	W *graph.Node `batch:"Y,optional"` // no split carries "Y"
	V *graph.Node `batch:"v,optional"` // the val split alone carries "v"
}

type optExp struct{ coretest.Base }

func (*optExp) Loss(out core.Outputs, in optTgt) *graph.Node { return coretest.MSE(out["pred"], in.Y) }

type optIn struct {
	X    *graph.Node `batch:"x"`
	Mask *graph.Node `batch:"mask,optional"`
}

type optSpecExp struct{ coretest.Base }

func (*optSpecExp) Forward(ctx *context.Context, in optIn) core.Outputs {
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), in.X, true, 1)}
}

// TestOptionalFieldNoSplitWarns: an optional field no split carries (a misspelled key) warns
// once, with the keys the splits carry and the nearest; one that some split carries is quiet.
func TestOptionalFieldNoSplitWarns(t *testing.T) {
	d := coretest.Data(t, 0)
	x, y := coretest.Synthetic(16, 3)
	val, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y, "v": y}, 16, prefetch.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d["val"] = val
	var warned []string
	coretest.MustNew(t, &optExp{}, d, core.WithWarn(func(m string) { warned = append(warned, m) }))
	if len(warned) != 1 {
		t.Fatalf("warnings %q; want one, for field W", warned)
	}
	wantContains(t, "warning", warned[0], `hook Loss's optional batch field W reads key "Y", which no split carries (they carry v, x, y)`, `did you mean "y"?`)

	warned = nil
	coretest.New(t, &optSpecExp{}, coretest.GoOpts(nil, core.WithInputSpecs(prefetch.FieldSpec{Name: "x", DType: dtypes.Float32, Shape: []int{coretest.Features}}),
		core.WithWarn(func(m string) { warned = append(warned, m) }))...)
	if len(warned) != 1 {
		t.Fatalf("warnings %q; want one, for field Mask", warned)
	}
	wantContains(t, "warning", warned[0], `hook Forward's optional batch field Mask reads key "mask", which no input spec carries (they carry x)`)
}
