package engine

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/markers"
)

// TraceModel creates and initializes the model's variables: one trace of Forward (never
// compiled) on forwardKeys at width, then, in manual mode, one of TrainStep on stepKeys (nil
// skips it: a model built from input specs has no train batch), so that every variable either
// creates exists; then the check that Forward reads no Host field, and the initial values.
func (e *Engine) TraceModel(width int, forwardKeys, stepKeys []string) error {
	err := TryGraph("tracing Forward to create the model's variables", func() {
		g := graph.NewGraph(e.backend.Backend, "nitro_shape_trace")
		defer g.Finalize()
		view, err := markers.BindDevice(e.exp, e.deviceParams(g))
		if err != nil {
			panic(err)
		}
		batch := e.batchParams(g, width, forwardKeys)
		e.ctx.SetTraining(g, true)
		e.hooks.Forward(view, e.ctx, batch)
	})
	if err != nil {
		return e.explainMissingOp(err)
	}
	if e.hooks.TrainStep != nil && stepKeys != nil {
		if err := e.traceManualShapes(width, stepKeys); err != nil {
			return e.explainMissingOp(err)
		}
	}
	if err := e.checkForwardHostIndependent(width, forwardKeys); err != nil {
		return err
	}
	if err := InitializeVariables(e.ctx, e.backend.Backend); err != nil {
		return fmt.Errorf("initializing parameters: %w", err)
	}
	return nil
}

// checkForwardHostIndependent builds Forward from the Host-zeroed view and from the real
// experiment and compares the graphs, so a Host read in Forward fails setup rather than the first
// step. (Loss, Metrics and TrainMetrics are checked when their programs are first built.)
func (e *Engine) checkForwardHostIndependent(width int, keys []string) error {
	return markers.CheckHostIndependent(e.exp, func(src any) (string, error) {
		var fp string
		err := TryGraph("tracing Forward", func() {
			g := markers.NewTraceGraph(e.backend.Backend, "nitro_forward_check")
			defer g.Finalize()
			nodes := e.traceInputs(g, width, keys)
			view := e.bindModel(g, nodes, src)
			e.ctx.SetTraining(g, false)
			e.hooks.Forward(view, e.ctx.Reuse(), batchNodes(nodes, keys))
			var err error
			if fp, err = markers.Fingerprint(g); err != nil {
				panic(err)
			}
		})
		return fp, err
	})
}

// Forward traces Forward in eval mode on g, on view (the experiment with its Device fields
// bound), with batch routed to the fields Forward declares. Every output must have the batch,
// width, on axis 0; a violation panics (graph building).
func (e *Engine) Forward(g *graph.Graph, view any, batch map[string]*graph.Node, width int) map[string]*graph.Node {
	routed := make(map[string]*graph.Node, len(batch))
	for _, k := range e.route("Forward", sortedKeys(batch)) {
		routed[k] = batch[k]
	}
	e.ctx.SetTraining(g, false)
	return e.callForward(view, routed, width)
}

// Place uploads a host batch's keys fields to the device (over a mesh, as shards, one per
// device). It touches no engine state, so a batch stream's transfer goroutine may call it: the
// consumer counts the uploads (CountBatchUploads). On error it frees what it placed.
func (e *Engine) Place(b map[string]*tensors.Tensor, keys []string) (placed map[string]*tensors.Tensor, err error) {
	placed = make(map[string]*tensors.Tensor, len(keys))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("placing the batch on the device: %v", r)
		}
		if err != nil {
			err = errors.Join(err, freeBatch(placed, keys))
			placed = nil
		}
	}()
	for _, k := range keys {
		t := b[k]
		if t == nil {
			return placed, fmt.Errorf("batch field %q is missing", k)
		}
		if m := e.mesh; m != nil {
			// Over a mesh the field goes to the devices as shards, one per device, never whole.
			if err := m.Stage(t); err != nil {
				return placed, fmt.Errorf("batch field %q to the devices: %w", k, err)
			}
		} else if !t.IsOnDevice(0) {
			if err := t.MaterializeOnDevice(e.backend.Backend, false, 0); err != nil {
				return placed, fmt.Errorf("batch field %q to the device: %w", k, err)
			}
		}
		placed[k] = t
	}
	return placed, nil
}

// MetricNames traces Forward and Metrics once in eval mode on keys at width (nothing is
// compiled) and returns the names Metrics returns, sorted, and which of them sum an array.
func (e *Engine) MetricNames(width int, keys []string) (names []string, array map[string]bool, err error) {
	array = map[string]bool{}
	err = TryGraph("tracing Metrics to learn the names of the validation metrics", func() {
		g := graph.NewGraph(e.backend.Backend, "nitro_metric_names")
		defer g.Finalize()
		nodes := e.traceInputs(g, width, keys)
		view := e.bindModel(g, nodes, e.exp)
		e.ctx.SetTraining(g, false)
		out := e.callForward(view, batchNodes(nodes, e.route("Forward", keys)), width)
		ms := e.hooks.Metrics(view, out, batchNodes(nodes, e.route("Metrics", keys)))
		for _, name := range sortedKeys(ms) {
			names = append(names, name)
			if sum := ms[name].Sum; sum != nil && sum.Rank() != 0 {
				array[name] = true
			}
		}
	})
	return names, array, err
}
