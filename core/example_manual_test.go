package core_test

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
)

// Tandem is Line (y = 2x + 1) as two sub-networks trained in manual mode: "body" (a Dense layer
// of 4 units) feeds "head" (a Dense layer of 1), each group with its own Adam. TrainStep steps the
// head on the loss, then the body on the loss through the updated head, and reports both losses.
type Tandem struct{ MaxEpochs int }

func newTandem() *Tandem { return &Tandem{MaxEpochs: 2} }

func (*Tandem) BuildModel(ctx *context.Context) error { return nil }

// BuildData is Line's data.
func (*Tandem) BuildData() (prefetch.Data, error) { return newLine().BuildData() }

// Loss is what validation reports (as val_loss); TrainStep computes its own losses.
func (*Tandem) Loss(out core.Outputs, in LineTarget) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(out["y"], in.Y)))
}

type TandemBatch struct {
	X *graph.Node `batch:"x"`
	Y *graph.Node `batch:"y"`
}

func (e *Tandem) Forward(ctx *context.Context, in LineIn) core.Outputs {
	h := layers.Dense(ctx.In("body"), in.X, true, 4)
	return core.Outputs{"y": layers.Dense(ctx.In("head"), h, true, 1)}
}

// ParamGroup makes each sub-network a group: its keypath's first part.
func (*Tandem) ParamGroup(keypath []string) string { return keypath[0] }

// SetupOptimizers gives each group its own rule; the rule's Eta is the group's learning rate.
func (*Tandem) SetupOptimizers() (map[string]optimizers.Rule, error) {
	body, head := optimizers.NewAdam(), optimizers.NewAdam()
	body.Eta, head.Eta = 0.02, 0.05
	return map[string]optimizers.Rule{"body": body, "head": head}, nil
}

func (e *Tandem) TrainStep(s hooks.ManualStep, in TandemBatch) hooks.StepResult {
	loss := func(ctx *context.Context) *graph.Node {
		pred := e.Forward(ctx, LineIn{X: in.X})["y"]
		return graph.ReduceAllMean(graph.Square(graph.Sub(pred, in.Y)))
	}
	headLoss, headGrads := s.Backward(loss, "head") // gradients of the head's parameters only
	s.StepOptimizer("head", headGrads)
	bodyLoss, bodyGrads := s.Backward(loss, "body") // through the stepped head, into the body only
	s.StepOptimizer("body", bodyGrads)
	return hooks.StepResult{Loss: bodyLoss, Stats: map[string]*graph.Node{"head_loss": headLoss}}
}

// Backward differentiates an objective with respect to the named groups only, and StepOptimizer
// steps one group with its own chain; the whole TrainStep is one compiled program, and the loop,
// validation (through Loss) and the history are the framework's.
func Example_manualTrainStep() {
	cache := compilecache.New()
	n, err := core.New(newTandem(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(cache), core.WithMaxEpochs(6))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := n.Train(); err != nil {
		fmt.Println(err)
		return
	}
	h := n.History()
	// The step program, and eval at the val split's full and short final batch widths.
	fmt.Println("steps:", n.Step(), "programs compiled:", cache.Stats().Misses)
	fmt.Println("stats:", sortedNames(h[0].Train))
	fmt.Println("learned:", h[5].Val[core.ValLoss] < h[0].Val[core.ValLoss]/2)
	// Output:
	// steps: 24 programs compiled: 3
	// stats: [head_loss]
	// learned: true
}

// StepOptimizer refuses a second step of one group in the same TrainStep: the error comes from
// the verb that builds the step program (Train), naming the group.
func ExampleManualStep_StepOptimizer() {
	n, err := core.New(&TwiceTandem{*newTandem()}, core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n.Train() != nil, n.Step())
	// Output:
	// true 0
}

// TwiceTandem steps the head twice.
type TwiceTandem struct{ Tandem }

func (e *TwiceTandem) TrainStep(s hooks.ManualStep, in TandemBatch) hooks.StepResult {
	loss, g := s.Backward(func(ctx *context.Context) *graph.Node {
		return graph.ReduceAllMean(graph.Square(graph.Sub(e.Forward(ctx, LineIn{X: in.X})["y"], in.Y)))
	}, "head")
	s.StepOptimizer("head", g)
	s.StepOptimizer("head", g)
	return hooks.StepResult{Loss: loss}
}
