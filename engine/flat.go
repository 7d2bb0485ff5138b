package engine

// The flat layout: a parameter group's parameters, their gradients (and the accumulator's sums)
// and each of its chain's state leaves live on the device as a few buffers per group, not one per
// array: its small arrays (under packRun elements: biases, norms, the many arrays of a deep narrow
// model) end to end in one flat buffer, in the group's variable order (its optimizers.Layout's),
// and each large array alone, flat, after it (segment 0 is the small arrays' when there are any).
// So the optimizer program takes and returns one buffer per segment: its inputs, graph and
// compile stop growing with the small arrays, and a large array, whose update costs far more than
// passing its buffer, keeps the buffer it would have had.
//
// Why not one buffer for the large arrays too: Forward reads each array through a view of its
// segment (bindParams), and a view that is a slice costs a copy wherever XLA needs the array as a
// buffer of its own (a matrix product's operand), and packing the gradients back costs another.
// For the large arrays of an MLP or a CNN those copies cost more than the optimizer's buffer
// count saves (with every array in one buffer, one BenchmarkFamilies run had the MLP's
// fused/GoMLX at 1.33 where the per-array engine's was 0.97); a segment of one array is read as a
// reshape of its input, which is free, and its gradient is written as it is.
//
// In a shared segment, a view's start is an input, one Int32 scalar per array placed once at
// setup ("offset/<group>/<keypath>"), not a constant: XLA fuses a slice into the kernels that read
// it, and with the offset baked in every array's kernels differ, so none is shared and the
// compile grows with the array count (the gradient program at 60 arrays took 5.9 s against 0.95 s
// per array; with the offsets as inputs, 0.46 s). A backend without dynamic slices (GoMLX's
// pure-Go one, which compiles no kernels) takes static slices and no offsets. The gradient program
// differentiates the loss with respect to the views and packs each segment's gradients back
// (pack). Layer state (batch-norm statistics, the RNG state) is not a parameter and stays one
// buffer per variable: its variables create their own inputs, as before.
//
// On the host nothing changes: a record, Parameters, SetParameters and the model view name one
// tensor per array, cut out of (or patched into) its segment by the same offsets.

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

// segment is one device buffer of a group: the arrays it holds, in group order, and its size.
type segment struct {
	arrays []int
	size   int
}

// packRun is the size, in elements, from which an array has a segment of its own (a variable so
// a test can move it).
var packRun = 1 << 16

// segmentArrays splits the group's arrays into segments: the small ones together first, then each
// large one alone; seg and local say where each array lives.
func (g *paramGroup) segmentArrays() {
	g.segs, g.seg, g.local = nil, make([]int, len(g.vars)), make([]int, len(g.vars))
	var small segment
	for j, v := range g.vars {
		if v.Shape().Size() < packRun {
			g.local[j] = small.size
			small.arrays = append(small.arrays, j)
			small.size += v.Shape().Size()
		}
	}
	if len(small.arrays) > 0 {
		g.segs = append(g.segs, small)
	}
	for j, v := range g.vars {
		if v.Shape().Size() < packRun {
			continue
		}
		g.seg[j] = len(g.segs)
		g.segs = append(g.segs, segment{arrays: []int{j}, size: v.Shape().Size()})
	}
}

// shared reports whether array j shares its segment (and so is a slice of it, not all of it).
func (g *paramGroup) shared(j int) bool { return len(g.segs[g.seg[j]].arrays) > 1 }

// The names of a group's segment inputs ("params/default/0") and of array j's offset.
func paramsInput(g *paramGroup, s int) string { return fmt.Sprintf("params/%s/%d", g.name, s) }
func gradsInput(g *paramGroup, s int) string  { return fmt.Sprintf("grads/%s/%d", g.name, s) }
func accInput(g *paramGroup, s int) string    { return fmt.Sprintf("acc/%s/%d", g.name, s) }
func (g *paramGroup) offsetInput(j int) string {
	return "offset/" + g.name + "/" + strings.Join(g.keypaths[j], "/")
}

// segShape is segment s's buffer shape: [size] of the group's dtype.
func (g *paramGroup) segShape(s int) shapes.Shape {
	return shapes.Make(dtypeOf(g.dtype), g.segs[s].size)
}

// addSegmentInputs adds one input per segment, named by name, to a signature.
func (g *paramGroup) addSegmentInputs(sig *signature, name func(*paramGroup, int) string) {
	for s := range g.segs {
		sig.add(name(g, s), g.dtype, []int{g.segs[s].size})
	}
}

// view is array j of its segment's node seg: its elements, in its shape; nodes holds the
// program's offset inputs.
func (g *paramGroup) view(seg *graph.Node, nodes map[string]*graph.Node, j int) *graph.Node {
	dims := g.vars[j].Shape().Dimensions
	if !g.shared(j) {
		return graph.Reshape(seg, dims...)
	}
	size := g.vars[j].Shape().Size()
	var part *graph.Node
	if at, ok := nodes[g.offsetInput(j)]; ok {
		part = graph.DynamicSlice(seg, []*graph.Node{at}, []int{size})
	} else {
		part = graph.Slice(seg, graph.AxisRange(g.local[j], g.local[j]+size))
	}
	return graph.Reshape(part, dims...)
}

// pack lays a group's arrays (in its order, each in its own shape) out as its segments' nodes:
// the inverse of view.
func (g *paramGroup) pack(arrays []*graph.Node) []*graph.Node {
	out := make([]*graph.Node, len(g.segs))
	for s, seg := range g.segs {
		parts := make([]*graph.Node, len(seg.arrays))
		for k, j := range seg.arrays {
			parts[k] = graph.Reshape(arrays[j], arrays[j].Shape().Size())
		}
		out[s] = parts[0]
		if len(parts) > 1 {
			out[s] = graph.Concatenate(parts, 0)
		}
	}
	return out
}

// addOffsetInputs adds the offset scalars of the group's shared arrays to a signature (none
// without dynamic slices).
func (g *paramGroup) addOffsetInputs(sig *signature) {
	for j, t := range g.at {
		if t != nil {
			sig.add(g.offsetInput(j), "Int32", nil)
		}
	}
}

// offsetArgs are the group's offset scalars as program inputs: placed at setup, never donated.
func (e *Engine) offsetArgs(g *paramGroup) []arg {
	var args []arg
	for _, t := range g.at {
		if t != nil {
			args = append(args, arg{t: t, counter: &e.uploads.Offsets})
		}
	}
	return args
}

// placeOffsets uploads the offsets of the group's shared arrays, one Int32 scalar each, on a
// backend with dynamic slices.
func (e *Engine) placeOffsets(g *paramGroup) error {
	g.at = make([]*tensors.Tensor, len(g.vars))
	if !e.backend.Backend.Capabilities().Operations[backends.OpTypeDynamicSlice] {
		return nil
	}
	for j := range g.vars {
		if !g.shared(j) {
			continue
		}
		t, err := e.upload(tensors.FromScalar(int32(g.local[j])), &e.uploads.Offsets)
		if err != nil {
			return fmt.Errorf("group %q: offset of %s: %w", g.name, strings.Join(g.keypaths[j], "/"), err)
		}
		g.at[j] = t
	}
	return nil
}

// splitOne cuts segment s out of a host tensor laid out as the group's Layout (its arrays end to
// end, in order): a host tensor of the segment's shape.
func (g *paramGroup) splitOne(flat *tensors.Tensor, s int) (*tensors.Tensor, error) {
	item := int(dtypeOf(g.dtype).Size())
	t := tensors.FromShape(g.segShape(s))
	var inner error
	err := flat.ConstBytes(func(src []byte) {
		inner = t.MutableBytes(func(dst []byte) {
			for _, j := range g.segs[s].arrays {
				n := g.vars[j].Shape().Size() * item
				copy(dst[g.local[j]*item:g.local[j]*item+n], src[g.offsets[j]*item:g.offsets[j]*item+n])
			}
		})
	})
	if err == nil {
		err = inner
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// bindParams binds each group's variables, in g, to their views of the group's segment inputs
// (nodes holds them under paramsInput), so that a layer reading a variable through the context
// reads its view and creates no input of its own. It returns the views, per group.
func (e *Engine) bindParams(g *graph.Graph, nodes map[string]*graph.Node) [][]*graph.Node {
	views := make([][]*graph.Node, len(e.groups))
	for i, grp := range e.groups {
		for j, v := range grp.vars {
			view := grp.view(nodes[paramsInput(grp, grp.seg[j])], nodes, j)
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

// segmentCount counts the segments over all groups: the gradient program's gradient outputs.
func (e *Engine) segmentCount() int {
	k := 0
	for _, g := range e.groups {
		k += len(g.segs)
	}
	return k
}
