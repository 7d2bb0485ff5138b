package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/optimizers"
)

// manualStep is the engine's hooks.ManualStep, the value TrainStep receives (its contract, the
// verbs' meaning included, is package hooks'). It is valid only inside the TrainStep call that
// received it, which is traced (graph building): a misuse panics with an error naming the verb,
// and the verb that built the program returns it.
type manualStep struct {
	ctx *context.Context // the model context, in training mode, reusing the variables setup created

	e        *Engine
	g        *graph.Graph
	nodes    map[string]*graph.Node // the program's inputs; nil in setup's variable-creating trace
	stepped  map[string]bool
	newFlat  map[int][]*graph.Node   // per group index: its parameter segments after StepOptimizer
	newState map[int][][]*graph.Node // per group index: its state ([leaf][segment]) after StepOptimizer
	consumed *graph.Node             // the train.AddLoss total when the last Backward returned
	stray    bool                    // terms were collected outside every Backward objective
}

var _ hooks.ManualStep = (*manualStep)(nil)

// Ctx is the model context TrainStep's layers read the parameters through.
func (s *manualStep) Ctx() *context.Context { return s.ctx }

// trace reports setup's variable-creating trace, where groups are not formed yet: Backward
// differentiates the variables that exist after its objective ran and StepOptimizer does nothing.
func (s *manualStep) trace() bool { return s.nodes == nil }

// Groups lists the parameter groups (ParamGroup's names; one "default" without it).
func (s *manualStep) Groups() []string { return s.e.GroupNames() }

// Step is the 1-based optimizer step being taken, a Float32 scalar.
func (s *manualStep) Step() *graph.Node {
	if s.trace() {
		return graph.Scalar(s.g, dtypes.Float32, 1)
	}
	return s.nodes["step"]
}

// Params are a group's parameters by keypath, at their current value in this step.
func (s *manualStep) Params(group string) map[string]*graph.Node {
	vars, kps := s.groupVars(map[string]bool{s.checkGroup("Params", group): true})
	out := make(map[string]*graph.Node, len(vars))
	for i, v := range vars {
		out[kps[i]] = v.ValueGraph(s.g)
	}
	return out
}

// OptState is a group's optimizer state as this step received it: by state leaf name (the chain's
// StateNames, e.g. "0.adam.mu"), then by parameter keypath. Empty in setup's trace.
func (s *manualStep) OptState(group string) map[string]map[string]*graph.Node {
	s.checkGroup("OptState", group)
	out := map[string]map[string]*graph.Node{}
	if s.trace() {
		return out
	}
	i := s.groupIndex(group)
	g := s.e.groups[i]
	for si, name := range g.opt.StateNames() {
		leaf := map[string]*graph.Node{}
		for j := range g.vars {
			seg := s.nodes[stateInput(si)(g, g.seg[j])]
			if len(g.stateSegmentDims(si, g.seg[j])) == 0 { // a mask segment held as one value
				leaf[strings.Join(g.keypaths[j], "/")] = graph.BroadcastToDims(seg, g.vars[j].Shape().Dimensions...)
				continue
			}
			leaf[strings.Join(g.keypaths[j], "/")] = g.view(seg, s.nodes, j)
		}
		out[name] = leaf
	}
	return out
}

// Backward builds loss = f(Ctx) and its gradients with respect to the named groups' parameters
// only. While f runs, every other trainable variable reads as a constant (a stop-gradient of its
// current value), so no gradient reaches another group through a value read from the context,
// even one that an earlier StepOptimizer computed from these groups' parameters. Nodes f captures
// from outside keep their graph, and gradients flow through them (GoMLX differentiates the graph,
// not f's arguments): compute inside f whatever must not carry a gradient, or wrap it in
// graph.StopGradient. The loss must be a scalar. The terms GoMLX layers collect with
// train.AddLoss while f runs (a regularizer's L2) are added to f's loss, as the automatic loop
// adds them to Loss; terms collected outside every Backward belong to no objective, and the step
// program warns when it is built with any.
//
// A named group none of whose parameters the loss reaches in the graph (f reads it only through
// graph.StopGradient, or not at all) is refused: its gradient would be zero for every batch.
func (s *manualStep) Backward(f func(ctx *context.Context) *graph.Node, groups ...string) (*graph.Node, hooks.Grads) {
	if len(groups) == 0 {
		panic(fmt.Errorf("Backward: no parameter group named: pass the groups to differentiate, e.g. Backward(f, %q) (groups: %v)", "disc", s.Groups()))
	}
	chosen := map[string]bool{}
	for _, g := range groups {
		chosen[s.checkGroup("Backward", g)] = true
	}
	var cut []*context.Variable
	var before []*graph.Node
	if !s.trace() {
		for _, grp := range s.e.groups {
			if chosen[grp.name] {
				continue
			}
			for _, v := range grp.vars {
				cur := v.ValueGraph(s.g)
				cut, before = append(cut, v), append(before, cur)
				v.SetValueGraph(graph.StopGradient(cur))
			}
		}
	}
	prev := collectedLosses(s.ctx, s.g)
	s.stray = s.stray || prev != s.consumed
	loss := f(s.ctx)
	for i, v := range cut {
		v.SetValueGraph(before[i])
	}
	if loss == nil || loss.Rank() != 0 {
		panic(fmt.Errorf("Backward(%v): the objective must return a scalar loss, got %v", groups, shapeOf(loss)))
	}
	cur := collectedLosses(s.ctx, s.g)
	terms, ok := termsSince(cur, prev)
	if !ok {
		panic(fmt.Errorf("Backward(%v): the train.AddLoss total changed in a way other than train.AddLoss, so the terms f collected cannot be told apart: collect loss terms only with train.AddLoss", groups))
	}
	loss, s.consumed = addTerms(loss, terms), cur
	vars, kps := s.groupVars(chosen)
	leaves := make([]*graph.Node, len(vars))
	for i, v := range vars {
		leaves[i] = v.ValueGraph(s.g)
	}
	if !s.trace() {
		var grps []*paramGroup
		for _, grp := range s.e.groups {
			if chosen[grp.name] {
				grps = append(grps, grp)
			}
		}
		hook := fmt.Sprintf("Backward(f, %s)", quoted(groups))
		if dead := s.e.deadGroups(hook, loss, grps, leaves); len(dead) > 0 {
			panic(fmt.Errorf("%s: %s gets no gradient: f's loss depends on none of its parameters, so StepOptimizer "+
				"would leave them unchanged. f must compute its loss from the group's variables read through the ctx "+
				"Backward passes it (there every other group reads as a constant, and a value passed through "+
				"graph.StopGradient carries no gradient), or the group does not belong in this Backward", hook, strings.Join(dead, " and ")))
		}
	}
	out := hooks.Grads{}
	if len(leaves) > 0 {
		for i, gr := range graph.Gradient(loss, leaves...) {
			out[kps[i]] = gr
		}
	}
	return loss, out
}

// quoted is groups as Go literals, comma-separated, for naming a Backward call.
func quoted(groups []string) string {
	q := make([]string, len(groups))
	for i, g := range groups {
		q[i] = fmt.Sprintf("%q", g)
	}
	return strings.Join(q, ", ")
}

// StepOptimizer takes one optimizer step of a group with its chain (the global-norm clip, when
// GradientClipNorm is set, over this group's gradients): grads must hold a gradient for each of
// the group's parameters (Backward's result; other keypaths are ignored). The group's parameters
// read through Ctx afterwards are the updated ones. A group steps at most once per TrainStep.
func (s *manualStep) StepOptimizer(group string, grads hooks.Grads) {
	s.checkGroup("StepOptimizer", group)
	if s.trace() {
		return
	}
	if s.stepped[group] {
		panic(fmt.Errorf("StepOptimizer(%q) called twice in one TrainStep: a group takes one optimizer step per TrainStep (its state advances once per step)", group))
	}
	i := s.groupIndex(group)
	grp := s.e.groups[i]
	arrays := make([]*graph.Node, len(grp.vars))
	for j, v := range grp.vars {
		kp := strings.Join(grp.keypaths[j], "/")
		gr, ok := grads[kp]
		if !ok || gr == nil {
			panic(fmt.Errorf("StepOptimizer(%q): no gradient for parameter %s: pass the Grads of Backward(f, %q)", group, kp, group))
		}
		if !gr.Shape().Equal(v.Shape()) {
			panic(fmt.Errorf("StepOptimizer(%q): the gradient of %s is %s, the parameter is %s", group, kp, gr.Shape(), v.Shape()))
		}
		arrays[j] = gr
	}
	// The group steps once per TrainStep, so its parameters are still the program's input here.
	u := s.e.groupInputs(i, s.nodes)
	u.params, u.grads = segmentNodes(grp, s.nodes, paramsInput), grp.pack(arrays)
	prog, err := optimizers.NewProgram([]*optimizers.Chain{grp.opt}, s.e.clip)
	if err != nil {
		panic(err)
	}
	ps, ss := prog.ApplyArrays([][]*graph.Node{u.params}, [][]*graph.Node{u.grads}, [][][]*graph.Node{u.state}, []optimizers.Hyper{u.hyper}, s.nodes["step"])
	for j, v := range grp.vars {
		v.SetValueGraph(grp.view(ps[0][grp.seg[j]], s.nodes, j))
	}
	s.newFlat[i], s.newState[i] = ps[0], ss[0]
	s.stepped[group] = true
}

// termsSince is the sum of the train.AddLoss terms added since the total was prev. AddLoss
// keeps the total as Add(term, total so far), so the new terms are the left operands down the
// chain from cur to prev; ok is false when the chain is not that.
func termsSince(cur, prev *graph.Node) (sum *graph.Node, ok bool) {
	if prev == nil || cur == prev {
		return cur, true
	}
	var terms []*graph.Node
	for node := cur; node != prev; node = node.Inputs()[1] {
		if node == nil || node.Type() != graph.NodeTypeAdd || len(node.Inputs()) != 2 {
			return nil, false
		}
		terms = append(terms, node.Inputs()[0])
	}
	for _, t := range terms {
		if sum == nil {
			sum = t
		} else {
			sum = graph.Add(sum, t)
		}
	}
	return sum, true
}

// checkGroup refuses a group that does not exist (in setup's trace, any name passes).
func (s *manualStep) checkGroup(verb, group string) string {
	if !s.trace() && s.groupIndex(group) < 0 {
		panic(fmt.Errorf("%s(%q): no such parameter group (groups: %v): groups are ParamGroup's names, \"default\" without it", verb, group, s.Groups()))
	}
	return group
}

func (s *manualStep) groupIndex(group string) int {
	return slices.IndexFunc(s.e.groups, func(g *paramGroup) bool { return g.name == group })
}

// groupVars lists the chosen groups' trainable variables and keypaths, in group order. In setup's
// trace it scans the context (ParamGroup decides each variable's group) for those created so far.
func (s *manualStep) groupVars(chosen map[string]bool) (vars []*context.Variable, kps []string) {
	if !s.trace() {
		for _, grp := range s.e.groups {
			if chosen[grp.name] {
				vars = append(vars, grp.vars...)
				for _, kp := range grp.keypaths {
					kps = append(kps, strings.Join(kp, "/"))
				}
			}
		}
		return vars, kps
	}
	for v := range s.e.ctx.IterVariables() {
		name := "default"
		if s.e.grouper != nil {
			name = s.e.grouper(keypath(v))
		}
		if v.Trainable && chosen[name] {
			vars = append(vars, v)
		}
	}
	slices.SortFunc(vars, func(a, b *context.Variable) int { return strings.Compare(a.ScopeAndName(), b.ScopeAndName()) })
	for _, v := range vars {
		kps = append(kps, strings.Join(keypath(v), "/"))
	}
	return vars, kps
}

// stepProgram is the one program of a manual or fused step.
func (e *Engine) stepProgram(width int, keys []string) (*program, error) {
	if e.hooks.TrainStep == nil {
		return e.trainStepProgram(width, keys)
	}
	return e.manualStepProgram(width, keys)
}

// manualStepProgram is manual mode's one program per optimizer step. Its inputs and outputs are
// the fused step's (trainStepProgram: "loss", "params/...", "opt/...", "state/..." and the stats
// as "metric/<name>"), so the fused step's driver code runs it; TrainStep's trace is its body.
func (e *Engine) manualStepProgram(width int, keys []string) (*program, error) {
	return e.memo(fmt.Sprintf("manual_step/%d/%v", width, keys), func() (*program, error) {
		sig := e.modelInputs(width, keys)
		for i := range e.groups {
			e.addStateInputs(&sig, i)
		}
		sig.add("step", "Float32", nil)
		key := e.key(compilecache.KindTrainStep, e.hookNames("TrainStep")+" (manual)", sig)
		key.Accum, key.Clip = 1, e.clip
		for _, g := range e.groups {
			key.Extra = append(key.Extra, [2]string{"chain/" + g.name, g.opt.Describe()})
		}
		return e.getProgram(key, func(g *graph.Graph, src any) outList {
			nodes, _ := e.modelNodes(g, sig)
			return e.traceManual(g, nodes, src, keys)
		})
	})
}

// traceManual calls TrainStep on the program's inputs and lists the outputs. A non-finite loss
// keeps the old parameters and optimizer state (keepIfFinite), as the fused step does; a group
// that did not step keeps them too.
func (e *Engine) traceManual(g *graph.Graph, nodes map[string]*graph.Node, src any, keys []string) outList {
	view := e.bindModel(g, nodes, src)
	e.ctx.SetTraining(g, true)
	s := &manualStep{ctx: e.ctx.Reuse(), e: e, g: g, nodes: nodes, stepped: map[string]bool{}, newFlat: map[int][]*graph.Node{}, newState: map[int][][]*graph.Node{}}
	res := e.hooks.TrainStep(view, s, batchNodes(nodes, e.route("TrainStep", keys)))
	if res.Loss == nil || res.Loss.Rank() != 0 {
		panic(fmt.Errorf("TrainStep must return StepResult.Loss as a scalar node, got %v", shapeOf(res.Loss)))
	}
	if s.stray || collectedLosses(s.ctx, g) != s.consumed {
		e.warn("TrainStep: layers collected loss terms with train.AddLoss (a regularizer's L2, for one) outside every Backward objective, so no gradient includes them: call those layers inside the objective f of Backward(f, groups...)")
	}
	var updates outList
	update := func(name func(*paramGroup, int) string, grp *paramGroup, cur []*graph.Node) { // cur nil: the group did not step
		for k := range grp.segs {
			if cur == nil {
				updates.add(name(grp, k), nodes[name(grp, k)])
			} else {
				updates.add(name(grp, k), cur[k])
			}
		}
	}
	for i, grp := range e.groups {
		update(paramsInput, grp, s.newFlat[i])
	}
	for i, grp := range e.groups {
		for si := range e.st.groups[i].opt {
			if grp.constLeaf(si) {
				continue
			}
			var cur []*graph.Node
			if st, ok := s.newState[i]; ok {
				cur = st[si]
			}
			update(stateInput(si), grp, cur)
		}
	}
	var outs outList
	outs.add(lossOut, res.Loss)
	outs.then(keepIfFinite(res.Loss, updates, nodes))
	outs.then(e.layerOutputs(g))
	for _, name := range sortedKeys(res.Stats) {
		if st := res.Stats[name]; st == nil || st.Rank() != 0 {
			panic(fmt.Errorf("TrainStep's stat %q must be a scalar node (a per-step value), got %v", name, shapeOf(st)))
		}
		outs.add(metricOut+name, res.Stats[name])
	}
	return outs
}

// traceManualShapes traces TrainStep once at setup (never compiled), after Forward's shape
// trace, so that the variables only TrainStep's code creates (a GAN's discriminator) exist and
// are initialized with the others; keys are the fields TrainStep reads of the sample batch.
func (e *Engine) traceManualShapes(width int, keys []string) error {
	return TryGraph("tracing TrainStep to create the model's variables", func() {
		g := graph.NewGraph(e.backend.Backend, "nitro_manual_shape_trace")
		defer g.Finalize()
		nodes := e.traceInputs(g, width, keys)
		view := e.bindModel(g, nodes, e.exp)
		e.ctx.SetTraining(g, true)
		// Unchecked: TrainStep creates its own variables and reuses those Forward's trace created.
		s := &manualStep{ctx: e.ctx.Checked(false), e: e, g: g}
		res := e.hooks.TrainStep(view, s, batchNodes(nodes, keys))
		if res.Loss == nil || res.Loss.Rank() != 0 {
			panic(fmt.Errorf("TrainStep must return StepResult.Loss as a scalar node, got %v", shapeOf(res.Loss)))
		}
	})
}
