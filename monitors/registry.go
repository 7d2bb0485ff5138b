package monitors

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// Run is the view of a live run a monitor receives in Info. Monitors watch a run and never steer
// it; RequestStop is the one exception (graceful: the run stops after its next validation).
type Run interface {
	RequestStop()
	Phase() Phase
	Progress() Progress
	ProgressCounter() uint64
}

// Info accompanies every event.
type Info struct {
	// Run is the run handle; nil for process-level publishes made with no run (PublishProcess).
	Run Run
	// Logger is the run's logger, opaque to this package.
	Logger any
	// IsRank0 reports whether this process is rank 0.
	IsRank0 bool
	// Metrics holds the finalized metrics on the transition that ends an evaluation (out of
	// EvalStepping to whatever the run does next); nil otherwise, including on a compile or a
	// checkpoint write that interrupts EvalStepping and returns to it.
	Metrics map[string]float64
}

// Monitor observes phase transitions. A returned error or a panic never stops the run: it is
// reported once per monitor through the run's warn function and otherwise ignored.
type Monitor interface {
	Observe(phase Phase, at Progress, info Info) error
}

// MonitorFunc adapts a function to Monitor.
type MonitorFunc func(phase Phase, at Progress, info Info) error

// Observe calls f.
func (f MonitorFunc) Observe(phase Phase, at Progress, info Info) error { return f(phase, at, info) }

type entry struct {
	id     uint64
	m      Monitor
	warned atomic.Bool // shared by every snapshot holding this entry: warn once per monitor
}

var nextID atomic.Uint64

// Registry is an ordered set of monitors, safe for concurrent use. The process-level registry
// is reached through Register / RegisterFunc; each Tracker owns a per-run one.
type Registry struct {
	mu      sync.Mutex
	entries []*entry
}

// Handle identifies one registration. Its zero value is valid and unregisters nothing.
type Handle struct {
	reg *Registry
	id  uint64
}

// Register appends m and returns its handle; monitors fire in registration order.
func (r *Registry) Register(m Monitor) Handle {
	if m == nil {
		panic("monitors: Register(nil)")
	}
	e := &entry{id: nextID.Add(1), m: m}
	r.mu.Lock()
	r.entries = append(r.entries, e)
	r.mu.Unlock()
	return Handle{reg: r, id: e.id}
}

// RegisterFunc registers f.
func (r *Registry) RegisterFunc(f MonitorFunc) Handle { return r.Register(f) }

// Len reports how many monitors are registered.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.entries)
}

func (r *Registry) list() []*entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*entry(nil), r.entries...)
}

func (r *Registry) remove(id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.entries {
		if e.id == id {
			r.entries = append(r.entries[:i:i], r.entries[i+1:]...)
			return
		}
	}
}

// Unregister removes the monitor from the registry it was added to (process-level or a run's).
// Removing an already-removed monitor, or using the zero Handle, is a no-op. Unregistering a
// process-level handle does not reach a run that already snapshotted it.
func (h Handle) Unregister() {
	if h.reg != nil {
		h.reg.remove(h.id)
	}
}

// Unregister is h.Unregister().
func Unregister(h Handle) { h.Unregister() }

var process Registry

// Register adds m to the process-level registry, which applies to future runs: a Tracker copies
// it when constructed and again at each Tracker.Snapshot.
func Register(m Monitor) Handle { return process.Register(m) }

// RegisterFunc is Register(f).
func RegisterFunc(f MonitorFunc) Handle { return process.Register(f) }

var processWarn atomic.Pointer[func(string)]

// SetProcessWarn sets where PublishProcess reports failing monitors (default: stderr). nil
// restores the default.
func SetProcessWarn(warn func(string)) {
	if warn == nil {
		processWarn.Store(nil)
		return
	}
	processWarn.Store(&warn)
}

func stderrWarn(msg string) { fmt.Fprintln(os.Stderr, msg) }

func currentProcessWarn() func(string) {
	if p := processWarn.Load(); p != nil {
		return *p
	}
	return stderrWarn
}

// PublishProcess fires the process-level monitors for phase with no run attached (info.Run may
// be nil), for work that happens before a run handle exists. Nothing is recorded.
func PublishProcess(phase Phase, at Progress, info Info) {
	fire(process.list(), phase, at, info, currentProcessWarn())
}

func fire(entries []*entry, phase Phase, at Progress, info Info, warn func(string)) {
	for _, e := range entries {
		if err := call(e.m, phase, at, info); err != nil && e.warned.CompareAndSwap(false, true) {
			warn(fmt.Sprintf("monitors: monitor #%d (%T) failed on %v: %v (further failures of this monitor are not reported)", e.id, e.m, phase, err))
		}
	}
}

func call(m Monitor, phase Phase, at Progress, info Info) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return m.Observe(phase, at, info)
}
