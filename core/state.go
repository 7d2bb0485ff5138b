package core

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// trainState is the training state, kept apart from setup values and compiled programs: per
// parameter group the parameters and optimizer state, the layer state (which carries the model's
// RNG state: GoMLX's "#rngState" variable, seeded from Seed at setup and advanced by every
// program that draws random numbers, e.g. dropout), the optimizer
// step, the epoch and the data position. It is exactly what a checkpoint saves and restores and
// what export reads; every tensor in it is device resident between steps.
type trainState struct {
	groups []groupState      // parallel to setup.groups
	layer  []*tensors.Tensor // parallel to setup.stateVars
	step   int               // optimizer steps taken
	epoch  int               // epochs completed
	data   dataPosition      // where the next train batch comes from
}

// groupState is one parameter group's device-resident training state.
type groupState struct {
	params []*tensors.Tensor   // per parameter array, in the group's variable order
	opt    [][]*tensors.Tensor // [chain state leaf][parameter array]
}

// dataPosition is the next train batch: the epoch being trained (1-based) and the batch index in
// it. Sources are index addressable and plan each epoch from (seed, epoch) alone, so this is all a
// mid-epoch resume needs to replay the same data order.
type dataPosition struct {
	epoch, batch int
}

// States reads the layer state back to the host, by variable scope and name (e.g.
// "/batch_norm/mean", and "/#rngState", the RNG state): running statistics and the like, which
// training updates but the optimizer does not. An explicit readback; training never needs it.
func (n *Nitro) States() (map[string]*tensors.Tensor, error) {
	out := make(map[string]*tensors.Tensor, len(n.stateVars))
	for i, v := range n.stateVars {
		c, err := n.st.layer[i].LocalClone()
		if err != nil {
			return nil, fmt.Errorf("reading layer state %s back: %w", v.ScopeAndName(), err)
		}
		out[v.ScopeAndName()] = c
	}
	return out, nil
}
