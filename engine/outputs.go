package engine

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Program outputs are named. A builder declares each output with its name where it emits it
// (outList), the program keeps the names (program.outputs), and a reader takes a run's results by
// name (results): asked for a name the program does not declare, or a run of names the program
// does not declare one after another in that order, or leaving an output untaken, it fails naming
// the program and the output, so a builder and a reader that disagree fail, never swap values. An
// output that is the new value of an input bears that input's name:
//
//	loss                          the training loss (gradient, fused and manual step programs)
//	grads/<group>/<segment>       a segment's gradient, with accum > 1 the step's running sum
//	                              (gradient; the optimizer program's input of that name)
//	params/<group>/<segment>      a segment's new parameters (optimizer, fused and manual step)
//	opt/<group>/<leaf>/<segment>  a non-constant optimizer state leaf's new segment (the same)
//	state/<variable>              a layer state variable's new value (the training programs)
//	metric/<name>                 a train metric or TrainStep stat; in eval, a metric's sum
//	count/<name>                  in eval, the count of the metric before it, when it has one
//	forward/<name>                a Forward output (predict, and eval at full width)
//
// The training programs list theirs in that order (the loss; the gradients, or the new parameters
// then the new state, each group by group; the layer state; the metrics), eval its metrics then
// Forward's outputs; a reader depends on no order but that of a run it takes whole.
//
// The names are part of the program the compile cache holds, set by every build that compiles
// one (a miss; when pjrthook's disk cache then supplies the executable, the graph, and so the
// names, were built all the same).
const (
	lossOut    = "loss"
	metricOut  = "metric/"
	countOut   = "count/"
	forwardOut = "forward/"
)

// layerInput names a layer state variable's input, and its new value's output.
func layerInput(name string) string { return "state/" + name }

// outList is a program's outputs as its builder emits them: each node, its name, and the input it
// replaces ("" for none; compileProgram declares those pairs as aliases, alias.go).
type outList struct {
	nodes    []*graph.Node
	names    []string
	replaces []string
}

// add appends an output that replaces no input.
func (o *outList) add(name string, node *graph.Node) { o.replacing(name, node, "") }

// replacing appends an output that replaces input (its buffer is donated and reused).
func (o *outList) replacing(name string, node *graph.Node, input string) {
	o.nodes = append(o.nodes, node)
	o.names = append(o.names, name)
	o.replaces = append(o.replaces, input)
}

// then appends more's outputs.
func (o *outList) then(more outList) {
	o.nodes = append(o.nodes, more.nodes...)
	o.names = append(o.names, more.names...)
	o.replaces = append(o.replaces, more.replaces...)
}

// declare sets the program's output names and their index, refusing an empty or repeated name.
func (p *program) declare(names []string) error {
	p.outputs, p.at = names, make(map[string]int, len(names))
	for i, name := range names {
		if _, dup := p.at[name]; dup || name == "" {
			return fmt.Errorf("internal: the %s program declares output %d as %q, which is empty or declared before", p.kind, i, name)
		}
		p.at[name] = i
	}
	return nil
}

// trainNames are the names a training step reads the training programs' outputs by, listed once
// per engine (the groups, their segments and state leaves and the layer state are fixed at setup).
type trainNames struct {
	grads  []string     // every group's gradient segments, in group order
	params [][]string   // [group]: its parameter segments
	opt    [][][]string // [group][state leaf]: its segments, nil for a constant leaf
	layer  []string     // the layer state, in stateVars order
}

// trainNames lists them on the first call; the optimizer state must be initialized by then
// (InitOptimizer).
func (e *Engine) trainNames() *trainNames {
	if n := e.scratch.names; n != nil {
		return n
	}
	n := &trainNames{}
	for i, g := range e.groups {
		n.params = append(n.params, segmentNames(g, paramsInput))
		n.grads = append(n.grads, segmentNames(g, gradsInput)...)
		leaves := make([][]string, len(e.st.groups[i].opt))
		for l := range leaves {
			if !g.constLeaf(l) {
				leaves[l] = segmentNames(g, stateInput(l))
			}
		}
		n.opt = append(n.opt, leaves)
	}
	for _, v := range e.stateVars {
		n.layer = append(n.layer, layerInput(v.ScopeAndName()))
	}
	e.scratch.names = n
	return n
}

// segmentNames is a group's segment names by name, in segment order.
func segmentNames(g *paramGroup, name func(*paramGroup, int) string) []string {
	out := make([]string, len(g.segs))
	for s := range out {
		out[s] = name(g, s)
	}
	return out
}

// results is one run's outputs, taken by the names its program declares. A failed take records
// the error and returns nil; done returns it, or names an output nothing took. A caller checks
// r.err (or done, once it has taken everything) before it uses a value it took.
type results struct {
	p     *program
	ts    []*tensors.Tensor
	taken []bool // per output (the engine's scratch, reused run to run)
	err   error
}

// results starts reading p's outputs ts.
func (e *Engine) results(p *program, ts []*tensors.Tensor) results {
	s := &e.scratch
	if cap(s.taken) < len(ts) {
		s.taken = make([]bool, len(ts))
	}
	r := results{p: p, ts: ts, taken: s.taken[:len(ts)]}
	clear(r.taken)
	if len(ts) != len(p.outputs) {
		r.err = fmt.Errorf("internal: the %s program returned %d outputs and declares %d", p.kind, len(ts), len(p.outputs))
	}
	return r
}

// one takes the output named name.
func (r *results) one(name string) *tensors.Tensor {
	if ts := r.run([]string{name}); ts != nil {
		return ts[0]
	}
	return nil
}

// run takes the outputs named names, which the program must declare one after another in that
// order; nil when names is empty or a take failed.
func (r *results) run(names []string) []*tensors.Tensor {
	if len(names) == 0 || r.err != nil {
		return nil
	}
	i, ok := r.p.at[names[0]]
	if !ok {
		r.err = fmt.Errorf("internal: the %s program has no output %q (it declares %s)", r.p.kind, names[0], strings.Join(r.p.outputs, ", "))
		return nil
	}
	for k, name := range names {
		switch {
		case i+k >= len(r.p.outputs) || r.p.outputs[i+k] != name:
			got, at := "nothing", "nowhere"
			if i+k < len(r.p.outputs) {
				got = fmt.Sprintf("%q", r.p.outputs[i+k])
			}
			if j, ok := r.p.at[name]; ok {
				at = fmt.Sprintf("at output %d", j)
			}
			r.err = fmt.Errorf("internal: the %s program declares %s at output %d, where its reader expects %q (after %q; it declares that %s)", r.p.kind, got, i+k, name, names[0], at)
			return nil
		case r.taken[i+k]:
			r.err = fmt.Errorf("internal: output %q of the %s program is read twice", name, r.p.kind)
			return nil
		}
	}
	for k := range names {
		r.taken[i+k] = true
	}
	return r.ts[i : i+len(names) : i+len(names)]
}

// prefixed takes every output whose name starts with prefix ("metric/"), which the program
// declares one after another, and returns their names (prefix included) and values; none is no
// error.
func (r *results) prefixed(prefix string) ([]string, []*tensors.Tensor) {
	i := 0
	for i < len(r.p.outputs) && !strings.HasPrefix(r.p.outputs[i], prefix) {
		i++
	}
	j := i
	for j < len(r.p.outputs) && strings.HasPrefix(r.p.outputs[j], prefix) {
		j++
	}
	if i == j {
		return nil, nil
	}
	for _, name := range r.p.outputs[j:] {
		if strings.HasPrefix(name, prefix) && r.err == nil {
			r.err = fmt.Errorf("internal: the %s program declares its %s outputs apart (%q after %q)", r.p.kind, prefix, name, r.p.outputs[j])
		}
	}
	return r.p.outputs[i:j:j], r.run(r.p.outputs[i:j])
}

// done returns the first failed take's error, or else names an output nothing took.
func (r *results) done() error {
	if r.err != nil {
		return r.err
	}
	for i, ok := range r.taken {
		if !ok {
			return fmt.Errorf("internal: the %s program's output %q is read by nothing (it declares %s)", r.p.kind, r.p.outputs[i], strings.Join(r.p.outputs, ", "))
		}
	}
	return nil
}
