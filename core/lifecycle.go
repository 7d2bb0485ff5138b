package core

import (
	"fmt"
	"os"

	"github.com/nitro-go/nitro/monitors"
)

// newNitro makes the handle with its run-lifetime collaborators: the tracker (phase, progress, stop
// flag and monitors, from package monitors), the console and the logger (the default one pathless
// until setup pins it). It publishes Starting, so a supervisor learns of setup before BuildData
// runs.
func newNitro(e any, typeName string, o options) *Nitro {
	n := &Nitro{spec: runSpec{e: e, typeName: typeName, opts: o, cache: o.cache}, log: rankLog(o, newRunLog(o, e))}
	n.log.warn = n.spec.warn
	switch {
	case o.quiet:
	case o.consoleSet:
		n.spec.console = o.console
	default:
		n.spec.console = TextConsole(o.out)
	}
	warn := o.warn
	if warn == nil {
		warn = n.spec.warn
	}
	n.tracker = monitors.NewTracker(monitors.TrackerOptions{Logger: n.log.l, Rank: distOf(o).Rank, Warn: warn})
	for _, m := range o.monitors {
		n.tracker.Register(m)
	}
	n.tracker.Publish(monitors.Starting{}, monitors.Info{})
	return n
}

// notice reports an informational message (a recompile and why) on the console, if any.
func (su *runSpec) notice(msg string) {
	if su.console != nil {
		su.console.Notice(msg)
	}
}

// warn reports a warning (a failing monitor, a failed logger write) through WithWarn, else on
// the console, else on stderr: a warning is never silently dropped, even when Quiet.
func (su *runSpec) warn(msg string) {
	switch {
	case su.opts.warn != nil:
		su.opts.warn(msg)
	case su.console != nil:
		su.console.Notice("warning: " + msg)
	default:
		fmt.Fprintln(os.Stderr, "nitro: warning:", msg)
	}
}

// enter marks a public entry point. The returned func, deferred, turns a panic that escaped the
// entry point into its error, lets finish record the outcome (Done or Failed), and publishes Repl
// when this was the outermost entry point (Train's inner Validate does not).
func (n *Nitro) enter(what string, err *error, finish func(error)) func() {
	n.tracker.Enter()
	return func() {
		if r := recover(); r != nil { // recover works only in the deferred function itself
			*err = panicError(what, r)
		}
		if finish != nil {
			finish(*err)
		}
		n.adoptHostWrites() // what the verb's own hooks wrote is no drift (drift.go)
		n.tracker.Exit()
	}
}

// recoverInto, deferred, turns a panic into *err (naming what was running). Graph building
// reports user errors by panicking; nothing of that may escape an exported function.
func recoverInto(what string, err *error) {
	if r := recover(); r != nil {
		*err = panicError(what, r)
	}
}

func panicError(what string, r any) error {
	if e, ok := r.(error); ok {
		return fmt.Errorf("%s: %w", what, e)
	}
	return fmt.Errorf("%s: %v", what, r)
}

// setPhase records a phase transition (publishing only on change); metrics go with the
// transition out of EvalStepping.
func (n *Nitro) setPhase(p monitors.Phase, metrics map[string]float64) {
	n.tracker.SetPhase(p, monitors.Info{Metrics: metrics})
}

// Phase is the run's recorded phase: Starting on a fresh handle, Done after a Train that returned
// nil, Failed after one that returned an error; never Repl (published, not recorded).
func (n *Nitro) Phase() monitors.Phase { return n.tracker.Phase() }

// ProgressCounter is the process-wide count of completed units of work (one per optimizer step,
// one per eval batch); a stall watchdog compares it across observations.
func (n *Nitro) ProgressCounter() uint64 { return monitors.ProgressCounter() }

// Run is the view of this run monitors receive in Info.Run.
func (n *Nitro) Run() monitors.Run { return n.tracker }

// RegisterMonitor adds m to this run's own monitors; it fires from the next transition on, also
// when called from another goroutine while Train runs. Unregister with the handle.
func (n *Nitro) RegisterMonitor(m monitors.Monitor) monitors.Handle { return n.tracker.Register(m) }

// RequestStop asks Train to stop gracefully: it finishes the current epoch, validates, and
// returns normally with StopReason "requested" (aborting mid-epoch would skip exactly what makes
// the run useful). Checked once per epoch, after validation. Safe from any goroutine, including a
// monitor.
func (n *Nitro) RequestStop() { n.tracker.RequestStop() }

// Interrupt is the impatient RequestStop, what Ctrl+C means (the CLI calls it on SIGINT, and
// TrainContext when its context is done, the way a program of your own takes Ctrl+C): the
// epoch breaks at the next step boundary, then validates and Train returns the same way, with
// StopReason "requested". A standalone Evaluate or Validate stops at its next batch boundary
// instead and returns the partial metrics with a *PartialError; PredictAll stops there too, its
// last error matching ErrInterrupted. Safe from any goroutine.
func (n *Nitro) Interrupt() {
	n.interrupted.Store(true)
	n.tracker.RequestStop()
}
