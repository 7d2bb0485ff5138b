package engine

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/optimizers"
)

// optimizerProgram: per group its parameter segments, their (accumulated) gradients, the chain's
// state leaves (by segment) and its schedulable hyperparameters, then the step -> emitUpdates'
// outputs ("params/..." then "opt/..."), each replacing the input it is named after. Clipping is
// global over all groups, at the top, and a threshold of 0 emits nothing; the threshold bakes, so
// it is in this program's key and no other's.
//
// Its inputs are a few buffers per group (flat.go: the small arrays' segment and one per large
// array), so its compile and its run no longer grow with the model's small arrays;
// BenchmarkArrayCount measures it against the per-array program the engine compiled before (one
// input per parameter, gradient and state array, about 19 nodes per array with RAdam).
func (e *Engine) optimizerProgram() (*program, error) {
	return e.memo("optimizer", func() (*program, error) {
		var sig signature
		for i, g := range e.groups {
			g.addSegmentInputs(&sig, paramsInput)
			g.addSegmentInputs(&sig, gradsInput)
			e.addStateInputs(&sig, i)
		}
		sig.add("step", "Float32", nil)
		key := e.key(compilecache.KindOptimizer, "optimizer", sig)
		key.Clip = e.clip
		for _, g := range e.groups {
			key.Extra = append(key.Extra, [2]string{"chain/" + g.name, g.opt.Describe()})
		}
		return e.getProgram(key, func(gr *graph.Graph, _ any) outList {
			nodes := sig.params(gr, nil)
			in := make([]groupUpdate, len(e.groups))
			for i, g := range e.groups {
				in[i] = e.groupInputs(i, nodes)
				in[i].params, in[i].grads = segmentNodes(g, nodes, paramsInput), segmentNodes(g, nodes, gradsInput)
			}
			outs := e.emitUpdates(in, nodes["step"])
			copy(outs.replaces, outs.names) // each replaces its input
			return outs
		})
	})
}

// segmentNodes is a group's segment inputs named by name, in segment order.
func segmentNodes(g *paramGroup, nodes map[string]*graph.Node, name func(*paramGroup, int) string) []*graph.Node {
	out := make([]*graph.Node, len(g.segs))
	for s := range g.segs {
		out[s] = nodes[name(g, s)]
	}
	return out
}

// addStateInputs adds group i's optimizer state leaves (by segment) and hyperparameters to a signature.
func (e *Engine) addStateInputs(sig *signature, i int) {
	g := e.groups[i]
	for l := range e.st.groups[i].opt {
		for s := range g.segs {
			sig.add(stateInput(l)(g, s), g.dtype, g.stateSegmentDims(l, s))
		}
	}
	for _, f := range g.opt.HyperFields() {
		sig.add("hyper/"+g.name+"/"+f, "Float32", nil)
	}
}

// stateInput names state leaf l's segment inputs, e.g. "opt/default/0.radam.mu/0".
func stateInput(l int) func(*paramGroup, int) string {
	return func(g *paramGroup, s int) string {
		return fmt.Sprintf("opt/%s/%s/%d", g.name, g.opt.StateNames()[l], s)
	}
}

// groupUpdate is one group's side of the update as graph nodes, by segment: its parameters, their
// gradients, its state ([leaf][segment]) and its hyperparameters.
type groupUpdate struct {
	params, grads []*graph.Node
	state         [][]*graph.Node
	hyper         optimizers.Hyper
}

// groupInputs reads a group's state and hyperparameters from a program's parameter nodes (the
// "opt/" and "hyper/" inputs of the signature); the caller sets params and grads.
func (e *Engine) groupInputs(i int, nodes map[string]*graph.Node) groupUpdate {
	g := e.groups[i]
	u := groupUpdate{hyper: optimizers.Hyper{}}
	for l := range e.st.groups[i].opt {
		u.state = append(u.state, segmentNodes(g, nodes, stateInput(l)))
	}
	for _, f := range g.opt.HyperFields() {
		u.hyper[f] = nodes["hyper/"+g.name+"/"+f]
	}
	return u
}

// emitUpdates builds the update with optimizers.Program.ApplyArrays over the segments (the global
// clip, then each group's chain segment by segment, its scalars built once per group) and
// returns every group's new parameter segments ("params/<group>/<segment>"), then every group's
// new non-constant state segments ("opt/<group>/<leaf>/<segment>"), each named as the input it
// updates.
func (e *Engine) emitUpdates(groups []groupUpdate, step *graph.Node) outList {
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
	var outs outList
	for i, g := range e.groups {
		for s, p := range ps[i] {
			outs.add(paramsInput(g, s), p)
		}
	}
	for i, g := range e.groups {
		for l, segs := range ss[i] {
			if !g.constLeaf(l) {
				for s, st := range segs {
					outs.add(stateInput(l)(g, s), st)
				}
			}
		}
	}
	return outs
}

// constLeaf reports whether optimizer state leaf s never changes (the chain says so at setup).
func (g *paramGroup) constLeaf(s int) bool { return s < len(g.constant) && g.constant[s] }

// optimizerStep runs the optimizer program, replacing (donating) parameters, gradients and state.
// grads holds every group's gradient segments, in group order.
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
	return e.takeOptimizerOutputs(p, outs)
}

// optimizerArgs lists the optimizer program's inputs for the 1-based step: per group its
// parameter segments (donated), its gradient segments (donated when donateGrads), the state
// (donated unless constant) and the hyperparameters, then the step.
func (e *Engine) optimizerArgs(grads []*tensors.Tensor, donateGrads bool, step int) ([]arg, error) {
	var args []arg
	for i, g := range e.groups {
		for _, t := range e.st.groups[i].params {
			args = append(args, arg{t: t, donate: true, counter: &e.uploads.Params})
		}
		for _, t := range grads[:len(g.segs)] {
			args = append(args, arg{t: t, donate: donateGrads, counter: &e.uploads.Params}) // parameter-sized
		}
		grads = grads[len(g.segs):]
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
	for l, segs := range e.st.groups[i].opt {
		for _, t := range segs {
			// Constant leaves (Decay's anchor and mask) are read, never replaced: not donated.
			args = append(args, arg{t: t, donate: !g.constLeaf(l), counter: &e.uploads.OptState})
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

// takeOptimizerOutputs installs the optimizer program p's outputs outs.
func (e *Engine) takeOptimizerOutputs(p *program, outs []*tensors.Tensor) error {
	r := e.results(p, outs)
	e.takeUpdates(&r)
	return r.done()
}

// takeUpdates installs the updates a run returned (emitUpdates' outputs: every group's parameter
// segments and non-constant state), taken by name. A failed take leaves nil in their place: the
// run's inputs were donated, so the state is lost either way, and r.done reports it.
func (e *Engine) takeUpdates(r *results) {
	names := e.trainNames()
	for i := range e.groups {
		st := &e.st.groups[i]
		st.params = r.run(names.params[i])
		for l, leaf := range names.opt[i] {
			if leaf != nil {
				st.opt[l] = r.run(leaf)
			}
		}
	}
}
