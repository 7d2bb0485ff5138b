package core

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/optimizers"
)

// groupOptimizer is what core needs of a group's optimizer chain (optimizers.Chain satisfies it).
type groupOptimizer interface {
	Init(params *tensors.Tensor) ([]*tensors.Tensor, error)
	Apply(params, grads *graph.Node, state []*graph.Node, hp optimizers.Hyper, step *graph.Node) (*graph.Node, []*graph.Node)
	HyperFields() []string
	Describe() string
}

var _ groupOptimizer = (*optimizers.Chain)(nil)

// optimizerProgram: per group the parameter leaves (packed into the group's flat layout on entry,
// split on exit), the accumulated flat gradients, the chain's
// state and its schedulable hyperparameters, then the step -> new parameters and new state per
// group. Clipping is global over all groups, at the top, and a threshold of 0 emits nothing;
// the threshold bakes, so it is in this program's key and no other's.
func (n *Nitro) optimizerProgram() (*program, error) {
	return n.memo("optimizer", func() (*program, error) {
		var sig signature
		for _, g := range n.groups {
			for _, v := range g.vars {
				sig.add("param/"+v.ScopeAndName(), v.DType().String(), v.Shape().Dimensions)
			}
			sig.add("grads/"+g.name, g.dtype, []int{g.size})
			for i, s := range g.optState {
				sig.add(fmt.Sprintf("opt/%s/%d", g.name, i), s.DType().String(), s.Shape().Dimensions)
			}
			for _, f := range g.opt.HyperFields() {
				sig.add("hyper/"+g.name+"/"+f, "Float32", nil)
			}
		}
		sig.add("step", "Float32", nil)
		key := n.key(kindOptimizer, "optimizer", sig)
		key.Clip = n.cfg.clip.value
		for _, g := range n.groups {
			key.Extra = append(key.Extra, [2]string{"chain/" + g.name, g.opt.Describe()})
		}
		return n.getProgram(key, func(gr *graph.Graph, _ any) ([]*graph.Node, *program) {
			nodes := sig.params(gr, nil)
			grads := make([]*graph.Node, len(n.groups))
			for i, g := range n.groups {
				grads[i] = nodes["grads/"+g.name]
			}
			grads = optimizers.ClipByGlobalNorm(grads, n.cfg.clip.value)
			var newParams, newState []*graph.Node
			for i, g := range n.groups {
				state := make([]*graph.Node, len(g.optState))
				for j := range g.optState {
					state[j] = nodes[fmt.Sprintf("opt/%s/%d", g.name, j)]
				}
				hp := optimizers.Hyper{}
				for _, f := range g.opt.HyperFields() {
					hp[f] = nodes["hyper/"+g.name+"/"+f]
				}
				leaves := make([]*graph.Node, len(g.vars))
				for j, v := range g.vars {
					leaves[j] = nodes["param/"+v.ScopeAndName()]
				}
				p, s := g.opt.Apply(g.layout.FlattenNodes(leaves), grads[i], state, hp, nodes["step"])
				newParams = append(newParams, g.layout.UnflattenNode(p)...)
				for j, leaf := range s {
					if !g.constLeaf(j) {
						newState = append(newState, leaf)
					}
				}
			}
			return append(newParams, newState...), &program{}
		})
	})
}

// constLeaf reports whether optimizer state leaf j never changes (the chain says so at setup).
func (g *paramGroup) constLeaf(j int) bool { return j < len(g.constant) && g.constant[j] }

// optimizerStep runs the optimizer program, replacing (donating) parameters, gradients and state.
func (n *Nitro) optimizerStep(grads []*tensors.Tensor) error {
	p, err := n.optimizerProgram()
	if err != nil {
		return err
	}
	step := n.step + 1
	var args []arg
	for i, g := range n.groups {
		for _, t := range g.leaves {
			args = append(args, arg{t: t, donate: true, counter: &n.uploads.Params})
		}
		args = append(args, arg{t: grads[i], donate: true, counter: &n.uploads.Batch})
		for j, s := range g.optState {
			// Constant leaves (Decay's anchor and mask) are read, never replaced: not donated.
			args = append(args, arg{t: s, donate: !g.constLeaf(j), counter: &n.uploads.OptState})
		}
		hv, err := n.hyperValues(g, step)
		if err != nil {
			return fmt.Errorf("group %q: %w", g.name, err)
		}
		for _, f := range g.opt.HyperFields() {
			v, ok := hv[f]
			if !ok {
				return fmt.Errorf("group %q: the optimizer reads hyperparameter %q, which nothing configures", g.name, f)
			}
			args = append(args, arg{t: tensors.FromScalar(float32(v)), counter: &n.uploads.Hyper})
		}
	}
	args = append(args, arg{t: tensors.FromScalar(float32(step)), counter: &n.uploads.Hyper})
	outs, err := n.run(p, args)
	if err != nil {
		return err
	}
	k := 0
	for _, g := range n.groups {
		g.leaves = outs[k : k+len(g.vars)]
		k += len(g.vars)
	}
	for _, g := range n.groups {
		for j := range g.optState {
			if !g.constLeaf(j) {
				g.optState[j] = outs[k]
				k++
			}
		}
	}
	return nil
}
