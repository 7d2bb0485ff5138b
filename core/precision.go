package core

import (
	"fmt"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/engine"
)

// WithMixedPrecision sets the compute precision of the programs nitro compiles: "bf16" computes
// every float32 matrix product and convolution (Forward's and their gradients) in bfloat16, with
// the casts in and out emitted by nitro; "f32", "none" or "" is float32 throughout (the default).
// Parameters, gradients, optimizer state, the loss and the metrics stay float32, and a model
// needs no change (see package precision). Any other value is refused by New. Nitro.Backend
// then holds the bf16 twin; an export bundle is traced on the exporter's own backend, float32.
func WithMixedPrecision(mode string) Option {
	return func(o *options) { o.precision = &mode }
}

// resolvePrecision parses WithMixedPrecision's value into the config.
func (c *config) resolvePrecision(o *options) error {
	if o.precision == nil {
		f32, _ := engine.ParsePrecision("") // float32 throughout
		c.precision = resolved[engine.Precision]{f32, "default"}
		return nil
	}
	m, err := engine.ParsePrecision(*o.precision)
	if err != nil {
		return fmt.Errorf("WithMixedPrecision(%q): %w", *o.precision, err)
	}
	c.precision = resolved[engine.Precision]{m, "run option"}
	return nil
}

// applyPrecision puts the run on its mode's backend (engine.Precision.OnBackend): under bf16, every
// program's float32 products and convolutions are built in bfloat16, the rest float32. It runs
// before anything is uploaded, so the parameters, the optimizer state and every batch are
// tensors of the backend the programs are compiled for.
func (bld *builder) applyPrecision() {
	su := &bld.n.spec
	su.backend.Backend = su.cfg.precision.value.OnBackend(su.backend.Backend)
}

// checkPrecisionOnResume explains a resume whose mode differs from the checkpoint's. Both modes
// keep float32 parameters and optimizer state, so the state fits either way and the resume goes
// on; the notice says the compute changed. A record without a mode is f32.
func (bld *builder) checkPrecisionOnResume(rec *checkpoint.Record, path string) {
	su := &bld.n.spec
	was, err := engine.ParsePrecision(rec.MixedPrecision)
	if err != nil {
		su.notice(fmt.Sprintf("resume: checkpoint %s records mixed precision %q, which this build does not know; the state is float32 and is resumed under %s", path, rec.MixedPrecision, su.cfg.precision.value))
		return
	}
	if now := su.cfg.precision.value; was != now {
		su.notice(fmt.Sprintf("resume: mixed precision %s, the checkpoint's run trained with %s: parameters and optimizer state are float32 in both, so they are resumed as they are; only the dtype of the products changes", now, was))
	}
}
