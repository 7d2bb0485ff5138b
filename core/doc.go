// Package core is the Nitro: a thin composer of markers (fields, compile view), compilecache
// (program keys), optimizers (the update program), schedules (the horizon, per-step values),
// prefetch (the data contract), monitors (run phases), logjson (the run's record) and checkpoint
// (records, retention) behind the documented hook surface. New runs setup only; Train, Validate,
// Evaluate, Predict and SetDevice are the verbs. A step is two compiled programs by default
// (gradient; optimizer), one with WithFusedStep; parameters, gradients and optimizer state stay
// per array on the device; Uploads counts every host-to-device transfer. Nitro keeps setup
// values, compiled programs and the training state (parameters, optimizer and layer state with
// the RNG state, step, epoch, data position) apart; the state converts to a checkpoint.Record.
// Collaborators, through small interfaces: Console (Quiet has none), Logger (default: JSON Lines
// at <RunDir>/metrics.jsonl; WithLogger, WithoutLogger, WithLogEvery), monitors.Monitor, and the
// Checkpointer (default: TopK(3, val_loss, min) in RunDir, called once per epoch after validation
// and the stop decision; WithCheckpointer, WithoutCheckpoints; WithResume("auto"|path) restores
// the whole state exactly, refusing a GraphConst or w0-anchor change; WithCheckpoint loads
// weights only); WithEarlyStopping adds the EarlyStopping policy. Export writes the Nitro as an
// exportbundle (one captured StableHLO program per batch size, taking the declared inputs then the
// weights Forward reads; Device fields frozen to constants; provenance from the framework, the
// git state at an ExportSpec.ProvenanceRoot, an ExportProvenance hook, then the caller, each
// winning over the one before); the input shapes come from the data contract, so BuildData still
// runs (a checkpointed Nitro needs only enough data for its shapes). Left to the caller: the hooks
// and data, signal handling (the CLI turns Ctrl+C into Interrupt). Errors name the hook, field
// or value and the fix; no panic escapes an exported function. A Nitro is not safe for concurrent
// use, except RequestStop, Interrupt, RegisterMonitor, Phase and ProgressCounter. Go differs from
// the spec in two ways: batch routing is by the hook's batch struct type; the batch axis leads.
package core
