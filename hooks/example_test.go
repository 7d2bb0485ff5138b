package hooks_test

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/hooks"
)

// An experiment's Metrics hook returns a hooks.Metric per metric: a sum and a count per batch,
// which evaluation sums over the split and divides at the end.
func ExampleMetric() {
	accuracy := func(pred, labels *graph.Node) map[string]hooks.Metric {
		hits := graph.ConvertDType(graph.Equal(pred, labels), dtypes.Float32)
		return map[string]hooks.Metric{"accuracy": {Sum: graph.ReduceAllSum(hits), Count: graph.Scalar(pred.Graph(), dtypes.Float32, float64(pred.Shape().Dimensions[0]))}}
	}
	fmt.Printf("%T\n", accuracy)
	// Output: func(*graph.Node, *graph.Node) map[string]hooks.Metric
}

// sgdStep is a manual TrainStep's body: one Backward over group "default", then its optimizer
// step. An experiment's TrainStep(s hooks.ManualStep, in Batch) hooks.StepResult reads so.
func sgdStep(s hooks.ManualStep, objective func(ctx *context.Context) *graph.Node) hooks.StepResult {
	loss, grads := s.Backward(objective, "default")
	s.StepOptimizer("default", grads)
	return hooks.StepResult{Loss: loss, Stats: map[string]*graph.Node{"groups": graph.Scalar(loss.Graph(), dtypes.Float32, float64(len(s.Groups())))}}
}

// A manual TrainStep receives a hooks.ManualStep, which the engine implements and a test fakes
// with FakeStep (fake_test.go runs one).
func ExampleManualStep() {
	fmt.Printf("%T\n", sgdStep)
	// Output: func(hooks.ManualStep, func(*context.Context) *graph.Node) hooks.StepResult
}
