package core

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/precision"
)

// WithMixedPrecision sets the compute precision of Forward in every program nitro compiles:
// "bf16" reads the float32 parameters and float32 batch fields in Forward as bfloat16 (its matmuls
// and convolutions compute in bfloat16) and casts Forward's outputs back to float32 for Loss and
// Metrics; "f32", "none" or "" is float32 throughout (the default). Parameters, gradients and the
// optimizer state stay float32 (see package precision). Any other value is refused by New.
func WithMixedPrecision(mode string) Option {
	return func(o *options) { o.precision = &mode }
}

// resolvePrecision parses WithMixedPrecision's value into the config.
func (c *config) resolvePrecision(o *options) error {
	if o.precision == nil {
		c.precision = resolved[precision.Mode]{precision.F32, "default"}
		return nil
	}
	m, err := precision.Parse(*o.precision)
	if err != nil {
		return fmt.Errorf("WithMixedPrecision(%q): %w", *o.precision, err)
	}
	c.precision = resolved[precision.Mode]{m, "run option"}
	return nil
}

// programForward is Forward as every compiled program traces it: under mixed precision, the
// parameters and float batch fields are read through casts to the compute dtype and the outputs
// cast back, so Loss, Metrics and the gradient see float32. Setup's shape trace does not come
// here: it creates the variables, which must be created float32 (layers take their dtype from
// their input). Export traces callForward, float32: a bundle serves the master weights as they are.
func (n *Nitro) programForward(g *graph.Graph, view any, batch map[string]*graph.Node, width int) Outputs {
	mode := n.cfg.precision.value
	if !mode.Enabled() {
		return n.callForward(view, batch, width)
	}
	cast := make(map[string]*graph.Node, len(batch))
	for k, x := range batch {
		cast[k] = mode.CastIn(x)
	}
	type swap struct {
		v          *context.Variable
		orig, cast *graph.Node
	}
	var swaps []swap
	for _, grp := range n.groups {
		for _, v := range grp.vars {
			if !v.InUseByGraph(g) { // every program's signature reads the parameters first
				continue
			}
			orig := v.ValueGraph(g)
			if c := mode.CastIn(orig); c != orig {
				v.SetValueGraph(c)
				swaps = append(swaps, swap{v, orig, c})
			}
		}
	}
	out := n.callForward(view, cast, width)
	// Loss and Metrics read the float32 parameters again (a weight penalty in Loss is float32).
	for _, s := range swaps {
		if s.v.ValueGraph(g) == s.cast {
			s.v.SetValueGraph(s.orig)
		}
	}
	for k, o := range out {
		out[k] = mode.CastOut(o)
	}
	return out
}

// precisionKey adds the mode to a program's key when the program traces Forward and the mode
// casts: a bf16 program and its float32 twin are two entries, and float32 keys stay as they were.
func (n *Nitro) precisionKey(key *compilecache.Key) {
	if key.Kind == compilecache.KindOptimizer {
		return
	}
	if name, value, ok := n.cfg.precision.value.KeyEntry(); ok {
		key.Extra = append(key.Extra, [2]string{name, value})
	}
}

// checkPrecisionOnResume explains a resume whose mode differs from the checkpoint's. Both modes
// keep float32 parameters and optimizer state, so the state fits either way and the resume goes
// on; the notice says the compute changed. A record written before modes were recorded is f32.
func (n *Nitro) checkPrecisionOnResume(rec *checkpoint.Record, path string) {
	was, err := precision.Parse(rec.MixedPrecision)
	if err != nil {
		n.notice(fmt.Sprintf("resume: checkpoint %s records mixed precision %q, which this build does not know; the state is float32 and is resumed under %s", path, rec.MixedPrecision, n.cfg.precision.value))
		return
	}
	if now := n.cfg.precision.value; was != now {
		n.notice(fmt.Sprintf("resume: mixed precision %s, the checkpoint's run trained with %s: parameters and optimizer state are float32 in both, so they are resumed as they are; Forward now computes in %s", now, was, now.Compute()))
	}
}
