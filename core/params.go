package core

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/markers"
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

// traceShapes traces Forward once (never compiled) so that every variable it creates exists.
func (n *Nitro) traceShapes() error {
	width, avail, err := n.sampleBatch()
	if err != nil {
		return err
	}
	return tryGraph("tracing Forward to create the model's variables", func() {
		g := graph.NewGraph(n.backend.Backend, "nitro_shape_trace")
		defer g.Finalize()
		devNodes := n.deviceParams(g)
		view, err := markers.BindDevice(n.e, devNodes)
		if err != nil {
			panic(err)
		}
		batch := n.batchParams(g, width, routed(avail, n.forward))
		n.ctx.SetTraining(g, true)
		n.forward.call(view, valueOf(n.ctx), batch)
	})
}

// sampleBatch is the batch setup traces with: the train split's first, else the first split's;
// under WithInputSpecs, one row of each declared field (only shapes are traced, no data is read).
func (n *Nitro) sampleBatch() (int, map[string]bool, error) {
	if n.specOnly() {
		return 1, keySet(n.fieldShapes), nil
	}
	split := "train"
	if _, ok := n.data[split]; !ok {
		split = sortedKeys(n.data)[0]
	}
	b, err := n.data[split].BatchAt(0)
	if err != nil {
		return 0, nil, fmt.Errorf("split %q, batch 0: %w", split, err)
	}
	w, err := batchWidth(b)
	return w, keySet(b), err
}

// checkForwardHostIndependent builds Forward from the Host-zeroed view and from the real
// experiment and compares the graphs, so a Host read in Forward fails setup rather than the first
// step. (Loss, Metrics and TrainMetrics are checked when their programs are first built.)
func (n *Nitro) checkForwardHostIndependent() error {
	width, avail, err := n.sampleBatch()
	if err != nil {
		return err
	}
	keys := routed(avail, n.forward)
	return markers.CheckHostIndependent(n.e, func(src any) (string, error) {
		var fp string
		err := tryGraph("tracing Forward", func() {
			g := markers.NewTraceGraph(n.backend.Backend, "nitro_forward_check")
			defer g.Finalize()
			nodes := n.traceInputs(g, width, keys)
			view := n.bindModel(g, nodes, src)
			n.ctx.SetTraining(g, false)
			n.forward.call(view, valueOf(n.ctx.Reuse()), batchNodes(nodes, keys))
			var err error
			if fp, err = markers.Fingerprint(g); err != nil {
				panic(err)
			}
		})
		return fp, err
	})
}

// placeParameters groups the trainable variables, flattens each group into one buffer and places
// parameters, layer state and optimizer state on the device, once.
func (n *Nitro) placeParameters() error {
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
	n.st.groups = make([]groupState, len(n.groups))
	flats := map[string]*tensors.Tensor{}
	for i, g := range n.groups {
		leaves := make([]optimizers.ParamLeaf, len(g.vars))
		for i, v := range g.vars {
			leaves[i] = optimizers.ParamLeaf{Keypath: g.keypaths[i], Shape: v.Shape()}
		}
		var err error
		if g.layout, err = optimizers.NewLayout(g.name, leaves); err != nil {
			return err
		}
		if flats[g.name], err = flatten(g); err != nil {
			return err
		}
		for _, v := range g.vars {
			t, err := v.Value()
			if err != nil {
				return fmt.Errorf("parameter %s: %w", v.ScopeAndName(), err)
			}
			c, err := t.LocalClone()
			if err != nil {
				return err
			}
			if c, err = n.upload(c, &n.uploads.Params); err != nil {
				return fmt.Errorf("parameter %s: %w", v.ScopeAndName(), err)
			}
			n.st.groups[i].params = append(n.st.groups[i].params, c)
		}
	}
	if err := n.setupOptimization(flats); err != nil {
		return err
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
		t, err := v.Value()
		if err != nil {
			return fmt.Errorf("layer state %s: %w", v.ScopeAndName(), err)
		}
		c, err := t.LocalClone()
		if err != nil {
			return err
		}
		if c, err = n.upload(c, &n.uploads.LayerState); err != nil {
			return fmt.Errorf("layer state %s: %w", v.ScopeAndName(), err)
		}
		n.st.layer = append(n.st.layer, c)
	}
	return nil
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
