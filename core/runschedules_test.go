package core_test

import (
	"strings"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/schedules"
)

// TestWithSchedulesOverridesTheExperiment: a run's WithSchedules replaces the experiment's
// schedule of the same target for that run (the run trains exactly as the experiment would with
// that schedule declared), the binding report marks it "run option", the params line records its
// text, and a key that binds nothing is refused by name, as the hook's are.
func TestWithSchedulesOverridesTheExperiment(t *testing.T) {
	exp := func(sched map[string]any) *RuleExp {
		return &RuleExp{Rule: optimizers.Momentum{Rho: 0.9}, Sched: sched}
	}
	text, err := schedules.Parse("linear:0.05,0.01")
	if err != nil {
		t.Fatal(err)
	}
	rec := &logjson.Memory{}
	over := coretest.MustNew(t, exp(map[string]any{"opt.eta": schedules.Cosine(0.5, 0)}), coretest.Data(t, 0), core.WithMaxEpochs(2),
		core.WithSchedules(map[string]any{"eta": text}), core.WithLogger(rec))
	coretest.Train(t, over)
	declared := coretest.MustNew(t, exp(map[string]any{"eta": schedules.Linear(0.05, 0.01)}), coretest.Data(t, 0), core.WithMaxEpochs(2))
	coretest.Train(t, declared)
	sameBits(t, "the run's schedule vs the same schedule declared by the experiment", flatParams(t, over), flatParams(t, declared))

	wantContains(t, "binding report", over.BindingReport(), "schedule eta (run option)")
	if strings.Contains(over.BindingReport(), "schedule opt.eta") {
		t.Errorf("the binding report still shows the experiment's opt.eta:\n%s", over.BindingReport())
	}
	params := rec.Params()
	if len(params) != 1 || params[0]["schedule.eta"] != "linear:0.05,0.01" {
		t.Errorf("params lines %v; want one with schedule.eta = linear:0.05,0.01", params)
	}
	if v, ok := rec.Other("binding_notices"); !ok || !strings.Contains(strings.Join(v.([]string), "\n"), "the run option's eta replaces the experiment's Schedules() key opt.eta") {
		t.Errorf("binding_notices %v (%v); want the replaced key named", v, ok)
	}

	coretest.WantErr(t, newErr(t, exp(nil), coretest.Data(t, 0), core.WithSchedules(map[string]any{"lr": 0.1, "beta9": text})),
		"the run's schedules (run option)", "unknown schedule key beta9", "unknown schedule key lr", "the learning-rate key is eta")
}
