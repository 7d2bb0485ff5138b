package schedules_test

import (
	"math"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/schedules"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

// check asserts sched(step) for each step -> want pair.
func check(t *testing.T, name string, sched schedules.Schedule, want map[int]float64) {
	t.Helper()
	for step, w := range want {
		if got := sched(step); !near(got, w) {
			t.Errorf("%s at step %d = %v, want %v", name, step, got, w)
		}
	}
}

func TestFactoriesAreOneBasedOverTheHorizon(t *testing.T) {
	check(t, "Constant", schedules.Constant(0.5)(10), map[int]float64{1: 0.5, 10: 0.5, 1000: 0.5})
	// Linear: from at step 1, to at step total, clamped outside.
	check(t, "Linear", schedules.Linear(0, 1)(5), map[int]float64{0: 0, 1: 0, 2: 0.25, 3: 0.5, 5: 1, 9: 1})
	// Cosine: peak at step 1, the midpoint halfway, floor at step total.
	check(t, "Cosine", schedules.Cosine(1, 0.1)(5), map[int]float64{
		1: 1, 2: 0.1 + 0.9*(1+math.Cos(math.Pi/4))/2, 3: 0.55, 5: 0.1, 6: 0.1,
	})
	// Warmup over 4 steps: peak/4 at step 1 (never a wasted zero step), peak at step 4, then cosine to floor.
	check(t, "WarmupCosineSteps", schedules.WarmupCosineSteps(4, 1, 0)(8), map[int]float64{
		1: 0.25, 2: 0.5, 4: 1, 6: 0.5, 8: 0,
	})
	// Fraction 0.25 of 8 steps is the same 2-step warmup as WarmupCosineSteps(2, ...).
	frac, steps := schedules.WarmupCosine(0.25, 1, 0)(8), schedules.WarmupCosineSteps(2, 1, 0)(8)
	for s := 1; s <= 8; s++ {
		if frac(s) != steps(s) {
			t.Fatalf("WarmupCosine(0.25) and WarmupCosineSteps(2) differ at step %d: %v vs %v", s, frac(s), steps(s))
		}
	}
	// No warmup is Cosine.
	cos, nowarm := schedules.Cosine(2, 1)(7), schedules.WarmupCosineSteps(0, 2, 1)(7)
	for s := 1; s <= 7; s++ {
		if !near(cos(s), nowarm(s)) {
			t.Fatalf("WarmupCosineSteps(0) differs from Cosine at step %d: %v vs %v", s, nowarm(s), cos(s))
		}
	}
	check(t, "Piecewise", schedules.Piecewise([]int{3, 6}, []float64{1, 0.1, 0.01})(10), map[int]float64{
		1: 1, 2: 1, 3: 0.1, 5: 0.1, 6: 0.01, 100: 0.01,
	})
	check(t, "StepDecay", schedules.StepDecay(1, 0.5, 3)(10), map[int]float64{1: 1, 3: 1, 4: 0.5, 6: 0.5, 7: 0.25})
}

func TestFactoryArgumentErrorsSurfaceAtResolve(t *testing.T) {
	space := schedules.Space{RuleFields: []string{"eta"}}
	cases := []struct {
		name  string
		f     schedules.Factory
		wants []string
	}{
		{"warmup too long", schedules.WarmupCosineSteps(10, 1, 0), []string{"WarmupCosineSteps", "10 warmup steps of 10 total", "fewer warmup steps"}},
		{"warmup fraction", schedules.WarmupCosine(1.5, 1, 0), []string{"WarmupCosine", "warmupFrac 1.5", "[0, 1)"}},
		{"piecewise values", schedules.Piecewise([]int{3}, []float64{1}), []string{"Piecewise", "1 boundaries need 2 values, got 1"}},
		{"piecewise order", schedules.Piecewise([]int{5, 3}, []float64{1, 2, 3}), []string{"boundary 3 at index 1", "strictly increasing"}},
		{"step decay", schedules.StepDecay(1, 0.5, 0), []string{"StepDecay", "every 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := schedules.Resolve(map[string]any{"eta": tc.f}, space, 10)
			wantErr(t, err, append(tc.wants, "schedule key eta")...)
		})
	}
}

func TestTotalSteps(t *testing.T) {
	if n, err := schedules.TotalSteps(3, 100, 4); err != nil || n != 75 {
		t.Fatalf("TotalSteps(3, 100, 4) = %d, %v; want 75", n, err)
	}
	if n, err := schedules.TotalSteps(2, 7, 1); err != nil || n != 14 {
		t.Fatalf("TotalSteps(2, 7, 1) = %d, %v; want 14", n, err)
	}
	_, err := schedules.TotalSteps(3, 10, 3)
	wantErr(t, err, "batches per epoch 10", "not divisible by accum 3", "1, 2, 5 or 10", "multiple of 3 batches")
	_, err = schedules.TotalSteps(1, 60000, 7)
	wantErr(t, err, "1, 2, 3, 4, 5, 6, ..., 60000")
	_, err = schedules.TotalSteps(0, 10, 1)
	wantErr(t, err, "max_epochs 0", "at least 1 epoch")
	_, err = schedules.TotalSteps(1, 0, 1)
	wantErr(t, err, "batches per epoch 0")
	_, err = schedules.TotalSteps(1, 10, 0)
	wantErr(t, err, "accum 0", "accum >= 1")
}

func wantErr(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}
