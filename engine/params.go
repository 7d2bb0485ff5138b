package engine

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/optimizers"
)

// paramGroup is one parameter group as setup fixed it: its variables, layout and optimizer chain.
// Its device-resident values (parameters and optimizer state, one buffer per segment: flat.go)
// are the training state's groupState at the same index.
type paramGroup struct {
	name     string
	vars     []*context.Variable
	keypaths [][]string
	offsets  []int // each array's place in the Layout (its arrays end to end)
	size     int
	dtype    string
	segs     []segment         // its device buffers (flat.go)
	seg      []int             // per array: its segment
	local    []int             // per array: its offset in its segment
	at       []*tensors.Tensor // per array: its offset as an Int32 device scalar, when a view's start is an input
	layout   *optimizers.Layout
	opt      *optimizers.Chain // the group's chain (optimizers owns the update math)
	constant []bool            // state leaves that never change (not donated, not re-output)
	// scalar marks the decay mask's segments held as one device scalar ([leaf][segment]): a
	// segment whose arrays are all decayed or all exempt (every array alone in its own is one)
	// multiplies by the same 1 or 0 everywhere, and a parameter-sized buffer of it costs its
	// bytes of memory and of reading every step (344 MB each for GPT-2 small's 86M parameters).
	scalar [][]bool
}

// PlaceParameters sorts the context's trainable variables into groups (Config.Grouper), builds
// each group's layout and segments, and places the parameters (one buffer per segment) and the
// layer state (one buffer per variable) on the device, once.
func (e *Engine) PlaceParameters() error {
	if err := e.groupParameters(); err != nil {
		return err
	}
	e.st.groups = make([]groupState, len(e.groups))
	for i, g := range e.groups {
		leaves := make([]optimizers.ParamLeaf, len(g.vars))
		for i, v := range g.vars {
			leaves[i] = optimizers.ParamLeaf{Keypath: g.keypaths[i], Shape: v.Shape()}
		}
		var err error
		if g.layout, err = optimizers.NewLayout(g.name, leaves); err != nil {
			return err
		}
		g.segmentArrays()
		flat, err := flatten(g)
		if err != nil {
			return err
		}
		if e.st.groups[i].params, err = e.uploadSegments(g, flat, &e.uploads.Params); err != nil {
			return fmt.Errorf("group %q: parameters: %w", g.name, err)
		}
		if err := e.placeOffsets(g); err != nil {
			return err
		}
	}
	e.varInputs = map[string]*context.Variable{}
	for _, v := range e.stateVars {
		e.varInputs[layerInput(v.ScopeAndName())] = v
	}
	for _, v := range e.stateVars {
		t, err := e.uploadValue(v, "layer state", &e.uploads.LayerState)
		if err != nil {
			return err
		}
		e.st.layer = append(e.st.layer, t)
	}
	return nil
}

// groupParameters splits the context's variables into trainable ones, sorted into parameter
// groups by ParamGroup (one "default" group without it), and layer state, each by name.
func (e *Engine) groupParameters() error {
	var trainable []*context.Variable
	e.stateVars = nil
	for v := range e.ctx.IterVariables() {
		if v.Trainable {
			trainable = append(trainable, v)
		} else {
			e.stateVars = append(e.stateVars, v)
		}
	}
	byName := func(vs []*context.Variable) {
		sort.Slice(vs, func(i, j int) bool { return vs[i].ScopeAndName() < vs[j].ScopeAndName() })
	}
	byName(trainable)
	byName(e.stateVars)
	if len(trainable) == 0 {
		return fmt.Errorf("the model has no trainable parameters: Forward created no trainable variables in the context")
	}
	grouper := e.grouper
	index := map[string]*paramGroup{}
	for _, v := range trainable {
		kp := keypath(v)
		name := "default"
		if grouper != nil {
			if name = grouper(kp); name == "" {
				return fmt.Errorf("ParamGroup(%v) returned an empty group name", kp)
			}
		}
		g, ok := index[name]
		if !ok {
			g = &paramGroup{name: name, dtype: v.DType().String()}
			index[name] = g
			e.groups = append(e.groups, g)
		}
		if v.DType().String() != g.dtype {
			return fmt.Errorf("parameter %v is %s but group %q holds %s: a group's flat buffer has one dtype; put it in its own group with ParamGroup", kp, v.DType(), name, g.dtype)
		}
		g.vars = append(g.vars, v)
		g.keypaths = append(g.keypaths, kp)
		g.offsets = append(g.offsets, g.size)
		g.size += v.Shape().Size()
	}
	sort.Slice(e.groups, func(i, j int) bool { return e.groups[i].name < e.groups[j].name })
	return nil
}

// uploadValue places a copy of variable v's initial value on the device; what ("parameter",
// "layer state") names it in errors.
func (e *Engine) uploadValue(v *context.Variable, what string, counter *int) (*tensors.Tensor, error) {
	t, err := v.Value()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, v.ScopeAndName(), err)
	}
	c, err := t.LocalClone()
	if err != nil {
		return nil, err
	}
	if c, err = e.upload(c, counter); err != nil {
		return nil, fmt.Errorf("%s %s: %w", what, v.ScopeAndName(), err)
	}
	return c, nil
}

// InitOptimizer gives each group its chain from the resolved plan (whose groups are in group
// order) and its optimizer state, initialized from the group's initial values flattened end to
// end and placed on the device, one buffer per state leaf and segment.
func (e *Engine) InitOptimizer(plan *optimizers.Plan) error {
	for gi, gp := range plan.Groups() {
		g := e.groups[gi]
		flat, err := flatten(g)
		if err != nil {
			return err
		}
		g.opt, g.constant = gp.Chain, gp.Chain.ConstantLeaves()
		state, err := gp.InitState(flat)
		if err != nil {
			return err
		}
		names := gp.Chain.StateNames()
		g.scalar = make([][]bool, len(state))
		for l, leaf := range state {
			var segs []*tensors.Tensor
			if scalarMasks && g.constLeaf(l) && strings.HasSuffix(names[l], "."+optimizers.DecayName+".mask") {
				segs, g.scalar[l], err = e.uploadMaskSegments(g, leaf)
			} else {
				segs, err = e.uploadSegments(g, leaf, &e.uploads.OptState)
			}
			if err != nil {
				return fmt.Errorf("group %q: optimizer state: %w", g.name, err)
			}
			state[l] = nil // uploaded: the host copy is garbage now
			e.st.groups[gi].opt = append(e.st.groups[gi].opt, segs)
		}
	}
	if err := dropInitialValues(e.groups); err != nil {
		return err
	}
	releaseHostCopies(e.groups)
	return nil
}

// dropInitialValues frees the device buffers that held the trainable variables' first values
// (InitializeVariables'): the parameters live in the groups' segments from PlaceParameters on,
// and the flattened copies above were the last reads, so the context's copy would only double
// the parameters' memory for the whole run (344 MB for GPT-2 small). A variable keeps its shape,
// which is all a graph build reads from it (the programs bind each variable to its view).
func dropInitialValues(groups []*paramGroup) error {
	for _, g := range groups {
		for _, v := range g.vars {
			if !v.HasValue() {
				continue
			}
			t, err := v.Value()
			if err != nil {
				return err
			}
			if err := v.SetValuePreservingOld(nil); err != nil {
				return fmt.Errorf("parameter %s: %w", v.ScopeAndName(), err)
			}
			if err := t.FinalizeAll(); err != nil {
				return fmt.Errorf("parameter %s: freeing its initial value: %w", v.ScopeAndName(), err)
			}
		}
	}
	return nil
}

// hostCopyRelease is the size, in parameter values over all groups, from which setup hands its
// host copies back to the system once they are uploaded (a variable so a test can move it).
var hostCopyRelease = 1 << 24

// releaseHostCopies collects setup's host copies (the flattened parameters, the optimizer's
// initial state and their segments: several parameter-sized buffers, all garbage once on the
// device) and returns their pages to the system. The steps allocate little Go memory, so without
// this no collection runs for minutes and the process keeps that heap resident while training:
// about 2 GB for GPT-2 small. A small model's copies are left to the collector.
func releaseHostCopies(groups []*paramGroup) {
	n := 0
	for _, g := range groups {
		n += g.size
	}
	if n >= hostCopyRelease {
		debug.FreeOSMemory()
	}
}

// uploadSegments splits a host tensor laid out as the group's Layout into its segments and places
// them on the device, one segment at a time, so that no more than one segment's host copy is
// alive beside flat.
func (e *Engine) uploadSegments(g *paramGroup, flat *tensors.Tensor, counter *int) ([]*tensors.Tensor, error) {
	segs := make([]*tensors.Tensor, len(g.segs))
	for s := range segs {
		t, err := g.splitOne(flat, s)
		if err == nil {
			t, err = e.upload(t, counter)
		}
		if err != nil {
			freeTensors(segs[:s])
			return nil, err
		}
		segs[s] = t
	}
	return segs, nil
}

// scalarMasks holds uniform mask segments as scalars (a variable so a test can compare).
var scalarMasks = true

// uploadMaskSegments places the decay mask's segments on the device, each that holds one value
// throughout as a scalar of it (scalar[s] says which): the decay multiplies by it elementwise,
// and a scalar broadcasts to the same product.
func (e *Engine) uploadMaskSegments(g *paramGroup, flat *tensors.Tensor) ([]*tensors.Tensor, []bool, error) {
	segs := make([]*tensors.Tensor, len(g.segs))
	scalar := make([]bool, len(segs))
	item := int(dtypeOf(g.dtype).Size())
	for s := range segs {
		t, err := g.splitOne(flat, s) // one segment's host copy at a time
		if err != nil {
			freeTensors(segs[:s])
			return nil, nil, err
		}
		segs[s] = t
		var first []byte
		_ = t.ConstBytes(func(b []byte) {
			if len(b) >= item && uniform(b, item) {
				first = bytes.Clone(b[:item])
			}
		})
		if first != nil {
			one := tensors.FromShape(shapes.Make(dtypeOf(g.dtype)))
			if err := one.MutableBytes(func(b []byte) { copy(b, first) }); err != nil {
				freeTensors(segs[:s])
				return nil, nil, err
			}
			segs[s], scalar[s] = one, true
		}
		if segs[s], err = e.upload(segs[s], &e.uploads.OptState); err != nil {
			freeTensors(segs[:s])
			return nil, nil, err
		}
	}
	return segs, scalar, nil
}

// uniform reports whether b is one item's bytes repeated.
func uniform(b []byte, item int) bool {
	for i := item; i < len(b); i += item {
		if !bytes.Equal(b[i:i+item], b[:item]) {
			return false
		}
	}
	return true
}

// stateSegmentDims is the device shape of leaf l's segment s: [size], or a scalar for a mask
// segment held as one value.
func (g *paramGroup) stateSegmentDims(l, s int) []int {
	if l < len(g.scalar) && s < len(g.scalar[l]) && g.scalar[l][s] {
		return []int{}
	}
	return []int{g.segs[s].size}
}

// Layouts lists the groups' layouts, in group order.
func (e *Engine) Layouts() []*optimizers.Layout {
	out := make([]*optimizers.Layout, len(e.groups))
	for i, g := range e.groups {
		out[i] = g.layout
	}
	return out
}

// GroupNames lists the parameter groups, in group order.
func (e *Engine) GroupNames() []string {
	names := make([]string, len(e.groups))
	for i, g := range e.groups {
		names[i] = g.name
	}
	return names
}

// GroupSizes lists each group's array count and value count, in group order.
func (e *Engine) GroupSizes() (arrays, values []int) {
	for _, g := range e.groups {
		arrays, values = append(arrays, len(g.vars)), append(values, g.size)
	}
	return arrays, values
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
func (e *Engine) layoutDigest() string {
	var b strings.Builder
	for _, g := range e.groups {
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
func (e *Engine) Parameters() (map[string]*tensors.Tensor, error) {
	out := map[string]*tensors.Tensor{}
	read := readCache{}
	for _, s := range e.stateSlots() {
		if s.kind != slotParam {
			continue
		}
		data, err := read.bytes(s)
		if err != nil {
			return nil, fmt.Errorf("reading %s back: %w", s.name, err)
		}
		t := tensors.FromShape(s.shape)
		if s.shape.Size() > 0 {
			if err := t.MutableBytes(func(b []byte) { copy(b, data) }); err != nil {
				return nil, err
			}
		}
		out[strings.TrimPrefix(s.name, paramPrefix)] = t
	}
	return out, nil
}

// ParamArrays counts the parameter arrays over all groups.
func (e *Engine) ParamArrays() int {
	k := 0
	for _, g := range e.groups {
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
