package schedules

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Schedule is a value as a function of the 1-based optimizer step: step 1 is the first update, step total
// the last. Steps count optimizer updates, not micro-batches: with accum N they differ by a factor of N.
type Schedule func(step int) float64

// Factory builds a Schedule from the horizon, the total number of optimizer steps of the run. It is called
// once at setup. The shipped factories panic on invalid arguments when called; Resolve reports that as a
// setup error naming the key.
type Factory func(total int) Schedule

// progress maps step to [0, 1] over steps first..last, clamping outside so a resumed or extended run
// holds the end value instead of extrapolating.
func progress(step, first, last int) float64 {
	if last <= first || step <= first {
		return 0
	}
	if step >= last {
		return 1
	}
	return float64(step-first) / float64(last-first)
}

// Constant is v at every step; a bare number in a schedule map means the same.
func Constant(v float64) Factory {
	return func(int) Schedule { return func(int) float64 { return v } }
}

// Linear goes from `from` at step 1 to `to` at step total, in a straight line.
func Linear(from, to float64) Factory {
	return func(total int) Schedule {
		return func(step int) float64 { return from + (to-from)*progress(step, 1, total) }
	}
}

// Cosine anneals from peak at step 1 to floor at step total along half a cosine.
func Cosine(peak, floor float64) Factory {
	return func(total int) Schedule {
		return func(step int) float64 { return cosineBetween(peak, floor, progress(step, 1, total)) }
	}
}

func cosineBetween(peak, floor, p float64) float64 {
	return floor + (peak-floor)*(1+math.Cos(math.Pi*p))/2
}

// WarmupCosine warms up linearly over the first warmupFrac of the horizon (rounded to whole steps), then
// anneals like Cosine from peak to floor at step total. warmupFrac must be in [0, 1).
func WarmupCosine(warmupFrac, peak, floor float64) Factory {
	return func(total int) Schedule {
		if !(warmupFrac >= 0 && warmupFrac < 1) {
			panic(fmt.Sprintf("schedules.WarmupCosine: warmupFrac %v: use a fraction of the horizon in [0, 1)", warmupFrac))
		}
		return warmupCosine(int(math.Round(warmupFrac*float64(total))), peak, floor, total, "WarmupCosine")
	}
}

// WarmupCosineSteps warms up linearly over warmupSteps optimizer steps (peak/warmupSteps at step 1, peak
// at step warmupSteps; a zero first step would waste an update), then anneals from peak to floor at step
// total. warmupSteps must be in [0, total).
func WarmupCosineSteps(warmupSteps int, peak, floor float64) Factory {
	return func(total int) Schedule { return warmupCosine(warmupSteps, peak, floor, total, "WarmupCosineSteps") }
}

func warmupCosine(warmup int, peak, floor float64, total int, name string) Schedule {
	if warmup < 0 || warmup >= total {
		panic(fmt.Sprintf("schedules.%s: %d warmup steps of %d total leave no annealing: use fewer warmup steps than total", name, warmup, total))
	}
	return func(step int) float64 {
		if step <= warmup {
			return peak * float64(max(step, 1)) / float64(warmup)
		}
		// With no warmup the anneal starts at step 1, as Cosine does.
		return cosineBetween(peak, floor, progress(step, max(warmup, 1), total))
	}
}

// Piecewise is values[0] before step boundaries[0], values[i] from step boundaries[i-1] up to (not
// including) step boundaries[i], and the last value from the last boundary on. It needs one more value
// than boundaries, and strictly increasing boundaries >= 1.
func Piecewise(boundaries []int, values []float64) Factory {
	boundaries = append([]int(nil), boundaries...)
	values = append([]float64(nil), values...)
	return func(int) Schedule {
		if len(values) != len(boundaries)+1 {
			panic(fmt.Sprintf("schedules.Piecewise: %d boundaries need %d values, got %d: pass one value per interval", len(boundaries), len(boundaries)+1, len(values)))
		}
		for i, b := range boundaries {
			if b < 1 || (i > 0 && b <= boundaries[i-1]) {
				panic(fmt.Sprintf("schedules.Piecewise: boundary %d at index %d: boundaries are optimizer steps >= 1, strictly increasing", b, i))
			}
		}
		return func(step int) float64 {
			i := 0
			for i < len(boundaries) && step >= boundaries[i] {
				i++
			}
			return values[i]
		}
	}
}

// StepDecay is initial, multiplied by factor after every `every` optimizer steps: initial at steps
// 1..every, initial*factor at steps every+1..2*every, and so on.
func StepDecay(initial, factor float64, every int) Factory {
	return func(int) Schedule {
		if every < 1 {
			panic(fmt.Sprintf("schedules.StepDecay: every %d: decay after a positive number of optimizer steps", every))
		}
		return func(step int) float64 {
			return initial * math.Pow(factor, float64((max(step, 1)-1)/every))
		}
	}
}

// TotalSteps is the horizon handed to every Factory: maxEpochs * (batchesPerEpoch / accum) optimizer
// steps. The division must be exact; a remainder would leave micro-batches that never reach an update.
func TotalSteps(maxEpochs, batchesPerEpoch, accum int) (int, error) {
	switch {
	case maxEpochs < 1:
		return 0, fmt.Errorf("max_epochs %d: train for at least 1 epoch", maxEpochs)
	case batchesPerEpoch < 1:
		return 0, fmt.Errorf("batches per epoch %d: the training split yields no batch; supply data or lower the batch size", batchesPerEpoch)
	case accum < 1:
		return 0, fmt.Errorf("accum %d: set accum >= 1 (1 = no accumulation)", accum)
	case batchesPerEpoch%accum != 0:
		return 0, fmt.Errorf("batches per epoch %d is not divisible by accum %d: choose an accum that divides it (%s), or make the training split a multiple of %d batches", batchesPerEpoch, accum, divisors(batchesPerEpoch), accum)
	}
	return maxEpochs * (batchesPerEpoch / accum), nil
}

// divisors lists n's divisors for the fix in TotalSteps' error, shortened when there are many.
func divisors(n int) string {
	var ds []int
	for d := 1; d <= n; d++ {
		if n%d == 0 {
			ds = append(ds, d)
		}
	}
	var b strings.Builder
	for i, d := range ds {
		switch {
		case len(ds) > 8 && i == 6:
			b.WriteString(", ..., ")
			b.WriteString(strconv.Itoa(n))
			return b.String()
		case i == len(ds)-1 && i > 0:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(d))
	}
	return b.String()
}
