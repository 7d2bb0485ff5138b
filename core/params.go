package core

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/optimizers"
)

// paramGroup is one parameter group as setup fixed it: its variables, layout and optimizer chain.
// Its device-resident values (parameters and optimizer state, one buffer per array) are the
// training state's groupState at the same index.
type paramGroup struct {
	name     string
	vars     []*context.Variable
	keypaths [][]string
	offsets  []int
	size     int
	dtype    string
	layout   *optimizers.Layout
	opt      *optimizers.Chain // the group's chain (optimizers owns the update math)
	constant []bool            // state leaves that never change (not donated, not re-output)
}

// placeParameters is setup's parameter phase: the trainable variables sorted into groups (the
// ParamGroup hook, contract.go's ParamGrouper), each group's layout, and the parameters and the
// layer state placed on the device, once, one buffer per array.
func (n *Nitro) placeParameters() error {
	if err := n.groupParameters(); err != nil {
		return err
	}
	n.st.groups = make([]groupState, len(n.groups))
	for i, g := range n.groups {
		leaves := make([]optimizers.ParamLeaf, len(g.vars))
		for i, v := range g.vars {
			leaves[i] = optimizers.ParamLeaf{Keypath: g.keypaths[i], Shape: v.Shape()}
		}
		var err error
		if g.layout, err = optimizers.NewLayout(g.name, leaves); err != nil {
			return err
		}
		for _, v := range g.vars {
			t, err := n.uploadValue(v, "parameter", &n.uploads.Params)
			if err != nil {
				return err
			}
			n.st.groups[i].params = append(n.st.groups[i].params, t)
		}
	}
	n.varInputs = map[string]*context.Variable{}
	for _, g := range n.groups {
		for _, v := range g.vars {
			n.varInputs["param/"+v.ScopeAndName()] = v
		}
	}
	for _, v := range n.stateVars {
		n.varInputs["state/"+v.ScopeAndName()] = v
	}
	for _, v := range n.stateVars {
		t, err := n.uploadValue(v, "layer state", &n.uploads.LayerState)
		if err != nil {
			return err
		}
		n.st.layer = append(n.st.layer, t)
	}
	return nil
}

// groupParameters splits the context's variables into trainable ones, sorted into parameter
// groups by ParamGroup (one "default" group without it), and layer state, each by name.
func (n *Nitro) groupParameters() error {
	var trainable []*context.Variable
	n.stateVars = nil
	for v := range n.ctx.IterVariables() {
		if v.Trainable {
			trainable = append(trainable, v)
		} else {
			n.stateVars = append(n.stateVars, v)
		}
	}
	byName := func(vs []*context.Variable) {
		sort.Slice(vs, func(i, j int) bool { return vs[i].ScopeAndName() < vs[j].ScopeAndName() })
	}
	byName(trainable)
	byName(n.stateVars)
	if len(trainable) == 0 {
		return fmt.Errorf("the model has no trainable parameters: Forward created no trainable variables in the context")
	}
	grouper := n.acc.grouper
	index := map[string]*paramGroup{}
	for _, v := range trainable {
		kp := keypath(v)
		name := "default"
		if grouper != nil {
			if name = grouper.ParamGroup(kp); name == "" {
				return fmt.Errorf("ParamGroup(%v) returned an empty group name", kp)
			}
		}
		g, ok := index[name]
		if !ok {
			g = &paramGroup{name: name, dtype: v.DType().String()}
			index[name] = g
			n.groups = append(n.groups, g)
		}
		if v.DType().String() != g.dtype {
			return fmt.Errorf("parameter %v is %s but group %q holds %s: a group's flat buffer has one dtype; put it in its own group with ParamGroup", kp, v.DType(), name, g.dtype)
		}
		g.vars = append(g.vars, v)
		g.keypaths = append(g.keypaths, kp)
		g.offsets = append(g.offsets, g.size)
		g.size += v.Shape().Size()
	}
	sort.Slice(n.groups, func(i, j int) bool { return n.groups[i].name < n.groups[j].name })
	return nil
}

// uploadValue places a copy of variable v's initial value on the device; what ("parameter",
// "layer state") names it in errors.
func (n *Nitro) uploadValue(v *context.Variable, what string, counter *int) (*tensors.Tensor, error) {
	t, err := v.Value()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, v.ScopeAndName(), err)
	}
	c, err := t.LocalClone()
	if err != nil {
		return nil, err
	}
	if c, err = n.upload(c, counter); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, v.ScopeAndName(), err)
	}
	return c, nil
}

// setUpOptimizer is setup's optimizer phase: each group's optimizer resolved and initialized from
// the group's initial values, flattened end to end (hyper.go's setupOptimization), and its state
// placed on the device.
func (n *Nitro) setUpOptimizer() error {
	flats := make(map[string]*tensors.Tensor, len(n.groups))
	for _, g := range n.groups {
		var err error
		if flats[g.name], err = flatten(g); err != nil {
			return err
		}
	}
	return n.setupOptimization(flats)
}

// flatten copies a group's initial values end to end into one host tensor.
func flatten(g *paramGroup) (*tensors.Tensor, error) {
	first := g.vars[0]
	flat := tensors.FromShape(shapes.Make(first.DType(), g.size))
	itemBytes := int(first.DType().Size())
	var ferr error
	err := flat.MutableBytes(func(dst []byte) {
		for i, v := range g.vars {
			t, err := v.Value()
			if err != nil {
				ferr = fmt.Errorf("parameter %v: %w", g.keypaths[i], err)
				return
			}
			off := g.offsets[i] * itemBytes
			if err := t.ConstBytes(func(src []byte) { copy(dst[off:off+len(src)], src) }); err != nil {
				ferr = err
				return
			}
		}
	})
	if ferr != nil {
		return nil, ferr
	}
	return flat, err
}

// layoutDigest describes the groups' layouts for the compile-cache key.
func (n *Nitro) layoutDigest() string {
	var b strings.Builder
	for _, g := range n.groups {
		fmt.Fprintf(&b, "%s[", g.name)
		for i, v := range g.vars {
			fmt.Fprintf(&b, "%s%v;", strings.Join(g.keypaths[i], "/"), v.Shape().Dimensions)
		}
		b.WriteString("]")
	}
	return b.String()
}

// Parameters reads the current parameters back to the host, by keypath ("dense_0/weights").
// This is an explicit readback; training never needs it.
func (n *Nitro) Parameters() (map[string]*tensors.Tensor, error) {
	out := map[string]*tensors.Tensor{}
	for gi, g := range n.groups {
		for i, t := range n.st.groups[gi].params {
			c, err := t.LocalClone()
			if err != nil {
				return nil, fmt.Errorf("reading %v back: %w", g.keypaths[i], err)
			}
			out[strings.Join(g.keypaths[i], "/")] = c
		}
	}
	return out, nil
}

// paramArrays counts the parameter arrays over all groups.
func (n *Nitro) paramArrays() int {
	k := 0
	for _, g := range n.groups {
		k += len(g.vars)
	}
	return k
}

// keypath splits a variable's scope into parts, e.g. "/dense_0" + "weights" -> [dense_0 weights].
func keypath(v *context.Variable) []string {
	var parts []string
	for _, p := range strings.Split(v.Scope(), context.ScopeSeparator) {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return append(parts, v.Name())
}
