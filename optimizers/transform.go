package optimizers

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
)

// Hyper holds the schedulable hyperparameters of one group's chain as scalar graph nodes, by field
// name ("eta", "lambda", "rho", ...). They are inputs of the optimizer program, so a new value (a
// schedule step, a sweep) runs the same compiled program. Any float dtype is accepted; each
// transform converts to the parameters' dtype.
type Hyper map[string]*graph.Node

// Leaf is the element type of optimizer state: a host tensor (Init, checkpoints) or a graph node
// (inside the optimizer program).
type Leaf interface {
	*tensors.Tensor | *graph.Node
}

// State is one transform's typed state. Implementations are small structs generic in the leaf
// type (AdamState[L], MomentumState[L], DecayState[L], NoState[L]), so one declaration serves the
// host side and the graph side. Leaves flattens: it returns the leaves in the order the
// transform's StateNames lists them. Unflattening is the struct literal over that order (see
// UpdateInput.State).
type State[L Leaf] interface {
	Leaves() []L
}

// UpdateInput is what Chain.Apply hands each transform.
type UpdateInput struct {
	// Updates are the incoming updates: the (clipped) flat gradient for the first transform, the
	// previous transform's output after that. Same shape and dtype as Params.
	Updates *graph.Node
	// Params are the group's flat parameters before this step.
	Params *graph.Node
	// State is this transform's flat state, in StateNames order; unflatten it with the struct
	// literal of the transform's state type, e.g. AdamState[*graph.Node]{Mu: s[0], Nu: s[1]}.
	State []*graph.Node
	// Hyper holds the schedulable values; a transform reads only the fields HyperFields names.
	Hyper Hyper
	// Step is the 1-based optimizer step (not the micro-batch) as a scalar node of any numeric
	// dtype: 1 on the first update, so bias corrections divide by 1-beta^1, as optax counts.
	// Transforms convert it to float64 for their step-dependent scalars: exact for integer dtypes
	// up to 2^53 and for a float32 step (what core passes) up to 2^24 = 16,777,216 steps.
	Step *graph.Node
	// Shared caches nodes across the arrays of one group (nil: no sharing); Position is the
	// transform's index in its chain, for keys that must not collide (see Shared.Node).
	Shared   *Shared
	Position int
}

// Transform is one init/update pair with its own typed state (optax's GradientTransformation).
// The update it returns is ADDED to the parameters: a descent rule returns -eta * direction.
type Transform interface {
	// Name is the transform's short name ("radam", "decay").
	Name() string
	// Describe is the transform's structural identity: the name plus every value baked into the
	// graph as a constant. Two transforms that can emit different graphs must describe
	// differently, because the compile cache key is built from it.
	Describe() string
	// HyperFields lists the schedulable fields the transform reads from Hyper.
	HyperFields() []string
	// StateNames names the state leaves in flatten order ("mu", "nu"); fixed for a built transform.
	StateNames() []string
	// Init builds the initial state on the host from the group's flat parameters. No program is
	// compiled (core's compile-cache counts must stay 2 for train-only).
	Init(params *tensors.Tensor) (State[*tensors.Tensor], error)
	// Update is graph-side: it may panic, as GoMLX graph code does.
	Update(in UpdateInput) (updates *graph.Node, newState State[*graph.Node])
}

// NonschedulableDeclarer is implemented by transforms whose fields must never be scheduled; the
// map is field -> reason. Chain.Nonschedulable unions it over the chain. A transform that does
// not implement it declares nothing.
type NonschedulableDeclarer interface {
	Nonschedulable() map[string]string
}

// ConstantLeaves is implemented by transforms some of whose state leaves never change (Decay's
// anchor and mask): core may rebuild them with Init instead of checkpointing them, which keeps a
// w0-anchored checkpoint from doubling. The result has one entry per StateNames leaf, true for a
// constant one (a Chain answers for its members, so nesting keeps the saving).
type ConstantLeaves interface {
	ConstantLeaves() []bool
}

// NoState is the state of a stateless transform (SGD).
type NoState[L Leaf] struct{}

// Leaves implements State.
func (NoState[L]) Leaves() []L { return nil }

// AdamState is the state of Adam and RAdam: the first and second moment estimates of the
// gradient, each the size of the group's flat parameters.
type AdamState[L Leaf] struct{ Mu, Nu L }

// Leaves implements State: Mu, Nu.
func (s AdamState[L]) Leaves() []L { return []L{s.Mu, s.Nu} }

// MomentumState is the state of Momentum: the velocity (optax's trace).
type MomentumState[L Leaf] struct{ Velocity L }

// Leaves implements State: Velocity.
func (s MomentumState[L]) Leaves() []L { return []L{s.Velocity} }

// DecayState is the state of Decay: the anchor (absent for AnchorZero) and the no-decay mask
// (absent when no leaf is excluded). Absent leaves are not flattened, so a zero anchor carries no
// parameter-sized buffer.
type DecayState[L Leaf] struct{ Anchor, Mask L }

// Leaves implements State: Anchor then Mask, each only when present.
func (s DecayState[L]) Leaves() []L {
	var zero L
	out := make([]L, 0, 2)
	if s.Anchor != zero {
		out = append(out, s.Anchor)
	}
	if s.Mask != zero {
		out = append(out, s.Mask)
	}
	return out
}

var (
	_ State[*graph.Node]     = NoState[*graph.Node]{}
	_ State[*tensors.Tensor] = AdamState[*tensors.Tensor]{}
	_ State[*graph.Node]     = MomentumState[*graph.Node]{}
	_ State[*tensors.Tensor] = DecayState[*tensors.Tensor]{}
)

// hyperScalar reads one schedulable field as a scalar of dtype. Graph side: panics with the fix.
func hyperScalar(hp Hyper, transform, field string, dtype dtypes.DType) *graph.Node {
	n, ok := hp[field]
	if !ok || n == nil {
		have := make([]string, 0, len(hp))
		for k := range hp {
			have = append(have, k)
		}
		slices.Sort(have)
		panic(fmt.Errorf("optimizers: %s reads hyperparameter %q but Hyper has none (has %v): pass every field of Chain.HyperFields as a scalar node", transform, field, have))
	}
	if !n.IsScalar() {
		panic(fmt.Errorf("optimizers: hyperparameter %q for %s has shape %s: it must be a scalar node (one value per group, a device input)", field, transform, n.Shape()))
	}
	if n.DType() != dtype {
		n = graph.ConvertDType(n, dtype)
	}
	return n
}

// zerosLike allocates a zero host tensor with the shape and dtype of params.
func zerosLike(params *tensors.Tensor) *tensors.Tensor {
	return tensors.FromShape(params.Shape())
}

// checkFloatParams is the common Init precondition.
func checkFloatParams(name string, params *tensors.Tensor) error {
	if params == nil {
		return fmt.Errorf("optimizers: %s.Init got nil params: pass the group's flat parameter tensor", name)
	}
	if !params.DType().IsFloat() {
		return fmt.Errorf("optimizers: %s.Init got params of dtype %s: optimizer state follows the parameters' dtype, which must be a float (float32 in training, float64 in the reference tests)", name, params.DType())
	}
	return nil
}
