package optimizers

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

type anchorKind int

const (
	anchorZero anchorKind = iota
	anchorW0
	anchorArray
)

// Anchor is what Decay pulls toward: zero (ordinary weight decay), the initial weights (w0, L2-SP:
// Li, Grandvalet & Davoine 2018), or an explicit array. It is a field of Decay, never captured
// implicitly: see AnchorW0 for what Init must be given.
type Anchor struct {
	kind  anchorKind
	array *tensors.Tensor
}

var (
	// AnchorZero decays toward zero. It emits no subtraction and carries no parameter-sized buffer.
	AnchorZero = Anchor{kind: anchorZero}
	// AnchorW0 decays toward the parameters exactly as BuildModel returned them: Chain.Init must
	// be given those, before any restore (on resume, Init from BuildModel's weights and then load
	// the checkpoint's non-constant leaves), or the anchor is the restored weights.
	AnchorW0 = Anchor{kind: anchorW0}
)

// AnchorArray decays toward t: the group's flat anchor (any shape with the group's element count
// and the parameters' dtype). It is the extension point: initialize from A, anchor to B.
func AnchorArray(t *tensors.Tensor) Anchor { return Anchor{kind: anchorArray, array: t} }

// String is the anchor's kind: "zero", "w0" or "array" (what Describe and the binding report show).
func (a Anchor) String() string {
	switch a.kind {
	case anchorW0:
		return "w0"
	case anchorArray:
		return "array"
	default:
		return "zero"
	}
}

// IsZero reports whether the anchor is zero (no anchor buffer).
func (a Anchor) IsZero() bool { return a.kind == anchorZero }

// NoDecayMask is the per-leaf decay exclusion of one group: built host-side once from the group's
// Layout. Decay turns it into a flat 0/1 state leaf (a device buffer passed as a value, so its
// contents never change the graph or the compile key). Exclusion dominates the anchor: an
// excluded element's decay term is 0 whatever the anchor is.
type NoDecayMask struct {
	layout   *Layout
	excluded []bool
}

// NoDecayFunc decides whether one leaf is excluded from decay. It runs host-side, once.
type NoDecayFunc func(keypath []string, shape shapes.Shape) bool

// DefaultNoDecay excludes every 1-D parameter: biases and normalization scales and offsets. It is
// structural rather than name-based, so it does not depend on a layer naming convention; extend it
// with ||, e.g. DefaultNoDecay(kp, s) || slices.Contains(kp, "embeddings").
func DefaultNoDecay(keypath []string, shape shapes.Shape) bool { return shape.Rank() == 1 }

// NoDecayMask evaluates noDecay (DefaultNoDecay when nil) on every leaf of the layout.
func (l *Layout) NoDecayMask(noDecay NoDecayFunc) *NoDecayMask {
	if noDecay == nil {
		noDecay = DefaultNoDecay
	}
	m := &NoDecayMask{layout: l, excluded: make([]bool, len(l.Leaves))}
	for i, leaf := range l.Leaves {
		m.excluded[i] = noDecay(append([]string(nil), leaf.Keypath...), leaf.Shape)
	}
	return m
}

// Excluded lists the keypaths of the excluded leaves, in layout order.
func (m *NoDecayMask) Excluded() [][]string {
	var out [][]string
	for i, ex := range m.excluded {
		if ex {
			out = append(out, append([]string(nil), m.layout.Leaves[i].Keypath...))
		}
	}
	return out
}

// ExcludesNothing reports whether every leaf is decayed (then Decay carries no mask buffer).
func (m *NoDecayMask) ExcludesNothing() bool {
	for _, ex := range m.excluded {
		if ex {
			return false
		}
	}
	return true
}

// Tensor builds the flat mask, 0 for excluded elements and 1 elsewhere, in params' dtype.
func (m *NoDecayMask) Tensor(params shapes.Shape) (*tensors.Tensor, error) {
	if params.Size() != m.layout.Size {
		return nil, fmt.Errorf("optimizers: no-decay mask of group %q covers %d elements but the parameters have %d (shape %s): build the mask from the same Layout as the group's flat buffer", m.layout.Group, m.layout.Size, params.Size(), params)
	}
	// Built in params' dtype and shape directly: a float64 mask cast afterwards held three times
	// the mask's bytes at setup (656 MB and 328 MB for GPT-2 small's 86M parameters).
	one := tensors.FromAnyValue(shapes.CastAsDType(1.0, params.DType))
	var unit []byte
	if err := one.ConstBytes(func(b []byte) { unit = slices.Clone(b) }); err != nil {
		return nil, err
	}
	t := tensors.FromShape(params)
	err := t.MutableBytes(func(b []byte) {
		n := len(unit)
		for i, leaf := range m.layout.Leaves {
			if m.excluded[i] {
				continue
			}
			for j := leaf.Offset; j < leaf.Offset+leaf.Size; j++ {
				copy(b[j*n:], unit)
			}
		}
	})
	return t, err
}

// decayTransform is decoupled decay, the last member of a chain:
//
//	update = update - lambda * mask * (params - anchor)
//
// lambda is a device input that arrives already multiplied by the group's effective learning rate
// (core does that on the host), so an LR schedule modulates regularization. The mask factor is
// emitted only when some leaf is excluded, the subtraction only for a non-zero anchor.
type decayTransform struct {
	anchor Anchor
	mask   *NoDecayMask // nil: decay everything
}

// Decay returns the decoupled decay transform. mask nil (or excluding nothing) decays every
// element. It must be the last transform of a chain: it is Terminal, and NewChain checks.
func Decay(anchor Anchor, mask *NoDecayMask) Transform {
	if mask != nil && mask.ExcludesNothing() {
		mask = nil
	}
	return &decayTransform{anchor: anchor, mask: mask}
}

// DecayName is Decay's Name.
const DecayName = "decay"

func (t *decayTransform) Name() string { return DecayName }

func (t *decayTransform) Describe() string {
	mask := "none"
	if t.mask != nil {
		mask = "leaf"
	}
	return fmt.Sprintf("decay(anchor=%s,mask=%s)", t.anchor, mask)
}

func (t *decayTransform) HyperFields() []string { return []string{LambdaField} }

func (t *decayTransform) StateNames() []string {
	var out []string
	if !t.anchor.IsZero() {
		out = append(out, "anchor")
	}
	if t.mask != nil {
		out = append(out, "mask")
	}
	return out
}

func (t *decayTransform) ConstantLeaves() []bool {
	return slices.Repeat([]bool{true}, len(t.StateNames()))
}

// EndsChain implements Terminal: decay is decoupled, so it applies to the base rule's finished
// update; anywhere earlier its term would feed the moments (coupled L2).
func (t *decayTransform) EndsChain() (what, why string) {
	return "Decay", "it is decoupled: applied after the base rule, never fed through its moments"
}

func (t *decayTransform) Nonschedulable() map[string]string {
	return map[string]string{
		"anchor": "the anchor is parameter-sized: scheduling it would upload a parameter-sized buffer every step",
		"mask":   "the no-decay mask is parameter-sized and resolved once at setup",
	}
}

func (t *decayTransform) Init(params *tensors.Tensor) (State[*tensors.Tensor], error) {
	if err := checkFloatParams(DecayName, params); err != nil {
		return nil, err
	}
	var st DecayState[*tensors.Tensor]
	switch t.anchor.kind {
	case anchorW0:
		w0, err := params.LocalClone()
		if err != nil {
			return nil, fmt.Errorf("optimizers: decay anchor w0: copying the initial parameters: %w", err)
		}
		st.Anchor = w0
	case anchorArray:
		a := t.anchor.array
		if a == nil {
			return nil, fmt.Errorf("optimizers: decay anchor is AnchorArray(nil): pass the group's flat anchor tensor, or use AnchorZero or AnchorW0")
		}
		if a.DType() != params.DType() || a.Shape().Size() != params.Shape().Size() {
			return nil, fmt.Errorf("optimizers: decay anchor array has shape %s but the group's parameters have %s: the anchor must have the same element count and dtype (flatten it with the group's Layout)", a.Shape(), params.Shape())
		}
		c, err := a.LocalClone()
		if err != nil {
			return nil, fmt.Errorf("optimizers: decay anchor array: %w", err)
		}
		if st.Anchor, err = reshapeHost(c, params.Shape()); err != nil {
			return nil, err
		}
	}
	if t.mask != nil {
		m, err := t.mask.Tensor(params.Shape())
		if err != nil {
			return nil, err
		}
		st.Mask = m
	}
	return st, nil
}

func (t *decayTransform) Update(in UpdateInput) (*graph.Node, State[*graph.Node]) {
	var st DecayState[*graph.Node]
	i := 0
	if !t.anchor.IsZero() {
		st.Anchor, i = in.State[i], i+1
	}
	if t.mask != nil {
		st.Mask = in.State[i]
	}
	lambda := hyperScalar(in.Hyper, DecayName, LambdaField, in.Params.DType())
	diff := in.Params
	if st.Anchor != nil {
		diff = graph.Sub(diff, st.Anchor)
	}
	if st.Mask != nil {
		diff = graph.Mul(st.Mask, diff)
	}
	return graph.Sub(in.Updates, graph.Mul(lambda, diff)), st
}

var (
	_ Transform              = (*decayTransform)(nil)
	_ NonschedulableDeclarer = (*decayTransform)(nil)
	_ ConstantLeaves         = (*decayTransform)(nil)
	_ Terminal               = (*decayTransform)(nil)
)

// reshapeHost returns t's data with shape s (same element count and dtype), copying.
func reshapeHost(t *tensors.Tensor, s shapes.Shape) (*tensors.Tensor, error) {
	if t.Shape().Equal(s) {
		return t, nil
	}
	out := tensors.FromShape(s)
	var err error
	if cerr := t.ConstFlatData(func(src any) {
		err = out.MutableFlatData(func(dst any) { reflect.Copy(reflect.ValueOf(dst), reflect.ValueOf(src)) })
	}); cerr != nil {
		return nil, cerr
	}
	return out, err
}
