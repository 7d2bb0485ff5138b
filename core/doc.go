// Package core is the Nitro: a thin composer of the modules behind the documented hook surface.
// New runs setup only; Train, Validate, Evaluate, Predict and SetDevice are the verbs, and
// ViewModel is the read-only model view the export module (package export) ships bundles from.
// A training step is two compiled programs by default (gradient; optimizer), one with
// WithFusedStep; parameters, gradients and optimizer state stay per array on the device.
//
// Nitro keeps setup values, compiled programs and the training state (parameters, optimizer and
// layer state with the RNG, step, epoch, data position) apart. Each concern is a collaborator
// behind a small interface owned by its module: the batch stream (prefetch; WithPrefetch), the
// console (Console; Quiet has none), the record (logjson.Logger; default JSON Lines at
// <RunDir>/metrics.jsonl), monitors (monitors.Monitor; phases and progress), the checkpointer
// (checkpoint.Checkpointer; default TopK(3, val_loss, min); WithResume restores exactly).
// WithInputSpecs builds a Nitro for export or predict with no data. Core never imports
// exportbundle: training links neither it nor its cgo capture shim.
//
// Left to the caller: the experiment's hooks and data, and signals (the CLI turns Ctrl+C into
// Interrupt). Errors name the hook, field or value and the fix; no panic escapes an exported
// function. A Nitro is not safe for concurrent use, except RequestStop, Interrupt,
// RegisterMonitor, Phase and ProgressCounter. Go differs from the spec in two ways: batch routing
// is by the hook's batch struct type, and the batch axis leads (GoMLX is row-major).
package core
