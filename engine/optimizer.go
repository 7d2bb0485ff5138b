package engine

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/optimizers"
)

// optimizerProgram: per group the parameter leaves, their (accumulated) gradients, the chain's
// state leaves and its schedulable hyperparameters, then the step -> new parameter leaves and new
// state. Clipping is global over all groups, at the top, and a threshold of 0 emits nothing; the
// threshold bakes, so it is in this program's key and no other's.
//
// Its layout is per array, so it grows with the array count (about 19 nodes and 4 inputs per
// array with RAdam). BenchmarkOptimizerLayout decides it: packing the arrays into one flat buffer
// per group inside the program, and slicing them back, is never faster to run and 4-19x slower to
// compile at 6, 60 and 600 arrays. At 600 arrays the step costs what copying the same buffers
// costs (the buffer count, not the math); a flat buffer at the program's boundary would cut that
// 20x, but moves the packing into the gradient program and makes the parameters flat-resident.
func (e *Engine) optimizerProgram() (*program, error) {
	return e.memo("optimizer", func() (*program, error) {
		var sig signature
		for i, g := range e.groups {
			for _, v := range g.vars {
				sig.add("param/"+v.ScopeAndName(), v.DType().String(), v.Shape().Dimensions)
			}
			for _, v := range g.vars {
				sig.add("grad/"+v.ScopeAndName(), v.DType().String(), v.Shape().Dimensions)
			}
			e.addStateInputs(&sig, i)
		}
		sig.add("step", "Float32", nil)
		key := e.key(compilecache.KindOptimizer, "optimizer", sig)
		key.Clip = e.clip
		for _, g := range e.groups {
			key.Extra = append(key.Extra, [2]string{"chain/" + g.name, g.opt.Describe()})
		}
		return e.getProgram(key, func(gr *graph.Graph, _ any) ([]*graph.Node, *program) {
			nodes := sig.params(gr, nil)
			in := make([]groupUpdate, len(e.groups))
			for i, g := range e.groups {
				in[i] = e.groupInputs(i, nodes)
				for _, v := range g.vars {
					in[i].grads = append(in[i].grads, nodes["grad/"+v.ScopeAndName()])
				}
			}
			newParams, newState := e.emitUpdates(in, nodes["step"])
			return append(newParams, newState...), &program{}
		})
	})
}

// addStateInputs adds group i's optimizer state leaves and hyperparameters to a signature.
func (e *Engine) addStateInputs(sig *signature, i int) {
	g := e.groups[i]
	for s, leaves := range e.st.groups[i].opt {
		for j, t := range leaves {
			sig.add(stateInput(g, s, j), t.DType().String(), t.Shape().Dimensions)
		}
	}
	for _, f := range g.opt.HyperFields() {
		sig.add("hyper/"+g.name+"/"+f, "Float32", nil)
	}
}

// stateInput names state leaf s of the group's parameter array j, e.g. "opt/default/0.radam.mu/dense/weights".
func stateInput(g *paramGroup, s, j int) string {
	return "opt/" + g.name + "/" + g.opt.StateNames()[s] + "/" + g.vars[j].ScopeAndName()
}

// groupUpdate is one group's side of the update as graph nodes: its parameter leaves, their
// gradients, its state ([state leaf][parameter array]) and its hyperparameters.
type groupUpdate struct {
	params, grads []*graph.Node
	state         [][]*graph.Node
	hyper         optimizers.Hyper
}

// groupInputs reads a group's parameters, state and hyperparameters from a program's parameter
// nodes (the "param/", "opt/" and "hyper/" inputs of the signature).
func (e *Engine) groupInputs(i int, nodes map[string]*graph.Node) groupUpdate {
	g := e.groups[i]
	u := groupUpdate{hyper: optimizers.Hyper{}}
	for _, v := range g.vars {
		u.params = append(u.params, nodes["param/"+v.ScopeAndName()])
	}
	for s, leaves := range e.st.groups[i].opt {
		var row []*graph.Node
		for j := range leaves {
			row = append(row, nodes[stateInput(g, s, j)])
		}
		u.state = append(u.state, row)
	}
	for _, f := range g.opt.HyperFields() {
		u.hyper[f] = nodes["hyper/"+g.name+"/"+f]
	}
	return u
}

// emitUpdates builds the update with optimizers.Program.ApplyArrays (the global clip, then each
// group's chain array by array, its scalars built once per group) and returns every group's new
// parameter arrays, then every group's new non-constant state arrays, in signature order.
func (e *Engine) emitUpdates(groups []groupUpdate, step *graph.Node) (newParams, newState []*graph.Node) {
	chains := make([]*optimizers.Chain, len(e.groups))
	params, grads := make([][]*graph.Node, len(groups)), make([][]*graph.Node, len(groups))
	states, hyper := make([][][]*graph.Node, len(groups)), make([]optimizers.Hyper, len(groups))
	for i, g := range e.groups {
		chains[i] = g.opt
		params[i], grads[i], states[i], hyper[i] = groups[i].params, groups[i].grads, groups[i].state, groups[i].hyper
	}
	prog, err := optimizers.NewProgram(chains, e.clip)
	if err != nil {
		panic(err) // graph side: getProgram recovers it into the build error
	}
	ps, ss := prog.ApplyArrays(params, grads, states, hyper, step)
	for i, g := range e.groups {
		newParams = append(newParams, ps[i]...)
		for s, arrays := range ss[i] {
			if !g.constLeaf(s) {
				newState = append(newState, arrays...)
			}
		}
	}
	return newParams, newState
}

// constLeaf reports whether optimizer state leaf s never changes (the chain says so at setup).
func (g *paramGroup) constLeaf(s int) bool { return s < len(g.constant) && g.constant[s] }

// optimizerStep runs the optimizer program, replacing (donating) parameters, gradients and state.
// grads holds every group's per-array gradients, in parameter order.
func (e *Engine) optimizerStep(grads []*tensors.Tensor, step int) error {
	p, err := e.optimizerProgram()
	if err != nil {
		return err
	}
	args, err := e.optimizerArgs(grads, true, step)
	if err != nil {
		return err
	}
	outs, err := e.execute(p, args)
	if err != nil {
		return err
	}
	e.takeOptimizerOutputs(outs)
	return nil
}

// optimizerArgs lists the optimizer program's inputs for the 1-based step: per group the parameter
// leaves (donated), the gradients (donated when donateGrads), the state (donated unless constant)
// and the hyperparameters, then the step.
func (e *Engine) optimizerArgs(grads []*tensors.Tensor, donateGrads bool, step int) ([]arg, error) {
	var args []arg
	for i, g := range e.groups {
		for _, t := range e.st.groups[i].params {
			args = append(args, arg{t: t, donate: true, counter: &e.uploads.Params})
		}
		for _, t := range grads[:len(g.vars)] {
			args = append(args, arg{t: t, donate: donateGrads, counter: &e.uploads.Params}) // parameter-sized
		}
		grads = grads[len(g.vars):]
		more, err := e.stateArgs(i, step)
		if err != nil {
			return nil, err
		}
		args = append(args, more...)
	}
	args = append(args, e.stepArg(step))
	return args, nil
}

// stateArgs lists group i's state leaves (donated unless constant) and its hyperparameters at step.
func (e *Engine) stateArgs(i int, step int) ([]arg, error) {
	g := e.groups[i]
	var args []arg
	for s, leaves := range e.st.groups[i].opt {
		for _, t := range leaves {
			// Constant leaves (Decay's anchor and mask) are read, never replaced: not donated.
			args = append(args, arg{t: t, donate: !g.constLeaf(s), counter: &e.uploads.OptState})
		}
	}
	hv, err := e.hyper(g.name, step)
	if err != nil {
		return nil, fmt.Errorf("group %q: %w", g.name, err)
	}
	for j, f := range e.hyperFields(i) {
		v, ok := hv[f]
		if !ok {
			return nil, fmt.Errorf("group %q: the optimizer reads hyperparameter %q, which nothing configures", g.name, f)
		}
		args = append(args, e.hyperArg(i, j, float32(v)))
	}
	return args, nil
}

// takeOptimizerOutputs installs the optimizer program's outputs (every group's parameters, then
// every group's non-constant state) and returns the outputs that follow them.
func (e *Engine) takeOptimizerOutputs(outs []*tensors.Tensor) []*tensors.Tensor {
	for i, g := range e.groups {
		e.st.groups[i].params = outs[:len(g.vars)]
		outs = outs[len(g.vars):]
	}
	for i, g := range e.groups {
		st := &e.st.groups[i]
		for s := range st.opt {
			if !g.constLeaf(s) {
				st.opt[s] = outs[:len(g.vars)]
				outs = outs[len(g.vars):]
			}
		}
	}
	return outs
}
