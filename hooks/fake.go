package hooks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// FakeStep is an in-memory ManualStep for testing a TrainStep without the engine: it traces
// TrainStep's objectives on a context of the test's and records what TrainStep asked for.
// Backward differentiates the trainable variables of the named groups found in Context (Group
// assigns each keypath its group; nil puts every variable in "default"); StepOptimizer only
// records the step. Nothing is compiled or run unless the test does it.
type FakeStep struct {
	Context *context.Context
	Group   func(keypath string) string
	StepAt  *graph.Node // what Step returns

	Backwards [][]string       // the groups of each Backward call, in order
	Stepped   map[string]Grads // the grads StepOptimizer received, per group
}

var _ ManualStep = (*FakeStep)(nil)

func (f *FakeStep) Ctx() *context.Context { return f.Context }
func (f *FakeStep) Step() *graph.Node     { return f.StepAt }

// Groups lists the groups of Context's trainable variables, sorted.
func (f *FakeStep) Groups() []string {
	var names []string
	for _, kp := range f.keypaths(nil) {
		if g := f.groupOf(kp); !slices.Contains(names, g) {
			names = append(names, g)
		}
	}
	slices.Sort(names)
	return names
}

// Params are the group's variables at their value in g, the graph StepAt belongs to.
func (f *FakeStep) Params(group string) map[string]*graph.Node {
	out := map[string]*graph.Node{}
	vars := f.vars(map[string]bool{group: true})
	for i, kp := range f.keypaths(vars) {
		out[kp] = vars[i].ValueGraph(f.StepAt.Graph())
	}
	return out
}

// OptState is empty: a fake has no optimizer.
func (f *FakeStep) OptState(string) map[string]map[string]*graph.Node { return nil }

func (f *FakeStep) Backward(fn func(ctx *context.Context) *graph.Node, groups ...string) (*graph.Node, Grads) {
	f.Backwards = append(f.Backwards, groups)
	loss := fn(f.Context)
	if loss == nil || loss.Rank() != 0 {
		panic(fmt.Errorf("Backward(%v): the objective must return a scalar loss", groups))
	}
	chosen := map[string]bool{}
	for _, g := range groups {
		chosen[g] = true
	}
	vars := f.vars(chosen)
	out := Grads{}
	if len(vars) == 0 {
		return loss, out
	}
	leaves := make([]*graph.Node, len(vars))
	for i, v := range vars {
		leaves[i] = v.ValueGraph(loss.Graph())
	}
	kps := f.keypaths(vars)
	for i, g := range graph.Gradient(loss, leaves...) {
		out[kps[i]] = g
	}
	return loss, out
}

func (f *FakeStep) StepOptimizer(group string, grads Grads) {
	if f.Stepped == nil {
		f.Stepped = map[string]Grads{}
	}
	if _, again := f.Stepped[group]; again {
		panic(fmt.Errorf("StepOptimizer(%q): a group steps at most once per TrainStep", group))
	}
	f.Stepped[group] = grads
}

// vars lists Context's trainable variables of the chosen groups (all with chosen nil), sorted by
// scope and name.
func (f *FakeStep) vars(chosen map[string]bool) []*context.Variable {
	var vars []*context.Variable
	for v := range f.Context.IterVariables() {
		if v.Trainable && (chosen == nil || chosen[f.groupOf(keypathOf(v))]) {
			vars = append(vars, v)
		}
	}
	slices.SortFunc(vars, func(a, b *context.Variable) int { return strings.Compare(a.ScopeAndName(), b.ScopeAndName()) })
	return vars
}

// keypaths names vars as keypaths; with vars nil, every trainable variable's.
func (f *FakeStep) keypaths(vars []*context.Variable) []string {
	if vars == nil {
		vars = f.vars(nil)
	}
	kps := make([]string, len(vars))
	for i, v := range vars {
		kps[i] = keypathOf(v)
	}
	return kps
}

func (f *FakeStep) groupOf(kp string) string {
	if f.Group == nil {
		return "default"
	}
	return f.Group(kp)
}

// keypathOf is a variable's scope parts and name joined by "/" ("disc/dense_0/weights").
func keypathOf(v *context.Variable) string {
	var parts []string
	for _, p := range strings.Split(v.Scope(), context.ScopeSeparator) {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(append(parts, v.Name()), "/")
}
