package monitors

import (
	"sync"
	"sync/atomic"
)

// Process-level state: the work-in-flight depth and the progress counter.
var (
	depth   atomic.Int64
	counter atomic.Uint64
)

// Enter marks a public entry point as running; pair every Enter with one Exit.
func Enter() { depth.Add(1) }

// Exit ends an entry point and reports whether it was the outermost one, i.e. whether the caller
// should publish Repl. An unpaired Exit panics.
func Exit() (outermost bool) {
	n := depth.Add(-1)
	if n < 0 {
		depth.Add(1)
		panic("monitors: Exit without Enter")
	}
	return n == 0
}

// WorkInFlight reports whether any entry point is executing in this process.
func WorkInFlight() bool { return depth.Load() > 0 }

// ProgressCounter is a monotonic count of units of work this process has completed (one per
// optimizer step, one per eval batch). Only its change is meaningful.
func ProgressCounter() uint64 { return counter.Load() }

// Tick adds one to the process progress counter.
func Tick() { counter.Add(1) }

// TrackerOptions configures a Tracker.
type TrackerOptions struct {
	Logger any // passed through in Info.Logger
	Rank   int // Info.IsRank0 is Rank == 0
	// Warn receives the one-per-monitor failure reports; nil means stderr.
	Warn func(msg string)
}

// Tracker is the run-side recorder: it holds a run's phase and progress and publishes
// transitions to the run's snapshot of the process-level monitors, then the run's own. Core
// embeds one per run handle. Safe for concurrent use, but monitors must not call SetPhase,
// Publish, WithCompiling or WithCheckpointing from inside Observe (deadlock); RequestStop and
// the readers are fine.
type Tracker struct {
	opts  TrackerOptions
	pubMu sync.Mutex // serializes publishes so monitors see events in order

	mu            sync.Mutex
	phase         Phase
	at            Progress
	loss          float64
	hasLoss       bool
	stepsPerEpoch int
	snapshot      []*entry

	own  Registry
	stop atomic.Bool
}

// NewTracker returns a tracker in phase Starting holding a snapshot of the process-level
// monitors taken now.
func NewTracker(opts TrackerOptions) *Tracker {
	if opts.Warn == nil {
		opts.Warn = stderrWarn
	}
	return &Tracker{opts: opts, phase: Starting{}, snapshot: process.list()}
}

// Snapshot re-copies the process-level monitors into the run (call at the start of each
// train). Monitors registered on the run itself are kept.
func (t *Tracker) Snapshot() {
	s := process.list()
	t.mu.Lock()
	t.snapshot = s
	t.mu.Unlock()
}

// Register adds m to this run's own registry; it reaches the live run at once and fires after
// the process-level monitors.
func (t *Tracker) Register(m Monitor) Handle { return t.own.Register(m) }

// RegisterFunc is Register(f).
func (t *Tracker) RegisterFunc(f MonitorFunc) Handle { return t.own.Register(f) }

// Phase returns the recorded phase (never Repl).
func (t *Tracker) Phase() Phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.phase
}

// SetPhase records phase and publishes it, on transition only: re-entering the current phase
// is no event. It reports whether an event fired. Pass finalized metrics in info.Metrics on the
// transition out of EvalStepping.
func (t *Tracker) SetPhase(phase Phase, info Info) bool {
	if phase == nil {
		panic("monitors: SetPhase(nil)")
	}
	if _, ok := phase.(Repl); ok {
		panic("monitors: Repl is published, never recorded; use Publish")
	}
	t.pubMu.Lock()
	defer t.pubMu.Unlock()
	t.mu.Lock()
	if SamePhase(t.phase, phase) {
		t.mu.Unlock()
		return false
	}
	t.phase = phase
	t.mu.Unlock()
	t.publishLocked(phase, info)
	return true
}

// Publish fires the monitors for phase without recording it and with no transition guard. It
// exists for Repl.
func (t *Tracker) Publish(phase Phase, info Info) {
	t.pubMu.Lock()
	defer t.pubMu.Unlock()
	t.publishLocked(phase, info)
}

func (t *Tracker) publishLocked(phase Phase, info Info) {
	t.mu.Lock()
	snap, at := t.snapshot, t.at
	t.mu.Unlock()
	info.Run = t
	if info.Logger == nil {
		info.Logger = t.opts.Logger
	}
	info.IsRank0 = t.opts.Rank == 0
	fire(snap, phase, at, info, t.opts.Warn)
	fire(t.own.list(), phase, at, info, t.opts.Warn)
}

// WithCompiling publishes leaf, runs fn, and restores the previous phase afterwards, also
// when fn returns an error or panics. It returns fn's error.
func (t *Tracker) WithCompiling(leaf Compiling, fn func() error) error {
	prev := t.Phase()
	t.SetPhase(leaf, Info{})
	defer t.SetPhase(prev, Info{})
	return fn()
}

// WithCheckpointing publishes Checkpointing, runs fn (the write), and restores the previous
// phase afterwards, also when fn returns an error or panics. It returns fn's error. The
// transition into Checkpointing carries no metrics: like a compile, the write interrupts the
// phase it was entered from, and the metrics go with the transition that ends that phase.
func (t *Tracker) WithCheckpointing(fn func() error) error {
	prev := t.Phase()
	t.SetPhase(Checkpointing{}, Info{})
	defer t.SetPhase(prev, Info{})
	return fn()
}

// Enter marks an entry point as running (process-level depth counter).
func (t *Tracker) Enter() { Enter() }

// Exit ends an entry point and publishes Repl through this run if it was the outermost one.
func (t *Tracker) Exit() {
	if Exit() {
		t.Publish(Repl{}, Info{})
	}
}

// WorkInFlight is the package-level WorkInFlight.
func (t *Tracker) WorkInFlight() bool { return WorkInFlight() }

// SetProgress records the current epoch and step (marks the progress as started).
func (t *Tracker) SetProgress(epoch, step int) {
	t.mu.Lock()
	t.at = Progress{Epoch: epoch, Step: step, Started: true}
	t.mu.Unlock()
}

// Progress returns the current epoch and step.
func (t *Tracker) Progress() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.at
}

// Tick adds one unit of work to the process progress counter.
func (t *Tracker) Tick() { Tick() }

// ProgressCounter is the process progress counter.
func (t *Tracker) ProgressCounter() uint64 { return ProgressCounter() }

// SetLoss records the last training loss (read by the progress display).
func (t *Tracker) SetLoss(loss float64) {
	t.mu.Lock()
	t.loss, t.hasLoss = loss, true
	t.mu.Unlock()
}

// LastLoss returns the last recorded loss.
func (t *Tracker) LastLoss() (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.loss, t.hasLoss
}

// SetStepsPerEpoch records the number of steps in an epoch (0: unknown).
func (t *Tracker) SetStepsPerEpoch(n int) {
	t.mu.Lock()
	t.stepsPerEpoch = n
	t.mu.Unlock()
}

// StepsPerEpoch returns the number of steps in an epoch (0: unknown).
func (t *Tracker) StepsPerEpoch() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stepsPerEpoch
}

// RequestStop asks the run to stop gracefully; core checks StopRequested once per epoch after
// validation.
func (t *Tracker) RequestStop() { t.stop.Store(true) }

// StopRequested reports whether RequestStop was called since the last ClearStop.
func (t *Tracker) StopRequested() bool { return t.stop.Load() }

// ClearStop resets the stop flag (at the start of a train).
func (t *Tracker) ClearStop() { t.stop.Store(false) }

var _ Run = (*Tracker)(nil)

var (
	_ LossReporter  = (*Tracker)(nil)
	_ StepsReporter = (*Tracker)(nil)
)
