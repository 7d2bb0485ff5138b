package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// Experiments with a hook missing or malformed.
type (
	NoForward struct{}
	NoLoss    struct{}
	BadFwdOut struct{ coretest.Base }
	BadFwdCtx struct{ coretest.Base }
	BadFwdIn  struct{ coretest.Base }
	NoModel   struct{}
	// WantsLabel's Loss declares a "label" field the data does not have.
	WantsLabel struct{ coretest.Base }
	// OptionalW's Forward declares an optional "w" field.
	OptionalW struct{ coretest.Base }
	// ZeroLR has a LearningRate field left at 0.
	ZeroLR struct {
		coretest.Base
		LearningRate float64
	}
	// BadAccessor's MaxEpochs method has the wrong result type.
	BadAccessor struct{ coretest.Base }
)

func (*NoForward) BuildModel(*context.Context) error { return nil }
func (*NoForward) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["pred"], in.Y)
}
func (*NoLoss) BuildModel(*context.Context) error { return nil }
func (*NoLoss) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return (&coretest.Base{}).Forward(ctx, in)
}
func (*BadFwdOut) Forward(ctx *context.Context, in coretest.In) *graph.Node { return in.X }
func (*BadFwdCtx) Forward(ctx context.Context, in coretest.In) core.Outputs { return nil }
func (*BadFwdIn) Forward(ctx *context.Context, x *graph.Node) core.Outputs {
	return nil
}
func (*NoModel) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return (&coretest.Base{}).Forward(ctx, in)
}
func (*NoModel) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["pred"], in.Y)
}

func (*WantsLabel) Loss(out core.Outputs, in struct {
	Label *graph.Node `batch:"label"`
}) *graph.Node {
	return graph.ReduceAllMean(out["pred"])
}

// sawOptionalW records whether the last trace of OptionalW.Forward was handed a "w" node.
var sawOptionalW bool

func (*OptionalW) Forward(ctx *context.Context, in struct {
	X *graph.Node `batch:"x"`
	W *graph.Node `batch:"w,optional"`
}) core.Outputs {
	sawOptionalW = in.W != nil
	x := in.X
	if in.W != nil {
		x = graph.Mul(x, in.W)
	}
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), x, true, 1)}
}

func (*BadAccessor) MaxEpochs() string { return "three" }

func TestNewRefusesMissingRequiredHooks(t *testing.T) {
	err := newErr(t, &NoForward{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "NoForward has no Forward hook", "func (e *E) Forward(ctx *context.Context, in B) core.Outputs")

	err = newErr(t, &NoLoss{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "NoLoss has no Loss hook", "func (e *E) Loss(out core.Outputs, in B) *graph.Node")

	err = newErr(t, &NoModel{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "NoModel has no BuildModel hook", "func (e *NoModel) BuildModel(ctx *context.Context) error")

	// No BuildData and no WithData.
	err = newErr(t, &coretest.Reg{}, nil)
	coretest.WantErr(t, err, "Reg has no BuildData hook", "func (e *Reg) BuildData() (prefetch.Data, error)", "core.WithData")
}

func TestNewRefusesWrongForwardSignature(t *testing.T) {
	want := "want func (e *E) Forward(ctx *context.Context, in B) core.Outputs"
	cases := []struct {
		e   any
		why string
	}{
		{&BadFwdOut{}, "result must be core.Outputs"},
		{&BadFwdCtx{}, "first parameter must be *context.Context"},
		{&BadFwdIn{}, "the batch parameter must be a struct of *graph.Node fields or map[string]*graph.Node"},
	}
	for _, c := range cases {
		err := newErr(t, c.e, coretest.Data(t, 0))
		coretest.WantErr(t, err, "Forward has signature", c.why, want)
	}
}

func TestNewRefusesAMissingBatchField(t *testing.T) {
	err := newErr(t, &WantsLabel{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "hook Loss", `batch field "label"`, "train split", "[x y]",
		"add the field to the source", "`batch:\"label,optional\"`")
}

func TestOptionalBatchField(t *testing.T) {
	// Missing: setup and a train step are fine, and Forward sees a nil node.
	sawOptionalW = true
	n := coretest.MustNew(t, &OptionalW{}, coretest.Data(t, 32), core.WithMaxEpochs(1))
	if sawOptionalW {
		t.Errorf("Forward was handed a node for the missing optional field w")
	}
	if err := n.Train(); err != nil {
		t.Fatalf("Train without the optional field: %v", err)
	}

	// Present: it is routed to Forward.
	x, y := coretest.Synthetic(64, 1)
	w := tensors.FromFlatDataAndDimensions(make([]float32, 64*coretest.Features), 64, coretest.Features)
	tr, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y, "w": w}, 16, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	sawOptionalW = false
	n = coretest.MustNew(t, &OptionalW{}, prefetch.Data{"train": tr})
	if !sawOptionalW {
		t.Errorf("Forward was not handed the optional field w although the data has it")
	}
	if err := n.Train(); err != nil {
		t.Fatalf("Train with the optional field: %v", err)
	}
}

func TestNewRefusesATrainSplitKeepingItsPartialBatch(t *testing.T) {
	d := prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{})}
	err := newErr(t, &coretest.Reg{}, d)
	coretest.WantErr(t, err, "train split must drop its partial final batch", "ArrayOptions{DropPartial: true}", "DropsPartial() bool")
}

func TestNewRefusesBatchesNotDivisibleByAccum(t *testing.T) {
	// 4 train batches, accum 3.
	err := newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithAccum(3))
	coretest.WantErr(t, err, "4 batches", "not divisible by Accum = 3", "run option", "choose a batch size or accum that divides it")
}

func TestNewRefusesAZeroLearningRate(t *testing.T) {
	err := newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithLearningRate(0))
	coretest.WantErr(t, err, "LearningRate = 0 from run option", "must be non-zero")
	err = newErr(t, &ZeroLR{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "LearningRate = 0 from field LearningRate", "must be non-zero")
}

func TestNewRefusesAnAccessorOfTheWrongType(t *testing.T) {
	err := newErr(t, &BadAccessor{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "accessor method MaxEpochs", "func() string", "want func() int")
}

func TestNewRefusesANonPointerExperiment(t *testing.T) {
	for _, e := range []any{coretest.Reg{}, (*coretest.Reg)(nil), 42} {
		_, err := core.New(e, coretest.GoOpts(nil, core.WithData(coretest.Data(t, 0)))...)
		coretest.WantErr(t, err, "core.New takes a pointer to an experiment struct")
	}
	_, err := core.New(coretest.Reg{}, coretest.GoOpts(nil, core.WithData(coretest.Data(t, 0)))...)
	coretest.WantErr(t, err, "got coretest.Reg")
}

func TestNewRefusesEmptyData(t *testing.T) {
	err := newErr(t, &coretest.Reg{}, prefetch.Data{})
	coretest.WantErr(t, err, "no splits", `"train"`)
}

func TestEvaluateUnknownSplitListsTheSplits(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32))
	_, err := n.Evaluate("test")
	coretest.WantErr(t, err, `no split "test"`, "[train val]")

	// Validate needs a "val" split and says so the same way.
	n = coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0))
	_, err = n.Validate()
	coretest.WantErr(t, err, `no split "val"`, "[train]")
}

func TestNewRefusesOutOfRangeKnobs(t *testing.T) {
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithAccum(0)), "Accum = 0 from run option", "must be >= 1")
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithMaxEpochs(-1)), "MaxEpochs = -1 from run option", "must be >= 0")
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithGradientClipNorm(-1)), "GradientClipNorm = -1 from run option", "0 turns clipping off")
	coretest.WantErr(t, newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithBackend("tpu")), `unknown backend "tpu"`, `"xla"`, `"go"`)
}

// MaxEpochs 0 is legal: Train does nothing and completes.
func TestZeroEpochs(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(0))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if n.Step() != 0 || n.Epoch() != 0 || n.TotalSteps() != 0 || n.StopReason() != core.StopCompleted {
		t.Errorf("Step %d Epoch %d TotalSteps %d StopReason %q", n.Step(), n.Epoch(), n.TotalSteps(), n.StopReason())
	}
}
