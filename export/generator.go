package export

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/tensorfile"
)

// StepExporter is the optional experiment method ExportGenerator reads a text generator's decode
// step from. It returns:
//   - ctx, a context holding the view's weights (each under the scope and name its checkpoint
//     name gives, "param/block_0/ln_1/gain" at scope /block_0/ln_1, name gain) and the step's
//     state (every other variable: a key/value cache), each state variable's value zero;
//   - step, which reads them, takes the token [1, 1] int32 and its position (a scalar int32),
//     returns the next token's logits [1, 256] float32 and sets each state variable's next value
//     (SetValueGraph); what it reads of the experiment is Go values, no Device field;
//   - window, the positions the step attends over (the longest prompt).
//
// The types are GoMLX's and core's only, so an experiment implements it without importing
// export or exportbundle.
type StepExporter interface {
	ExportStep(m *core.ModelView) (ctx *context.Context, step func(ctx *context.Context, token, pos *graph.Node) *graph.Node, window int, err error)
}

// The generator bundle's tensor names: the state keeps its variable's scope and name.
const (
	GeneratorToken    = "token"
	GeneratorPosition = "position"
	GeneratorLogits   = "logits"
	generatorState    = "state"
)

// ExportGenerator writes n's decode step (the experiment's StepExporter) as a text generator's
// bundle at dir: one program at batch size 1 taking the token, its position and the state, then
// the weights the step reads; returning the logits and the next state; and a manifest whose
// generator entry names them (exportbundle.GeneratorSpec). nitro serve answers a prompt with it.
//
// Of spec it reads Name (required), Provenance, ProvenanceRoot and Writer; a contract field or
// batch sizes other than {1} are refused by name, since a decode step's contract is fixed. Like
// Export it reads the model only through the view, writes atomically, and never panics.
func ExportGenerator(n *core.Nitro, dir string, spec ExportSpec) (*exportbundle.Bundle, error) {
	if n == nil {
		return nil, errors.New("export.ExportGenerator: nil *Nitro")
	}
	var b *exportbundle.Bundle
	err := n.ViewModel("Export", func(m *core.ModelView) (err error) {
		b, err = exportGenerator(m, dir, spec)
		return err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func exportGenerator(m *core.ModelView, dir string, spec ExportSpec) (*exportbundle.Bundle, error) {
	fail := func(err error) (*exportbundle.Bundle, error) { return nil, fmt.Errorf("export: %w", err) }
	se, ok := m.Experiment().(StepExporter)
	if !ok {
		return fail(fmt.Errorf("experiment %s has no decode step to export as a text generator (an ExportStep method, export.StepExporter)", m.TypeName()))
	}
	if setsContract(spec) {
		return fail(errors.New("ExportSpec: a text generator's inputs and outputs are its decode step's (token, position, state; logits, state): leave Inputs, WireInputs, Preprocess, Outputs, Postprocess, ClientInputs and ClientOutputs empty"))
	}
	if len(spec.BatchSizes) > 0 && !slices.Equal(spec.BatchSizes, []int{1}) {
		return fail(fmt.Errorf("ExportSpec.BatchSizes %v: a text generator's decode step runs one sequence, at batch size 1: leave it empty", spec.BatchSizes))
	}
	if err := exportbundle.CheckName("ExportSpec.Name", spec.Name); err != nil {
		return fail(err)
	}
	if err := exportbundle.CheckSpec(exportbundle.Spec{Name: spec.Name, BatchSizes: []int{1}, Provenance: spec.Provenance, Inputs: stepInputs()}); err != nil {
		return fail(fmt.Errorf("the bundle would be invalid: %w", err))
	}
	writer := spec.Writer
	if writer == nil {
		writer = exportbundle.Files{}
		if err := checkExportDir(dir); err != nil {
			return fail(err)
		}
	}
	plugin, err := exportPlugin(m)
	if err != nil {
		return fail(err)
	}
	prov, extra, err := exportProvenance(m, spec, &exportPlan{plugin: plugin})
	if err != nil {
		return fail(err)
	}
	var b *exportbundle.Bundle
	err = m.WithCompiling(func() error {
		ctx, step, window, err := callExportStep(se, m)
		if err != nil {
			return err
		}
		b, err = captureStep(m, plugin, ctx, step, window)
		if err != nil {
			return err
		}
		b.Name, b.Provenance = spec.Name, prov
		if len(extra) > 0 {
			b.Extra = extra
		}
		return writer.WriteBundle(dir, b)
	})
	if err != nil {
		return fail(err)
	}
	return b, nil
}

func callExportStep(se StepExporter, m *core.ModelView) (ctx *context.Context, step stepFunc, window int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError("ExportStep", r)
		}
	}()
	ctx, step, window, err = se.ExportStep(m)
	switch {
	case err != nil:
		return nil, nil, 0, fmt.Errorf("ExportStep: %w", err)
	case ctx == nil || step == nil:
		return nil, nil, 0, errors.New("ExportStep returned no context or no step")
	case window < 1:
		return nil, nil, 0, fmt.Errorf("ExportStep: window %d: a decode step attends over at least 1 position", window)
	}
	return ctx, step, window, nil
}

// stepVar is one variable of the step's context: a weight (named as its checkpoint names it) or
// state (named "state" + its scope and name).
type stepVar struct {
	v      *context.Variable
	name   string
	weight bool
	t      exportbundle.Tensor // a weight's value, as the view holds it
}

// stepVars sorts the context's variables into weights (those the view names) and state.
func stepVars(m *core.ModelView, ctx *context.Context) ([]stepVar, error) {
	cands, err := readWeights(m)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]exportWeight, len(cands))
	for _, c := range cands {
		byName[c.name] = c
	}
	var out []stepVar
	var bad error
	ctx.EnumerateVariables(func(v *context.Variable) {
		key := context.JoinScope(v.Scope(), v.Name())
		for _, prefix := range []string{"param", "state"} {
			if c, ok := byName[prefix+key]; ok {
				if !slices.Equal(c.t.Shape, v.Shape().Dimensions) || c.t.DType != tensorfile.DTypeOf(v.DType()) {
					bad = errors.Join(bad, fmt.Errorf("ExportStep's variable %s is %s, the model's weight %s is %s%v", key, v.Shape(), c.name, c.t.DType, c.t.Shape))
				}
				out = append(out, stepVar{v: v, name: c.name, weight: true, t: c.t})
				return
			}
		}
		out = append(out, stepVar{v: v, name: generatorState + key})
	})
	return out, bad
}

// stepFunc is the decode step an experiment's ExportStep returns.
type stepFunc = func(ctx *context.Context, token, pos *graph.Node) *graph.Node

// captureStep traces the step once to learn which weights it reads and that it sets every state
// variable, then compiles it on a capturing backend with its parameters in the bundle's order:
// token, position, state, weights.
func captureStep(m *core.ModelView, plugin string, ctx *context.Context, step stepFunc, window int) (*exportbundle.Bundle, error) {
	vars, err := stepVars(m, ctx)
	if err != nil {
		return nil, err
	}
	b := &exportbundle.Bundle{Programs: map[int]exportbundle.Program{}}
	var state []stepVar
	progs, err := exportbundle.Capture(plugin, func(be backends.Backend) error {
		var weights []stepVar
		var err error
		state, weights, err = probeStep(be, ctx, step, vars)
		if err != nil {
			return err
		}
		return traceStep(be, "nitro_export_step", func(g *graph.Graph, token, pos *graph.Node) {
			compileStep(g, ctx, step, token, pos, state, weights, b)
		})
	})
	if err != nil {
		return nil, err
	}
	if len(progs) != 1 {
		return nil, fmt.Errorf("internal: the capture recorded %d programs for the decode step, want 1", len(progs))
	}
	b.Programs[1] = exportbundle.Program{Format: progs[0].Format, Code: progs[0].Code}
	b.Generator = &exportbundle.GeneratorSpec{Context: window, Vocab: exportbundle.GeneratorVocab,
		Token: GeneratorToken, Position: GeneratorPosition, Logits: GeneratorLogits}
	for _, sv := range state {
		b.Generator.State = append(b.Generator.State, sv.name)
	}
	return b, nil
}

// traceStep builds a graph on be with the step's token and position parameters, the first two,
// and hands it to build; a panic in build (GoMLX's way of failing) is an error.
func traceStep(be backends.Backend, name string, build func(g *graph.Graph, token, pos *graph.Node)) error {
	return tryGraph("tracing ExportStep's step", func() {
		g := graph.NewGraph(be, name)
		defer g.Finalize()
		token := graph.Parameter(g, GeneratorToken, shapes.Make(dtypes.Int32, 1, 1))
		pos := graph.Parameter(g, GeneratorPosition, shapes.Make(dtypes.Int32, 1))
		build(g, token, pos)
	})
}

// probeStep traces the step, never compiled: the variables it reads are split into state (in
// the order the context holds them) and weights, and a state variable it reads but does not
// set, or logits of another shape, are refused.
func probeStep(be backends.Backend, ctx *context.Context, step stepFunc, vars []stepVar) (state, weights []stepVar, err error) {
	err = traceStep(be, "nitro_export_step_probe", func(g *graph.Graph, token, pos *graph.Node) {
		logits := step(ctx.Reuse(), token, graph.Reshape(pos))
		if logits == nil || logits.DType() != dtypes.Float32 || !slices.Equal(logits.Shape().Dimensions, []int{1, exportbundle.GeneratorVocab}) {
			panic(fmt.Errorf("the step returned logits %v, want float32 [1, %d]", shapeOf(logits), exportbundle.GeneratorVocab))
		}
		for _, sv := range vars {
			switch {
			case !sv.v.InUseByGraph(g):
			case sv.weight:
				weights = append(weights, sv)
			case !sv.v.ChangedInGraph(g):
				panic(fmt.Errorf("variable %s is no weight of the model and the step does not set it: state must be set for the next step (SetValueGraph)", sv.name))
			default:
				state = append(state, sv)
			}
		}
	})
	return state, weights, err
}

// compileStep builds the step with its parameters in the bundle's order, compiles it (the
// capture records the program), and fills b's inputs, outputs and weights to match.
func compileStep(g *graph.Graph, ctx *context.Context, step stepFunc, token, pos *graph.Node, state, weights []stepVar, b *exportbundle.Bundle) {
	for _, sv := range append(slices.Clone(state), weights...) {
		sv.v.ValueGraph(g) // the parameters after token and position, in the bundle's order
	}
	logits := step(ctx.Reuse(), token, graph.Reshape(pos))
	if got, want := g.NumParameters(), 2+len(state)+len(weights); got != want {
		panic(fmt.Errorf("the step's program has %d arguments, expected %d: it read a variable it did not read when traced before; read every variable unconditionally", got, want))
	}
	outs := []*graph.Node{logits}
	b.Inputs = stepInputs()
	b.Outputs = []exportbundle.TensorSpec{{Name: GeneratorLogits, DType: tensorfile.F32, Shape: []int{-1, exportbundle.GeneratorVocab}}}
	for _, sv := range state {
		s := sv.v.Shape()
		if len(s.Dimensions) == 0 || s.Dimensions[0] != 1 {
			panic(fmt.Errorf("state %s has shape %s: its axis 0 is the batch, 1 (the batch-first rule)", sv.name, s))
		}
		spec := exportbundle.TensorSpec{Name: sv.name, DType: tensorfile.DTypeOf(s.DType), Shape: append([]int{-1}, s.Dimensions[1:]...)}
		b.Inputs = append(b.Inputs, spec)
		b.Outputs = append(b.Outputs, spec)
		outs = append(outs, sv.v.ValueGraph(g))
	}
	for _, sv := range weights {
		b.Weights = append(b.Weights, exportbundle.Weight{Name: sv.name, Tensor: sv.t})
	}
	g.Compile(outs...)
}

// stepInputs are the step's inputs before its state: the token and its position.
func stepInputs() []exportbundle.TensorSpec {
	return []exportbundle.TensorSpec{
		{Name: GeneratorToken, DType: tensorfile.I32, Shape: []int{-1, 1}},
		{Name: GeneratorPosition, DType: tensorfile.I32, Shape: []int{-1}},
	}
}

func shapeOf(n *graph.Node) any {
	if n == nil {
		return "none"
	}
	return n.Shape()
}
