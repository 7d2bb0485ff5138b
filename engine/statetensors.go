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

// stateSlot is one tensor of the training state under its record name: where it lives in e.st
// (so a restore can replace it), the variable a trace reads it through (none for optimizer
// state), and the upload counter of its kind.
type stateSlot struct {
	name    string
	t       **tensors.Tensor
	v       *context.Variable
	counter *int
	kind    slotKind
	rng     bool // the context's RNG state
}

// stateSlots lists the training state's tensors in record order: parameters by group, then the
// optimizer's non-constant state leaves by group, leaf and parameter, then the layer state.
func (e *Engine) stateSlots() []stateSlot {
	var out []stateSlot
	for gi, g := range e.groups {
		st := &e.st.groups[gi]
		for j, v := range g.vars {
			out = append(out, stateSlot{name: paramPrefix + strings.Join(g.keypaths[j], "/"), t: &st.params[j], v: v, counter: &e.uploads.Params, kind: slotParam})
		}
	}
	for gi, g := range e.groups {
		st := &e.st.groups[gi]
		leaves := g.opt.StateNames()
		for s := range st.opt {
			if g.constLeaf(s) {
				continue
			}
			for j := range g.vars {
				name := optPrefix + g.name + "/" + leaves[s] + "/" + strings.Join(g.keypaths[j], "/")
				out = append(out, stateSlot{name: name, t: &st.opt[s][j], counter: &e.uploads.OptState, kind: slotOpt})
			}
		}
	}
	for i, v := range e.stateVars {
		rng := v.Name() == context.RNGStateVariableName && v.Scope() == context.RootScope
		out = append(out, stateSlot{name: statePrefix + v.ScopeAndName(), t: &e.st.layer[i], v: v, counter: &e.uploads.LayerState, kind: slotLayer, rng: rng})
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

// StateTensors reads the part p of the training state back to the host, in record order.
func (e *Engine) StateTensors(p Part) ([]StateTensor, error) {
	var out []StateTensor
	for _, s := range e.stateSlots() {
		if !p.covers(s) {
			continue
		}
		t := *s.t
		dt, ok := checkpointDType(t.DType())
		if !ok {
			return nil, fmt.Errorf("%s: dtype %s has no checkpoint dtype", s.name, t.DType())
		}
		data, err := ReadBack(t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		out = append(out, StateTensor{checkpoint.Tensor{Name: s.name, DType: dt, Shape: slices.Clone(t.Shape().Dimensions), Data: data}, s.v, t.DType()})
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
		h, err := hostTensorFrom(t, (*s.t).Shape())
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

// InstallState uploads staged tensors (counted in Uploads) and only then replaces the state
// with them, so a failed transfer leaves the state as it was; path names their source in errors.
func (e *Engine) InstallState(s Staged, path string) error { return e.installState(s.ts, path) }

func (e *Engine) installState(staged []stagedTensor, path string) error {
	placed := make([]*tensors.Tensor, 0, len(staged))
	for _, s := range staged {
		t, err := e.upload(s.t, s.slot.counter)
		if err != nil {
			freeTensors(placed)
			return fmt.Errorf("restoring %s from %s: %w", s.slot.name, path, err)
		}
		placed = append(placed, t)
	}
	var errs []error
	for i, s := range staged {
		old := *s.slot.t
		*s.slot.t = placed[i]
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
