package core_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/schedules"
)

// RuleExp returns its Rule at Level 1, for every group, with optional schedules.
type RuleExp struct {
	coretest.Base
	Rule  optimizers.Rule
	Sched map[string]any
}

func (e *RuleExp) OptimizerRule(string) optimizers.Rule { return e.Rule }
func (e *RuleExp) Schedules() map[string]any            { return e.Sched }

// GroupRuleExp is RuleExp with per-group rates: the head runs at half of LearningRate.
type GroupRuleExp struct {
	Groups
	Rule optimizers.Rule
}

func (e *GroupRuleExp) OptimizerRule(string) optimizers.Rule { return e.Rule }

// TestRuleFieldTheFrameworkOverwrites: a Level 1 rule's eta is fed from the resolved learning
// rate, so a rule holding another non-zero eta is refused naming the field, both values and where
// the resolved one came from; zero (unset) and an equal value are accepted and train alike, at
// the resolved rate.
func TestRuleFieldTheFrameworkOverwrites(t *testing.T) {
	coretest.WantErr(t, newErr(t, &RuleExp{Rule: optimizers.Momentum{Eta: 0.5, Rho: 0.9}}, coretest.Data(t, 0)),
		`OptimizerRule("default")`, "Momentum.Eta is 0.5 but the resolved LearningRate is 0.001 (default)", "set LearningRate instead, or leave Eta zero")
	coretest.WantErr(t, newErr(t, &RuleExp{Rule: optimizers.NewSGD()}, coretest.Data(t, 0), core.WithLearningRate(0.05)),
		"SGD.Eta is 0.001 but the resolved LearningRate is 0.05 (run option)")

	// Zero and equal: accepted, the same numbers, at the resolved rate.
	run := func(rule optimizers.Rule) ([]float64, string) {
		t.Helper()
		n := coretest.MustNew(t, &RuleExp{Rule: rule}, coretest.Data(t, 0), core.WithLearningRate(0.05), core.WithMaxEpochs(2))
		coretest.Train(t, n)
		return flatParams(t, n), n.BindingReport()
	}
	zero, rep := run(optimizers.Momentum{Rho: 0.9})
	wantContains(t, "binding report", rep, "momentum", "0.05", "LearningRate run option")
	equal, _ := run(optimizers.Momentum{Eta: 0.05, Rho: 0.9})
	sameBits(t, "Eta 0.05 vs Eta unset at LearningRate 0.05", equal, zero)
	other, _ := run(optimizers.Momentum{Rho: 0.5})
	if same := func() bool {
		for i := range other {
			if other[i] != zero[i] {
				return false
			}
		}
		return true
	}(); same {
		t.Error("Rho 0.5 trained as Rho 0.9: the rule's own (unreplaced) field is not used")
	}

	// Per-group rates: the group's resolved rate is what replaces eta (the head's 1e-3 agrees,
	// the backbone's 1e-4 does not).
	coretest.WantErr(t, newErr(t, &GroupRuleExp{Rule: optimizers.SGD{Eta: 1e-3}}, coretest.Data(t, 0)),
		`OptimizerRule("backbone")`, `SGD.Eta is 0.001 but group "backbone"'s resolved learning rate is 0.0001 (accessor LearningRateGroup(backbone))`, "leave Eta zero")
	coretest.MustNew(t, &GroupRuleExp{Rule: optimizers.SGD{}}, coretest.Data(t, 0))

	// A schedule of eta is where eta comes from, declared: the rule's eta is its default, as for
	// every rule field a schedule drives.
	coretest.MustNew(t, &RuleExp{Rule: optimizers.Momentum{Eta: 0.5, Rho: 0.9}, Sched: map[string]any{"eta": schedules.Cosine(0.05, 0)}}, coretest.Data(t, 0))
}

// TestScheduleReplacingRuleEtaIsSaid: an eta schedule replaces a Level 1 rule's own non-zero Eta
// (a schedule is where eta comes from, declared), and the run says so: once on the console at
// setup as a warning, on the binding report's eta row, and in the record beside the reports. A
// rule with Eta unset under the same schedule says none of it.
func TestScheduleReplacingRuleEtaIsSaid(t *testing.T) {
	run := func(rule optimizers.Rule) (*core.MemoryConsole, *logjson.Memory, *core.Nitro) {
		t.Helper()
		con, rec := &core.MemoryConsole{}, &logjson.Memory{}
		n, err := core.New(&RuleExp{Rule: rule, Sched: map[string]any{"eta": schedules.Cosine(0.05, 0)}}, core.WithData(coretest.Data(t, 0)),
			core.WithBackend("go"), core.WithCache(compilecache.New()), core.WithoutCheckpoints(),
			core.WithConsole(con), core.WithLogger(rec), core.WithMaxEpochs(1))
		if err != nil {
			t.Fatal(err)
		}
		coretest.Train(t, n)
		return con, rec, n
	}
	const said = "schedule eta replaces Momentum.Eta=0.5"
	con, rec, n := run(optimizers.Momentum{Eta: 0.5, Rho: 0.9})
	var warned []string
	for _, msg := range con.Notices {
		if strings.Contains(msg, "replaces") {
			warned = append(warned, msg)
		}
	}
	want := "warning: group default: eta: " + said + ", which the group does not train at: leave Eta zero to take the rate from the schedule, or drop the eta schedule"
	if len(warned) != 1 || !strings.HasPrefix(warned[0], want) {
		t.Errorf("console notices %q; want one starting %q", con.Notices, want)
	}
	wantContains(t, "binding report", n.BindingReport(), said)
	if v, ok := rec.Other("binding_notices"); !ok || !strings.Contains(fmt.Sprint(v), said) {
		t.Errorf("the record's binding_notices: %v (%v); want the notice", v, ok)
	}

	con, rec, n = run(optimizers.Momentum{Rho: 0.9})
	for _, msg := range con.Notices {
		if strings.Contains(msg, "replaces") {
			t.Errorf("Eta unset: the console says %q", msg)
		}
	}
	if strings.Contains(n.BindingReport(), "replaces") {
		t.Errorf("Eta unset: the binding report says a replacement:\n%s", n.BindingReport())
	}
	if v, ok := rec.Other("binding_notices"); ok {
		t.Errorf("Eta unset: the record holds binding_notices %v", v)
	}
}
