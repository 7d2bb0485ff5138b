package optimizers_test

import (
	"testing"

	"github.com/nitro-go/nitro/optimizers"
)

// A scheduled eta or lambda below zero is refused: a constant at Resolve, a schedule at the step
// it goes negative, naming the schedule key and the step. Zero is allowed (freezing late in a run).
func TestPlanRefusesANegativeScheduledRateOrDecay(t *testing.T) {
	spec := func(sched map[string]any) optimizers.PlanSpec {
		return optimizers.PlanSpec{
			LearningRate: optimizers.Setting{Value: 1e-3, Source: "default"},
			Groups:       []*optimizers.Layout{groupLayout(t, "default"), groupLayout(t, "head")},
			TotalSteps:   4,
			Schedules:    sched,
		}
	}
	_, err := optimizers.Resolve(spec(map[string]any{"opt": map[string]any{"head": map[string]any{"eta": -1}}}))
	mustContain(t, err, "schedule opt.head.eta (key opt.head.eta) is the constant -1", "learning rate must be >= 0")

	down := func(step int) float64 { return 0.3 - 0.1*float64(step) } // 0.2, 0.1, ~0, -0.1
	p, err := optimizers.Resolve(spec(map[string]any{"lambda": down}))
	if err != nil {
		t.Fatal(err)
	}
	for step := 1; step <= 3; step++ {
		h, err := p.Hyper("default", step)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if h[optimizers.LambdaField] < 0 {
			t.Errorf("step %d: lambda %v; a rounding negative (0.3 - 3*0.1) is used as 0", step, h[optimizers.LambdaField])
		}
	}
	_, err = p.Hyper("head", 4)
	mustContain(t, err, "schedule opt.lambda (key lambda) returned", "at optimizer step 4", "decay coefficient must be >= 0")

	p, err = optimizers.Resolve(spec(map[string]any{"eta": func(step int) float64 { return float64(4-step) * 1e-3 }}))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := p.Hyper("default", 4); err != nil || h[optimizers.EtaField] != 0 {
		t.Errorf("eta scheduled to 0 at the last step: %v, %v; want 0 accepted", h, err)
	}
}
