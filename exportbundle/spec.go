package exportbundle

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nitro-go/nitro/tensorfile"
)

// Spec is the part of a bundle known before any program exists: what an exporter has decided
// from its own spec before it traces and compiles. CheckSpec validates it with the rules Read
// applies to a manifest, so that a bundle that would be refused fails before minutes of
// compiling rather than after. The outputs, the weights and the programs are not in it: only a
// trace says what they are, and Write checks them.
type Spec struct {
	Name string
	// Inputs are the program's inputs in argument order; each has a batch axis.
	Inputs []TensorSpec
	// BatchSizes are the sizes programs will be compiled for, strictly increasing.
	BatchSizes []int
	// Postprocess is the client-side source the bundle will carry ("" for none).
	Postprocess string
	// ClientInputs and ClientOutputs are only allowed with a Postprocess.
	ClientInputs, ClientOutputs []TensorSpec
	Provenance                  map[string]string
}

// SpecError is a Spec (or a manifest) that breaks a bundle rule. Field is the manifest field at
// fault ("name", "inputs", "batch_sizes", "client_inputs", "client_outputs", "postprocess",
// "provenance"); Msg says what is wrong, naming the entry.
type SpecError struct {
	Field string
	Msg   string
	Err   error // ErrClientWithoutPostprocess for that rule, else nil
}

func (e *SpecError) Error() string { return e.Msg }
func (e *SpecError) Unwrap() error { return e.Err }

// ErrClientWithoutPostprocess is wrapped by the error for client specs declared without a
// postprocess. Client specs describe what a postprocess changes around the program; with no
// postprocess the program's own inputs and outputs are what a client sends and receives, so a
// second declaration could only disagree with them.
var ErrClientWithoutPostprocess = errors.New("client specs declared without a postprocess")

// CheckSpec validates s with the rules Read applies to the manifest the bundle will have. As
// Write does, it reads the size at each TensorSpec's batch axis as a placeholder. Its error is a
// *SpecError.
func CheckSpec(s Spec) error {
	if !utf8.ValidString(s.Postprocess) {
		return &SpecError{Field: "postprocess", Msg: "postprocess: not UTF-8 text"}
	}
	s.Inputs = normalized(s.Inputs)
	s.ClientInputs = normalized(s.ClientInputs)
	s.ClientOutputs = normalized(s.ClientOutputs)
	return s.check(s.Postprocess != "")
}

// check validates a spec whose batch axes already hold -1 (a manifest's spelling); post says
// whether the bundle has a postprocess.
func (s *Spec) check(post bool) error {
	bad := func(field, format string, args ...any) error {
		return &SpecError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if err := CheckName("name", s.Name); err != nil {
		return &SpecError{Field: "name", Msg: err.Error()}
	}
	if len(s.Inputs) == 0 {
		return bad("inputs", "inputs: none declared")
	}
	if len(s.BatchSizes) == 0 || len(s.BatchSizes) > maxBatchSizes {
		return bad("batch_sizes", "batch_sizes: %d of them (want 1..%d)", len(s.BatchSizes), maxBatchSizes)
	}
	for i, b := range s.BatchSizes {
		if b < 1 || b > maxBatch {
			return bad("batch_sizes", "batch_sizes[%d]: %d (want 1..%d)", i, b, maxBatch)
		}
		if i > 0 && b <= s.BatchSizes[i-1] {
			return bad("batch_sizes", "batch_sizes %v: not strictly increasing", s.BatchSizes)
		}
	}
	largest := s.BatchSizes[len(s.BatchSizes)-1]
	for _, l := range []struct {
		field string
		specs []TensorSpec
		kind  specKind
		batch int
	}{
		{"inputs", s.Inputs, kindInput, largest},
		{"client_inputs", s.ClientInputs, kindClient, 1},
		{"client_outputs", s.ClientOutputs, kindClient, 1},
	} {
		if err := checkSpecs(l.field, l.specs, l.kind, l.batch); err != nil {
			return &SpecError{Field: l.field, Msg: err.Error()}
		}
	}
	if !post {
		for _, c := range []struct {
			field string
			specs []TensorSpec
		}{{"client_inputs", s.ClientInputs}, {"client_outputs", s.ClientOutputs}} {
			if len(c.specs) > 0 {
				return &SpecError{Field: c.field, Err: ErrClientWithoutPostprocess,
					Msg: c.field + " declared without a postprocess: drop them, or add the postprocess whose sides they describe"}
			}
		}
	}
	for k := range s.Provenance {
		if err := CheckName("provenance key", k); err != nil {
			return &SpecError{Field: "provenance", Msg: err.Error()}
		}
	}
	return nil
}

// CheckName applies a bundle's rules for a name (of the bundle, a tensor, a weight, a
// provenance key), which are tensorfile.CheckName's: not empty, at most 256 bytes of UTF-8, no
// control character. Names end up as JSON keys and in error messages, where a control character
// would garble what a reader sees. what names the name in the error ("ExportSpec.Name",
// "inputs[0].name").
func CheckName(what, name string) error { return tensorfile.CheckName(what, name) }

// CheckAxisLetters applies a bundle's rule for axis letters, one ASCII letter per non-batch
// axis, each distinct, as far as it goes without the shape: the letters themselves. (Their
// count is checked against the shape where the shape is known.)
func CheckAxisLetters(letters string) error {
	for k := 0; k < len(letters); k++ {
		c := letters[k]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return fmt.Errorf("%q is not an ASCII letter", c)
		}
		if strings.IndexByte(letters[:k], c) >= 0 {
			return fmt.Errorf("%q appears twice", c)
		}
	}
	return nil
}
