package core

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/ml/context"
)

// buildModel is setup's model phase: a context seeded from Seed, the BuildModel hook
// (contract.go's ModelBuilder) on it, then the engine: the Device fields on the device, one
// shape trace of Forward (and of TrainStep in manual mode) to create every variable, the check
// that Forward reads no Host field, the variables' initial values, and the parameters and layer
// state placed on the device in their groups. Nothing is compiled.
func (bld *builder) buildModel() error {
	n := bld.n
	n.spec.ctx = context.New()
	if err := n.spec.ctx.SetRNGStateFromSeed(int64(n.spec.cfg.seed.value)); err != nil {
		return fmt.Errorf("seeding the model's RNG with Seed = %d: %w", n.spec.cfg.seed.value, err)
	}
	if err := n.spec.e.(ModelBuilder).BuildModel(n.spec.ctx); err != nil { // resolveHooks checked it is one
		return fmt.Errorf("BuildModel: %w", err)
	}
	if err := bld.newEngine(); err != nil {
		return err
	}
	if err := n.eng.PlaceDeviceFields(); err != nil {
		return err
	}
	width, avail, err := bld.sampleBatch()
	if err != nil {
		return err
	}
	var stepKeys []string // TrainStep's trace: none from input specs, which have no train batch
	if n.spec.trainStep != nil && !n.spec.specOnly() {
		stepKeys = append([]string{}, routed(avail, n.spec.trainStep)...) // non-nil: trace it
	}
	if err := n.eng.TraceModel(width, routed(avail, n.spec.forward), stepKeys); err != nil {
		return err
	}
	return n.eng.PlaceParameters()
}

// sampleBatch is the batch setup traces with: the train split's first, else the first split's;
// under WithInputSpecs, one row of each declared field (only shapes are traced, no data is read).
func (bld *builder) sampleBatch() (int, map[string]bool, error) {
	su := &bld.n.spec
	if su.specOnly() {
		return 1, keySet(su.fieldShapes), nil
	}
	split := "train"
	if _, ok := su.data[split]; !ok {
		split = sortedKeys(su.data)[0]
	}
	b, err := su.data[split].BatchAt(0)
	if err != nil {
		return 0, nil, fmt.Errorf("split %q, batch 0: %w", split, err)
	}
	w, err := batchWidth(b)
	return w, keySet(b), err
}
