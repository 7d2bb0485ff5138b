package core

import (
	"fmt"
	"maps"
	"reflect"
	"strings"

	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/runstatus"
)

// The run's logger is a logjson.Logger (LogParams, LogMetrics, LogOther, Finish): the contract,
// its Metrics and Status types and its optional capabilities (Tagger, DropCounter, Resumable,
// ...) are logjson's, so a logger written against logjson plugs in with nothing to adapt. A
// logger's errors never stop training: logging is observation, not control, so a failed write
// is a warning (WithWarn), once per distinct failure.

// MetricsFile is the default logger's file in the run directory (RunDir).
const MetricsFile = "metrics.jsonl"

// WithLogger hands the run's records to l instead of the default JSON Lines logger. nil means no
// logging (WithoutLogger). A *logjson.JSONLogger without a path is pinned to
// <RunDir>/metrics.jsonl at the end of setup, as the default is.
func WithLogger(l logjson.Logger) Option {
	return func(o *options) { o.logger, o.loggerSet = nilLogger(l), true }
}

// WithoutLogger turns logging off: the run keeps no record (no metrics.jsonl). Without it or
// WithLogger, New creates one logjson.JSONLogger whose path setup pins to
// <RunDir>/metrics.jsonl; it opens the file on the first record (the params, at the end of New).
func WithoutLogger() Option { return WithLogger(nil) }

// WithLogEvery writes a "train" line every k-th optimizer step (the steps whose number is a
// multiple of k) instead of every step (k = 1, the default). On the steps it skips, TrainMetrics
// are not read back from the device either, so EpochResult.Train's means are over the logged
// steps' micro-batches. New refuses k < 1.
func WithLogEvery(k int) Option { return func(o *options) { o.logEvery = &k } }

// runLog is the run's logger and how core calls it. Core calls the logger from the goroutine
// running the entry point only.
type runLog struct {
	l      logjson.Logger   // nil: no logging
	every  int              // a "train" line every k-th optimizer step
	warned map[string]bool  // logger failures already reported
	warn   func(msg string) // the run's warning (set once the Nitro exists)
}

// LoggerChooser is an experiment that picks its own logger (TensorBoard's event files beside the
// JSON Lines record, say: logjson.Multi(logjson.NewJSONLogger(""), new(tblog.Writer))), so that
// every run of it, from Go or from nitro train, logs the same way; nil turns logging off. A run's
// WithLogger wins. A logger that keeps files in the run dir (logjson.RunDirUser) is placed there
// at the end of setup, as the default is.
type LoggerChooser interface {
	Logger() logjson.Logger
}

// newRunLog picks the run's logger: the option's, the experiment's, or a pathless JSON Lines
// logger (its construction has no side effect; setup places it, the first record opens the file).
func newRunLog(o options, e any) runLog {
	l := o.logger
	if !o.loggerSet {
		l = logjson.NewJSONLogger("")
		if c, ok := e.(LoggerChooser); ok {
			l = nilLogger(c.Logger())
		}
	}
	return runLog{l: l, every: 1}
}

// nilLogger turns a typed nil pointer into no logger, rather than a logger that panics.
func nilLogger(l logjson.Logger) logjson.Logger {
	if v := reflect.ValueOf(l); v.IsValid() && v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return l
}

// Logger is the run's logger: the default JSON Lines logger (its path in logjson.Info), the one
// WithLogger gave, or nil under WithoutLogger.
func (n *Nitro) Logger() logjson.Logger { return n.log.l }

// startLog ends setup: it places a logger that keeps files in the run dir there (a pathless
// JSON logger at <RunDir>/metrics.jsonl) and logs the params, so they are on record before the
// first compile.
func (bld *builder) startLog() {
	n := bld.n
	if n.spec.opts.logEvery != nil {
		n.log.every = *n.spec.opts.logEvery
	}
	if n.log.l == nil {
		return
	}
	if u, ok := n.log.l.(logjson.RunDirUser); ok {
		n.log.failed("path", u.UseRunDir(n.RunDir()))
	}
	n.log.failed("params", logCall(func() error { return n.log.l.LogParams(n.spec.runParams()) }))
}

// jsonLoggers finds the JSON Lines loggers in l: l itself, or the members of a logjson.Multi (a
// JSON file beside, e.g., a Prometheus exporter).
func jsonLoggers(l logjson.Logger) []*logjson.JSONLogger {
	var out []*logjson.JSONLogger
	switch v := l.(type) {
	case *logjson.JSONLogger:
		out = append(out, v)
	case *logjson.MultiLogger:
		for _, m := range v.Members() {
			if jl, ok := m.(*logjson.JSONLogger); ok {
				out = append(out, jl)
			}
		}
	}
	return out
}

// MetricsPath is the JSON Lines file this Nitro's logger writes ("" when none).
func (n *Nitro) MetricsPath() string {
	for _, jl := range jsonLoggers(n.log.l) {
		if p := jl.Path(); p != "" {
			return p
		}
	}
	return ""
}

// failed reports a logger error as a warning, once per distinct failure.
func (l *runLog) failed(what string, err error) {
	if err == nil {
		return
	}
	msg := fmt.Sprintf("logger: %s: %v", what, err)
	if l.warned[msg] {
		return
	}
	if l.warned == nil {
		l.warned = map[string]bool{}
	}
	l.warned[msg] = true
	l.warn(msg)
}

func (l *runLog) other(key string, value any) {
	if l.l != nil {
		l.failed(key, logCall(func() error { return l.l.LogOther(key, value) }))
	}
}

// metrics drops the non-finite values (telling a logjson.DropCounter how many) and logs the
// rest as one line of context at optimizer step step.
func (l *runLog) metrics(context string, step, epoch int, values map[string]float64) {
	if l.l == nil {
		return
	}
	kept, dropped := logjson.DropNonFinite(values)
	if dc, ok := l.l.(logjson.DropCounter); ok && dropped > 0 {
		l.failed("dropped count", logCall(func() error { dc.CountDropped(dropped); return nil }))
	}
	m := logjson.Metrics{Step: step, Epoch: epoch, Context: context, Values: kept}
	l.failed(context+" metrics", logCall(func() error { return l.l.LogMetrics(m) }))
}

// logs reports whether optimizer step (1-based) gets a "train" line, and so whether its
// TrainMetrics are read back.
func (l *runLog) logs(step int) bool { return step%l.every == 0 }

// step writes the "train" line of the optimizer step just taken, at the LogEvery cadence: its
// loss and TrainMetrics, each the mean over the step's micro-batches, all read back already, and
// the steps' timing since the previous line (step_seconds, steps_per_second; they win over
// TrainMetrics of those names, as the loss does).
func (l *runLog) step(step, ep int, s *stepSums) {
	logged := l.l != nil && l.logs(step)
	var line map[string]float64
	if logged {
		line = s.stepValues()
	}
	s.clock.step(logged, line)
	if logged {
		l.metrics(logjson.ContextTrain, step, ep, line)
	}
	s.endStep()
}

// epoch writes an epoch's "validate" line (the finalized metrics, named val_*; only when
// there is a val split) and its "data" line: data_wait_frac (the fraction of the epoch's train
// wall time the loop waited on the batch stream), epoch_seconds (train and validation),
// train_seconds (the steps alone) and steps_per_second (optimizer steps over train_seconds:
// validation is not step time), which `nitro plot` draws.
func (l *runLog) epoch(step int, res EpochResult) {
	if res.Val != nil {
		l.metrics(logjson.ContextValidate, step, res.Epoch, withPrefix("val_", res.Val))
	}
	data := map[string]float64{"data_wait_frac": res.DataWaitFrac,
		"epoch_seconds": res.Seconds, "train_seconds": res.TrainSeconds, "steps_per_second": res.StepsPerSecond}
	if res.TokensPerSecond > 0 {
		data["tokens_per_second"] = res.TokensPerSecond
	}
	if res.MFU > 0 {
		data["mfu"] = res.MFU
	}
	l.metrics(logjson.ContextData, step, res.Epoch, data)
}

// finish ends Train's record: error when err is set, else the stop reason (completed,
// early_stop, requested; the logger's first status wins, so nothing later can stamp an error run completed).
func (l *runLog) finish(reason runstatus.Status, err error) {
	if l.l == nil {
		return
	}
	status := logjson.Status(reason)
	switch {
	case err != nil:
		status = logjson.StatusError
	case !status.Valid():
		status = logjson.StatusCompleted
	}
	l.failed("finish", logCall(func() error { return l.l.Finish(status) }))
}

// logCall makes one logger call; a panic in it is reported like an error: a logger never stops
// the run, not even a broken one.
func logCall(call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return call()
}

// withPrefix names every metric prefix+name unless it already starts with prefix.
func withPrefix(prefix string, m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			k = prefix + k
		}
		out[k] = v
	}
	return out
}

// runParams is what LogParams records, flat: the experiment's fields as markers.LogValues gives
// them, then the resolved knobs under snake_case names.
func (su *runSpec) runParams() map[string]any {
	p, err := markers.LogValues(su.e)
	if err != nil { // setup read the traits already; this cannot fail now
		p = map[string]any{}
	}
	p["max_epochs"] = su.cfg.maxEpochs.value
	if su.cfg.maxSteps.value > 0 {
		p["max_steps"] = su.cfg.maxSteps.value
	}
	if su.stepPeriods() {
		p["val_every"] = su.cfg.valEvery.value
		p["checkpoint_every"] = su.cfg.checkpointEvery.value
	}
	p["seed"] = su.cfg.seed.value
	p["accum"] = su.cfg.accum.value
	p["gradient_clip_norm"] = su.cfg.clip.value
	p["learning_rate"] = su.cfg.lr.value
	p["run_dir"] = su.cfg.runDir.value
	p["fused"] = su.opts.fused
	p["mixed_precision"] = su.cfg.precision.value.String()
	if su.opts.preset != "" {
		p["preset"] = su.opts.preset
	}
	maps.Copy(p, scheduleParams(su.opts.schedules))
	return p
}
