package core_test

import (
	"math"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

// TestFusedStepMatchesTwoPrograms trains the same groups experiment (two groups, per-group rates,
// decay toward w0, a clip) with the default two-program step and with the fused step: the final
// parameters agree, and the fused run compiled one training program where the default compiled two.
func TestFusedStepMatchesTwoPrograms(t *testing.T) {
	run := func(fused bool) ([]float64, int, *core.Nitro) {
		cache := newCache()
		opts := coretest.GoOpts(cache, core.WithData(coretest.Data(t, 0)), core.WithMaxEpochs(3), core.WithGradientClipNorm(0.5))
		if fused {
			opts = append(opts, core.WithFusedStep())
		}
		n, err := core.New(&Groups{}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		return flatParams(t, n), cache.Stats().Misses, n
	}
	two, twoMisses, _ := run(false)
	fused, fusedMisses, nf := run(true)
	if twoMisses != 2 || fusedMisses != 1 {
		t.Errorf("compile misses: two-program %d (want 2), fused %d (want 1)", twoMisses, fusedMisses)
	}
	if nf.Step() != 12 {
		t.Errorf("fused run took %d steps, want 12", nf.Step())
	}
	worst := 0.0
	for i := range two {
		worst = max(worst, math.Abs(two[i]-fused[i])/max(math.Abs(two[i]), 1e-3))
	}
	// The same math in one program or two; XLA-style fusion may reorder float32 rounding only.
	if worst > 1e-5 {
		t.Errorf("fused and two-program parameters differ by %.3g relative after 12 steps", worst)
	}
	if !strings.Contains(nf.ConfigReport(), "fused") {
		t.Errorf("config report does not say the step is fused:\n%s", nf.ConfigReport())
	}
}

// TestFusedStepWithValidationCompilesTwo: train + validate compiles the fused step and eval.
func TestFusedStepWithValidationCompilesTwo(t *testing.T) {
	cache := newCache()
	n, err := core.New(&coretest.Reg{}, coretest.GoOpts(cache, core.WithData(coretest.Data(t, 48)), core.WithMaxEpochs(2), core.WithFusedStep())...)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if s := cache.Stats(); s.Misses != 2 || s.Entries != 2 {
		t.Errorf("compile cache %+v: want 2 misses, 2 entries (fused train step, eval)", s)
	}
	h := n.History()
	if len(h) != 2 || !(h[1].TrainLoss < h[0].TrainLoss) {
		t.Errorf("fused training did not reduce the loss: %+v", h)
	}
}

// TestFusedStepRefusesAccum: accum > 1 has no place in one program; New says why and the fix.
func TestFusedStepRefusesAccum(t *testing.T) {
	_, err := core.New(&coretest.Reg{}, coretest.GoOpts(nil, core.WithData(coretest.Data(t, 0)), core.WithAccum(2), core.WithFusedStep())...)
	if err == nil {
		t.Fatal("New accepted WithFusedStep with Accum = 2")
	}
	for _, want := range []string{"Accum = 2", "one program", "set Accum to 1", "two-program step"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
