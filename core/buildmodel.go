package core

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/markers"
)

// buildModel is setup's model phase: a context seeded from Seed, the BuildModel hook
// (contract.go's ModelBuilder) on it, the Device fields on the device, one shape trace of Forward
// to create every variable, the check that Forward reads no Host field, and the variables'
// initial values. Nothing is compiled.
func (n *Nitro) buildModel() error {
	n.ctx = context.New()
	if err := n.ctx.SetRNGStateFromSeed(int64(n.cfg.seed.value)); err != nil {
		return fmt.Errorf("seeding the model's RNG with Seed = %d: %w", n.cfg.seed.value, err)
	}
	if err := n.e.(ModelBuilder).BuildModel(n.ctx); err != nil { // resolveHooks checked it is one
		return fmt.Errorf("BuildModel: %w", err)
	}
	if err := n.placeDeviceFields(); err != nil {
		return err
	}
	if err := n.traceShapes(); err != nil {
		return err
	}
	if err := n.traceManualShapes(); err != nil { // manual_step.go: TrainStep's own variables
		return err
	}
	if err := n.checkForwardHostIndependent(); err != nil {
		return err
	}
	if err := n.ctx.InitializeVariables(n.backend.Backend, nil); err != nil {
		return fmt.Errorf("initializing parameters: %w", err)
	}
	return nil
}

// traceShapes traces Forward once (never compiled) so that every variable it creates exists.
func (n *Nitro) traceShapes() error {
	width, avail, err := n.sampleBatch()
	if err != nil {
		return err
	}
	return tryGraph("tracing Forward to create the model's variables", func() {
		g := graph.NewGraph(n.backend.Backend, "nitro_shape_trace")
		defer g.Finalize()
		devNodes := n.deviceParams(g)
		view, err := markers.BindDevice(n.e, devNodes)
		if err != nil {
			panic(err)
		}
		batch := n.batchParams(g, width, routed(avail, n.forward))
		n.ctx.SetTraining(g, true)
		n.forward.call(view, valueOf(n.ctx), batch)
	})
}

// sampleBatch is the batch setup traces with: the train split's first, else the first split's;
// under WithInputSpecs, one row of each declared field (only shapes are traced, no data is read).
func (n *Nitro) sampleBatch() (int, map[string]bool, error) {
	if n.specOnly() {
		return 1, keySet(n.fieldShapes), nil
	}
	split := "train"
	if _, ok := n.data[split]; !ok {
		split = sortedKeys(n.data)[0]
	}
	b, err := n.data[split].BatchAt(0)
	if err != nil {
		return 0, nil, fmt.Errorf("split %q, batch 0: %w", split, err)
	}
	w, err := batchWidth(b)
	return w, keySet(b), err
}

// checkForwardHostIndependent builds Forward from the Host-zeroed view and from the real
// experiment and compares the graphs, so a Host read in Forward fails setup rather than the first
// step. (Loss, Metrics and TrainMetrics are checked when their programs are first built.)
func (n *Nitro) checkForwardHostIndependent() error {
	width, avail, err := n.sampleBatch()
	if err != nil {
		return err
	}
	keys := routed(avail, n.forward)
	return markers.CheckHostIndependent(n.e, func(src any) (string, error) {
		var fp string
		err := tryGraph("tracing Forward", func() {
			g := markers.NewTraceGraph(n.backend.Backend, "nitro_forward_check")
			defer g.Finalize()
			nodes := n.traceInputs(g, width, keys)
			view := n.bindModel(g, nodes, src)
			n.ctx.SetTraining(g, false)
			n.forward.call(view, valueOf(n.ctx.Reuse()), batchNodes(nodes, keys))
			var err error
			if fp, err = markers.Fingerprint(g); err != nil {
				panic(err)
			}
		})
		return fp, err
	})
}
