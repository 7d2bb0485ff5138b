// Package core is the Nitro: a thin composer of markers (fields and the compile view),
// compilecache (program keys), optimizers (the update program), schedules (the horizon and
// per-step values), prefetch (the data contract), monitors (run phases) and logjson (the run's
// record), behind the documented hook surface. New runs setup only; Train, Validate, Evaluate,
// Predict and SetDevice are the verbs. A training step is two compiled programs by default (gradient; optimizer), so a clip or
// accum change recompiles only the cheap one; WithFusedStep makes it one at accum 1. Parameters,
// gradients and optimizer state stay per array on the device between steps; Uploads counts every
// host-to-device transfer. Nitro keeps setup values, compiled programs and the training state
// (parameters, optimizer and layer state, step, epoch, data position) apart.
//
// Collaborators core calls through small interfaces: Console (human-readable report; Quiet has
// none), Logger (the run's record: logjson's contract; by default a JSON Lines logger writing
// <RunDir>/metrics.jsonl, params at the end of New, one "train" line per optimizer step, one
// "validate" and one "data" line per epoch, finish at the end of Train; WithLogger, WithoutLogger,
// WithLogEvery), monitors.Monitor (phases, via WithMonitor or RegisterMonitor).
// Left to the caller: the experiment's hooks and data, and signal handling (the CLI turns Ctrl+C
// into Interrupt). Errors: every exported function returns an error naming the hook, field or
// value and the fix; graph-building panics are recovered into errors at this boundary and no
// panic escapes an exported function. A Nitro is not safe for concurrent use, except
// RequestStop, Interrupt, RegisterMonitor, Phase and ProgressCounter. Go differs from the spec in
// two ways: batch routing is by the hook's batch struct type, and the batch axis leads.
package core
