package prefetch_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/prefetch"
)

func TestCheckFieldSpecsAccepts(t *testing.T) {
	specs := []prefetch.FieldSpec{
		{Name: "image", DType: dtypes.Float32, Shape: []int{28, 28}},
		{Name: "label", DType: dtypes.Int32},                  // one scalar per row
		{Name: "mask", DType: dtypes.Bool, Shape: []int{}},    // the same, spelled out
		{Name: strings.Repeat("n", 256), DType: dtypes.Uint8}, // the longest name
	}
	if err := prefetch.CheckFieldSpecs("WithInputSpecs", specs); err != nil {
		t.Fatalf("CheckFieldSpecs of well-formed specs: %v", err)
	}
}

// Each refusal names the list, the FieldSpec's index and (once it has one) its name, then what is wrong.
func TestCheckFieldSpecsRefuses(t *testing.T) {
	good := prefetch.FieldSpec{Name: "x", DType: dtypes.Float32, Shape: []int{3}}
	with := func(edit func(*prefetch.FieldSpec)) []prefetch.FieldSpec {
		s := good
		edit(&s)
		return []prefetch.FieldSpec{good, s}
	}
	for _, tc := range []struct {
		name  string
		specs []prefetch.FieldSpec
		want  string
	}{
		{"none", nil, "ExportSpec.WireInputs: no specs given"},
		{"empty list", []prefetch.FieldSpec{}, "ExportSpec.WireInputs: no specs given"},
		{"empty name", with(func(s *prefetch.FieldSpec) { s.Name = "" }), "ExportSpec.WireInputs[1].Name is empty"},
		{"long name", with(func(s *prefetch.FieldSpec) { s.Name = strings.Repeat("n", 257) }), "ExportSpec.WireInputs[1].Name is 257 bytes long (at most 256)"},
		{"not UTF-8", with(func(s *prefetch.FieldSpec) { s.Name = "a\xffb" }), `ExportSpec.WireInputs[1].Name "a\xffb" is not UTF-8`},
		{"control character", with(func(s *prefetch.FieldSpec) { s.Name = "a\tb" }), `ExportSpec.WireInputs[1].Name "a\tb" holds a control character`},
		{"no dtype", with(func(s *prefetch.FieldSpec) { s.Name, s.DType = "y", dtypes.InvalidDType }), `ExportSpec.WireInputs[1] "y": dtype InvalidDType is not one a batch field (or a bundle) can hold`},
		{"complex dtype", with(func(s *prefetch.FieldSpec) { s.Name, s.DType = "y", dtypes.Complex64 }), `ExportSpec.WireInputs[1] "y": dtype Complex64 is not one a batch field`},
		{"dimension 0", with(func(s *prefetch.FieldSpec) { s.Name, s.Shape = "y", []int{4, 0} }), `ExportSpec.WireInputs[1] "y": Shape [4 0]: dimension 1 is 0; each per-row dimension is at least 1 (the batch axis is not part of Shape)`},
		{"negative dimension", with(func(s *prefetch.FieldSpec) { s.Name, s.Shape = "y", []int{-1} }), `ExportSpec.WireInputs[1] "y": Shape [-1]: dimension 0 is -1`},
		{"declared twice", with(func(*prefetch.FieldSpec) {}), `ExportSpec.WireInputs[1] "x": declared twice (also ExportSpec.WireInputs[0])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := prefetch.CheckFieldSpecs("ExportSpec.WireInputs", tc.specs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckFieldSpecs = %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
