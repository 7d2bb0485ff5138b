package optimizers

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Program is the body of the optimizer program for G parameter groups: the global-norm clip over
// all groups' fully accumulated gradients, then each group's chain. Apply runs each chain on its
// group's flat buffer; ApplyArrays runs it on each of a group's buffers (arrays, or the engine's
// segments), its scalar math still once per group. Immutable; safe for
// concurrent use.
type Program struct {
	chains []*Chain
	clip   float64
}

// NewProgram takes one chain per group, in group order, and the clip threshold (0: off).
func NewProgram(chains []*Chain, clipNorm float64) (*Program, error) {
	if len(chains) == 0 {
		return nil, fmt.Errorf("optimizers: NewProgram got no chains: pass one per parameter group, in group order")
	}
	for i, c := range chains {
		if c == nil || len(c.ts) == 0 {
			return nil, fmt.Errorf("optimizers: NewProgram: chain of group %d is nil or empty: build it with NewChain", i)
		}
	}
	if err := CheckClipThreshold(clipNorm); err != nil {
		return nil, err
	}
	return &Program{chains: append([]*Chain(nil), chains...), clip: clipNorm}, nil
}

// Chains returns the per-group chains.
func (p *Program) Chains() []*Chain { return append([]*Chain(nil), p.chains...) }

// ClipNorm is the baked global-norm threshold (0: off).
func (p *Program) ClipNorm() float64 { return p.clip }

// Init builds every group's initial state on the host (no program compiled).
func (p *Program) Init(params []*tensors.Tensor) ([][]*tensors.Tensor, error) {
	if len(params) != len(p.chains) {
		return nil, fmt.Errorf("optimizers: Program.Init got %d parameter buffers for %d groups: pass one flat buffer per group", len(params), len(p.chains))
	}
	out := make([][]*tensors.Tensor, len(params))
	for g, c := range p.chains {
		st, err := c.Init(params[g])
		if err != nil {
			return nil, fmt.Errorf("group %d: %w", g, err)
		}
		out[g] = st.Leaves()
	}
	return out, nil
}

// Describe is the program's structural identity: the clip threshold and each group's chain.
func (p *Program) Describe() string {
	parts := make([]string, len(p.chains))
	for i, c := range p.chains {
		parts[i] = fmt.Sprintf("[%d] %s", i, c.Describe())
	}
	return fmt.Sprintf("clip=%s; %s", fmtFloat(p.clip), strings.Join(parts, "; "))
}

// Apply builds the whole update: params, grads, states and hyper are per group (in group order),
// step is the 1-based optimizer step. Graph side: panics on a malformed input.
func (p *Program) Apply(params, grads []*graph.Node, states [][]*graph.Node, hyper []Hyper, step *graph.Node) (newParams []*graph.Node, newStates [][]*graph.Node) {
	n := len(p.chains)
	if len(params) != n || len(grads) != n || len(states) != n || len(hyper) != n {
		panic(fmt.Errorf("optimizers: Program.Apply: %d groups but got %d params, %d grads, %d states, %d hyper: pass one of each per group", n, len(params), len(grads), len(states), len(hyper)))
	}
	grads = ClipByGlobalNorm(grads, p.clip)
	newParams = make([]*graph.Node, n)
	newStates = make([][]*graph.Node, n)
	for g, c := range p.chains {
		newParams[g], newStates[g] = c.Apply(params[g], grads[g], states[g], hyper[g], step)
	}
	return newParams, newStates
}

// ApplyArrays is Apply with every group split into buffers (its parameter arrays, or the
// engine's segments: its small arrays flat in one, each large array in its own): params[g][j] and
// grads[g][j] are buffer j of group g, states[g][s][j] is state leaf s of that buffer, and the
// results come back in the same layout. The clip is global over every array; each
// group's chain is applied array by array, so XLA fuses each array's update into one pass with no
// packing copies, while the group's step-dependent scalars are built once (Shared). Transforms
// are elementwise, so this equals Apply on the group's flat buffer.
func (p *Program) ApplyArrays(params, grads [][]*graph.Node, states [][][]*graph.Node, hyper []Hyper, step *graph.Node) (newParams [][]*graph.Node, newStates [][][]*graph.Node) {
	n := len(p.chains)
	if len(params) != n || len(grads) != n || len(states) != n || len(hyper) != n {
		panic(fmt.Errorf("optimizers: Program.ApplyArrays: %d groups but got %d params, %d grads, %d states, %d hyper: pass one of each per group", n, len(params), len(grads), len(states), len(hyper)))
	}
	var all []*graph.Node
	for g := range grads {
		if len(grads[g]) != len(params[g]) {
			panic(fmt.Errorf("optimizers: Program.ApplyArrays: group %d has %d parameter arrays but %d gradients", g, len(params[g]), len(grads[g])))
		}
		all = append(all, grads[g]...)
	}
	all = ClipByGlobalNorm(all, p.clip)
	newParams = make([][]*graph.Node, n)
	newStates = make([][][]*graph.Node, n)
	for g, c := range p.chains {
		gr := all[:len(params[g])]
		all = all[len(params[g]):]
		shared := NewShared()
		newStates[g] = make([][]*graph.Node, len(states[g]))
		for j := range params[g] {
			st := make([]*graph.Node, len(states[g]))
			for s := range states[g] {
				st[s] = states[g][s][j]
			}
			np, ns := c.ApplyShared(params[g][j], gr[j], st, hyper[g], step, shared)
			newParams[g] = append(newParams[g], np)
			for s := range ns {
				newStates[g][s] = append(newStates[g][s], ns[s])
			}
		}
	}
	return newParams, newStates
}
