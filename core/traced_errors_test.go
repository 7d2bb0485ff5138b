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

// Traced hooks that read a Host field, or return the wrong shapes.
type (
	HostInForward struct {
		coretest.Base
		Scale float64
	}
	HostInLoss struct {
		coretest.Base
		Scale float64
	}
	ScalarOutput struct{ coretest.Base }
	VectorLoss   struct{ coretest.Base }
	// WithTrainMetrics reports the mean absolute error of every micro-batch.
	WithTrainMetrics struct{ coretest.Base }
	BadTrainMetrics  struct{ coretest.Base }
)

func (e *HostInForward) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return core.Outputs{"pred": graph.MulScalar(layers.Dense(ctx.In("dense_0"), in.X, true, 1), e.Scale)}
}

func (e *HostInLoss) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return graph.MulScalar(coretest.MSE(out["pred"], in.Y), e.Scale)
}

func (*ScalarOutput) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return core.Outputs{"pred": graph.ReduceAllMean(layers.Dense(ctx.In("dense_0"), in.X, true, 1))}
}

func (*VectorLoss) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return graph.Sub(out["pred"], in.Y)
}

func (*WithTrainMetrics) TrainMetrics(out core.Outputs, in coretest.Tgt) map[string]*graph.Node {
	return map[string]*graph.Node{"mae": graph.ReduceAllMean(graph.Abs(graph.Sub(out["pred"], in.Y)))}
}

func (*BadTrainMetrics) TrainMetrics(out core.Outputs, in coretest.Tgt) map[string]*graph.Node {
	return map[string]*graph.Node{"err": graph.Sub(out["pred"], in.Y)}
}

func TestHostReadInForwardFailsSetup(t *testing.T) {
	err := newErr(t, &HostInForward{Scale: 2}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "reading Host field Scale", "traced code", `nitro:"graphconst"`, "markers.Device[float64]")
}

func TestHostReadInLossFailsTheFirstProgram(t *testing.T) {
	n := coretest.MustNew(t, &HostInLoss{Scale: 2}, coretest.Data(t, 32))
	coretest.WantErr(t, n.Train(), "epoch 1, step 1", "gradient program", "reading Host field Scale", `nitro:"graphconst"`)
	_, err := n.Validate()
	coretest.WantErr(t, err, "eval program", "reading Host field Scale")
	if n.Step() != 0 {
		t.Errorf("a step ran: %d", n.Step())
	}
}

func TestOutputShapeErrors(t *testing.T) {
	n := coretest.MustNew(t, &ScalarOutput{}, coretest.Data(t, 32))
	_, err := n.Validate()
	coretest.WantErr(t, err, `Forward output "pred" is a scalar`, "reduce it in Loss or Metrics")
	_, err = n.Predict(prefetch.Batch{"x": must(coretest.Arrays(t, 16, 16, 1, prefetch.ArrayOptions{}).BatchAt(0))["x"]})
	coretest.WantErr(t, err, `Forward output "pred" is a scalar`)

	n = coretest.MustNew(t, &VectorLoss{}, coretest.Data(t, 0))
	coretest.WantErr(t, n.Train(), "epoch 1, step 1", "Loss must return a scalar node", "[16 1]")
}

func TestTrainMetricsHook(t *testing.T) {
	n := coretest.MustNew(t, &WithTrainMetrics{}, coretest.Data(t, 32), core.WithMaxEpochs(2))
	if err := n.Train(); err != nil {
		t.Fatalf("Train with a TrainMetrics hook: %v", err)
	}
	if n.Step() != 8 {
		t.Errorf("Step %d, want 8", n.Step())
	}
	n = coretest.MustNew(t, &BadTrainMetrics{}, coretest.Data(t, 0))
	coretest.WantErr(t, n.Train(), `TrainMetrics "err" must be a scalar node`, "per-step diagnostic")
}

func TestSplitsMustAgreeOnFieldShapes(t *testing.T) {
	x := tensors.FromFlatDataAndDimensions(make([]float32, 32*3), 32, 3)
	y := tensors.FromFlatDataAndDimensions(make([]float32, 32), 32, 1)
	val, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, 16, prefetch.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = newErr(t, &coretest.Reg{}, prefetch.Data{"train": coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": val})
	coretest.WantErr(t, err, `batch field "x" is Float32[4] per sample in split "train" and Float32[3] in split "val"`, "splits must agree")
}
