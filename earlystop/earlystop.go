package earlystop

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// The defaults of the built-in policy, as Default returns them. They apply once a policy is
// asked for; a loop should ask for none by default, because a run cut short unasked is
// surprising and any patience would be a guess.
const (
	DefaultMetric   = "val_loss" // what a model with no metrics of its own reports
	DefaultMode     = "min"
	DefaultPatience = 5
	DefaultMinDelta = 1e-4
)

// Policy decides, once per epoch after validation, whether the run stops: stop ends it
// gracefully, and reason says why in one sentence ("" lets the loop say who asked). A custom
// policy implements this one method, and may add the interfaces below.
type Policy interface {
	ShouldStop(epoch int, val map[string]float64) (stop bool, reason string)
}

// MetricReader is a policy that reads one metric: the loop refuses, before training, a name
// validation does not report, and validates only that metric each epoch.
type MetricReader interface {
	StopMetric() string
}

// Stateful is a policy whose progress a checkpoint keeps: State is plain JSON; Restore takes it
// back on resume and reports false for a state that is not this policy's (it then starts afresh).
type Stateful interface {
	State() (json.RawMessage, error)
	Restore(state json.RawMessage) (bool, error)
}

// Exhauster is a policy that can say whether a restored state already stops the run.
type Exhauster interface {
	Exhausted() bool
}

var (
	_ Policy       = (*EarlyStopping)(nil)
	_ Stateful     = (*EarlyStopping)(nil)
	_ MetricReader = (*EarlyStopping)(nil)
	_ Exhauster    = (*EarlyStopping)(nil)
)

// EarlyStopping is the built-in policy: the run stops after Patience epochs in a row whose
// Metric did not improve on the best seen by more than MinDelta (absolute), as Keras and
// Lightning count. Default gives the defaults; a literal must name its Metric and Mode (Check
// refuses one that does not). It shares with checkpoint ranking only the convention of a metric
// name and a "min"/"max" mode: three lines of comparison are cheaper than a shared abstraction.
type EarlyStopping struct {
	Metric   string  // a validation metric as the record names it, e.g. "val_loss"
	Mode     string  // "min" or "max"
	Patience int     // epochs without improvement before stopping (>= 0; 0 stops as 1 does)
	MinDelta float64 // the least improvement that counts (absolute, >= 0)

	st state
}

// state is what EarlyStopping has seen: the best value and the epochs since it improved.
type state struct {
	Metric    string  `json:"metric"`
	Mode      string  `json:"mode"`
	Seen      bool    `json:"seen"`
	Best      float64 `json:"best"`
	BadEpochs int     `json:"bad_epochs"`
}

// Default is EarlyStopping with the defaults: val_loss, min, patience 5, min_delta 1e-4. Change
// a field for another value: es := earlystop.Default(); es.Patience = 10.
func Default() *EarlyStopping {
	return &EarlyStopping{Metric: DefaultMetric, Mode: DefaultMode, Patience: DefaultPatience, MinDelta: DefaultMinDelta}
}

// New checks the configuration and returns a policy that has seen nothing.
func New(metric, mode string, patience int, minDelta float64) (*EarlyStopping, error) {
	s := &EarlyStopping{Metric: metric, Mode: mode, Patience: patience, MinDelta: minDelta}
	if err := s.Check("earlystop.New", "earlystop.Default()"); err != nil {
		return nil, err
	}
	return s, nil
}

// Check refuses a configuration that cannot decide a stop, naming the field and the fix. origin
// names where the policy came from ("WithEarlyStopping", "E.EarlyStop()"); defaults is how the
// caller's API spells Default, offered as the fix for a policy with no metric.
func (s *EarlyStopping) Check(origin, defaults string) error {
	origin = strings.TrimSuffix(origin, "()") // "E.EarlyStop()" reads as E.EarlyStop("val_acc") below
	switch {
	case s.Metric == "":
		return fmt.Errorf("%s: no metric: name a validation metric, e.g. %q, or start from %s (%s, %s, patience %d, min_delta %g)",
			origin, DefaultMetric, defaults, DefaultMetric, DefaultMode, DefaultPatience, DefaultMinDelta)
	case s.Mode != "min" && s.Mode != "max":
		return fmt.Errorf("%s(%q): mode %q, want \"min\" (lower is better) or \"max\"", origin, s.Metric, s.Mode)
	case s.Patience < 0:
		return fmt.Errorf("%s(%q): patience %d, want >= 0 (epochs without improvement)", origin, s.Metric, s.Patience)
	case s.MinDelta < 0 || math.IsNaN(s.MinDelta) || math.IsInf(s.MinDelta, 0):
		return fmt.Errorf("%s(%q): minDelta %v, want a finite value >= 0 (an absolute improvement)", origin, s.Metric, s.MinDelta)
	}
	return nil
}

// Fresh is a copy of the configuration that has seen nothing: a loop runs its own copy, so one
// value shared between runs (one option list for a sweep) never carries a count across them.
func (s *EarlyStopping) Fresh() *EarlyStopping {
	return &EarlyStopping{Metric: s.Metric, Mode: s.Mode, Patience: s.Patience, MinDelta: s.MinDelta}
}

// ShouldStop implements Policy: Observe, for the training loop.
func (s *EarlyStopping) ShouldStop(_ int, val map[string]float64) (bool, string) {
	return s.Observe(val)
}

// StopMetric is the metric the policy reads (its Metric).
func (s *EarlyStopping) StopMetric() string { return s.Metric }

// Observe takes one epoch's validation metrics and says whether to stop, with a sentence saying
// why. A missing or NaN metric counts as no improvement.
func (s *EarlyStopping) Observe(metrics map[string]float64) (stop bool, reason string) {
	v, ok := metrics[s.Metric]
	improved := ok && !math.IsNaN(v) && (!s.st.Seen || s.better(v))
	if improved {
		s.st.Seen, s.st.Best, s.st.BadEpochs = true, v, 0
	} else {
		s.st.BadEpochs++
	}
	if !s.Exhausted() {
		return false, ""
	}
	return true, fmt.Sprintf("%s has not improved by more than %g for %d epoch(s) (best %g, mode %s)",
		s.Metric, s.MinDelta, s.st.BadEpochs, s.st.Best, s.Mode)
}

// better reports whether v beats the best seen by more than MinDelta.
func (s *EarlyStopping) better(v float64) bool {
	if s.Mode == "max" {
		return v > s.st.Best+s.MinDelta
	}
	return v < s.st.Best-s.MinDelta
}

// Exhausted reports whether the patience is used up: the next Observe without improvement
// stops, and so does this state if the run resumes from it.
func (s *EarlyStopping) Exhausted() bool {
	return s.st.Seen && s.st.BadEpochs > 0 && s.st.BadEpochs >= s.Patience
}

// Best is the best value seen and whether any was.
func (s *EarlyStopping) Best() (float64, bool) { return s.st.Best, s.st.Seen }

// State is the policy's progress as JSON, for a checkpoint record.
func (s *EarlyStopping) State() (json.RawMessage, error) {
	st := s.st
	st.Metric, st.Mode = s.Metric, s.Mode
	return json.Marshal(st)
}

// Restore takes back a State. A state recorded for another metric or mode is not this policy's
// progress: Restore then starts afresh and reports false. A state no EarlyStopping writes (a
// negative count, a non-finite best) is an error.
func (s *EarlyStopping) Restore(data json.RawMessage) (bool, error) {
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return false, fmt.Errorf("early-stopping state: %w", err)
	}
	if st.Metric != s.Metric || st.Mode != s.Mode {
		s.st = state{}
		return false, nil
	}
	if st.BadEpochs < 0 || math.IsNaN(st.Best) || math.IsInf(st.Best, 0) {
		return false, fmt.Errorf("early-stopping state %s: not a state EarlyStopping writes", data)
	}
	s.st = st
	return true, nil
}
