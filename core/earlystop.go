package core

import (
	"encoding/json"
	"fmt"
	"math"
)

// EarlyStopping is the stopping policy WithEarlyStopping installs: the run stops after Patience
// epochs in a row whose Metric did not improve on the best seen by more than MinDelta
// (absolute), as Keras and Lightning count. It is a small value Train consults once per epoch,
// after validation; the stop is graceful (the epoch's validation and checkpoint happen, the
// logger finishes with early_stop). It lives in core, not in package checkpoint, because it is
// control flow of the training loop and independent of retention (the spec's "duplicating three
// lines of comparison beats the abstraction"): it shares with checkpoint.TopK only the
// convention of a metric name and a "min"/"max" mode. Its state (State, Restore) is plain JSON,
// which a checkpoint record carries so that a resume counts on where the run left off.
type EarlyStopping struct {
	Metric   string  // a validation metric as the record names it, e.g. "val_loss"
	Mode     string  // "min" or "max"
	Patience int     // epochs without improvement before stopping (>= 0)
	MinDelta float64 // the least improvement that counts (absolute, >= 0)

	st esState
}

// esState is what EarlyStopping has seen: the best value and the epochs since it improved.
type esState struct {
	Metric    string  `json:"metric"`
	Mode      string  `json:"mode"`
	Seen      bool    `json:"seen"`
	Best      float64 `json:"best"`
	BadEpochs int     `json:"bad_epochs"`
}

// NewEarlyStopping checks the configuration and returns a policy that has seen nothing.
func NewEarlyStopping(metric, mode string, patience int, minDelta float64) (*EarlyStopping, error) {
	switch {
	case metric == "":
		return nil, fmt.Errorf("WithEarlyStopping: no metric: name a validation metric, e.g. %q", ValLoss)
	case mode != "min" && mode != "max":
		return nil, fmt.Errorf("WithEarlyStopping(%q): mode %q, want \"min\" (lower is better) or \"max\"", metric, mode)
	case patience < 0:
		return nil, fmt.Errorf("WithEarlyStopping(%q): patience %d, want >= 0 (epochs without improvement)", metric, patience)
	case minDelta < 0 || math.IsNaN(minDelta) || math.IsInf(minDelta, 0):
		return nil, fmt.Errorf("WithEarlyStopping(%q): minDelta %v, want a finite value >= 0 (an absolute improvement)", metric, minDelta)
	}
	return &EarlyStopping{Metric: metric, Mode: mode, Patience: patience, MinDelta: minDelta}, nil
}

// Observe takes one epoch's validation metrics (named as the record names them: val_loss,
// val_accuracy) and says whether to stop, with a sentence saying why. The caller has checked
// that the metric is present and finite; a missing one counts as no improvement.
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
// progress: Restore then starts afresh and reports false.
func (s *EarlyStopping) Restore(state json.RawMessage) (bool, error) {
	var st esState
	if err := json.Unmarshal(state, &st); err != nil {
		return false, fmt.Errorf("early-stopping state: %w", err)
	}
	if st.Metric != s.Metric || st.Mode != s.Mode {
		s.st = esState{}
		return false, nil
	}
	if st.BadEpochs < 0 || math.IsNaN(st.Best) || math.IsInf(st.Best, 0) {
		return false, fmt.Errorf("early-stopping state %s: not a state EarlyStopping writes", state)
	}
	s.st = st
	return true, nil
}
