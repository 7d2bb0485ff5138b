package optimizers

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Chain is one parameter group's optimizer: transforms applied in order to the gradient, the
// result added to the parameters, on the group's flat buffer or on any split of it (the engine
// runs it on each of the group's device buffers), which is the same math since transforms are
// elementwise. A named optimizer is a
// one-transform chain. A Chain is itself a Transform, so a chain nests in a chain as optax's
// chain does; a member that must end its chain (Decay, see Terminal) still does, nested or not.
// A Chain is immutable and safe for concurrent use.
type Chain struct {
	ts []Transform
}

// Terminal is implemented by a transform that must be the last of its chain: EndsChain returns
// what it is and why it must be last, or "" for what when it need not be (a Chain passes on its
// last member's answer, so a chain ending in Decay must end its own parent). NewChain refuses a
// terminal member anywhere but last. Decay is terminal: before the base rule its term would pass
// through the moment estimates (coupled L2), which is not supported.
type Terminal interface {
	EndsChain() (what, why string)
}

// composite is a transform made of others (a nested Chain): HasDecay looks through it, and its
// parent's Describe brackets it, so [a [b c]] and [a b c] describe differently.
type composite interface {
	Transforms() []Transform
}

var (
	_ Transform              = (*Chain)(nil)
	_ Terminal               = (*Chain)(nil)
	_ NonschedulableDeclarer = (*Chain)(nil)
	_ ConstantLeaves         = (*Chain)(nil)
	_ composite              = (*Chain)(nil)
)

// ChainName is a Chain's Name, as a member of another chain.
const ChainName = "chain"

// ChainState is a Chain's state as a Transform: its members' leaves, in StateNames order.
type ChainState[L Leaf] []L

// Leaves implements State.
func (s ChainState[L]) Leaves() []L { return s }

// NewChain validates and returns the chain: no nil member, each member's ConstantLeaves (if any)
// one per state leaf, and a Terminal member (Decay) only last.
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
		if cl, ok := t.(ConstantLeaves); ok {
			if got, want := len(cl.ConstantLeaves()), len(t.StateNames()); got != want {
				return nil, fmt.Errorf("optimizers: chain position %d (%s): ConstantLeaves has %d entries but StateNames lists %d: return one bool per state leaf", i, t.Name(), got, want)
			}
		}
	}
	for i, t := range ts[:len(ts)-1] {
		if what, why := endsChain(t); what != "" {
			fixed := slices.Concat(names[:i], names[i+1:], names[i:i+1])
			return nil, fmt.Errorf("optimizers: chain [%s]: %s is at position %d of %d but must be last (%s); reorder to [%s]",
				strings.Join(names, " "), what, i, len(ts), why, strings.Join(fixed, " "))
		}
	}
	return &Chain{ts: slices.Clone(ts)}, nil
}

// endsChain is t's Terminal answer; "" when t does not implement it.
func endsChain(t Transform) (what, why string) {
	if term, ok := t.(Terminal); ok {
		return term.EndsChain()
	}
	return "", ""
}

// EndsChain implements Terminal: a chain must end its parent when its last member must.
func (c *Chain) EndsChain() (what, why string) {
	what, why = endsChain(c.ts[len(c.ts)-1])
	if what != "" {
		what = "chain ending in " + what
	}
	return what, why
}

// Name implements Transform.
func (c *Chain) Name() string { return ChainName }

// Transforms returns the chain's members, in order.
func (c *Chain) Transforms() []Transform { return slices.Clone(c.ts) }

// HasDecay reports whether the chain ends with Decay, directly or through nested chains.
func (c *Chain) HasDecay() bool {
	var last Transform = c
	for {
		comp, ok := last.(composite)
		if !ok {
			return last.Name() == DecayName
		}
		ts := comp.Transforms()
		if len(ts) == 0 {
			return false
		}
		last = ts[len(ts)-1]
	}
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
		if cl, ok := t.(ConstantLeaves); ok {
			out = append(out, cl.ConstantLeaves()...) // one per leaf: NewChain checked
		} else {
			out = append(out, make([]bool, len(t.StateNames()))...)
		}
	}
	return out
}

// Init builds the flattened initial state (a ChainState) on the host from the group's flat
// parameters. No program is compiled.
func (c *Chain) Init(params *tensors.Tensor) (State[*tensors.Tensor], error) {
	var out ChainState[*tensors.Tensor]
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
// step-dependent scalars (see Shared): ApplyArrays calls it once per array with the same hp, step
// and shared, so the scalar math is emitted once per group. Transforms are elementwise, so applying
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
	updates, st := c.update(UpdateInput{Updates: grads, Params: params, State: state, Hyper: hp, Step: step, Shared: shared})
	return graph.Add(params, updates), st.Leaves()
}

// Update implements Transform: the members' updates in order, not yet added to the parameters.
// The members' Shared keys are scoped by the chain's position in its parent, so a nested member
// never shares a node with an outer one of the same position.
func (c *Chain) Update(in UpdateInput) (*graph.Node, State[*graph.Node]) {
	in.Shared = in.Shared.within(fmt.Sprintf("%d.%s/", in.Position, ChainName))
	return c.update(in)
}

// update runs the members on in.Updates; in.State is the chain's flat state.
func (c *Chain) update(in UpdateInput) (*graph.Node, State[*graph.Node]) {
	names := c.StateNames()
	updates := in.Updates
	var newState ChainState[*graph.Node]
	pos := 0
	for i, t := range c.ts {
		n := len(t.StateNames())
		leaves := in.State[pos : pos+n]
		for j, s := range leaves {
			if s == nil {
				panic(fmt.Errorf("optimizers: Chain.Apply: state leaf %s is nil: pass Chain.Init's leaves as program inputs", names[pos+j]))
			}
		}
		var st State[*graph.Node]
		updates, st = t.Update(UpdateInput{Updates: updates, Params: in.Params, State: slices.Clone(leaves), Hyper: in.Hyper, Step: in.Step, Shared: in.Shared, Position: i})
		out := st.Leaves()
		if len(out) != n {
			panic(fmt.Errorf("optimizers: chain position %d (%s): Update returned %d state leaves, StateNames lists %d", i, t.Name(), len(out), n))
		}
		newState = append(newState, out...)
		pos += n
	}
	return updates, newState
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
// joined by " > ", e.g. "radam(beta1=0.9,beta2=0.999,eps=1e-08,threshold=5) > decay(anchor=w0,mask=leaf)",
// a nested chain's in brackets. Schedulable values are device inputs and never appear.
func (c *Chain) Describe() string {
	parts := make([]string, len(c.ts))
	for i, t := range c.ts {
		parts[i] = t.Describe()
		if _, nested := t.(composite); nested {
			parts[i] = "[" + parts[i] + "]"
		}
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
