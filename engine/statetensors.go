package engine

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/tensorfile"
)

// The training state as named tensors, both ways: StateTensors reads a part of it back under the
// record names, StageState checks named tensors against it (the fit check), and InstallState
// swaps staged tensors in. A checkpoint's record and restore and the model view's Weights are
// built on these alone, so a name, a dtype or a shape means the same in all three.

// The record's tensor names: "param/" + the parameter's scope path ("param/dense_0/weights"),
// "opt/<group>/<state leaf>/<scope path>" for optimizer state ("opt/default/0.radam.mu/
// dense_0/weights"; the constant leaves, Decay's anchor and mask, are rebuilt at setup from
// BuildModel's weights and not stored), "state" + the variable's scope and name for layer state
// ("state/batch_norm/mean", and the RNG state "state/#rngState").
const (
	paramPrefix = "param/"
	optPrefix   = "opt/"
	statePrefix = "state"

	rngStateName = statePrefix + context.RootScope + context.RNGStateVariableName
)

// slotKind says which part of the training state a slot is.
type slotKind int

const (
	slotParam slotKind = iota
	slotOpt
	slotLayer
)

// stateSlot is one tensor of the training state under its record name: the device buffer in e.st
// that holds it (so a restore can replace it), where in that buffer (a parameter or optimizer
// state array is a slice of its group's segment, flat.go; a layer state variable its own buffer), the
// variable a trace reads it through (none for optimizer state), and the upload counter of its
// kind.
type stateSlot struct {
	name    string
	buf     **tensors.Tensor
	at      int          // element offset in *buf
	shape   shapes.Shape // the array's own shape (and dtype)
	v       *context.Variable
	counter *int
	kind    slotKind
	rng     bool // the context's RNG state
}

// bytesIn is the slot's bytes within its buffer's bytes.
func (s stateSlot) bytesIn(buf []byte) []byte {
	item := int(s.shape.DType.Size())
	from, to := s.at*item, (s.at+s.shape.Size())*item
	return buf[from:to:to] // capped: an append by the caller cannot reach the next slot's bytes
}

// readCache reads each device buffer back once, for the several arrays it holds.
type readCache map[**tensors.Tensor][]byte

// bytes is the slot's bytes, read back from the device (shared with other slots of the buffer).
func (c readCache) bytes(s stateSlot) ([]byte, error) {
	buf, ok := c[s.buf]
	if !ok {
		var err error
		if buf, err = ReadBack(*s.buf); err != nil {
			return nil, err
		}
		c[s.buf] = buf
	}
	return s.bytesIn(buf), nil
}

// stateSlots lists the training state's tensors in record order: parameters by group, then the
// optimizer's non-constant state leaves by group, leaf and parameter, then the layer state.
func (e *Engine) stateSlots() []stateSlot {
	var out []stateSlot
	for gi, g := range e.groups {
		st := &e.st.groups[gi]
		for j, v := range g.vars {
			out = append(out, stateSlot{name: paramPrefix + strings.Join(g.keypaths[j], "/"), buf: &st.params[g.seg[j]], at: g.local[j], shape: v.Shape(), v: v, counter: &e.uploads.Params, kind: slotParam})
		}
	}
	for gi, g := range e.groups {
		st := &e.st.groups[gi]
		leaves := g.opt.StateNames()
		for s := range st.opt {
			if g.constLeaf(s) {
				continue
			}
			for j, v := range g.vars {
				name := optPrefix + g.name + "/" + leaves[s] + "/" + strings.Join(g.keypaths[j], "/")
				out = append(out, stateSlot{name: name, buf: &st.opt[s][g.seg[j]], at: g.local[j], shape: v.Shape(), counter: &e.uploads.OptState, kind: slotOpt})
			}
		}
	}
	for i, v := range e.stateVars {
		rng := v.Name() == context.RNGStateVariableName && v.Scope() == context.RootScope
		out = append(out, stateSlot{name: statePrefix + v.ScopeAndName(), buf: &e.st.layer[i], shape: e.st.layer[i].Shape(), v: v, counter: &e.uploads.LayerState, kind: slotLayer, rng: rng})
	}
	return out
}

// Part selects what a conversion covers besides the parameters and the layer state.
type Part int

const (
	WeightsPart Part = iota // parameters and layer state without the RNG state: a new run from the weights
	ModelPart               // with the RNG state: every variable a trace may read (the model view)
	WholePart               // with the optimizer's state too: a checkpoint record, a resume
)

func (p Part) opt() bool               { return p == WholePart }   // the optimizer's state
func (p Part) rng() bool               { return p != WeightsPart } // the RNG state: layer state, but the run's progress
func (p Part) covers(s stateSlot) bool { return (p.opt() || s.kind != slotOpt) && (p.rng() || !s.rng) }

// leavesOut reports whether a named tensor is of a part p excludes: loading the weights of a
// record ignores its optimizer and RNG state rather than calling them foreign to the model.
func (p Part) leavesOut(name string) bool {
	return (!p.opt() && strings.HasPrefix(name, optPrefix)) || (!p.rng() && name == rngStateName)
}

// StateTensor is one tensor of the training state read back to the host, under its record name
// (Data in the host's byte order; a record refuses a big-endian host), with the variable a trace
// reads it through (nil for optimizer state) and its dtype.
type StateTensor struct {
	checkpoint.Tensor
	Var   *context.Variable
	DType dtypes.DType
}

// StateTensors reads the part p of the training state back to the host, in record order, one
// tensor per array: each device buffer is read once and its arrays cut out of it.
func (e *Engine) StateTensors(p Part) ([]StateTensor, error) {
	var out []StateTensor
	read := readCache{}
	for _, s := range e.stateSlots() {
		if !p.covers(s) {
			continue
		}
		dt, ok := checkpointDType(s.shape.DType)
		if !ok {
			return nil, fmt.Errorf("%s: dtype %s has no checkpoint dtype", s.name, s.shape.DType)
		}
		b, err := read.bytes(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		// b is a part of a buffer read back for this call alone, so it is the caller's without a
		// copy: a second one held a gpt2 checkpoint's 985 MB twice.
		out = append(out, StateTensor{checkpoint.Tensor{Name: s.name, DType: dt, Shape: slices.Clone(s.shape.Dimensions), Data: b}, s.v, s.shape.DType})
	}
	return out, nil
}

// stagedTensor is a named tensor checked against its slot and made a host tensor, ready to upload.
type stagedTensor struct {
	slot stateSlot
	t    *tensors.Tensor
}

// Staged is named tensors checked against the training state, ready to install.
type Staged struct{ ts []stagedTensor }

// StageState checks named tensors against the part p of the training state, all at once: each
// slot p covers needs its tensor, of the model's dtype and shape, and no tensor may be foreign
// to the model (one of a part p leaves out is ignored). The error names every misfit and the
// checkpoint (path). Nothing on the engine changes.
func (e *Engine) StageState(ts []checkpoint.Tensor, p Part, path string) (Staged, error) {
	staged, err := e.stageState(ts, p, path)
	return Staged{staged}, err
}

func (e *Engine) stageState(ts []checkpoint.Tensor, p Part, path string) ([]stagedTensor, error) {
	byName := make(map[string]checkpoint.Tensor, len(ts))
	for _, t := range ts {
		byName[t.Name] = t
	}
	var staged []stagedTensor
	var missing, wrong, extra []string
	used := map[string]bool{}
	for _, s := range e.stateSlots() {
		if !p.covers(s) {
			continue
		}
		used[s.name] = true
		t, ok := byName[s.name]
		if !ok {
			missing = append(missing, s.name)
			continue
		}
		h, err := hostTensorFrom(t, s.shape)
		if err != nil {
			wrong = append(wrong, err.Error())
			continue
		}
		staged = append(staged, stagedTensor{s, h})
	}
	for _, t := range ts {
		if !used[t.Name] && !p.leavesOut(t.Name) {
			extra = append(extra, t.Name)
		}
	}
	if len(missing)+len(wrong)+len(extra) > 0 {
		return nil, misfitError(path, missing, extra, wrong)
	}
	return staged, nil
}

// misfitError names every way a checkpoint's tensors do not fit the model.
func misfitError(path string, missing, extra, wrong []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint %s does not fit this model", path)
	if len(missing) > 0 {
		fmt.Fprintf(&b, "; missing: %s", strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		fmt.Fprintf(&b, "; not in this model: %s", strings.Join(extra, ", "))
	}
	if len(wrong) > 0 {
		fmt.Fprintf(&b, "; %s", strings.Join(wrong, "; "))
	}
	return errors.New(b.String())
}

// InstallState uploads staged tensors (counted in Uploads, one upload per device buffer they
// touch) and only then replaces the state with them, so a failed transfer leaves the state as it
// was; path names their source in errors.
func (e *Engine) InstallState(s Staged, path string) error { return e.installState(s.ts, path) }

// installState builds each touched buffer on the host (from the staged arrays alone when they
// cover it, else on a read-back of its current value), uploads them all, then swaps them in.
func (e *Engine) installState(staged []stagedTensor, path string) error {
	type patch struct {
		buf     **tensors.Tensor
		arrays  []stagedTensor
		counter *int
	}
	var order []*patch
	byBuf := map[**tensors.Tensor]*patch{}
	for _, s := range staged {
		p := byBuf[s.slot.buf]
		if p == nil {
			p = &patch{buf: s.slot.buf, counter: s.slot.counter}
			byBuf[s.slot.buf] = p
			order = append(order, p)
		}
		p.arrays = append(p.arrays, s)
	}
	placed := make([]*tensors.Tensor, 0, len(order))
	for _, p := range order {
		h, err := e.patchedBuffer(*p.buf, p.arrays)
		if err == nil {
			h, err = e.upload(h, p.counter)
		}
		if err != nil {
			freeTensors(placed)
			return fmt.Errorf("restoring %s from %s: %w", p.arrays[0].slot.name, path, err)
		}
		placed = append(placed, h)
	}
	var errs []error
	for i, p := range order {
		old := *p.buf
		*p.buf = placed[i]
		if old != nil {
			if err := old.FinalizeAll(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		e.warn(fmt.Sprintf("restoring from %s: freeing the replaced state: %v", path, errors.Join(errs...)))
	}
	return nil
}

// patchedBuffer is a host copy of device buffer cur with the staged arrays written into their
// places. Arrays that cover every element of it need no read-back.
func (e *Engine) patchedBuffer(cur *tensors.Tensor, arrays []stagedTensor) (*tensors.Tensor, error) {
	covered := 0
	for _, s := range arrays {
		covered += s.slot.shape.Size()
	}
	var base []byte
	if covered < cur.Shape().Size() {
		var err error
		if base, err = ReadBack(cur); err != nil {
			return nil, err
		}
	}
	h := tensors.FromShape(cur.Shape())
	if cur.Shape().Size() == 0 {
		return h, nil
	}
	var inner error
	err := h.MutableBytes(func(dst []byte) {
		copy(dst, base)
		for _, s := range arrays {
			if s.slot.shape.Size() > 0 {
				inner = errors.Join(inner, s.t.ConstBytes(func(src []byte) { copy(s.slot.bytesIn(dst), src) }))
			}
		}
	})
	return h, errors.Join(err, inner)
}

// checkpointDType is the checkpoint dtype of a GoMLX dtype, from tensorfile's one table; ok is
// false for one a checkpoint cannot hold (complex, 4- and 8-bit floats, 2- and 4-bit integers).
func checkpointDType(dt dtypes.DType) (d tensorfile.DType, ok bool) {
	d = tensorfile.DTypeOf(dt)
	return d, d != ""
}

// ReadBack copies a device tensor's bytes to the host, leaving no host copy on the tensor.
func ReadBack(t *tensors.Tensor) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading %s back from the device: %v", t.Shape(), r)
		}
	}()
	if t.Shape().Size() == 0 {
		return []byte{}, nil
	}
	if err := t.ConstBytes(func(b []byte) { data = bytes.Clone(b) }); err != nil {
		return nil, fmt.Errorf("reading %s back from the device: %w", t.Shape(), err)
	}
	if t.IsOnAnyDevice() {
		t.FinalizeLocal() // the device copy stays the value; keep no second copy on the host
	}
	return data, nil
}

// hostTensorFrom makes the host tensor a record's tensor holds, refusing another dtype or shape
// than the model's.
func hostTensorFrom(t checkpoint.Tensor, want shapes.Shape) (*tensors.Tensor, error) {
	dt, _ := checkpointDType(want.DType)
	if t.DType != dt || !slices.Equal(t.Shape, want.Dimensions) {
		return nil, fmt.Errorf("%s is %s%v in the checkpoint, %s%v in this model", t.Name, t.DType, t.Shape, dt, want.Dimensions)
	}
	h := tensors.FromShape(want)
	if want.Size() == 0 {
		return h, nil
	}
	err := h.MutableBytes(func(b []byte) { copy(b, t.Data) })
	return h, err
}
