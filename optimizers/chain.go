package optimizers

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Chain is one parameter group's optimizer: transforms applied in order to the gradient, the
// result added to the parameters, on the group's flat buffer or (as core runs it) on each of its
// arrays, which is the same math since transforms are elementwise. A named optimizer is a
// one-transform chain; Decay, when present, is last. A Chain is immutable and safe for concurrent use.
type Chain struct {
	ts []Transform
}

// NewChain validates and returns the chain. Decay anywhere but last is refused: before the base
// rule its term would pass through the moment estimates (coupled L2), which is not supported.
func NewChain(ts ...Transform) (*Chain, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("optimizers: empty chain: pass at least a rule, e.g. NewChain(radam) where radam comes from NewRAdam().Build()")
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		if t == nil {
			return nil, fmt.Errorf("optimizers: chain position %d of %d is nil: pass a built transform (Rule.Build returns one)", i, len(ts))
		}
		names[i] = t.Name()
	}
	for i, t := range ts {
		if _, isDecay := t.(*decayTransform); isDecay && i != len(ts)-1 {
			fixed := slices.Clone(names[:i])
			fixed = append(fixed, names[i+1:]...)
			fixed = append(fixed, DecayName)
			return nil, fmt.Errorf("optimizers: chain [%s]: Decay is at position %d of %d but must be last (it is decoupled: applied after the base rule, never fed through its moments); reorder to [%s]",
				strings.Join(names, " "), i, len(ts), strings.Join(fixed, " "))
		}
	}
	return &Chain{ts: slices.Clone(ts)}, nil
}

// Transforms returns the chain's members, in order.
func (c *Chain) Transforms() []Transform { return slices.Clone(c.ts) }

// HasDecay reports whether the chain ends with Decay.
func (c *Chain) HasDecay() bool {
	if len(c.ts) == 0 {
		return false
	}
	_, ok := c.ts[len(c.ts)-1].(*decayTransform)
	return ok
}

// StateNames names the chain's flat state leaves, "<position>.<transform>.<leaf>", e.g.
// "0.radam.mu": stable names for checkpoints.
func (c *Chain) StateNames() []string {
	var out []string
	for i, t := range c.ts {
		for _, leaf := range t.StateNames() {
			out = append(out, fmt.Sprintf("%d.%s.%s", i, t.Name(), leaf))
		}
	}
	return out
}

// ConstantLeaves returns, for each state leaf in StateNames order, whether Update never changes
// it (Decay's anchor and mask). Core may rebuild such leaves with Init (from BuildModel's
// weights) instead of checkpointing them.
func (c *Chain) ConstantLeaves() []bool {
	var out []bool
	for _, t := range c.ts {
		var constant []string
		if cl, ok := t.(ConstantLeaves); ok {
			constant = cl.ConstantLeaves()
		}
		for _, leaf := range t.StateNames() {
			out = append(out, slices.Contains(constant, leaf))
		}
	}
	return out
}

// Init builds the flattened initial state on the host from the group's flat parameters. No
// program is compiled.
func (c *Chain) Init(params *tensors.Tensor) ([]*tensors.Tensor, error) {
	var out []*tensors.Tensor
	for i, t := range c.ts {
		st, err := t.Init(params)
		if err != nil {
			return nil, fmt.Errorf("chain position %d (%s): %w", i, t.Name(), err)
		}
		leaves := st.Leaves()
		if want := len(t.StateNames()); len(leaves) != want {
			return nil, fmt.Errorf("optimizers: chain position %d (%s): Init returned %d state leaves but StateNames lists %d: the transform breaks the flatten convention", i, t.Name(), len(leaves), want)
		}
		out = append(out, leaves...)
	}
	return out, nil
}

// Apply builds one step of the chain in the optimizer program: state is the flat state in
// StateNames order, hp the group's schedulable values (every HyperFields entry), step the 1-based
// optimizer step. newParams keeps params' dtype and shape, so the parameters are a fixed point of
// the step's types. Graph side: panics on a malformed input.
func (c *Chain) Apply(params, grads *graph.Node, state []*graph.Node, hp Hyper, step *graph.Node) (newParams *graph.Node, newState []*graph.Node) {
	return c.ApplyShared(params, grads, state, hp, step, nil)
}

// ApplyShared is Apply for one parameter array of a group whose other arrays reuse shared's
// step-dependent scalars (see Shared): core calls it once per array with the same hp, step and
// shared, so the scalar math is emitted once per group. Transforms are elementwise, so applying
// the chain array by array equals applying it to the group's flat buffer.
func (c *Chain) ApplyShared(params, grads *graph.Node, state []*graph.Node, hp Hyper, step *graph.Node, shared *Shared) (newParams *graph.Node, newState []*graph.Node) {
	if !params.DType().IsFloat() {
		panic(fmt.Errorf("optimizers: Chain.Apply: params have dtype %s, want a float", params.DType()))
	}
	if !grads.Shape().EqualDimensions(params.Shape()) {
		panic(fmt.Errorf("optimizers: Chain.Apply: gradient shape %s does not match params %s: pass the group's flat gradient", grads.Shape(), params.Shape()))
	}
	if grads.DType() != params.DType() {
		grads = graph.ConvertDType(grads, params.DType())
	}
	if step == nil || !step.IsScalar() {
		panic(fmt.Errorf("optimizers: Chain.Apply: step must be a scalar node (the 1-based optimizer step)"))
	}
	names := c.StateNames()
	if len(state) != len(names) {
		panic(fmt.Errorf("optimizers: Chain.Apply: got %d state leaves, the chain has %d (%v): pass Chain.Init's leaves, in order", len(state), len(names), names))
	}
	updates := grads
	pos := 0
	for i, t := range c.ts {
		n := len(t.StateNames())
		leaves := state[pos : pos+n]
		for j, s := range leaves {
			if s == nil {
				panic(fmt.Errorf("optimizers: Chain.Apply: state leaf %s is nil: pass Chain.Init's leaves as program inputs", names[pos+j]))
			}
		}
		var st State[*graph.Node]
		updates, st = t.Update(UpdateInput{Updates: updates, Params: params, State: slices.Clone(leaves), Hyper: hp, Step: step, Shared: shared, Position: i})
		out := st.Leaves()
		if len(out) != n {
			panic(fmt.Errorf("optimizers: chain position %d (%s): Update returned %d state leaves, StateNames lists %d", i, t.Name(), len(out), n))
		}
		newState = append(newState, out...)
		pos += n
	}
	return graph.Add(params, updates), newState
}

// HyperFields is the union of the members' schedulable fields, in order of first use: what core
// must pass in Hyper, and what the binding report compares the scheduled keys against.
func (c *Chain) HyperFields() []string {
	var out []string
	for _, t := range c.ts {
		for _, f := range t.HyperFields() {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// Nonschedulable is the union of the members' declarations (field -> reason).
func (c *Chain) Nonschedulable() map[string]string {
	out := map[string]string{}
	for _, t := range c.ts {
		if d, ok := t.(NonschedulableDeclarer); ok {
			for k, v := range d.Nonschedulable() {
				out[k] = fmt.Sprintf("%s (%s)", v, t.Name())
			}
		}
	}
	return out
}

// CheckScheduleKey refuses a schedule key that a member declares nonschedulable, naming the
// member and the reason. A key the chain simply does not read is not an error here (Level 2 owns
// hyperparameter application); Binding reports it.
func (c *Chain) CheckScheduleKey(key string) error {
	if reason, ok := c.Nonschedulable()[key]; ok {
		return fmt.Errorf("optimizers: schedule key %q is nonschedulable in chain %s: %s; make it a constant of the transform instead", key, c.Describe(), reason)
	}
	return nil
}

// Describe is the chain's structural identity for the compile cache key: the members' Describe
// joined by " > ", e.g. "radam(beta1=0.9,beta2=0.999,eps=1e-08,threshold=5) > decay(anchor=w0,mask=leaf)".
// Schedulable values are device inputs and never appear.
func (c *Chain) Describe() string {
	parts := make([]string, len(c.ts))
	for i, t := range c.ts {
		parts[i] = t.Describe()
	}
	return strings.Join(parts, " > ")
}

// Binding is, for one group, which scheduled keys the group's chain reads (Used) and which it
// does not (Unused): the data of the binding report's Level 2 section, where a scheduled value a
// factory ignored would otherwise do nothing, silently, for the whole run.
type Binding struct {
	Group  string
	Chain  string // Describe
	Used   []string
	Unused []string
}

// Bind compares the scheduled keys against the chain's HyperFields.
func (c *Chain) Bind(group string, scheduled []string) Binding {
	b := Binding{Group: group, Chain: c.Describe()}
	reads := c.HyperFields()
	for _, k := range scheduled {
		if slices.Contains(reads, k) {
			b.Used = append(b.Used, k)
		} else {
			b.Unused = append(b.Unused, k)
		}
	}
	return b
}
