package markers

import (
	"fmt"
	"reflect"
	"strings"
)

// Snapshot is an experiment's exported fields as they were when it was taken, each kept as a
// fingerprint of its value (ValueFingerprint: by content up to a budget, by identity beyond) and
// as the text a message shows (ValueText). A Device field is taken by its host value. Comparing
// a later state of the experiment with it (Changed) says which fields were assigned since, by
// kind; what to do about each kind is the caller's policy.
type Snapshot struct {
	traits *Traits
	fields []snapField
}

type snapField struct {
	Field
	fp, text string
}

// Change is one field whose value differs from the snapshot.
type Change struct {
	Kind Kind
	Name string
	Old  string // the snapshot's value, as ValueText shows it
	New  string // the value now
	// Fingerprint identifies the new value, e.g. to say something once per value.
	Fingerprint string
}

// TakeSnapshot records every exported field of e (an E or a *E) as it is now.
func TakeSnapshot(e any) (*Snapshot, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{traits: tr}
	for _, f := range tr.Fields {
		if f.Exported {
			sf := snapField{Field: f}
			sf.read(v)
			s.fields = append(s.fields, sf)
		}
	}
	return s, nil
}

// read fills the field's fingerprint and text from the struct value v.
func (f *snapField) read(v reflect.Value) {
	x := fieldValue(v, f.Field)
	f.fp, f.text = ValueFingerprint(x), describeValue(x)
}

// fieldValue is a field's value: a Device field's host value, else the field itself.
func fieldValue(v reflect.Value, f Field) reflect.Value {
	fv := v.Field(f.Index)
	if slot, ok := fv.Interface().(deviceSlot); ok && f.Kind == KindDevice {
		return reflect.ValueOf(slot.hostValue())
	}
	return fv
}

// Changed lists the fields of e whose value differs from the snapshot, in declaration order.
// e must be of the snapshot's type.
func (s *Snapshot) Changed(e any) ([]Change, error) {
	v, err := s.value(e)
	if err != nil {
		return nil, err
	}
	var out []Change
	for _, f := range s.fields {
		x := fieldValue(v, f.Field)
		fp := ValueFingerprint(x)
		if fp != f.fp {
			out = append(out, Change{Kind: f.Kind, Name: f.Name, Old: f.text, New: describeValue(x), Fingerprint: fp})
		}
	}
	return out, nil
}

// Update re-takes the fields match selects from e, as they are now: what the caller adopts (a
// field it wrote itself) is no change from then on.
func (s *Snapshot) Update(e any, match func(Field) bool) error {
	v, err := s.value(e)
	if err != nil {
		return err
	}
	for i := range s.fields {
		if match(s.fields[i].Field) {
			s.fields[i].read(v)
		}
	}
	return nil
}

// value is e's struct value, refusing another type than the snapshot's.
func (s *Snapshot) value(e any) (reflect.Value, error) {
	tr, v, err := readStruct(e)
	if err != nil {
		return reflect.Value{}, err
	}
	if tr != s.traits {
		return reflect.Value{}, fmt.Errorf("markers: a snapshot of %s compared with a %s: compare an experiment with its own snapshot", s.traits.Name, tr.Name)
	}
	return v, nil
}

// describeValue is a value as a message shows it: a plain scalar's text (a string quoted), a
// short slice or array of them, else its type.
func describeValue(v reflect.Value) string {
	if !v.IsValid() {
		return "nil"
	}
	if s, ok := ValueText(v); ok {
		if v.Kind() == reflect.String {
			return fmt.Sprintf("%q", s)
		}
		return s
	}
	if (v.Kind() == reflect.Slice || v.Kind() == reflect.Array) && v.Len() <= 8 {
		if t, ok := scalarsText(v); ok {
			return t
		}
	}
	return "a " + v.Type().String() + " value"
}

// scalarsText prints a short slice or array of plain scalars.
func scalarsText(v reflect.Value) (string, bool) {
	parts := make([]string, v.Len())
	for i := range v.Len() {
		s, ok := ValueText(v.Index(i))
		if !ok {
			return "", false
		}
		parts[i] = s
	}
	return "[" + strings.Join(parts, " ") + "]", true
}
