package core

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/nitro-go/nitro/earlystop"
)

// Early stopping as core composes it: the policy (the patience count, its state, the metric-mode
// helpers) is package earlystop's; core finds the experiment's hook, resolves the run's rule,
// checks and validates the metrics it reads, asks it once per epoch, and carries its state in
// each checkpoint's control state.

// The defaults of an early-stopping rule, as DefaultEarlyStopping returns them. They are the
// defaults of the rule once one is asked for; a run asks for none by default, because a
// framework that cuts a run short unasked is surprising and any patience would be a guess.
const (
	DefaultEarlyStopMetric = earlystop.DefaultMetric // val_loss: what an experiment without a Metrics hook reports
	DefaultEarlyStopMode   = earlystop.DefaultMode
	DefaultPatience        = earlystop.DefaultPatience
	DefaultMinDelta        = earlystop.DefaultMinDelta
)

// EarlyStopper is a stopping policy (earlystop.Policy). Train asks it once per epoch, after
// validation, with the epoch (1-based) and the epoch's validation metrics named as the record
// names them (val_loss, val_accuracy); stop ends the run gracefully (that epoch is still
// checkpointed, the logger finishes with early_stop) and reason is said on the console.
// EarlyStopping is the built-in one; a custom policy implements this one method.
//
// Optional methods a policy may add (earlystop's MetricReader, Stateful, Exhauster):
//
//	StopMetric() string                       the one metric it reads: New refuses a name the
//	                                          val split does not report, and only that metric is
//	                                          validated; without it every val metric is
//	State() (json.RawMessage, error)          its progress, carried by each checkpoint, and
//	Restore(json.RawMessage) (bool, error)    taken back on resume (false: not this policy's
//	                                          state, start afresh); without them a resumed run's
//	                                          policy starts afresh, and the console says so
//	Exhausted() bool                          whether a restored state already stops the run
//
// The policy value holds one run's progress: return a new one from each EarlyStop call, and do
// not pass one value to two runs (an *EarlyStopping is copied by New, so it may be shared).
type EarlyStopper = earlystop.Policy

// EarlyStopChooser is an experiment that picks its own stopping rule, so every run of it stops
// the same way; nil means none. A run's WithEarlyStopping or WithEarlyStopper wins.
type EarlyStopChooser interface {
	EarlyStop() EarlyStopper
}

// EarlyStopStater is a policy whose progress checkpoints carry (see EarlyStopper).
type EarlyStopStater = earlystop.Stateful

// EarlyStopping is the built-in stopping policy (earlystop.EarlyStopping): the run stops after
// Patience epochs in a row whose Metric did not improve on the best seen by more than MinDelta
// (absolute). DefaultEarlyStopping gives the defaults (val_loss, min, patience 5, min_delta
// 1e-4); a literal must name its Metric and Mode (New refuses one that does not, as
// NewEarlyStopping does). Its state is plain JSON, which a checkpoint record carries so that a
// resume counts on where the run left off.
type EarlyStopping = earlystop.EarlyStopping

// DefaultEarlyStopping is EarlyStopping with the defaults: val_loss, min, patience 5, min_delta
// 1e-4. Change a field for another value, e.g. es := core.DefaultEarlyStopping(); es.Patience = 10.
func DefaultEarlyStopping() *EarlyStopping { return earlystop.Default() }

// defaultsCall is how core's API spells the defaults, offered as the fix for a rule with no metric.
const defaultsCall = "core.DefaultEarlyStopping()"

// NewEarlyStopping checks the configuration and returns a policy that has seen nothing.
func NewEarlyStopping(metric, mode string, patience int, minDelta float64) (*EarlyStopping, error) {
	s := &EarlyStopping{Metric: metric, Mode: mode, Patience: patience, MinDelta: minDelta}
	if err := s.Check("WithEarlyStopping", defaultsCall); err != nil {
		return nil, err
	}
	return s, nil
}

// WithEarlyStopping stops Train when the validation metric (named as the record names it, e.g.
// "val_loss") has not improved by more than minDelta for patience epochs; mode is "min" or "max".
// None by default. The metric must be one the val split reports (New checks) and finite each
// epoch. It wins over the experiment's EarlyStop. See EarlyStopping.
func WithEarlyStopping(metric, mode string, patience int, minDelta float64) Option {
	return func(o *options) {
		o.early = &earlySpec{args: &EarlyStopping{Metric: metric, Mode: mode, Patience: patience, MinDelta: minDelta}}
	}
}

// WithEarlyStopper makes p the run's stopping rule (core.DefaultEarlyStopping(), or a custom
// EarlyStopper), winning over the experiment's EarlyStop; nil turns early stopping off for the
// run.
func WithEarlyStopper(p EarlyStopper) Option {
	return func(o *options) { o.early = &earlySpec{policy: p, set: true} }
}

// earlySpec is what the run options asked for: WithEarlyStopping's arguments (args), or
// WithEarlyStopper's policy (set).
type earlySpec struct {
	args   *EarlyStopping
	policy EarlyStopper
	set    bool
}

// runEarlyStop is the run's stopping rule as setup resolved it.
type runEarlyStop struct {
	p        EarlyStopper
	metric   string // the one val metric it reads; "" when it may read any (each is validated)
	origin   string // where it came from, as errors name it
	restored bool   // resume took back this policy's own state
}

// EarlyStopper is the run's stopping rule, nil when the run does not stop early. An
// *EarlyStopping is the run's own copy, so its progress (Best, Exhausted) is this run's.
func (n *Nitro) EarlyStopper() EarlyStopper {
	if n.ck.es == nil {
		return nil
	}
	return n.ck.es.p
}

// resolveEarlyStop picks the run's stopping rule: the run's option, then the experiment's
// EarlyStop, then none. An *EarlyStopping is checked and copied with no progress, so a value
// shared between runs (one option slice for a sweep) never carries one run's count into another.
func (su *setup) resolveEarlyStop() (*runEarlyStop, error) {
	var p EarlyStopper
	var origin string
	switch s := su.opts.early; {
	case s != nil && s.args != nil:
		p, origin = s.args, "WithEarlyStopping"
	case s != nil:
		p, origin = s.policy, "WithEarlyStopper"
	default:
		ch, ok := su.e.(EarlyStopChooser)
		if !ok {
			if m := reflect.ValueOf(su.e).MethodByName("EarlyStop"); m.IsValid() {
				return nil, fmt.Errorf("experiment %s has an EarlyStop method of type %s, which is not the stopping-rule hook: want func (e *%s) EarlyStop() core.EarlyStopper (return core.DefaultEarlyStopping(), or nil for none)",
					su.typeName, coreSpelling(m.Type()), su.typeName)
			}
			return nil, nil
		}
		p, origin = ch.EarlyStop(), su.typeName+".EarlyStop()"
	}
	if v := reflect.ValueOf(p); !v.IsValid() || (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface || v.Kind() == reflect.Map || v.Kind() == reflect.Func) && v.IsNil() {
		return nil, nil // nil, typed or not, is "none"
	}
	r := &runEarlyStop{p: p, origin: origin}
	if es, ok := p.(*EarlyStopping); ok {
		if err := es.Check(origin, defaultsCall); err != nil {
			return nil, err
		}
		r.p = es.Fresh()
	}
	if m, ok := r.p.(earlystop.MetricReader); ok {
		r.metric = m.StopMetric()
		if r.metric == "" {
			return nil, fmt.Errorf("%s: %T's StopMetric() is empty: name the validation metric it reads (e.g. %q), or drop the method and every val metric is passed and validated", origin, p, ValLoss)
		}
	}
	return r, nil
}

// describe names the rule for errors: its origin and metric.
func (r *runEarlyStop) describe() string {
	if r.metric == "" {
		return r.origin
	}
	return fmt.Sprintf("%s(%q)", strings.TrimSuffix(r.origin, "()"), r.metric)
}

// reads reports whether the rule branches on a val metric (named as the record names it).
func (r *runEarlyStop) reads(full string) bool { return r.metric == "" || r.metric == full }

// checkMetric refuses, before training, a rule with no val split to stop on or a metric the val
// split does not report (names is nil when the names are only known after the first epoch).
func (r *runEarlyStop) checkMetric(hasVal bool, splits, names []string) error {
	switch {
	case !hasVal:
		return fmt.Errorf("%s: the data has no \"val\" split (it has %v), so no validation metric exists to stop on", r.describe(), splits)
	case names == nil || r.metric == "":
		return nil
	}
	for _, m := range names {
		if m == r.metric {
			return nil
		}
	}
	m := pickMetric(names)
	mode := earlystop.SuggestMode(m)
	eg := fmt.Sprintf("&core.EarlyStopping{Metric: %q, Mode: %q, Patience: %d, MinDelta: %g}", m, mode, DefaultPatience, DefaultMinDelta)
	if r.origin == "WithEarlyStopping" {
		eg = fmt.Sprintf("core.WithEarlyStopping(%q, %q, %d, %g)", m, mode, DefaultPatience, DefaultMinDelta)
	}
	return fmt.Errorf("%s: no metric of the val split has this name; it reports %s: stop on one of them, e.g. %s",
		r.describe(), strings.Join(names, ", "), eg)
}

// observe is the once-per-epoch early-stop decision: the metrics the rule reads are validated
// (it branches on them), then the rule decides.
func (n *Nitro) observeEarlyStop(res EpochResult) (bool, error) {
	r := n.ck.es
	if r == nil || res.Val == nil || !n.judgesEpoch() {
		return false, nil
	}
	val := withPrefix("val_", res.Val)
	check := []string{r.metric}
	if r.metric == "" {
		check = sortedKeys(val)
	}
	for _, name := range check {
		if _, err := controlValue(res.Val, name, "early-stopping metric"); err != nil {
			return false, err
		}
	}
	stop, why := r.p.ShouldStop(res.Epoch, val)
	if stop {
		if why == "" {
			why = fmt.Sprintf("%s asked to stop", r.origin)
		}
		n.notice(fmt.Sprintf("early stop after epoch %d: %s", res.Epoch, why))
	}
	return stop, nil
}

// The record's control keys: the policy's state and its Go type, so that a resume hands a
// policy only a state of its own kind.
// coreSpelling renders a type as core's API spells it: reflection sees through the aliases
// (EarlyStopping, EarlyStopper) to package earlystop's names, which the experiment did not write.
func coreSpelling(t reflect.Type) string {
	return strings.NewReplacer("earlystop.EarlyStopping", "core.EarlyStopping", "earlystop.Policy", "core.EarlyStopper").Replace(t.String())
}

// controlState is the rule's part of a record's control state, nil when it keeps none.
func (r *runEarlyStop) controlState() (map[string]json.RawMessage, error) {
	st, err := earlystop.SaveState(r.p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.origin, err)
	}
	return st, nil
}

// restoreEarlyStop takes the rule's state back from a record's control state on resume
// (earlystop.RestoreState decides); a policy that starts afresh is said on the console.
func (n *Nitro) restoreEarlyStop(control json.RawMessage, path string) error {
	var ctl map[string]json.RawMessage
	if len(control) > 0 {
		if err := json.Unmarshal(control, &ctl); err != nil {
			return fmt.Errorf("checkpoint %s: control state: %w", path, err)
		}
	}
	restored, note, err := earlystop.RestoreState(n.ck.es.p, ctl)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if note != "" {
		n.notice("resume: " + note)
	}
	n.ck.es.restored = restored
	return nil
}

// stillStopped reports whether the rule, as resumed, stops where the recorded run stopped early:
// its Exhausted when it has one, else whether it took back the state the stopping run saved.
func (r *runEarlyStop) stillStopped() bool {
	if e, ok := r.p.(earlystop.Exhauster); ok {
		return e.Exhausted()
	}
	return r.restored
}
