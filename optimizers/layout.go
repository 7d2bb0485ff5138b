package optimizers

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
)

// DefaultGroup is the name of the default parameter group: group 0, whose learning rate is the
// base the other groups' rates are ratios of.
const DefaultGroup = "default"

// ParamLeaf is one parameter array as the model holds it: its keypath (the variable's scope split
// into parts, e.g. [dense_0 weights]) and its shape (dtype included).
type ParamLeaf struct {
	Keypath []string
	Shape   shapes.Shape
}

// LeafLayout places one leaf in its group's flat buffer: elements [Offset, Offset+Size), row-major.
type LeafLayout struct {
	Keypath []string
	Shape   shapes.Shape
	Offset  int
	Size    int
}

// Layout describes one parameter group's flat buffer: the host-side view of the group's arrays
// end to end, on which a chain's Init builds its state. The engine keeps parameters, gradients and
// state on the device split into a few buffers cut from it (its small arrays together, each large
// one alone) and applies the chain to each (Program.ApplyArrays). A Layout is structural (the arrays, their order and shapes), so it belongs
// in the compile key via its shapes.
type Layout struct {
	Group  string
	DType  dtypes.DType
	Leaves []LeafLayout
	Size   int // total elements
}

// NewLayout lays out leaves, in the order given, as one flat buffer. All leaves must share a
// float dtype (one buffer has one dtype), keypaths must be distinct and non-empty, and the group
// must hold at least one element.
func NewLayout(group string, leaves []ParamLeaf) (*Layout, error) {
	if group == "" {
		return nil, fmt.Errorf("optimizers: parameter group name is empty: name it (param_group returns %q by default)", DefaultGroup)
	}
	if len(leaves) == 0 {
		return nil, fmt.Errorf("optimizers: parameter group %q has no leaves: a group exists only if param_group assigns it a parameter", group)
	}
	l := &Layout{Group: group, DType: leaves[0].Shape.DType}
	seen := map[string]bool{}
	for _, p := range leaves {
		kp := strings.Join(p.Keypath, "/")
		if len(p.Keypath) == 0 {
			return nil, fmt.Errorf("optimizers: a leaf of group %q has an empty keypath: every parameter needs its scope path (it is what param_group and no_decay see)", group)
		}
		if seen[kp] {
			return nil, fmt.Errorf("optimizers: leaf %s appears twice in group %q: each parameter array must be listed once", kp, group)
		}
		seen[kp] = true
		if !p.Shape.Ok() || !p.Shape.DType.IsFloat() {
			return nil, fmt.Errorf("optimizers: leaf %s of group %q has shape %s: trainable parameters must have a float dtype (a layer fed an integer input makes integer weights: convert the input in Forward, graph.ConvertDType(x, dtypes.Float32), or give the data a float dtype)", kp, group, p.Shape)
		}
		if p.Shape.DType != l.DType {
			return nil, fmt.Errorf("optimizers: leaf %s of group %q is %s but the group's first leaf is %s: one group is one flat buffer of one dtype; cast the parameter, or give it its own group in param_group", kp, group, p.Shape.DType, l.DType)
		}
		size := p.Shape.Size()
		l.Leaves = append(l.Leaves, LeafLayout{Keypath: slices.Clone(p.Keypath), Shape: p.Shape.Clone(), Offset: l.Size, Size: size})
		l.Size += size
	}
	if l.Size == 0 {
		return nil, fmt.Errorf("optimizers: parameter group %q has no elements (all %d leaves are empty): drop the group", group, len(leaves))
	}
	return l, nil
}

// GroupLayouts partitions leaves into groups by groupOf (nil: everything in DefaultGroup) and lays
// out each. Order: DefaultGroup first when it has leaves, then the other groups in order of first
// appearance, which is stable for a fixed model and bakes into the compiled program.
func GroupLayouts(leaves []ParamLeaf, groupOf func(keypath []string) string) ([]*Layout, error) {
	if groupOf == nil {
		groupOf = func([]string) string { return DefaultGroup }
	}
	order := []string{}
	byGroup := map[string][]ParamLeaf{}
	for _, p := range leaves {
		g := groupOf(slices.Clone(p.Keypath))
		if g == "" {
			return nil, fmt.Errorf("optimizers: param_group returned an empty name for leaf %s: return a group name (%q for the default group)", strings.Join(p.Keypath, "/"), DefaultGroup)
		}
		if _, ok := byGroup[g]; !ok {
			order = append(order, g)
		}
		byGroup[g] = append(byGroup[g], p)
	}
	if i := slices.Index(order, DefaultGroup); i > 0 {
		order = append([]string{DefaultGroup}, slices.Delete(order, i, i+1)...)
	}
	out := make([]*Layout, 0, len(order))
	for _, g := range order {
		l, err := NewLayout(g, byGroup[g])
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// FlatShape is the group buffer's shape: [Size] of the group's dtype.
func (l *Layout) FlatShape() shapes.Shape { return shapes.Make(l.DType, l.Size) }

// Flatten packs per-leaf host tensors (in layout order) into the group's flat buffer.
func (l *Layout) Flatten(leaves []*tensors.Tensor) (*tensors.Tensor, error) {
	if len(leaves) != len(l.Leaves) {
		return nil, fmt.Errorf("optimizers: group %q: Flatten got %d tensors for %d leaves: pass one tensor per leaf, in layout order", l.Group, len(leaves), len(l.Leaves))
	}
	out := tensors.FromShape(l.FlatShape())
	for i, t := range leaves {
		ll := l.Leaves[i]
		if t == nil || !t.Shape().Equal(ll.Shape) {
			var got any = "nil"
			if t != nil {
				got = t.Shape()
			}
			return nil, fmt.Errorf("optimizers: group %q leaf %s: Flatten got shape %v, want %s: pass the leaves in layout order", l.Group, strings.Join(ll.Keypath, "/"), got, ll.Shape)
		}
		var err error
		if cerr := t.ConstFlatData(func(src any) {
			err = out.MutableFlatData(func(dst any) {
				reflect.Copy(reflect.ValueOf(dst).Slice(ll.Offset, ll.Offset+ll.Size), reflect.ValueOf(src))
			})
		}); cerr != nil {
			return nil, cerr
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Unflatten splits the group's flat buffer into per-leaf host tensors, in layout order.
func (l *Layout) Unflatten(flat *tensors.Tensor) ([]*tensors.Tensor, error) {
	if flat == nil || !flat.Shape().Equal(l.FlatShape()) {
		var got any = "nil"
		if flat != nil {
			got = flat.Shape()
		}
		return nil, fmt.Errorf("optimizers: group %q: Unflatten got shape %v, want %s: pass this group's flat buffer", l.Group, got, l.FlatShape())
	}
	out := make([]*tensors.Tensor, len(l.Leaves))
	err := flat.ConstFlatData(func(src any) {
		for i, ll := range l.Leaves {
			t := tensors.FromShape(ll.Shape)
			_ = t.MutableFlatData(func(dst any) {
				reflect.Copy(reflect.ValueOf(dst), reflect.ValueOf(src).Slice(ll.Offset, ll.Offset+ll.Size))
			})
			out[i] = t
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
