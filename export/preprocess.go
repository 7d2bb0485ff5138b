package export

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/core"
)

// inputParams creates the program's input parameters at batch size b, in argument order: the
// batch fields, or with a Preprocess the wire inputs.
func (p *exportPlan) inputParams(g *graph.Graph, b int) map[string]*graph.Node {
	prefix := "batch/"
	if p.pre != nil {
		prefix = "wire/"
	}
	nodes := make(map[string]*graph.Node, len(p.inputs))
	for _, in := range p.inputs {
		nodes[in.name] = graph.Parameter(g, prefix+in.name, shapes.Make(in.dtype, append([]int{b}, in.row...)...))
	}
	return nodes
}

// batch is what the exported program passes to Forward: the input parameters as they are, or
// what the Preprocess makes of them (the view routes it to the fields Forward declares).
func (p *exportPlan) batch(wire map[string]*graph.Node) map[string]*graph.Node {
	if p.pre == nil {
		return wire
	}
	return callPreprocess(p.pre, wire)
}

// callPreprocess calls the Preprocess on a copy of wire, naming it in a panic that escapes it.
func callPreprocess(pre func(map[string]*graph.Node) map[string]*graph.Node, wire map[string]*graph.Node) map[string]*graph.Node {
	defer func() {
		if r := recover(); r != nil {
			panic(panicError("ExportSpec.Preprocess", r))
		}
	}()
	return pre(maps.Clone(wire))
}

// checkPreprocess calls the Preprocess eagerly, before anything is captured: once, on zero wire
// inputs at the first batch size, on the Nitro's own backend. It must return every batch field
// Forward requires and none Forward does not declare, each batch-first with the dtype and
// per-row shape of the data contract; an error names the field.
func checkPreprocess(m *core.ModelView, p *exportPlan) (err error) {
	if p.pre == nil {
		return nil
	}
	b := p.batches[0]
	what := fmt.Sprintf("ExportSpec.Preprocess (called eagerly on zero wire inputs at batch size %d)", b)
	var names []string
	var owned, results []*tensors.Tensor
	defer func() {
		for _, t := range owned {
			t.FinalizeAll()
		}
	}()
	err = tryGraph(what, func() {
		be, _, _ := m.Backend()
		g := graph.NewGraph(be, "nitro_export_preprocess")
		defer g.Finalize()
		out := callPreprocess(p.pre, p.inputParams(g, b))
		if err := checkPreprocessFields(m, out); err != nil {
			panic(err)
		}
		names = sortedKeys(out)
		nodes := make([]*graph.Node, len(names))
		for i, k := range names {
			nodes[i] = out[k]
		}
		g.Compile(nodes...)
		args := make([]any, len(p.inputs))
		for i, in := range p.inputs {
			t := tensors.FromShape(shapes.Make(in.dtype, append([]int{b}, in.row...)...))
			owned = append(owned, t)
			args[i] = t
		}
		results = g.Run(args...)
		owned = append(owned, results...)
	})
	if err != nil {
		return err
	}
	for i, name := range names {
		t := results[i]
		dims := t.Shape().Dimensions
		if len(dims) == 0 || dims[0] != b {
			return fmt.Errorf("%s: batch field %q has shape %v for %d rows of wire input: the batch must lead (batch-first rule), one row per wire row", what, name, dims, b)
		}
		fs, ok := m.FieldSpec(name)
		if ok && (t.DType() != fs.DType || !slices.Equal(dims[1:], fs.Shape)) {
			return fmt.Errorf("%s: batch field %q is %s%v per row, and Forward's data contract (%s) has it as %s%v per row", what, name, t.DType(), dims[1:], contractName(m), fs.DType, fs.Shape)
		}
	}
	return nil
}

// checkPreprocessFields checks the names of what the Preprocess returned against Forward's.
func checkPreprocessFields(m *core.ModelView, out map[string]*graph.Node) error {
	fields, whole := m.ForwardFields()
	if len(out) == 0 {
		return errors.New("it returned no batch field: return the fields Forward reads, by name")
	}
	for _, k := range sortedKeys(out) {
		if out[k] == nil {
			return fmt.Errorf("batch field %q is nil", k)
		}
		if !whole && !slices.ContainsFunc(fields, func(f core.ForwardField) bool { return f.Name == k }) {
			return fmt.Errorf("it returned batch field %q, which Forward does not declare (it declares %v)", k, fieldNames(fields))
		}
	}
	if !whole {
		for _, f := range fields {
			if _, ok := out[f.Name]; !ok && !f.Optional {
				return fmt.Errorf("it returned %v, without batch field %q, which Forward requires", sortedKeys(out), f.Name)
			}
		}
	}
	return nil
}

// contractName says where the Nitro's field dtypes and shapes came from.
func contractName(m *core.ModelView) string {
	if m.FromInputSpecs() {
		return "WithInputSpecs"
	}
	return "the data"
}
