package core_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/hooks"
)

// BatchLoss's Loss reads only the batch: no parameter can change it, and training it would run
// every epoch without changing anything.
type BatchLoss struct{ coretest.Base }

func (*BatchLoss) Loss(_ core.Outputs, in coretest.Tgt) *graph.Node {
	return graph.ReduceAllMean(graph.Square(in.Y))
}

// trainErr sets e up and trains it, returning the first error (New's or Train's: the gradient
// program is built on the first step) and the Nitro when New succeeded.
func trainErr(t *testing.T, e any, opts ...core.Option) (*core.Nitro, error) {
	t.Helper()
	n, err := core.New(e, coretest.GoOpts(nil, append([]core.Option{core.WithData(coretest.Data(t, 0)), core.WithMaxEpochs(2)}, opts...)...)...)
	if err != nil {
		return nil, err
	}
	return n, n.Train()
}

// TestLossWithoutGradientPathIsRefused: a Loss that does not depend on the parameters is refused
// when the gradient program is first built, naming the group, its parameters and the fix, in
// the two-program and the fused step alike, and no step is taken.
func TestLossWithoutGradientPathIsRefused(t *testing.T) {
	for _, fused := range []bool{false, true} {
		var opts []core.Option
		if fused {
			opts = append(opts, core.WithFusedStep())
		}
		n, err := trainErr(t, &BatchLoss{}, opts...)
		coretest.WantErr(t, err, "Loss:", `parameter group "default"`, "dense_0/dense/weights", "gets no gradient",
			"Loss must compute from Forward's outputs", "SetTrainable(false)")
		if n != nil && n.Step() != 0 {
			t.Errorf("fused=%v: %d steps were taken before the refusal", fused, n.Step())
		}
	}
}

// DeadHead creates a "head" group whose output Forward drops: the loss reaches the backbone only.
type DeadHead struct{ Groups }

func (*DeadHead) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	_ = layers.Dense(ctx.In("head"), in.X, true, 1)
	return core.Outputs{"pred": layers.Dense(ctx.In("backbone"), in.X, true, 1)}
}

// TestDeadGroupIsRefusedByName: one dead group among live ones is refused, and named; the live
// one is not.
func TestDeadGroupIsRefusedByName(t *testing.T) {
	_, err := trainErr(t, &DeadHead{})
	coretest.WantErr(t, err, `parameter group "head"`, "head/dense/weights")
	if err != nil && strings.Contains(err.Error(), `"backbone"`) {
		t.Errorf("the live backbone group is named in the refusal: %v", err)
	}
}

// TestLiveLossTrains: the plain regression passes the check, trains and learns, with no warning.
func TestLiveLossTrains(t *testing.T) {
	var warned []string
	n, err := trainErr(t, &coretest.Reg{}, core.WithWarn(func(m string) { warned = append(warned, m) }))
	if err != nil {
		t.Fatal(err)
	}
	if h := n.History(); len(h) != 2 || !(h[1].TrainLoss < h[0].TrainLoss) {
		t.Errorf("training did not reduce the loss: %+v", h)
	}
	if len(warned) != 0 {
		t.Errorf("warnings for a model whose parameters all get a gradient: %q", warned)
	}
}

// PartDead's group has one parameter nothing reads (an unused bias, say) beside live ones.
type PartDead struct{ coretest.Base }

func (*PartDead) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	ctx.In("dense_0").VariableWithValue("unused", float32(0))
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_0"), in.X, true, 1)}
}

// TestPartlyDeadGroupTrainsWithOneWarning: a group the loss reaches in part is not refused; the
// unreached parameter is named in one warning, however many times the program is traced.
func TestPartlyDeadGroupTrainsWithOneWarning(t *testing.T) {
	var warned []string
	n, err := trainErr(t, &PartDead{}, core.WithWarn(func(m string) { warned = append(warned, m) }))
	if err != nil {
		t.Fatal(err)
	}
	if n.Step() == 0 {
		t.Fatal("no step was taken")
	}
	var dead []string
	for _, m := range warned {
		if strings.Contains(m, "no gradient") {
			dead = append(dead, m)
		}
	}
	if len(dead) != 1 || !strings.Contains(dead[0], "dense_0/unused") || strings.Contains(dead[0], "dense_0/dense/weights") {
		t.Errorf("warnings %q: want one naming dense_0/unused only", dead)
	}
}

// ZeroButLive's loss is a hinge that is flat for every batch: its gradient is zero in value, yet
// the loss depends on the parameters, so the graph has a path and nothing is refused.
type ZeroButLive struct{ coretest.Base }

func (*ZeroButLive) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	below := graph.AddScalar(graph.Sub(out["pred"], in.Y), -1e6)
	return graph.ReduceAllMean(graph.Max(below, graph.ZerosLike(below)))
}

// TestNumericallyZeroGradientIsNotRefused: the check is structural, not a look at values.
func TestNumericallyZeroGradientIsNotRefused(t *testing.T) {
	n, err := trainErr(t, &ZeroButLive{})
	if err != nil {
		t.Fatalf("a loss whose gradient is zero only in value was refused: %v", err)
	}
	if n.Step() == 0 {
		t.Error("no step was taken")
	}
}

// DuelCut's objective reads b only through graph.StopGradient, so Backward(f, "b") has no path
// to b: the manual step is refused naming the call and the group.
type DuelCut struct{ Duel }

func (*DuelCut) TrainStep(s hooks.ManualStep, in DuelBatch) hooks.StepResult {
	objective := func(ctx *context.Context) *graph.Node {
		a, b := duelParam(ctx, "a", duelA0, in.U), graph.StopGradient(duelParam(ctx, "b", duelB0, in.U))
		return coretest.MSE(graph.Mul(graph.Mul(in.U, a), b), in.V)
	}
	lossA, ga := s.Backward(objective, "a")
	s.StepOptimizer("a", ga)
	lossB, gb := s.Backward(objective, "b")
	s.StepOptimizer("b", gb)
	return hooks.StepResult{Loss: graph.Add(lossA, lossB)}
}

// TestManualBackwardWithoutPathIsRefused: Backward on a group its objective cannot reach is
// refused when the manual step is built; the same objective on the group it reaches is not.
func TestManualBackwardWithoutPathIsRefused(t *testing.T) {
	n, err := core.New(&DuelCut{}, coretest.GoOpts(nil, core.WithData(duelData(t)), core.WithMaxEpochs(1))...)
	if err == nil {
		err = n.Train()
	}
	coretest.WantErr(t, err, `Backward(f, "b")`, `parameter group "b"`, "b/w", "gets no gradient", "graph.StopGradient")
	if err != nil && strings.Contains(err.Error(), `group "a"`) {
		t.Errorf("the reached group a is named in the refusal: %v", err)
	}
}

// TestLossWithoutGradientPathIsRefusedOnAMesh: the data-parallel step traces the same gradient,
// so it refuses the same Loss.
func TestLossWithoutGradientPathIsRefusedOnAMesh(t *testing.T) {
	n, err := core.New(&BatchLoss{}, meshOpts(t, 2, core.WithData(oneBatchData(t)), core.WithMaxEpochs(1))...)
	if err == nil {
		err = n.Train()
	}
	coretest.WantErr(t, err, `parameter group "default"`, "gets no gradient")
}
