package exportbundle

import (
	"errors"
	"github.com/nitro-go/nitro/tensorfile"
	"strings"
	"testing"
)

// tinySpec is the Spec of tinyBundle: what an exporter knows of it before any program exists.
func tinySpec() Spec {
	b := tinyBundle()
	return Spec{Name: b.Name, Inputs: b.Inputs, BatchSizes: b.BatchSizes(), Postprocess: b.Postprocess,
		ClientInputs: b.ClientInputs, ClientOutputs: b.ClientOutputs, Provenance: b.Provenance}
}

// TestCheckSpecAgreesWithWrite: CheckSpec refuses each spec a bundle may not have, naming the
// manifest field, and Write refuses the bundle with the same change with the same message, so an
// exporter that checks its spec first learns, before compiling, exactly what Write would say.
func TestCheckSpecAgreesWithWrite(t *testing.T) {
	if err := CheckSpec(tinySpec()); err != nil {
		t.Fatalf("tinyBundle's spec: %v", err)
	}
	// The size at a batch axis is a placeholder, as for Write.
	s := tinySpec()
	s.Inputs = []TensorSpec{{Name: "img", DType: tensorfile.U8, Shape: []int{7, 5, 5}}}
	if err := CheckSpec(s); err != nil {
		t.Errorf("an input with 7 at its batch axis: %v (the batch axis is a placeholder)", err)
	}
	cases := []struct {
		name   string
		spec   func(*Spec)
		bundle func(*Bundle) // nil: a bundle cannot express the change
		field  string
		want   string
	}{
		{"empty name", func(s *Spec) { s.Name = "" }, func(b *Bundle) { b.Name = "" }, "name", "name is empty"},
		{"control character in a name", func(s *Spec) { s.Name = "a\tb" }, func(b *Bundle) { b.Name = "a\tb" }, "name", `name "a\tb" holds a control character`},
		{"no inputs", func(s *Spec) { s.Inputs = nil }, func(b *Bundle) { b.Inputs = nil }, "inputs", "inputs: none declared"},
		{"long input name", func(s *Spec) { s.Inputs[0].Name = strings.Repeat("x", 257) }, func(b *Bundle) { b.Inputs[0].Name = strings.Repeat("x", 257) },
			"inputs", "inputs[0].name is 257 bytes long (at most 256)"},
		{"input axis letter twice", func(s *Spec) { s.Inputs[0].AxisLetters = "ww" }, func(b *Bundle) { b.Inputs[0].AxisLetters = "ww" },
			"inputs", `inputs[0] "img": axis_letters "ww": 'w' appears twice`},
		{"input without a batch axis", func(s *Spec) { s.Inputs[0].BatchAxis = -1 }, func(b *Bundle) { b.Inputs[0].BatchAxis = -1 },
			"inputs", `inputs[0] "img": batch_axis -1 out of range`},
		{"batch size 0", func(s *Spec) { s.BatchSizes = []int{0, 1, 8} }, func(b *Bundle) { b.Programs[0] = Program{Format: "mlir", Code: []byte("m")} },
			"batch_sizes", "batch_sizes[0]: 0 (want 1..1048576)"},
		{"batch sizes out of order", func(s *Spec) { s.BatchSizes = []int{8, 1} }, nil, "batch_sizes", "batch_sizes [8 1]: not strictly increasing"},
		{"no batch size", func(s *Spec) { s.BatchSizes = nil }, func(b *Bundle) { b.Programs = nil }, "batch_sizes", "batch_sizes: 0 of them"},
		{"client axis letters", func(s *Spec) { s.ClientOutputs[0].AxisLetters = "ab" }, func(b *Bundle) { b.ClientOutputs[0].AxisLetters = "ab" },
			"client_outputs", `client_outputs[0] "prob": axis_letters "ab": want one letter per non-batch axis (1)`},
		{"client outputs without a postprocess", func(s *Spec) { s.Postprocess = "" }, func(b *Bundle) { b.Postprocess = "" },
			"client_outputs", "client_outputs declared without a postprocess"},
		{"client inputs without a postprocess", func(s *Spec) {
			s.Postprocess, s.ClientOutputs = "", nil
			s.ClientInputs = []TensorSpec{{Name: "jpeg", DType: tensorfile.U8, Shape: []int{-1}, BatchAxis: -1}}
		}, func(b *Bundle) {
			b.Postprocess, b.ClientOutputs = "", nil
			b.ClientInputs = []TensorSpec{{Name: "jpeg", DType: tensorfile.U8, Shape: []int{-1}, BatchAxis: -1}}
		}, "client_inputs", "client_inputs declared without a postprocess"},
		{"provenance key", func(s *Spec) { s.Provenance = map[string]string{"a\nb": "x"} }, func(b *Bundle) { b.Provenance = map[string]string{"a\nb": "x"} },
			"provenance", `provenance key "a\nb" holds a control character`},
		{"postprocess not UTF-8", func(s *Spec) { s.Postprocess = "\xff" }, func(b *Bundle) { b.Postprocess = "\xff" }, "postprocess", "postprocess: not UTF-8 text"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := tinySpec()
			s.Inputs = append([]TensorSpec{}, s.Inputs...)
			s.ClientOutputs = append([]TensorSpec{}, s.ClientOutputs...)
			c.spec(&s)
			err := CheckSpec(s)
			var se *SpecError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) || se.Field != c.field {
				t.Fatalf("CheckSpec: %v (%T); want a *SpecError on field %q saying %q", err, err, c.field, c.want)
			}
			if wantIs := strings.Contains(c.name, "without a postprocess"); errors.Is(err, ErrClientWithoutPostprocess) != wantIs {
				t.Errorf("errors.Is(%v, ErrClientWithoutPostprocess) = %v, want %v", err, !wantIs, wantIs)
			}
			if c.bundle == nil {
				return
			}
			b := tinyBundle()
			c.bundle(b)
			_, _, werr := b.encode(false)
			if werr == nil || !strings.Contains(werr.Error(), err.Error()) {
				t.Errorf("Write's check: %v\nwant it to say what CheckSpec says: %v", werr, err)
			}
		})
	}
}

func TestCheckAxisLetters(t *testing.T) {
	for letters, want := range map[string]string{"": "", "hwC": "", "h1": `'1' is not an ASCII letter`, "aba": `'a' appears twice`, "é": "is not an ASCII letter"} {
		err := CheckAxisLetters(letters)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("CheckAxisLetters(%q) = %v, want %q", letters, err, want)
		}
	}
}
