package core

import (
	"reflect"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/engine"
	"github.com/nitro-go/nitro/hooks"
)

// The engine owns the device side of the run (package engine): programs, execution, parameters,
// optimizer and layer state, Device fields. Core binds the experiment's traced hooks to it once,
// here, and talks to it through the small interfaces declared where they are used.

// newEngine starts the run's engine, at the start of setup's model phase: the context exists,
// the data contract, the devices and the knobs are resolved.
func (bld *builder) newEngine() (err error) {
	n := bld.n
	fields := make(map[string]engine.FieldShape, len(n.spec.fieldShapes))
	for k, fs := range n.spec.fieldShapes {
		fields[k] = engine.FieldShape{DType: fs.dtype, Row: fs.row}
	}
	var grouper func([]string) string
	if g := n.spec.acc.grouper; g != nil {
		grouper = g.ParamGroup
	}
	n.eng, err = engine.New(engine.Config{
		Experiment: n.spec.e, TypeName: n.spec.typeName, Backend: n.spec.backend, Cache: n.spec.cache, Ctx: n.spec.ctx,
		Devices: n.spec.devs.n.value, Precision: n.spec.cfg.precision.value,
		Accum: n.spec.cfg.accum.value, Clip: n.spec.cfg.clip.value, Fused: n.spec.opts.fused, TrainWidth: n.spec.trainWidth,
		Reducer:        bld.reducer(), // collective.go: nil for one process
		StopVote:       n.interrupted.Load,
		GraphConstHash: n.spec.gcHash, GraphConst: n.spec.gcValues, FieldShapes: fields,
		Hooks: bld.engineHooks(), MetricsOnHost: n.spec.onHost(), Grouper: grouper,
		Hyper:     func(group string, step int) (map[string]float64, error) { return n.spec.opt.Hyper(group, step) },
		Compiling: n.tracker.WithCompiling,
		Notice:    n.spec.notice, Warn: n.spec.warn,
	})
	return err
}

// engineHooks binds the traced hooks (found by reflection at setup) as the plain functions the
// engine calls; an absent optional hook stays nil.
func (bld *builder) engineHooks() engine.Hooks {
	su := &bld.n.spec
	h := engine.Hooks{
		Forward: func(view any, ctx *context.Context, b map[string]*graph.Node) map[string]*graph.Node {
			return su.forward.call(view, reflect.ValueOf(ctx), b).Interface().(Outputs)
		},
		Route: func(name string, keys []string) []string { return routed(setOf(keys), bld.hookNamed(name)) },
	}
	if su.loss != nil {
		h.Loss = func(view any, out, b map[string]*graph.Node) *graph.Node {
			return su.loss.call(view, reflect.ValueOf(Outputs(out)), b).Interface().(*graph.Node)
		}
	}
	if su.metrics != nil {
		h.Metrics = func(view any, out, b map[string]*graph.Node) map[string]hooks.Metric {
			return su.metrics.call(view, reflect.ValueOf(Outputs(out)), b).Interface().(map[string]hooks.Metric)
		}
	}
	if su.trainMetrics != nil {
		h.TrainMetrics = func(view any, out, b map[string]*graph.Node) map[string]*graph.Node {
			return su.trainMetrics.call(view, reflect.ValueOf(Outputs(out)), b).Interface().(map[string]*graph.Node)
		}
	}
	if su.trainStep != nil {
		h.TrainStep = func(view any, s hooks.ManualStep, b map[string]*graph.Node) hooks.StepResult {
			return su.trainStep.call(view, reflect.ValueOf(s), b).Interface().(hooks.StepResult)
		}
	}
	return h
}

// hookNamed is the traced hook of a name, nil when the experiment does not define it.
func (bld *builder) hookNamed(name string) *hook {
	su := &bld.n.spec
	switch name {
	case "Forward":
		return su.forward
	case "Loss":
		return su.loss
	case "Metrics":
		return su.metrics
	case "TrainMetrics":
		return su.trainMetrics
	case "TrainStep":
		return su.trainStep
	}
	return nil
}

// Uploads returns the host-to-device transfer counters.
func (n *Nitro) Uploads() engine.Uploads { return n.eng.Uploads() }

// MeshUploads is what the mesh has placed on each device (engine.MeshUploads); the zero value
// without a mesh.
func (n *Nitro) MeshUploads() engine.MeshUploads { return n.eng.MeshUploads() }

// Parameters reads the current parameters back to the host, by keypath ("dense_0/weights").
// This is an explicit readback; training never needs it.
func (n *Nitro) Parameters() (map[string]*tensors.Tensor, error) { return n.eng.Parameters() }

// States reads the layer state back to the host, by variable scope and name (e.g.
// "/batch_norm/mean", and "/#rngState", the RNG state): running statistics and the like, which
// training updates but the optimizer does not. An explicit readback; training never needs it.
func (n *Nitro) States() (map[string]*tensors.Tensor, error) { return n.eng.States() }

// SetParameters replaces parameters by keypath with host values (engine.Engine.SetParameters:
// every entry is checked before anything changes; the optimizer's and the layer state, and the
// counters, are untouched). To start a run from a checkpoint's weights, use WithCheckpoint.
func (n *Nitro) SetParameters(values map[string]any) (err error) {
	defer n.enter("SetParameters", &err, nil)()
	return n.eng.SetParameters(values)
}

// DeviceValue reads a Device field's value as the programs see it: the device copy New,
// SetDevice or a schedule uploaded, read back and typed as the field's element. A direct
// assignment to the field does not reach the device (the next verb warns), so it is not
// what this returns.
func (n *Nitro) DeviceValue(name string) (any, error) { return n.eng.DeviceValue(name) }
