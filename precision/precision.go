package precision

import "fmt"

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

// KeyEntry is the mode's compile-cache key component: ok is false when the mode is off, so
// float32 programs keep the keys they had before modes existed. A program compiled through
// Backend belongs to the wrapper (its inputs must be that backend's tensors), so every kind of
// program, not only those with products, needs the entry.
func (m Mode) KeyEntry() (name, value string, ok bool) {
	if !m.Enabled() {
		return "", "", false
	}
	return "mixed precision", m.String(), true
}
