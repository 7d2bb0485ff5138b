package engine

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/precision"
)

// Precision is the run's mixed-precision mode (package precision says which products compute in
// bfloat16, and why parameters and state stay float32). The zero value is float32 throughout.
type Precision struct{ mode precision.Mode }

// ParsePrecision reads a mode's spelling: "bf16", or "f32", "none" or "" (float32 throughout);
// anything else is an error listing the modes.
func ParsePrecision(s string) (Precision, error) {
	m, err := precision.Parse(s)
	return Precision{m}, err
}

// String is the mode's canonical name.
func (p Precision) String() string { return p.mode.String() }

// Casts reports whether the mode computes anything in bfloat16.
func (p Precision) Casts() bool { return p.mode.Enabled() }

// OnBackend is b under the mode: b itself for float32, else its twin whose builders emit float32
// products and convolutions in bfloat16. Every tensor of the run must belong to that backend.
func (p Precision) OnBackend(b backends.Backend) backends.Backend { return p.mode.Backend(b) }

// precisionKey adds the mode to a program's key when the mode casts: a bf16 program and its
// float32 twin are two entries (even the optimizer's: it belongs to the bf16 backend), and
// float32 keys stay as they were.
func (e *Engine) precisionKey(key *compilecache.Key) {
	if name, value, ok := e.precision.mode.KeyEntry(); ok {
		key.Extra = append(key.Extra, [2]string{name, value})
	}
}
