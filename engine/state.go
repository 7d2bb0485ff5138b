package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"

	"fmt"
	"github.com/nitro-go/nitro/optimizers"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// state is the device side of the training state: per parameter group the parameters and
// optimizer state, and the layer state (which carries the model's RNG state: GoMLX's
// "#rngState" variable, seeded at setup and advanced by every program that draws random numbers,
// e.g. dropout). With the caller's step, epoch and data position it is what a checkpoint saves
// and restores and what export reads; every tensor in it is device resident between steps.
type state struct {
	groups []groupState      // parallel to Engine.groups
	layer  []*tensors.Tensor // parallel to Engine.stateVars
}

// groupState is one parameter group's device-resident training state, by segment (flat.go).
type groupState struct {
	params []*tensors.Tensor   // per segment
	opt    [][]*tensors.Tensor // [chain state leaf][segment], laid out as params
}

// States reads the layer state back to the host, by variable scope and name (e.g.
// "/batch_norm/mean", and "/#rngState", the RNG state): running statistics and the like, which
// training updates but the optimizer does not. An explicit readback; training never needs it.
func (e *Engine) States() (map[string]*tensors.Tensor, error) {
	out := make(map[string]*tensors.Tensor, len(e.stateVars))
	for i, v := range e.stateVars {
		c, err := e.st.layer[i].LocalClone()
		if err != nil {
			return nil, fmt.Errorf("reading layer state %s back: %w", v.ScopeAndName(), err)
		}
		out[v.ScopeAndName()] = c
	}
	return out, nil
}

// DecayAnchorChecksums is, per group decaying toward a non-zero anchor (w0 or an array), a
// checksum of that anchor: a record keeps it instead of the parameter-sized arrays, and a resume
// refuses a group whose anchor differs.
func (e *Engine) DecayAnchorChecksums() (map[string]string, error) {
	out := map[string]string{}
	for gi, g := range e.groups {
		var h hash.Hash
		for s, name := range g.opt.StateNames() {
			if !g.constLeaf(s) || !strings.HasSuffix(name, "."+optimizers.DecayName+".anchor") {
				continue
			}
			if h == nil {
				h = sha256.New()
			}
			// Array by array, as when the anchor was one buffer per array: a record's checksum holds.
			read := readCache{}
			for j, v := range g.vars {
				b, err := read.bytes(stateSlot{buf: &e.st.groups[gi].opt[s][g.seg[j]], at: g.local[j], shape: v.Shape()})
				if err != nil {
					return nil, fmt.Errorf("group %q: decay anchor: %w", g.name, err)
				}
				fmt.Fprintf(h, "%s %s %v\n", strings.Join(g.keypaths[j], "/"), v.DType(), v.Shape().Dimensions)
				h.Write(b)
			}
		}
		if h != nil {
			out[g.name] = "sha256:" + hex.EncodeToString(h.Sum(nil))
		}
	}
	return out, nil
}
