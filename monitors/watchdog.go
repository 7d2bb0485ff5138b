package monitors

import (
	"fmt"
	"sync"
	"time"
)

// WatchdogConfig configures a stall watchdog. Zero fields take the documented defaults.
type WatchdogConfig struct {
	// Patience is how long the progress counter may stay unchanged (required, > 0).
	Patience time.Duration
	// Widen multiplies Patience while Compiling, Checkpointing or in Repl (default 10).
	Widen float64
	// Interval is how often the goroutine checks (default Patience/10, at least 1ms).
	Interval time.Duration
	// Log receives one line per detected stall (default: stderr).
	Log func(msg string)
	// StopOnStall requests a stop on the last seen run when a stall is detected.
	StopOnStall bool
	// Now and Counter are injectable for tests (defaults: time.Now, ProgressCounter).
	Now     func() time.Time
	Counter func() uint64
}

// Watchdog reports a stall when the progress counter has not changed for longer than the
// patience of the current phase. A phase transition also counts as evidence of life. Register
// it as a Monitor so it learns the phase; Close stops its goroutine.
type Watchdog struct {
	cfg WatchdogConfig

	mu       sync.Mutex
	phase    Phase
	at       Progress
	run      Run
	last     uint64
	since    time.Time
	reported bool

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewWatchdog starts a watchdog goroutine.
func NewWatchdog(cfg WatchdogConfig) *Watchdog {
	if cfg.Patience <= 0 {
		panic("monitors: WatchdogConfig.Patience must be > 0")
	}
	if cfg.Widen <= 0 {
		cfg.Widen = 10
	}
	if cfg.Interval <= 0 {
		cfg.Interval = max(cfg.Patience/10, time.Millisecond)
	}
	if cfg.Log == nil {
		cfg.Log = stderrWarn
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Counter == nil {
		cfg.Counter = ProgressCounter
	}
	w := &Watchdog{cfg: cfg, phase: Starting{}, last: cfg.Counter(), since: cfg.Now(),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

func (w *Watchdog) loop() {
	defer close(w.done)
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.Check()
		}
	}
}

// Observe implements Monitor: it records the phase and resets the stall clock.
func (w *Watchdog) Observe(phase Phase, at Progress, info Info) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.phase, w.at = phase, at
	if info.Run != nil {
		w.run = info.Run
	}
	w.since, w.reported = w.cfg.Now(), false
	return nil
}

// PatienceFor returns the patience applied in phase: widened in the phases where the progress
// counter stands still by design for longer than a step (a compile, a checkpoint write, an idle
// session), the base patience elsewhere.
func (w *Watchdog) PatienceFor(phase Phase) time.Duration {
	if IsCompiling(phase) || IsCheckpointing(phase) || IsRepl(phase) {
		return time.Duration(float64(w.cfg.Patience) * w.cfg.Widen)
	}
	return w.cfg.Patience
}

// Check runs one evaluation (the goroutine calls it every Interval) and reports whether a stall
// was reported by this call. A stall is reported once until progress or a transition resumes.
func (w *Watchdog) Check() bool {
	c, now := w.cfg.Counter(), w.cfg.Now()
	w.mu.Lock()
	if c != w.last {
		w.last, w.since, w.reported = c, now, false
		w.mu.Unlock()
		return false
	}
	stalled := now.Sub(w.since)
	if w.reported || stalled <= w.PatienceFor(w.phase) {
		w.mu.Unlock()
		return false
	}
	w.reported = true
	phase, at, run := w.phase, w.at, w.run
	if run != nil {
		at = run.Progress()
	}
	w.mu.Unlock()
	msg := fmt.Sprintf("monitors: stall: no progress for %v in phase %v at %v (patience %v)",
		stalled.Round(time.Millisecond), phase, at, w.PatienceFor(phase))
	if w.cfg.StopOnStall && run != nil {
		run.RequestStop()
		msg += "; stop requested"
	}
	w.cfg.Log(msg)
	return true
}

// Close stops the goroutine and waits for it; safe to call more than once.
func (w *Watchdog) Close() error {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	return nil
}
