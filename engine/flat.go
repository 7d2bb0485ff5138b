package engine

// The flat layout: a parameter group's parameters, their gradients (and the accumulator's sums)
// and each of its chain's state leaves are one device buffer per group, of the group's one dtype
// and shape [size]. Array j of the group is elements [offsets[j], offsets[j]+size_j) of it,
// row-major, in the group's variable order, which is its optimizers.Layout's order. So the
// optimizer program takes and returns G buffers per kind whatever the array count, and its
// compile and run stop growing with it.
//
// The model still reads its variables through the context. In every program that traces a hook,
// the group's flat buffer is one input ("params/<group>"), and each trainable variable is bound,
// for that graph only, to its view: a slice of the buffer reshaped to the variable's shape (see
// bindParams). The slice's start is an input too, one Int32 scalar per array placed once at setup
// ("offset/<group>/<keypath>"), not a constant: XLA fuses a slice into the kernels that read it,
// and with the offset baked in every array's kernels differ, so none is shared and the compile
// grows with the array count (the gradient program at 60 arrays took 5.9 s against 0.95 s per
// array; with the offsets as inputs, 0.46 s). The program still takes a buffer per array, as it
// did before, but a scalar that never changes and is never donated. A backend without dynamic
// slices (GoMLX's pure-Go one, which compiles no kernels) takes static slices and no offsets. The gradient program differentiates the loss with respect to the views and packs
// the gradients into one flat gradient per group, in the same order (packArrays). Layer state
// (batch-norm statistics, the RNG state) is not a parameter and stays one buffer per variable:
// its variables create their own inputs, as before.
//
// On the host, nothing changes: a record, Parameters, SetParameters and the model view name one
// tensor per array, cut out of (or patched into) the flat buffer by the same offsets.

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// paramsInput, gradsInput and accInput name a group's flat program inputs, offsetInput array j's
// offset in them.
func paramsInput(g *paramGroup) string { return "params/" + g.name }
func (g *paramGroup) offsetInput(j int) string {
	return "offset/" + g.name + "/" + strings.Join(g.keypaths[j], "/")
}
func gradsInput(g *paramGroup) string { return "grads/" + g.name }
func accInput(g *paramGroup) string   { return "acc/" + g.name }

// flatShape is a group's buffer shape: [size] of its dtype.
func (g *paramGroup) flatShape() shapes.Shape { return shapes.Make(dtypeOf(g.dtype), g.size) }

// view is array j of a group's flat node: its elements, in its shape; nodes holds the program's
// offset inputs.
func (g *paramGroup) view(flat *graph.Node, nodes map[string]*graph.Node, j int) *graph.Node {
	size := g.vars[j].Shape().Size()
	var part *graph.Node
	if at, ok := nodes[g.offsetInput(j)]; ok {
		part = graph.DynamicSlice(flat, []*graph.Node{at}, []int{size})
	} else {
		part = graph.Slice(flat, graph.AxisRange(g.offsets[j], g.offsets[j]+size))
	}
	return graph.Reshape(part, g.vars[j].Shape().Dimensions...)
}

// addOffsetInputs adds the group's offset scalars to a signature (none without dynamic slices).
func (g *paramGroup) addOffsetInputs(sig *signature) {
	for j := range g.at {
		sig.add(g.offsetInput(j), "Int32", nil)
	}
}

// offsetArgs are the group's offset scalars as program inputs: placed at setup, never donated.
func (e *Engine) offsetArgs(g *paramGroup) []arg {
	args := make([]arg, len(g.at))
	for j, t := range g.at {
		args[j] = arg{t: t, counter: &e.uploads.Offsets}
	}
	return args
}

// placeOffsets uploads the group's offsets, one Int32 scalar per array, on a backend with
// dynamic slices.
func (e *Engine) placeOffsets(g *paramGroup) error {
	if !e.backend.Backend.Capabilities().Operations[backends.OpTypeDynamicSlice] {
		return nil
	}
	for j := range g.vars {
		t, err := e.upload(tensors.FromScalar(int32(g.offsets[j])), &e.uploads.Offsets)
		if err != nil {
			return fmt.Errorf("group %q: offset of %s: %w", g.name, strings.Join(g.keypaths[j], "/"), err)
		}
		g.at = append(g.at, t)
	}
	return nil
}

// pack lays a group's arrays (in its order, each in its own shape) out end to end as its flat
// node: the inverse of view. nodes holds the program's offset inputs, when it has them.
//
// XLA fuses a Concatenate with the reshapes of its operands into one loop that picks, element by
// element, the operand an element comes from: cheap for small arrays, and on CPU about 5x the
// whole gradient program for a model of 2048-wide layers. So an array of packRun elements or more
// is written in place into the buffer (DynamicUpdateSlice at its offset input), and only runs of
// smaller neighbours are concatenated first, each run written as one. Without offset inputs (a
// backend without dynamic slices) it is one Concatenate.
func (g *paramGroup) pack(arrays []*graph.Node, nodes map[string]*graph.Node) *graph.Node {
	if _, ok := nodes[g.offsetInput(0)]; !ok {
		return packArrays(arrays)
	}
	var out *graph.Node
	for j := 0; j < len(arrays); {
		k := j + 1
		if arrays[j].Shape().Size() < packRun {
			for k < len(arrays) && arrays[k].Shape().Size() < packRun {
				k++
			}
		}
		run := packArrays(arrays[j:k])
		if j == 0 && k == len(arrays) {
			return run // one run covers the group
		}
		if out == nil {
			out = graph.Zeros(run.Graph(), g.flatShape())
		}
		out = graph.DynamicUpdateSlice(out, run, []*graph.Node{nodes[g.offsetInput(j)]})
		j = k
	}
	return out
}

// packRun is the size, in elements, from which an array is written into its group's buffer on
// its own rather than concatenated with its neighbours (see pack).
var packRun = 1 << 16 // a variable so a test can compare both ways of packing

// packArrays lays arrays out end to end as one flat node.
func packArrays(arrays []*graph.Node) *graph.Node {
	parts := make([]*graph.Node, len(arrays))
	for j, a := range arrays {
		parts[j] = graph.Reshape(a, a.Shape().Size())
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return graph.Concatenate(parts, 0)
}

// bindParams binds each group's variables, in g, to their views of the group's flat input (nodes
// holds it under paramsInput), so that a layer reading a variable through the context reads its
// view and creates no input of its own. It returns the views, per group.
func (e *Engine) bindParams(g *graph.Graph, nodes map[string]*graph.Node) [][]*graph.Node {
	views := make([][]*graph.Node, len(e.groups))
	for i, grp := range e.groups {
		flat := nodes[paramsInput(grp)]
		for j, v := range grp.vars {
			view := grp.view(flat, nodes, j)
			bindVariable(v, view)
			views[i] = append(views[i], view)
		}
	}
	return views
}

// bindVariable makes node the variable's value in node's graph, as if the graph had read it, and
// creates no graph input for it. GoMLX v0.25's context has no call for this: ValueGraph and
// SetValueGraph both create the variable's own input on its first use in a graph, which would
// be one input per array again. The variable's per-graph record (its input node and current
// value node) is set directly, both to node; a GoMLX whose Variable no longer has that record
// fails here, in every program build, with this message.
func bindVariable(v *context.Variable, node *graph.Node) {
	field := reflect.ValueOf(v).Elem().FieldByName("graphToNodes")
	if !field.IsValid() {
		panic(fmt.Errorf("internal: binding variable %s to its view of the flat parameters: this GoMLX's context.Variable has no graphToNodes field (the engine is written against GoMLX v0.25)", v.ScopeAndName()))
	}
	m := reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr()))
	store := m.MethodByName("Store")
	if !store.IsValid() || store.Type().NumIn() != 2 || store.Type().In(1).Kind() != reflect.Pointer {
		panic(fmt.Errorf("internal: binding variable %s: this GoMLX's graphToNodes has no Store(graph id, *nodes) (the engine is written against GoMLX v0.25)", v.ScopeAndName()))
	}
	rec := reflect.New(store.Type().In(1).Elem())
	for _, name := range []string{"paramNode", "valueNode"} {
		f := rec.Elem().FieldByName(name)
		if !f.IsValid() || f.Type() != reflect.TypeOf(node) {
			panic(fmt.Errorf("internal: binding variable %s: this GoMLX's per-graph variable record has no %s *Node (the engine is written against GoMLX v0.25)", v.ScopeAndName(), name))
		}
		reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(node))
	}
	store.Call([]reflect.Value{reflect.ValueOf(node.Graph().GraphId()), rec})
}

// arrayBytes is array j's bytes within its group's flat buffer's bytes.
func (g *paramGroup) arrayBytes(flat []byte, j int) []byte {
	item := int(dtypeOf(g.dtype).Size())
	at := g.offsets[j] * item
	return flat[at : at+g.vars[j].Shape().Size()*item]
}

// arrays reads a group's flat device buffer back as host tensors, one per array.
func (g *paramGroup) arrays(flat *tensors.Tensor) ([]*tensors.Tensor, error) {
	data, err := ReadBack(flat)
	if err != nil {
		return nil, err
	}
	out := make([]*tensors.Tensor, len(g.vars))
	for j, v := range g.vars {
		t := tensors.FromShape(v.Shape())
		if err := t.MutableBytes(func(b []byte) { copy(b, g.arrayBytes(data, j)) }); err != nil {
			return nil, err
		}
		out[j] = t
	}
	return out, nil
}
