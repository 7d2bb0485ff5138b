package export

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/tensorfile"
)

// exportResult is what the capture produced.
type exportResult struct {
	programs map[int]exportbundle.Program
	outputs  []exportbundle.TensorSpec
	weights  []exportbundle.Weight
}

// captureExport reads the weights and Device values back to the host, then, on a capturing
// backend: traces Forward once to learn what it reads (variables, Device fields) and what it
// returns, compiles one program per batch size, and runs the first once on example inputs.
func captureExport(m *core.ModelView, p *exportPlan) (*exportResult, error) {
	cands, err := readWeights(m)
	if err != nil {
		return nil, err
	}
	fz, err := freezeDevice(m)
	if err != nil {
		return nil, err
	}
	if err := checkHostIndependent(m, p, fz.values); err != nil {
		return nil, err
	}
	res := &exportResult{programs: map[int]exportbundle.Program{}}
	progs, err := exportbundle.Capture(p.plugin, func(be backends.Backend) error {
		probe, err := probeExport(m, be, p, fz, cands)
		if err != nil {
			return err
		}
		var used []exportWeight
		for _, c := range cands {
			if probe.vars[c.v] {
				used = append(used, c)
				res.weights = append(res.weights, exportbundle.Weight{Name: c.name, Tensor: c.t})
			}
		}
		for i, b := range p.batches {
			outs, err := compileExport(m, be, p, probe, fz, used, b, i == 0)
			if err != nil {
				return err
			}
			if i == 0 {
				res.outputs = outs
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(progs) != len(p.batches) {
		return nil, fmt.Errorf("internal: the capture recorded %d programs for batch sizes %v", len(progs), p.batches)
	}
	for i, b := range p.batches {
		res.programs[b] = exportbundle.Program{Format: progs[i].Format, Code: progs[i].Code}
	}
	return res, nil
}

// checkHostIndependent traces the export's Forward at every batch size from the experiment as
// it is and from its Host-zeroed view, and refuses a difference naming the Host fields: the
// export program is built from the zeroed view, so a Host read there (for instance one that
// matters only at a batch size the training check never saw) would ship the zero value.
func checkHostIndependent(m *core.ModelView, p *exportPlan, frozen map[string]*tensors.Tensor) error {
	for _, b := range p.batches {
		err := m.CheckHostIndependent(b, frozen, func(g *graph.Graph) map[string]*graph.Node {
			return p.batch(p.inputParams(g, b))
		})
		if err != nil {
			return fmt.Errorf("export at batch size %d: %w", b, err)
		}
	}
	return nil
}

// frozenDevice is the Device fields' values on the host, in declaration order (the order their
// constants enter a program, which keeps the program text deterministic).
type frozenDevice struct {
	names  []string
	values map[string]*tensors.Tensor
}

// consts makes each Device field a node of g: read[name] false makes a zero of its shape (so no
// array of its value is emitted), else a constant of its value (read nil: every field).
func (fz *frozenDevice) consts(g *graph.Graph, read map[string]bool) map[string]*graph.Node {
	out := make(map[string]*graph.Node, len(fz.names))
	for _, name := range fz.names {
		if read == nil || read[name] {
			out[name] = graph.ConstTensor(g, fz.values[name])
		} else {
			out[name] = graph.Zeros(g, fz.values[name].Shape())
		}
	}
	return out
}

// exportProbe is what one trace of Forward at the first batch size says: the variables it reads
// (they become the weights), the Device fields the shipped outputs depend on (they become
// constants), and each shipped output's source.
type exportProbe struct {
	vars    map[*context.Variable]bool
	devRead map[string]bool
	sources []exportSource
}

type exportSource struct {
	spec   ExportOutput // From resolved (never empty)
	output string       // a Forward output, or "" for an echo
	input  int          // the echoed input's index, when output is ""
}

// probeExport traces Forward once, never compiled, to resolve the outputs and learn what the
// program reads.
func probeExport(m *core.ModelView, be backends.Backend, p *exportPlan, fz *frozenDevice, cands []exportWeight) (probe *exportProbe, err error) {
	b := p.batches[0]
	err = tryGraph("tracing Forward for export", func() {
		g := graph.NewGraph(be, "nitro_export_probe")
		defer g.Finalize()
		wire := p.inputParams(g, b)
		consts := fz.consts(g, nil)
		out, err := m.Forward(g, consts, p.batch(wire), b)
		if err != nil {
			panic(err)
		}
		srcs, err := resolveOutputs(p, out)
		if err != nil {
			panic(err)
		}
		probe = &exportProbe{vars: map[*context.Variable]bool{}, devRead: map[string]bool{}, sources: srcs}
		var roots []*graph.Node
		for _, s := range srcs {
			if s.output != "" {
				roots = append(roots, out[s.output])
			}
		}
		reached := reachable(roots)
		for name, c := range consts {
			probe.devRead[name] = reached[c]
		}
		for _, c := range cands {
			probe.vars[c.v] = c.v.InUseByGraph(g)
		}
	})
	return probe, err
}

// resolveOutputs maps each shipped output to its source: a Forward output or an echoed input.
func resolveOutputs(p *exportPlan, out core.Outputs) ([]exportSource, error) {
	specs := p.outputs
	if specs == nil {
		for _, name := range sortedKeys(out) {
			if p.isInput(name) {
				return nil, fmt.Errorf("Forward output %q has the name of a declared input: list ExportSpec.Outputs, giving it another name (Name: \"...\", From: %q)", name, name)
			}
			specs = append(specs, ExportOutput{Name: name})
		}
	}
	srcs := make([]exportSource, len(specs))
	for i, o := range specs {
		what := fmt.Sprintf("ExportSpec.Outputs[%d] %q", i, o.Name)
		from := o.From
		if from == "" {
			from = o.Name
		}
		_, isOut := out[from]
		in := slices.IndexFunc(p.inputs, func(x exportInput) bool { return x.name == from })
		switch {
		case isOut && in >= 0 && o.From != "":
			return nil, fmt.Errorf("%s: From %q is both a Forward output and a declared input: it cannot say which to return; rename the output in Forward", what, from)
		case isOut:
			o.From = from
			srcs[i] = exportSource{spec: o, output: from}
		case in >= 0:
			o.From = from
			srcs[i] = exportSource{spec: o, input: in}
		case o.From != "":
			return nil, fmt.Errorf("%s: From %q is neither a Forward output (Forward returns %v) nor a declared input (%v)", what, from, sortedKeys(out), inputNames(p))
		default:
			return nil, fmt.Errorf("%s: Forward returns no output %q (it returns %v): name one of them, or set From to rename one", what, from, sortedKeys(out))
		}
	}
	return srcs, nil
}

// reachable is the set of nodes the roots depend on.
func reachable(roots []*graph.Node) map[*graph.Node]bool {
	seen := map[*graph.Node]bool{}
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		nd := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if nd == nil || seen[nd] {
			continue
		}
		seen[nd] = true
		stack = append(stack, nd.Inputs()...)
	}
	return seen
}

// compileExport builds and compiles the program for batch size b: its parameters are the inputs,
// then the weights, in that order and nothing else; a Device field Forward reads is a constant
// holding its frozen value, one it does not read is a dead zero of its shape (so no array of its
// value is emitted). With run set it also runs the program once on zero inputs and returns the
// output specs, checked against the trace and the ExportSpec's assertions.
func compileExport(m *core.ModelView, be backends.Backend, p *exportPlan, probe *exportProbe, fz *frozenDevice, used []exportWeight, b int, run bool) (specs []exportbundle.TensorSpec, err error) {
	err = tryGraph(fmt.Sprintf("compiling the export program for batch size %d", b), func() {
		g := graph.NewGraph(be, fmt.Sprintf("nitro_export_b%d", b))
		defer g.Finalize()
		wire := p.inputParams(g, b)
		inNodes := make([]*graph.Node, len(p.inputs))
		for i, in := range p.inputs {
			inNodes[i] = wire[in.name]
		}
		for _, w := range used {
			w.v.ValueGraph(g) // the weights' parameters, after the inputs, in weight order
		}
		out, err := m.Forward(g, fz.consts(g, probe.devRead), p.batch(wire), b)
		if err != nil {
			panic(err)
		}
		if got, want := g.NumParameters(), len(p.inputs)+len(used); got != want {
			panic(fmt.Errorf("the program has %d arguments, expected %d (%d inputs, %d weights): Forward read a variable at batch size %d that it did not read at batch size %d; read every variable unconditionally", got, want, len(p.inputs), len(used), b, p.batches[0]))
		}
		outs := make([]*graph.Node, len(probe.sources))
		for i, s := range probe.sources {
			if s.output != "" {
				outs[i] = out[s.output]
				if outs[i] == nil {
					panic(fmt.Errorf("Forward returned no %q at batch size %d", s.output, b))
				}
			} else {
				outs[i] = inNodes[s.input]
			}
		}
		g.Compile(outs...)
		if !run {
			return
		}
		for i, s := range probe.sources {
			spec, err := outputSpec(s.spec, outs[i].Shape(), b)
			if err != nil {
				panic(err)
			}
			specs = append(specs, spec)
		}
		if err := runExportOnce(g, p, used, specs, b); err != nil {
			panic(err)
		}
	})
	return specs, err
}

// outputSpec is an output's bundle spec from its traced shape, checked against the assertions.
func outputSpec(o ExportOutput, s shapes.Shape, b int) (exportbundle.TensorSpec, error) {
	what := fmt.Sprintf("ExportSpec.Outputs %q (from %q)", o.Name, o.From)
	dt := tensorfile.DTypeOf(s.DType)
	ok := dt.Valid()
	if !ok {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s: dtype %s cannot be held in a bundle", what, s.DType)
	}
	dims := s.Dimensions
	if len(dims) == 0 || dims[0] != b {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s has shape %v at batch size %d: the batch must lead (batch-first rule)", what, dims, b)
	}
	if o.DType != "" && o.DType != dt {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s: the program returns %s, ExportOutput.DType asserts %s", what, dt, o.DType)
	}
	if o.AxisLetters != "" && len(o.AxisLetters) != len(dims)-1 {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s: AxisLetters %q names %d axes, the output has %d besides the batch", what, o.AxisLetters, len(o.AxisLetters), len(dims)-1)
	}
	shape := append([]int{-1}, dims[1:]...)
	if len(o.Shape) > 0 && !slices.Equal(o.Shape, shape) {
		return exportbundle.TensorSpec{}, fmt.Errorf("%s: the program returns shape %v, ExportOutput.Shape asserts %v", what, shape, o.Shape)
	}
	return exportbundle.TensorSpec{Name: o.Name, DType: dt, Shape: shape, BatchAxis: 0, AxisLetters: o.AxisLetters}, nil
}

// runExportOnce runs the compiled program on zero inputs and the weights, and checks that what
// it returns is what the specs say: the verification the runner's own checks will rely on.
func runExportOnce(g *graph.Graph, p *exportPlan, used []exportWeight, specs []exportbundle.TensorSpec, b int) error {
	var args []any
	var owned []*tensors.Tensor
	defer func() {
		for _, t := range owned {
			t.FinalizeAll()
		}
	}()
	for _, in := range p.inputs {
		t := tensors.FromShape(shapes.Make(in.dtype, append([]int{b}, in.row...)...))
		owned = append(owned, t)
		args = append(args, t)
	}
	for _, w := range used {
		t, err := gomlxTensor(w.t, w.v.Shape())
		if err != nil {
			return fmt.Errorf("weight %s: %w", w.name, err)
		}
		owned = append(owned, t)
		args = append(args, t)
	}
	outs := g.Run(args...)
	owned = append(owned, outs...)
	if len(outs) != len(specs) {
		return fmt.Errorf("the program returned %d outputs, %d expected", len(outs), len(specs))
	}
	for i, t := range outs {
		want := specs[i].ShapeAt(b)
		if dt := tensorfile.DTypeOf(t.DType()); dt != specs[i].DType || !slices.Equal(t.Shape().Dimensions, want) {
			return fmt.Errorf("output %q: the program returned %s%v, the trace said %s%v", specs[i].Name, dt, t.Shape().Dimensions, specs[i].DType, want)
		}
	}
	return nil
}
