package sweep

import (
	"fmt"
	"math"
	"slices"
)

// ASHA is asynchronous successive halving, as Optuna's SuccessiveHalvingPruner: a trial is judged
// only at rungs, the steps MinResource * Reduction^(MinEarlyStoppingRate + k) for k = 0, 1, ...
// (defaults 1, 3, 0: steps 1, 3, 9, 27, ...). Steps are whatever the trials report (epochs or
// optimizer steps), the same kind for every trial of a sweep.
//
// A trial's value at a rung is the value it reported at its first step at or past the rung's
// step (a trial validated every 2 epochs has, at rung 3, its epoch-4 value). The rule is the same
// for the trial being judged and for its competitors, and is read from the record, so the
// decision is a pure function of the history: a resumed sweep prunes as an uninterrupted one.
//
// When a report is a trial's first at or past a rung, its value is ranked among the values every
// other trial has at that rung (any state: trials pruned there count) plus its own, n in all; it
// goes on only if it is within the best floor(n/Reduction), at least the best one (so while a
// rung has fewer than Reduction trials only a new best passes it, and a trial alone there goes
// on). Ties with the last value that passes pass. One report can cross several rungs (a trial that
// first reports at step 10 is judged at 1, 3 and 9, with that value at each).
//
// A report between rungs never prunes, nor does one at a rung the trial already crossed with an
// earlier report; the exception is a NaN value, which is pruned at any step (a diverged run does
// not recover, and a NaN cannot be ranked). NaN values at a rung are not competitors.
type ASHA struct {
	MinResource          int // the first rung's step (0: 1)
	Reduction            int // the factor between rungs, and the 1/fraction that goes on (0: 3)
	MinEarlyStoppingRate int // rungs start at MinResource * Reduction^MinEarlyStoppingRate
}

// withDefaults fills the zero fields with Optuna's defaults.
func (a ASHA) withDefaults() ASHA {
	if a.MinResource == 0 {
		a.MinResource = 1
	}
	if a.Reduction == 0 {
		a.Reduction = 3
	}
	return a
}

// Check says whether a's settings make rungs: a caller checks before a sweep starts, since Prune
// never prunes (other than NaN) under invalid settings.
func (a ASHA) Check() error {
	a = a.withDefaults()
	if a.MinResource < 0 {
		return fmt.Errorf("ASHA MinResource %d is negative: give the first rung's step (>= 1), or 0 for 1", a.MinResource)
	}
	if a.Reduction < 2 {
		return fmt.Errorf("ASHA Reduction %d must be at least 2 (each rung keeps 1/Reduction): give e.g. 3, or 0 for 3", a.Reduction)
	}
	if a.MinEarlyStoppingRate < 0 {
		return fmt.Errorf("ASHA MinEarlyStoppingRate %d is negative: give 0 or more", a.MinEarlyStoppingRate)
	}
	return nil
}

// Rungs lists the rung steps up to and including upTo.
func (a ASHA) Rungs(upTo int) []int {
	if a.Check() != nil {
		return nil
	}
	a = a.withDefaults()
	var rungs []int
	for r, ok := a.firstRung(); ok && r <= upTo; r, ok = a.next(r) {
		rungs = append(rungs, r)
	}
	return rungs
}

func (a ASHA) firstRung() (int, bool) {
	r := a.MinResource
	for range a.MinEarlyStoppingRate {
		var ok bool
		if r, ok = a.next(r); !ok {
			return 0, false
		}
	}
	return r, true
}

// next is the rung after r, false where it would overflow: no step reaches it.
func (a ASHA) next(r int) (int, bool) {
	if r > math.MaxInt/a.Reduction {
		return 0, false
	}
	return r * a.Reduction, true
}

// Prune says whether trial number stops after reporting value at step.
func (a ASHA) Prune(history []Trial, number, step int, value float64, maximize bool) bool {
	if math.IsNaN(value) {
		return true
	}
	if a.Check() != nil {
		return false
	}
	a = a.withDefaults()
	// The trial's own last step before this report: rungs at or below it were crossed already.
	// Its reports at this step or later (made before a resume went back to an earlier
	// checkpoint) are superseded by this one.
	crossed := math.MinInt
	for _, t := range history {
		if t.Number == number {
			for s := range t.Intermediate {
				if s < step {
					crossed = max(crossed, s)
				}
			}
			break
		}
	}
	for r, ok := a.firstRung(); ok && r <= step; r, ok = a.next(r) {
		if crossed >= r {
			continue
		}
		competing := []float64{value}
		for _, t := range history {
			if t.Number == number {
				continue
			}
			if v, ok := rungValue(t.Intermediate, r); ok && !math.IsNaN(v) {
				competing = append(competing, v)
			}
		}
		if !promotable(value, competing, a.Reduction, maximize) {
			return true
		}
	}
	return false
}

// rungValue is the value reported at the first step at or past rung.
func rungValue(intermediate map[int]float64, rung int) (float64, bool) {
	first, found := 0, false
	for s := range intermediate {
		if s >= rung && (!found || s < first) {
			first, found = s, true
		}
	}
	return intermediate[first], found
}

// promotable says whether value is within the best len(competing)/reduction of competing (which
// holds value), at least the best one.
func promotable(value float64, competing []float64, reduction int, maximize bool) bool {
	k := max(len(competing)/reduction, 1)
	sorted := slices.Clone(competing)
	slices.Sort(sorted)
	if maximize {
		return value >= sorted[len(sorted)-k]
	}
	return value <= sorted[k-1]
}
