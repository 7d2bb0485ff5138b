package core_test

import (
	"testing"

	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/markers"
)

// DeviceValue is what the programs read: a direct assignment to the field, which bypasses
// SetDevice and never reaches the device, does not change it; SetDevice does.
func TestDeviceValueIsTheDeviceCopy(t *testing.T) {
	e := newDev()
	n := coretest.MustNew(t, e, coretest.Data(t, 0))
	before, err := n.DeviceValue("Temperature")
	if err != nil {
		t.Fatal(err)
	}
	e.Temperature = markers.NewDevice(float32(7))
	if v, err := n.DeviceValue("Temperature"); err != nil || v != before {
		t.Errorf("after a direct assignment of 7, DeviceValue = %v, %v; want %v, the value on the device", v, err, before)
	}
	if err := n.SetDevice("Temperature", float32(3)); err != nil {
		t.Fatal(err)
	}
	if v, err := n.DeviceValue("Temperature"); err != nil || v != float32(3) {
		t.Errorf("after SetDevice(3), DeviceValue = %v, %v; want 3", v, err)
	}
	if v, err := n.DeviceValue("Shift"); err != nil {
		t.Errorf("DeviceValue(Shift), a vector field: %v, %v", v, err)
	} else if _, ok := v.([]float32); !ok {
		t.Errorf("DeviceValue(Shift) is %T, want []float32 like the field", v)
	}
}
