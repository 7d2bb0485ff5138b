// Package monitors watches runs without steering them: the run-phase tree (Starting, the
// compiles, stepping, Checkpointing, Done, Failed), the monitor registries, the process progress
// counter, and the shipped monitors: stall watchdog, heartbeat file, progress display.
// Guide: docs/logging.md.
//
// A monitor may request a stop (RequestStop), which is graceful; it never steers a run otherwise.
//
// Contract. A Tracker (embedded by core, one per run) records the run's phase and publishes
// transitions only: SetPhase to the current phase is no event. Repl is published (Publish, or
// Tracker.Exit of the outermost entry point) but never recorded. Monitors receive
// (phase, progress, info); Progress.Started is false until the first epoch begins.
// Order: the process-level monitors (Register), snapshotted into a run by NewTracker and
// Tracker.Snapshot, in registration order, then the run's own (Tracker.Register), which reach
// a live run at once. Handle.Unregister removes from whichever registry issued it, idempotently.
//
// Left to the caller: calling SetPhase/Tick/SetProgress at the right points, checking
// StopRequested once per epoch, and closing the shipped monitors (each runs one goroutine).
// Errors: a monitor that returns an error or panics never stops a run; it is reported once per
// monitor through TrackerOptions.Warn. Everything here is safe for concurrent use, but a
// monitor must not call SetPhase/Publish/WithCompiling/WithCheckpointing from inside Observe.
package monitors
