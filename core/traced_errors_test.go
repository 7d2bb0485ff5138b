package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
)

// Traced hooks that read a Host field, or return the wrong shapes.
type (
	HostInForward struct {
		base
		Scale float64
	}
	HostInLoss struct {
		base
		Scale float64
	}
	ScalarOutput struct{ base }
	VectorLoss   struct{ base }
	// WithTrainMetrics reports the mean absolute error of every micro-batch.
	WithTrainMetrics struct{ base }
	BadTrainMetrics  struct{ base }
)

func (e *HostInForward) Forward(ctx *context.Context, in In) core.Outputs {
	return core.Outputs{"pred": graph.MulScalar(layers.Dense(ctx.In("dense_0"), in.X, true, 1), e.Scale)}
}

func (e *HostInLoss) Loss(out core.Outputs, in Tgt) *graph.Node {
	return graph.MulScalar(mse(out["pred"], in.Y), e.Scale)
}

func (*ScalarOutput) Forward(ctx *context.Context, in In) core.Outputs {
	return core.Outputs{"pred": graph.ReduceAllMean(layers.Dense(ctx.In("dense_0"), in.X, true, 1))}
}

func (*VectorLoss) Loss(out core.Outputs, in Tgt) *graph.Node { return graph.Sub(out["pred"], in.Y) }

func (*WithTrainMetrics) TrainMetrics(out core.Outputs, in Tgt) map[string]*graph.Node {
	return map[string]*graph.Node{"mae": graph.ReduceAllMean(graph.Abs(graph.Sub(out["pred"], in.Y)))}
}

func (*BadTrainMetrics) TrainMetrics(out core.Outputs, in Tgt) map[string]*graph.Node {
	return map[string]*graph.Node{"err": graph.Sub(out["pred"], in.Y)}
}

func TestHostReadInForwardFailsSetup(t *testing.T) {
	err := newErr(t, &HostInForward{Scale: 2}, data(t, 0))
	wantErr(t, err, "reading Host field Scale", "traced code", `nitro:"graphconst"`, "markers.Device[float64]")
}

func TestHostReadInLossFailsTheFirstProgram(t *testing.T) {
	n := mustNew(t, &HostInLoss{Scale: 2}, data(t, 32))
	wantErr(t, n.Train(), "epoch 1, step 1", "gradient program", "reading Host field Scale", `nitro:"graphconst"`)
	_, err := n.Validate()
	wantErr(t, err, "eval program", "reading Host field Scale")
	if n.Step() != 0 {
		t.Errorf("a step ran: %d", n.Step())
	}
}

func TestOutputShapeErrors(t *testing.T) {
	n := mustNew(t, &ScalarOutput{}, data(t, 32))
	_, err := n.Validate()
	wantErr(t, err, `Forward output "pred" is a scalar`, "reduce it in Loss or Metrics")
	_, err = n.Predict(prefetch.Batch{"x": must(arrays(t, 16, 16, 1, prefetch.ArrayOptions{}).BatchAt(0))["x"]})
	wantErr(t, err, `Forward output "pred" is a scalar`)

	n = mustNew(t, &VectorLoss{}, data(t, 0))
	wantErr(t, n.Train(), "epoch 1, step 1", "Loss must return a scalar node", "[16 1]")
}

func TestTrainMetricsHook(t *testing.T) {
	n := mustNew(t, &WithTrainMetrics{}, data(t, 32), core.WithMaxEpochs(2))
	if err := n.Train(); err != nil {
		t.Fatalf("Train with a TrainMetrics hook: %v", err)
	}
	if n.Step() != 8 {
		t.Errorf("Step %d, want 8", n.Step())
	}
	n = mustNew(t, &BadTrainMetrics{}, data(t, 0))
	wantErr(t, n.Train(), `TrainMetrics "err" must be a scalar node`, "per-step diagnostic")
}

func TestSplitsMustAgreeOnFieldShapes(t *testing.T) {
	x := tensors.FromFlatDataAndDimensions(make([]float32, 32*3), 32, 3)
	y := tensors.FromFlatDataAndDimensions(make([]float32, 32), 32, 1)
	val, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, 16, prefetch.ArrayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = newErr(t, &Reg{}, prefetch.Data{"train": arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), "val": val})
	wantErr(t, err, `batch field "x" is Float32[4] per sample in split "train" and Float32[3] in split "val"`, "splits must agree")
}
