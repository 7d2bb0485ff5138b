// Package schedules drives optimizer values and Device fields over a run: each key's factory of the
// horizon is evaluated on the host once per optimizer step, so no schedule recompiles anything; it
// also renders the binding report. Guide: docs/optimizers.md#schedules.
//
// Every entry is a Factory of the horizon: called once at setup with total = TotalSteps(max_epochs,
// batches_per_epoch, accum), it returns a Schedule of the 1-based optimizer step (not the micro-batch).
// A bare number is a constant; Parse reads one written as text (cosine:0.05,0), for a flag. Resolve binds each key against the union of Device field names and rule
// field names (the learning-rate key is eta): a name that is both must be qualified as device.x or opt.x,
// and opt.<group>.x binds one parameter group's base curve. Bound.At evaluates every schedule on the host,
// once per optimizer step, for the caller to upload once.
//
// Left to the caller (core): per-group ratios (eta_g = base * lr(g)/lr(default)), pre-multiplying lambda,
// converting a value to its Device field's dtype, filling the Bindings that Report renders, and where a
// value binds when nothing is scheduled. Schedules run on the host, so any Go code may go in one; one that
// closes over training state does not resume exactly, since resume restores the step, not the closure.
//
// Errors: Resolve reports every bad key at once (unknown, ambiguous, unqualified dotted path, unknown
// group, nonschedulable field, opt lambda next to per-group lambda accessors, bad value, factory panic),
// each naming the key and the fix; At reports a panicking or non-finite schedule with its target and step.
// Report never fails. A Bound is read-only after Resolve; At is as goroutine-safe as the user's schedules.
package schedules
