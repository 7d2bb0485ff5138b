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

// EarlyStopChooser is an experiment that picks its own stopping rule, so every run of it stops
// the same way; nil means none. A run's WithEarlyStopping or WithEarlyStopper wins. Train asks
// the policy once per epoch, after validation, with the val metrics named as the record names
// them; a stop still checkpoints that epoch and the logger finishes with early_stop. The policy's
// optional methods (the metric it reads, its checkpointed state) are package earlystop's. Return
// a new policy from each call: one value holds one run's progress (an *earlystop.EarlyStopping
// is copied by New, so it may be shared).
type EarlyStopChooser interface {
	EarlyStop() earlystop.Policy
}

// defaultsCall is how the defaults are spelled, offered as the fix for a rule with no metric.
const defaultsCall = "earlystop.Default()"

// WithEarlyStopping stops Train when the validation metric (named as the record names it, e.g.
// "val_loss") has not improved by more than minDelta for patience epochs; mode is "min" or "max".
// None by default. The metric must be one the val split reports (New checks) and finite each
// epoch. It wins over the experiment's EarlyStop. See earlystop.EarlyStopping.
func WithEarlyStopping(metric, mode string, patience int, minDelta float64) Option {
	return func(o *options) {
		o.early = &earlySpec{args: &earlystop.EarlyStopping{Metric: metric, Mode: mode, Patience: patience, MinDelta: minDelta}}
	}
}

// WithEarlyStopper makes p the run's stopping rule (earlystop.Default(), or a custom
// earlystop.Policy), winning over the experiment's EarlyStop; nil turns early stopping off for the
// run.
func WithEarlyStopper(p earlystop.Policy) Option {
	return func(o *options) { o.early = &earlySpec{policy: p, set: true} }
}

// earlySpec is what the run options asked for: WithEarlyStopping's arguments (args), or
// WithEarlyStopper's policy (set).
type earlySpec struct {
	args   *earlystop.EarlyStopping
	policy earlystop.Policy
	set    bool
}

// runEarlyStop is the run's stopping rule as setup resolved it.
type runEarlyStop struct {
	p        earlystop.Policy
	metric   string // the one val metric it reads; "" when it may read any (each is validated)
	origin   string // where it came from, as errors name it
	restored bool   // resume took back this policy's own state
}

// EarlyStopper is the run's stopping rule, nil when the run does not stop early. An
// *earlystop.EarlyStopping is the run's own copy, so its progress (Best, Exhausted) is this run's.
func (n *Nitro) EarlyStopper() earlystop.Policy {
	if n.ck.es == nil {
		return nil
	}
	return n.ck.es.p
}

// resolveEarlyStop picks the run's stopping rule: the run's option, then the experiment's
// EarlyStop, then none. An *earlystop.EarlyStopping is checked and copied with no progress, so a value
// shared between runs (one option slice for a sweep) never carries one run's count into another.
func (bld *builder) resolveEarlyStop() (*runEarlyStop, error) {
	su := &bld.n.spec
	var p earlystop.Policy
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
				return nil, fmt.Errorf("experiment %s has an EarlyStop method of type %s, which is not the stopping-rule hook: want func (e *%s) EarlyStop() earlystop.Policy (return earlystop.Default(), or nil for none)",
					su.typeName, m.Type(), su.typeName)
			}
			return nil, nil
		}
		p, origin = ch.EarlyStop(), su.typeName+".EarlyStop()"
	}
	if v := reflect.ValueOf(p); !v.IsValid() || (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface || v.Kind() == reflect.Map || v.Kind() == reflect.Func) && v.IsNil() {
		return nil, nil // nil, typed or not, is "none"
	}
	r := &runEarlyStop{p: p, origin: origin}
	if es, ok := p.(*earlystop.EarlyStopping); ok {
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
	eg := fmt.Sprintf("&earlystop.EarlyStopping{Metric: %q, Mode: %q, Patience: %d, MinDelta: %g}", m, mode, earlystop.DefaultPatience, earlystop.DefaultMinDelta)
	if r.origin == "WithEarlyStopping" {
		eg = fmt.Sprintf("core.WithEarlyStopping(%q, %q, %d, %g)", m, mode, earlystop.DefaultPatience, earlystop.DefaultMinDelta)
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
	stop, why := r.p.ShouldStop(n.validationIndex(res), val)
	if stop {
		if why == "" {
			why = fmt.Sprintf("%s asked to stop", r.origin)
		}
		n.spec.notice(fmt.Sprintf("early stop after %s: %s", n.periodName(res), why))
	}
	return stop, nil
}

// The record's control keys: the policy's state and its Go type, so that a resume hands a
// policy only a state of its own kind.
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
func (bld *builder) restoreEarlyStop(control json.RawMessage, path string) error {
	n := bld.n
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
		n.spec.notice("resume: " + note)
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
