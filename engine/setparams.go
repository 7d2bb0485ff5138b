package engine

import (
	"errors"
	"fmt"
	"strings"
)

// SetParameters replaces parameters by keypath (the names Parameters returns, "dense_0/weights")
// with host values: a *tensors.Tensor (copied: the caller keeps it) or a typed Go array such as
// [][]float32 or []float32, as tensors.FromAnyValue reads it. Any subset may be given. Every
// entry is checked before anything changes: an unknown name is refused listing the valid ones,
// and a value of another dtype or shape than the parameter's is refused naming the parameter and
// both shapes (no conversion: a float64 array for a float32 parameter is an error, not a silent
// rounding). The new values are uploaded once, one upload per device buffer they touch (counted
// in Uploads().Params: a group's small arrays share one buffer, patched on the host when only
// some of them are given; flat.go), and the next program run reads them: parameters are program
// inputs, so nothing recompiles.
//
// Only the parameters change. The optimizer's state (moments, step counts, and Decay's anchor,
// which stays at the weights setup placed) is untouched, as are the layer state and the step and
// epoch counters: this loads weights into a run, it does not restart it. To start a run from a
// checkpoint's weights with a fresh anchor, use WithCheckpoint.
func (e *Engine) SetParameters(values map[string]any) error {
	slots := map[string]stateSlot{}
	var names []string
	for _, s := range e.stateSlots() {
		if s.kind == slotParam {
			name := strings.TrimPrefix(s.name, paramPrefix)
			slots[name] = s
			names = append(names, name)
		}
	}
	var staged []stagedTensor
	var errs []error
	for _, name := range sortedKeys(values) {
		s, ok := slots[name]
		if !ok {
			errs = append(errs, fmt.Errorf("SetParameters: no parameter %q; the parameters are %s", name, strings.Join(names, ", ")))
			continue
		}
		if values[name] == nil {
			errs = append(errs, fmt.Errorf("SetParameters: parameter %s: the value is nil", name))
			continue
		}
		t, err := hostTensor(values[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("SetParameters: parameter %s: %w", name, err))
			continue
		}
		if want := s.shape; !t.Shape().Equal(want) {
			errs = append(errs, fmt.Errorf("SetParameters: parameter %s is %s, the value given is %s: pass the parameter's dtype and shape", name, want, t.Shape()))
			continue
		}
		staged = append(staged, stagedTensor{s, t})
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return e.installState(staged, "SetParameters")
}
