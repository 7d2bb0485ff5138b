package prefetch

import (
	"fmt"
	"slices"

	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/tensorfile"
)

// FieldSpec declares one batch field without data, by name, dtype and per-row shape (the batch
// axis, axis 0, excluded): what a Batch's tensor under Name holds, row by row. A model built
// from specs instead of a Source (core.WithInputSpecs) and an export's wire inputs are declared
// this way.
type FieldSpec struct {
	Name  string
	DType dtypes.DType
	Shape []int // per row: the dimensions after the batch axis ([] for one scalar per row)
}

// check validates one spec; what names it in errors ("WithInputSpecs[0]"). The dtype must be
// one a tensor file can store, since a declared field's values end up in checkpoints and bundles.
func (s FieldSpec) check(what string) error {
	if err := tensorfile.CheckName(what+".Name", s.Name); err != nil {
		return err
	}
	what = fmt.Sprintf("%s %q", what, s.Name)
	if tensorfile.DTypeOf(s.DType) == "" {
		return fmt.Errorf("%s: dtype %s is not one a batch field (or a bundle) can hold", what, s.DType)
	}
	for i, d := range s.Shape {
		if d < 1 {
			return fmt.Errorf("%s: Shape %v: dimension %d is %d; each per-row dimension is at least 1 (the batch axis is not part of Shape)", what, s.Shape, i, d)
		}
	}
	return nil
}

// CheckFieldSpecs validates a list of specs: at least one, each well-formed (a name by
// tensorfile.CheckName, a dtype a tensor file can store, per-row dimensions of at least 1), no
// name twice (a Batch holds one tensor per name). field names the list in errors
// ("WithInputSpecs", "ExportSpec.WireInputs").
func CheckFieldSpecs(field string, specs []FieldSpec) error {
	if len(specs) == 0 {
		return fmt.Errorf("%s: no specs given", field)
	}
	for i, s := range specs {
		if err := s.check(fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return err
		}
		if j := slices.IndexFunc(specs[:i], func(x FieldSpec) bool { return x.Name == s.Name }); j >= 0 {
			return fmt.Errorf("%s[%d] %q: declared twice (also %s[%d])", field, i, s.Name, field, j)
		}
	}
	return nil
}
