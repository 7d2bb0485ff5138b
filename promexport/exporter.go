package promexport

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/monitors"
)

// Options configures New.
type Options struct {
	// Addr is the address /metrics is served on, host:port ("127.0.0.1:9090"); port 0 picks a
	// free port (see Exporter.Addr). Required.
	Addr string
	// Registry receives the nitro_* collectors and is what /metrics serves; nil means a fresh
	// registry. Close unregisters the collectors again.
	Registry *prometheus.Registry
	// CacheStats, when set, is called at every scrape for nitro_compile_cache_hits_total and
	// nitro_compile_cache_misses_total (counters); it must be safe for concurrent use. When nil, those two
	// series are absent.
	CacheStats func() (hits, misses uint64)
}

// ShutdownTimeout bounds how long Close waits for in-flight scrapes before it closes their
// connections forcibly.
const ShutdownTimeout = 5 * time.Second

// rateWindow is how many recent train lines the steps/s estimate spans.
const rateWindow = 32

const (
	phaseTrain = "TrainStepping"
	valPrefix  = "val_"
)

// knownPhases are the leaves whose nitro_phase series exist from the start (at 0).
var knownPhases = []monitors.Phase{
	monitors.Starting{}, monitors.GradientCompiling{}, monitors.OptimizerCompiling{},
	monitors.EvalCompiling{}, monitors.ExportCompiling{}, monitors.TrainStepping{},
	monitors.EvalStepping{}, monitors.Checkpointing{}, monitors.Done{}, monitors.Failed{}, monitors.Repl{},
}

var statuses = []logjson.Status{
	logjson.StatusCompleted, logjson.StatusEarlyStop, logjson.StatusRequested, logjson.StatusError,
}

// Exporter serves a run's progress as Prometheus gauges. It is both a monitors.Monitor
// (register it on a Tracker or process-wide) and a logjson.Logger (pass it to the run, alone
// or inside logjson.Multi). Safe for concurrent use.
type Exporter struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
	ep         *endpoint

	closeOnce sync.Once
	closeErr  error

	now func() time.Time // the clock; a test hook

	step          prometheus.Gauge
	epoch         prometheus.Gauge
	loss          prometheus.Gauge
	stepsPerSec   prometheus.Gauge
	stepsPerEpoch prometheus.Gauge
	dataWait      prometheus.Gauge
	phase         *prometheus.GaugeVec
	validation    *prometheus.GaugeVec
	status        *prometheus.GaugeVec

	mu       sync.Mutex
	phases   map[string]bool // every nitro_phase label created so far
	run      monitors.Run    // the last run seen, read by the progress counter at scrape time
	seg      segment         // the stretch since the last transition
	lines    []stamp         // recent train lines of the current stretch, oldest first
	finished bool
}

// segment is the stretch of a run between two observed transitions.
type segment struct {
	phase   string
	at      time.Time
	step    int
	started bool
}

// stamp is one train line: when it arrived and its step.
type stamp struct {
	at   time.Time
	step int
}

var (
	_ monitors.Monitor = (*Exporter)(nil)
	_ logjson.Logger   = (*Exporter)(nil)
)

// New registers the nitro_* collectors on opts.Registry (or a fresh registry), listens on
// opts.Addr and serves /metrics from its own goroutine until Close. An empty or unusable
// address, or a registry that already holds nitro_* collectors, is an error.
func New(opts Options) (*Exporter, error) {
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	e := newExporter(reg, opts.CacheStats)
	if err := e.register(); err != nil {
		return nil, err
	}
	ep, err := listen(opts.Addr, reg)
	if err != nil {
		e.unregister()
		return nil, err
	}
	e.ep = ep
	return e, nil
}

func newExporter(reg *prometheus.Registry, cacheStats func() (uint64, uint64)) *Exporter {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	vec := func(name, help, label string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{label})
	}
	e := &Exporter{
		reg:    reg,
		now:    time.Now,
		phases: map[string]bool{},

		step:          gauge("nitro_step", "Optimizer step of the last train line or phase transition."),
		epoch:         gauge("nitro_epoch", "Epoch of the last train line or phase transition."),
		loss:          gauge("nitro_loss", "Last training loss."),
		stepsPerSec:   gauge("nitro_steps_per_second", "Optimizer steps per second, from recent train lines or the last stretch of TrainStepping."),
		stepsPerEpoch: gauge("nitro_steps_per_epoch", "Optimizer steps in one epoch, as the run reports it (0: unknown)."),
		dataWait:      gauge("nitro_data_wait_fraction", "Fraction of the last epoch spent waiting on training data (data_wait_frac)."),
		phase:         vec("nitro_phase", "1 for the run phase of the last transition observed, 0 for the others.", "phase"),
		validation:    vec("nitro_validation_metric", "Last validation metrics, by name (val_*).", "metric"),
		status:        vec("nitro_run_status", "1 for the status the run finished with, 0 for the others.", "status"),
	}
	for _, p := range knownPhases {
		name := phaseLabel(p)
		e.phase.WithLabelValues(name).Set(0)
		e.phases[name] = true
	}
	for _, s := range statuses {
		e.status.WithLabelValues(string(s)).Set(0)
	}
	progress := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "nitro_progress_total",
		Help: "The process progress counter (one per optimizer step and per eval batch), read at scrape time.",
	}, e.progressCounter)
	e.collectors = []prometheus.Collector{
		e.step, e.epoch, e.loss, e.stepsPerSec, e.stepsPerEpoch, e.dataWait,
		e.phase, e.validation, e.status, progress,
	}
	if cacheStats != nil {
		e.collectors = append(e.collectors, newCacheCollector(cacheStats))
	}
	return e
}

func (e *Exporter) register() error {
	for i, c := range e.collectors {
		if err := e.reg.Register(c); err != nil {
			for _, done := range e.collectors[:i] {
				e.reg.Unregister(done)
			}
			return fmt.Errorf("promexport: registering the nitro_* collectors (is another Exporter using this registry?): %w", err)
		}
	}
	return nil
}

func (e *Exporter) unregister() {
	for _, c := range e.collectors {
		e.reg.Unregister(c)
	}
}

// Addr is the address the exporter listens on, with the port it bound (useful after ":0").
func (e *Exporter) Addr() string { return e.ep.addr }

// Registry is the registry /metrics serves; a caller may register more collectors on it.
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// Close stops the server, waiting for in-flight scrapes up to ShutdownTimeout (then closing
// them), waits for its goroutine to end and unregisters the nitro_* collectors. Later calls
// return the first call's result. The Exporter still accepts events afterwards, unserved.
func (e *Exporter) Close() error {
	e.closeOnce.Do(func() {
		e.closeErr = e.ep.shutdown()
		e.unregister()
	})
	return e.closeErr
}

// Observe implements monitors.Monitor. Every event sets nitro_phase, and, when the progress
// has started, nitro_step and nitro_epoch; it ends the current stretch, and a stretch of
// TrainStepping that advanced sets nitro_steps_per_second to its mean rate. Info.Metrics (the
// finalized metrics on the transition out of EvalStepping) set nitro_validation_metric, named
// val_<name>. A Run with LastLoss or StepsPerEpoch sets nitro_loss / nitro_steps_per_epoch.
func (e *Exporter) Observe(phase monitors.Phase, at monitors.Progress, info monitors.Info) error {
	if phase == nil {
		return nil
	}
	name := phaseLabel(phase)
	if r, ok := info.Run.(monitors.LossReporter); ok {
		if l, ok := r.LastLoss(); ok {
			e.loss.Set(l)
		}
	}
	if r, ok := info.Run.(monitors.StepsReporter); ok {
		if n := r.StepsPerEpoch(); n > 0 {
			e.stepsPerEpoch.Set(float64(n))
		}
	}
	for k, v := range info.Metrics {
		if !strings.HasPrefix(k, valPrefix) {
			k = valPrefix + k
		}
		e.validation.WithLabelValues(k).Set(v)
	}

	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if info.Run != nil {
		e.run = info.Run
	}
	if s := e.seg; s.phase == phaseTrain && s.started && at.Started && at.Step > s.step {
		if dt := now.Sub(s.at).Seconds(); dt > 0 {
			e.stepsPerSec.Set(float64(at.Step-s.step) / dt)
		}
	}
	e.seg = segment{phase: name, at: now, step: at.Step, started: at.Started}
	e.lines = e.lines[:0]
	if at.Started {
		e.step.Set(float64(at.Step))
		e.epoch.Set(float64(at.Epoch))
	}
	e.phases[name] = true
	for p := range e.phases {
		v := 0.0
		if p == name {
			v = 1
		}
		e.phase.WithLabelValues(p).Set(v)
	}
	return nil
}

// LogParams implements logjson.Logger; params are not exported.
func (e *Exporter) LogParams(map[string]any) error { return nil }

// LogOther implements logjson.Logger; free-form values are not exported.
func (e *Exporter) LogOther(string, any) error { return nil }

// LogMetrics implements logjson.Logger. A "train" line sets nitro_step, nitro_epoch, nitro_loss
// (its "loss" value) and nitro_steps_per_second (over the last train lines of the current
// stretch); a "validate" line sets nitro_validation_metric per value; a "data" line sets
// nitro_data_wait_fraction from data_wait_frac. Other contexts and values are ignored.
func (e *Exporter) LogMetrics(m logjson.Metrics) error {
	switch m.Context {
	case logjson.ContextTrain:
		e.logTrain(m)
	case logjson.ContextValidate:
		for k, v := range m.Values {
			e.validation.WithLabelValues(k).Set(v)
		}
	case logjson.ContextData:
		if v, ok := m.Values["data_wait_frac"]; ok {
			e.dataWait.Set(v)
		}
	}
	return nil
}

func (e *Exporter) logTrain(m logjson.Metrics) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := m.Values["loss"]; ok {
		e.loss.Set(v)
	}
	e.step.Set(float64(m.Step))
	e.epoch.Set(float64(m.Epoch))
	if n := len(e.lines); n > 0 {
		switch last := e.lines[n-1].step; {
		case m.Step == last:
			return // the same step again: no new information
		case m.Step < last:
			e.lines = e.lines[:0] // a new or resumed run: start over
		}
	}
	if len(e.lines) == rateWindow {
		copy(e.lines, e.lines[1:])
		e.lines = e.lines[:rateWindow-1]
	}
	e.lines = append(e.lines, stamp{at: now, step: m.Step})
	first, last := e.lines[0], e.lines[len(e.lines)-1]
	if dt := last.at.Sub(first.at).Seconds(); len(e.lines) > 1 && dt > 0 {
		e.stepsPerSec.Set(float64(last.step-first.step) / dt)
	}
}

// Finish implements logjson.Logger: nitro_run_status{status} becomes 1. The first call wins,
// as the contract says; a status outside the four is refused with logjson.ErrUnknownStatus.
func (e *Exporter) Finish(status logjson.Status) error {
	if err := status.Check(); err != nil {
		return fmt.Errorf("promexport: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.finished {
		return nil
	}
	e.finished = true
	e.status.WithLabelValues(string(status)).Set(1)
	return nil
}

// progressCounter is read at every scrape: the last run's counter, else the process's.
func (e *Exporter) progressCounter() float64 {
	e.mu.Lock()
	run := e.run
	e.mu.Unlock()
	if run != nil {
		return float64(run.ProgressCounter())
	}
	return float64(monitors.ProgressCounter())
}

// phaseLabel names a phase by its leaf type ("TrainStepping", "Failed"), never by String,
// which for Failed carries the error text.
func phaseLabel(p monitors.Phase) string {
	t := reflect.TypeOf(p)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n := t.Name(); n != "" {
		return n
	}
	return p.String()
}

// cacheCollector reports the compile cache's hits and misses, asking once per scrape.
type cacheCollector struct {
	stats        func() (uint64, uint64)
	hits, misses *prometheus.Desc
}

func newCacheCollector(stats func() (uint64, uint64)) *cacheCollector {
	return &cacheCollector{
		stats:  stats,
		hits:   prometheus.NewDesc("nitro_compile_cache_hits_total", "Compile-cache hits, read at scrape time.", nil, nil),
		misses: prometheus.NewDesc("nitro_compile_cache_misses_total", "Compile-cache misses, read at scrape time.", nil, nil),
	}
}

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hits
	ch <- c.misses
}

// Collect asks CacheStats once; a panic in it becomes a scrape error for these two series
// (the rest of the scrape is still served) instead of crashing the process.
func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	hits, misses, err := c.read()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.hits, err)
		ch <- prometheus.NewInvalidMetric(c.misses, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(hits))
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(misses))
}

func (c *cacheCollector) read() (hits, misses uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("promexport: CacheStats panicked: %v", r)
		}
	}()
	hits, misses = c.stats()
	return hits, misses, nil
}
