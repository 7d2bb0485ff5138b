package engine

import (
	"github.com/nitro-go/nitro/compilecache"
)

// precisionKey adds the mode to a program's key when the mode casts: a bf16 program and its
// float32 twin are two entries (even the optimizer's: it belongs to the bf16 backend), and
// float32 keys stay as they were.
func (e *Engine) precisionKey(key *compilecache.Key) {
	if name, value, ok := e.precision.KeyEntry(); ok {
		key.Extra = append(key.Extra, [2]string{name, value})
	}
}
