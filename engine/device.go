package engine

import (
	"fmt"
	"reflect"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/markers"
)

// PlaceDeviceFields uploads each Device field's host value once.
func (e *Engine) PlaceDeviceFields() error {
	vals, err := markers.DeviceValues(e.exp)
	if err != nil {
		return err
	}
	e.dev = map[string]*tensors.Tensor{}
	e.devNames = nil
	for _, dv := range vals {
		t, err := hostTensor(dv.Value)
		if err != nil {
			return fmt.Errorf("Device field %s: %w", dv.Name, err)
		}
		e.devNames = append(e.devNames, dv.Name)
		if e.dev[dv.Name], err = e.upload(t, &e.uploads.Device); err != nil {
			return fmt.Errorf("Device field %s: %w", dv.Name, err)
		}
	}
	return nil
}

// hostTensor makes a tensor nitro owns from a host value (a caller's tensor is copied, since
// nitro uploads, donates and frees what it owns).
func hostTensor(v any) (t *tensors.Tensor, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cannot make a tensor of %T: %v", v, r)
		}
	}()
	if t, ok := v.(*tensors.Tensor); ok {
		return t.LocalClone()
	}
	return tensors.FromAnyValue(v), nil
}

// upload places t (a tensor nitro owns) on device 0, drops its host copy, and counts it. A failed
// transfer (device out of memory, a lost device) is an error, never a panic.
func (e *Engine) upload(t *tensors.Tensor, counter *int) (_ *tensors.Tensor, err error) {
	if t.IsOnDevice(0) {
		return t, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("uploading %s to the device: %v", t.Shape(), r)
		}
	}()
	if err := t.MaterializeOnDevice(e.backend.Backend, false, 0); err != nil {
		return nil, fmt.Errorf("uploading %s to the device: %w", t.Shape(), err)
	}
	t.FinalizeLocal() // the device copy is the value now; keep no second copy on the host
	*counter++
	return t, nil
}

// SetDevice writes a new value into a Device field of the experiment and its device copy. It
// reuses every compiled program: Device values are program inputs, never part of a key. It
// refuses a GraphConst field (it bakes), a Host field (traced code never sees it) and a value of
// another dtype or shape (that would be another program, or fail inside XLA).
func (e *Engine) SetDevice(name string, value any) error {
	old, ok := e.dev[name]
	if err := markers.SetDevice(e.exp, name, value); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("internal: Device field %q has no device value", name)
	}
	v, err := markers.DeviceValueOf(e.exp, name)
	if err != nil {
		return err
	}
	t, err := hostTensor(v)
	if err != nil {
		return fmt.Errorf("Device field %s: %w", name, err)
	}
	if !t.Shape().Equal(old.Shape()) {
		return fmt.Errorf("Device field %s: new value has shape %s, the resident one %s", name, t.Shape(), old.Shape())
	}
	return e.ReplaceDevice(name, t)
}

// ReplaceDevice installs t (host) as Device field name's device copy, freeing the old one only
// once the new one is on the device: a failed upload leaves the field as it was.
func (e *Engine) ReplaceDevice(name string, t *tensors.Tensor) error {
	old := e.dev[name]
	nt, err := e.upload(t, &e.uploads.Device)
	if err != nil {
		return fmt.Errorf("Device field %s: %w", name, err)
	}
	e.dev[name] = nt
	if old != nil {
		if err := old.FinalizeAll(); err != nil {
			return fmt.Errorf("Device field %s: freeing the old value: %w", name, err)
		}
	}
	return nil
}

// DeviceValue reads a Device field's value as the programs see it: the device copy New,
// SetDevice or a schedule uploaded, read back and typed as the field's element. A direct
// assignment to the field does not reach the device (the next verb warns), so it is not
// what this returns.
func (e *Engine) DeviceValue(name string) (any, error) {
	field, err := markers.DeviceValueOf(e.exp, name) // checks the name; gives the element type
	if err != nil {
		return nil, err
	}
	t := e.dev[name]
	if t == nil {
		return field, nil
	}
	data, err := ReadBack(t)
	if err != nil {
		return nil, fmt.Errorf("Device field %s: %w", name, err)
	}
	h := tensors.FromShape(t.Shape())
	if err := h.MutableBytes(func(b []byte) { copy(b, data) }); err != nil {
		return nil, fmt.Errorf("Device field %s: %w", name, err)
	}
	v := reflect.ValueOf(h.Value())
	if want := reflect.TypeOf(field); v.Type() != want {
		v = v.Convert(want)
	}
	return v.Interface(), nil
}

// DeviceTensor is Device field name's device copy (nil when it has none): compare it to an
// earlier one to see whether the field was rewritten.
func (e *Engine) DeviceTensor(name string) *tensors.Tensor { return e.dev[name] }

// DeviceNames lists the Device fields, in program-input order.
func (e *Engine) DeviceNames() []string { return e.devNames }
