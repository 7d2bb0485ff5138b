package core

import (
	"fmt"
	"reflect"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/markers"
)

// placeDeviceFields uploads each Device field's host value once.
func (n *Nitro) placeDeviceFields() error {
	vals, err := markers.DeviceValues(n.e)
	if err != nil {
		return err
	}
	n.dev = map[string]*tensors.Tensor{}
	n.devNames = nil
	for _, dv := range vals {
		t, err := hostTensor(dv.Value)
		if err != nil {
			return fmt.Errorf("Device field %s: %w", dv.Name, err)
		}
		n.devNames = append(n.devNames, dv.Name)
		if n.dev[dv.Name], err = n.upload(t, &n.uploads.Device); err != nil {
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
func (n *Nitro) upload(t *tensors.Tensor, counter *int) (_ *tensors.Tensor, err error) {
	if t.IsOnDevice(0) {
		return t, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("uploading %s to the device: %v", t.Shape(), r)
		}
	}()
	if err := t.MaterializeOnDevice(n.backend.Backend, false, 0); err != nil {
		return nil, fmt.Errorf("uploading %s to the device: %w", t.Shape(), err)
	}
	t.FinalizeLocal() // the device copy is the value now; keep no second copy on the host
	*counter++
	return t, nil
}

// SetDevice writes a new value into a Device field of this live Nitro. It reuses every compiled
// program: Device values are program inputs, never part of a key. It refuses a GraphConst field
// (it bakes: build a new Nitro, which hits every cache entry the change does not move), a Host
// field (traced code never sees it) and a value of another dtype or shape (that would be another
// program, or fail inside XLA).
func (n *Nitro) SetDevice(name string, value any) (err error) {
	defer n.enter("SetDevice", &err, nil)()
	if n.isScheduledDevice(name) {
		return fmt.Errorf("Device field %s is driven by a schedule, which rewrites it every optimizer step: a value written here would last until the next step and no longer; change the schedule instead (Schedules()[%q])", name, name)
	}
	old, ok := n.dev[name]
	if err := markers.SetDevice(n.e, name, value); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("internal: Device field %q has no device value", name)
	}
	v, err := markers.DeviceValueOf(n.e, name)
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
	return n.replaceDevice(name, t)
}

// replaceDevice installs t (host) as Device field name's device copy, freeing the old one only
// once the new one is on the device: a failed upload leaves the field as it was.
func (n *Nitro) replaceDevice(name string, t *tensors.Tensor) error {
	old := n.dev[name]
	nt, err := n.upload(t, &n.uploads.Device)
	if err != nil {
		return fmt.Errorf("Device field %s: %w", name, err)
	}
	n.dev[name] = nt
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
func (n *Nitro) DeviceValue(name string) (any, error) {
	field, err := markers.DeviceValueOf(n.e, name) // checks the name; gives the element type
	if err != nil {
		return nil, err
	}
	t := n.dev[name]
	if t == nil {
		return field, nil
	}
	data, err := readBack(t)
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
