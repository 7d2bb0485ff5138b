package markers

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// DeviceValue is a Device field's host value as stored: a scalar or a regular multi-dimensional
// slice, what tensors.FromAnyValue takes. Treat a slice as read-only.
type DeviceValue struct {
	Name  string
	Value any
}

// DeviceValues returns the host value of every Device field in declaration order. e is an E or
// a *E.
func DeviceValues(e any) ([]DeviceValue, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return nil, err
	}
	var out []DeviceValue
	for _, f := range tr.Fields {
		if f.Kind == KindDevice {
			out = append(out, DeviceValue{f.Name, v.Field(f.Index).Interface().(deviceSlot).hostValue()})
		}
	}
	return out, nil
}

// DeviceValueOf returns the host value of the named Device field. A Host or GraphConst field is
// refused: it is already a host value, and reading the field directly is the way to get it.
func DeviceValueOf(e any, name string) (any, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return nil, err
	}
	f, err := deviceField(tr, name, "DeviceValueOf")
	if err != nil {
		return nil, err
	}
	return v.Field(f.Index).Interface().(deviceSlot).hostValue(), nil
}

// DeviceShapeOf returns the shape (dtype and dimensions) of the named Device field's host value:
// the shape the graph parameter bound to it must have.
func DeviceShapeOf(e any, name string) (shapes.Shape, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return shapes.Shape{}, err
	}
	f, err := deviceField(tr, name, "DeviceShapeOf")
	if err != nil {
		return shapes.Shape{}, err
	}
	return hostShape(tr, f, v.Field(f.Index).Interface().(deviceSlot).hostValue())
}

// SetDevice writes a new host value into a Device field of e (a non-nil *E). It keeps the
// promise that a Device write never recompiles, so it refuses what would break it: a GraphConst
// field (it bakes: a new value is a different program), a Host field (it reaches no trace:
// writing it here would change nothing compiled), and a value of another type or shape (either
// is a different program). Each error names the field and the fix. Slices are copied.
func SetDevice(e any, name string, value any) error {
	tr, v, err := mutableStruct(e)
	if err != nil {
		return err
	}
	f, err := deviceField(tr, name, "SetDevice")
	if err != nil {
		return err
	}
	if s, ok := value.(deviceSlot); ok && s.selfType() == tr.Type.Field(f.Index).Type {
		value = s.hostValue()
	}
	if value == nil || reflect.TypeOf(value) != f.Type {
		return fmt.Errorf("markers: SetDevice: field %s of %s holds %s, got %T (%v): a different type is a "+
			"different program; pass a %s", f.Name, tr.Name, f.Type, value, value, f.Type)
	}
	fv := v.Field(f.Index)
	old, err := hostShape(tr, f, fv.Interface().(deviceSlot).hostValue())
	if err != nil {
		return err
	}
	now, err := hostShape(tr, f, value)
	if err != nil {
		return fmt.Errorf("markers: SetDevice: %w", err)
	}
	if !old.Equal(now) {
		return fmt.Errorf("markers: SetDevice: field %s of %s has shape %s, got %s: a different shape is a "+
			"different program; set it on a new experiment (Apply) and build a new run", f.Name, tr.Name, old, now)
	}
	setField(v, f, deepCopySlices(reflect.ValueOf(value)))
	return nil
}

func deviceField(tr *Traits, name, verb string) (Field, error) {
	f, ok := tr.Field(name)
	if !ok || !f.Exported {
		return Field{}, fmt.Errorf("markers: %s: no field %s in %s; Device fields: %s",
			verb, name, tr.Name, orNone(tr.DeviceFields()))
	}
	switch f.Kind {
	case KindGraphConst:
		if verb == "SetDevice" {
			return Field{}, fmt.Errorf("markers: SetDevice: field %s of %s is GraphConst: it bakes into the program "+
				"and is in the compile key, so a new value is a different program; set it on a new experiment "+
				"(Apply) and build a new run, which recompiles only what the change touches", f.Name, tr.Name)
		}
		return Field{}, fmt.Errorf("markers: %s: field %s of %s is GraphConst, not Device: it is already a host "+
			"value; read the field directly", verb, f.Name, tr.Name)
	case KindHost:
		if verb == "SetDevice" {
			return Field{}, fmt.Errorf("markers: SetDevice: field %s of %s is Host: it reaches no trace, so writing "+
				"it here would change nothing compiled; set it on the experiment (Apply) and build a new run", f.Name, tr.Name)
		}
		return Field{}, fmt.Errorf("markers: %s: field %s of %s is Host, not Device: it is already a host value; "+
			"read the field directly", verb, f.Name, tr.Name)
	}
	return f, nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// hostShape is the GoMLX shape of a Device host value; an empty or ragged slice has none.
func hostShape(tr *Traits, f Field, value any) (shapes.Shape, error) {
	s, err := shapes.FromAnyValue(value)
	if err != nil {
		return shapes.Shape{}, fmt.Errorf("markers: Device field %s of %s holds a %T that is not a tensor "+
			"(an empty or ragged slice?): give it a value of regular shape before setup: %v", f.Name, tr.Name, value, err)
	}
	return s, nil
}

func deepCopySlices(v reflect.Value) reflect.Value {
	if v.Kind() != reflect.Slice || v.IsNil() {
		return v
	}
	out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
	for i := 0; i < v.Len(); i++ {
		out.Index(i).Set(deepCopySlices(v.Index(i)))
	}
	return out
}
