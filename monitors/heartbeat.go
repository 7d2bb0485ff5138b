package monitors

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nitro-go/nitro/tensorfile"
)

// HeartbeatConfig configures a heartbeat file.
type HeartbeatConfig struct {
	// Path of the JSON file (required). Its folder must exist.
	Path string
	// Interval between rewrites; also rewritten on every event (default 10s).
	Interval time.Duration
	// OnError receives write errors (default: stderr, once per distinct error text).
	OnError func(error)
	// Now is injectable for tests (default time.Now).
	Now func() time.Time
}

// HeartbeatRecord is the file's JSON content. Step and Epoch are null before the first epoch.
// Phase is the last one published; RunPhase is the run's own record of it, which differs under
// Repl: a run that has returned publishes Repl (nothing in flight) while its record says how it
// ended (Done, Failed), so a supervisor tells a finished run from a failed one.
type HeartbeatRecord struct {
	Phase        string    `json:"phase"`
	RunPhase     string    `json:"run_phase,omitempty"` // "" before any run event
	Step         *int      `json:"step"`
	Epoch        *int      `json:"epoch"`
	Counter      uint64    `json:"counter"`
	WorkInFlight bool      `json:"work_in_flight"`
	Time         time.Time `json:"time"`
}

// Heartbeat rewrites a JSON file atomically (temp file in the same folder, then rename) on
// every event and every Interval from its own goroutine, so it stays fresh during a compile.
type Heartbeat struct {
	cfg HeartbeatConfig

	mu      sync.Mutex
	phase   Phase
	at      Progress
	run     Run
	lastErr string
	writeMu sync.Mutex // serializes writers (event vs ticker)

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// NewHeartbeat writes the file once (phase Starting) and starts the goroutine.
func NewHeartbeat(cfg HeartbeatConfig) (*Heartbeat, error) {
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Heartbeat{cfg: cfg, phase: Starting{}, stop: make(chan struct{}), done: make(chan struct{})}
	if err := h.Write(); err != nil {
		return nil, err
	}
	go h.loop()
	return h, nil
}

func (h *Heartbeat) loop() {
	defer close(h.done)
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
			h.report(h.Write())
		}
	}
}

func (h *Heartbeat) report(err error) {
	if err == nil {
		// A write that succeeds ends the failure: the same failure later is news again.
		h.mu.Lock()
		h.lastErr = ""
		h.mu.Unlock()
		return
	}
	h.mu.Lock()
	dup := err.Error() == h.lastErr
	h.lastErr = err.Error()
	h.mu.Unlock()
	if dup {
		return
	}
	if h.cfg.OnError != nil {
		h.cfg.OnError(err)
	} else {
		stderrWarn("monitors: " + err.Error()) // err names the heartbeat file
	}
}

// Observe implements Monitor: it records the event and rewrites the file.
func (h *Heartbeat) Observe(phase Phase, at Progress, info Info) error {
	h.mu.Lock()
	h.phase, h.at = phase, at
	if info.Run != nil {
		h.run = info.Run
	}
	h.mu.Unlock()
	return h.Write()
}

// Record returns what the next write will contain.
func (h *Heartbeat) Record() HeartbeatRecord {
	h.mu.Lock()
	phase, at, run := h.phase, h.at, h.run
	h.mu.Unlock()
	if run != nil && !IsRepl(phase) && SamePhase(run.Phase(), phase) {
		at = run.Progress()
	}
	r := HeartbeatRecord{Phase: phase.String(), Counter: ProgressCounter(), WorkInFlight: WorkInFlight(),
		Time: h.cfg.Now().UTC()}
	if run != nil {
		r.RunPhase = run.Phase().String()
	}
	if at.Started {
		s, e := at.Step, at.Epoch
		r.Step, r.Epoch = &s, &e
	}
	return r
}

// Write rewrites the file now, atomically. An error names the heartbeat file and the step
// that failed, and carries the cause, but not the temporary file's random name: the same
// failure every Interval has the same text, so OnError hears of it once.
func (h *Heartbeat) Write() error {
	data, err := json.Marshal(h.Record())
	if err != nil {
		return fmt.Errorf("heartbeat %s: %w", h.cfg.Path, err)
	}
	h.writeMu.Lock()
	defer h.writeMu.Unlock()
	err = tensorfile.WriteFile(h.cfg.Path, append(data, '\n'), 0o644)
	var we *tensorfile.WriteError
	if !errors.As(err, &we) {
		return err // nil
	}
	// The cause without the path it came with: that is the temporary file's random name.
	cause := we.Err
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(cause, &pe):
		cause = pe.Err
	case errors.As(cause, &le):
		cause = le.Err
	}
	step := we.Op
	switch step {
	case "create temporary file":
		step = "create a temporary file in " + filepath.Dir(h.cfg.Path)
	case "rename":
		step = "rename into place"
	}
	return fmt.Errorf("heartbeat %s: %s: %w", h.cfg.Path, step, cause)
}

// Close stops the goroutine, waits for it, and writes a final record.
func (h *Heartbeat) Close() error {
	first := false
	h.once.Do(func() { close(h.stop); first = true })
	<-h.done
	if first {
		return h.Write()
	}
	return nil
}
