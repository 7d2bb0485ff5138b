package hooks

import (
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Metric is one evaluation metric's numerator and denominator for one batch. Evaluation sums
// both over the split and divides at the end; a nil Count means "sum, do not divide", and with a
// nil Count the Sum may be an array (summed elementwise, handed to FinalizeMetrics).
type Metric struct {
	Sum, Count *graph.Node
}

// StepResult is what a manual TrainStep returns: the step's scalar loss, which the loop logs
// and stops on when it is not finite, and named scalars logged beside it.
type StepResult struct {
	Loss  *graph.Node
	Stats map[string]*graph.Node
}

// Grads are gradients by parameter keypath ("disc/dense_0/weights"), as Backward returns them
// and StepOptimizer takes them.
type Grads map[string]*graph.Node

// ManualStep is what TrainStep receives: the model context and, per parameter group, the
// parameters, their optimizer state and the verbs that differentiate and step them.
//
// Parameters are read through Ctx, as Forward reads them: a layer called on Ctx sees each
// variable's current value in this step, which StepOptimizer replaces. A group that TrainStep
// never steps keeps its parameters and optimizer state.
//
// Setup also calls TrainStep once, on a trace that is never compiled, to create the variables
// only TrainStep's code creates (so TrainStep must create them unconditionally). Groups are not
// formed yet there: Groups and OptState are empty, Step is the constant 1, Backward
// differentiates the variables that exist after its objective ran, and StepOptimizer does
// nothing.
type ManualStep interface {
	// Ctx is the model context, in training mode, reusing the variables setup created.
	Ctx() *context.Context
	// Groups lists the parameter groups (ParamGroup's names; one "default" without it).
	Groups() []string
	// Step is the 1-based optimizer step being taken, a Float32 scalar.
	Step() *graph.Node
	// Params are a group's parameters by keypath, at their current value in this step.
	Params(group string) map[string]*graph.Node
	// OptState is a group's optimizer state as this step received it: by state leaf name (the
	// chain's StateNames, e.g. "0.adam.mu"), then by parameter keypath.
	OptState(group string) map[string]map[string]*graph.Node
	// Backward builds loss = f(Ctx) and its gradients with respect to the named groups'
	// parameters only; every other trainable variable reads as a constant while f runs. The
	// loss must be a scalar; a named group the loss does not reach is refused.
	Backward(f func(ctx *context.Context) *graph.Node, groups ...string) (*graph.Node, Grads)
	// StepOptimizer takes one optimizer step of a group with its chain (and the global-norm
	// clip, when set): grads must hold a gradient for each of the group's parameters. A group
	// steps at most once per TrainStep.
	StepOptimizer(group string, grads Grads)
}
