package precision

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gopjrt/dtypes"
)

// Mode is a mixed-precision mode: F32 (float32 throughout, the default) or BF16.
type Mode string

const (
	F32  Mode = "f32"
	BF16 Mode = "bf16"
)

// Modes are the accepted spellings, for help texts and errors.
const Modes = `"bf16", or "f32" (also "none" or "") for float32 throughout`

// ModeError is an unknown mode given to Parse.
type ModeError struct{ Value string }

func (e *ModeError) Error() string {
	return fmt.Sprintf("mixed precision %q is not a mode: use %s", e.Value, Modes)
}

// Parse maps a mode's spelling to its Mode: "", "none" and "f32" are F32, "bf16" is BF16;
// anything else is a *ModeError.
func Parse(s string) (Mode, error) {
	switch s {
	case "", "none", string(F32):
		return F32, nil
	case string(BF16):
		return BF16, nil
	}
	return "", &ModeError{Value: s}
}

// Enabled reports whether the mode casts anything (BF16).
func (m Mode) Enabled() bool { return m == BF16 }

// String is the mode's canonical name ("f32" for the zero Mode).
func (m Mode) String() string {
	if m == "" {
		return string(F32)
	}
	return string(m)
}

// Compute is the dtype Forward computes in: BFloat16 under BF16, else Float32.
func (m Mode) Compute() dtypes.DType {
	if m.Enabled() {
		return dtypes.BFloat16
	}
	return dtypes.Float32
}

// CastIn converts a float32 node to the compute dtype; any other node, and every node when the
// mode is off, is returned as it is.
func (m Mode) CastIn(x *graph.Node) *graph.Node {
	if !m.Enabled() || x == nil || x.DType() != dtypes.Float32 {
		return x
	}
	return graph.ConvertDType(x, dtypes.BFloat16)
}

// CastOut converts a node in the compute dtype back to float32; any other node, and every node
// when the mode is off, is returned as it is.
func (m Mode) CastOut(x *graph.Node) *graph.Node {
	if !m.Enabled() || x == nil || x.DType() != dtypes.BFloat16 {
		return x
	}
	return graph.ConvertDType(x, dtypes.Float32)
}

// KeyEntry is the mode's compile-cache key component for programs that trace Forward: ok is
// false when the mode is off, so float32 programs keep the keys they had before modes existed.
func (m Mode) KeyEntry() (name, value string, ok bool) {
	if !m.Enabled() {
		return "", "", false
	}
	return "mixed precision", m.String(), true
}
