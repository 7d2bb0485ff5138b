package optimizers_test

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/schedules"
)

func groupLayout(t testing.TB, group string) *optimizers.Layout {
	t.Helper()
	l, err := optimizers.NewLayout(group, []optimizers.ParamLeaf{
		{Keypath: []string{group, "weights"}, Shape: shapes.Make(dtypes.Float32, 2, 2)},
		{Keypath: []string{group, "biases"}, Shape: shapes.Make(dtypes.Float32, 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// twoGroupSpec: a backbone at a tenth of the default rate, Level 1 Momentum, per-group lambda and
// anchor, eta scheduled with a cosine, rho constant, and one Device field scheduled.
func twoGroupSpec(t testing.TB, calls map[string]int) optimizers.PlanSpec {
	count := func(name string) { calls[name]++ }
	return optimizers.PlanSpec{
		LearningRate: optimizers.Setting{Value: 1e-3, Source: "run option"},
		Lambda:       optimizers.Setting{Value: 0, Source: "default"},
		Groups:       []*optimizers.Layout{groupLayout(t, "backbone"), groupLayout(t, "default")},
		DeviceFields: []string{"Temperature"},
		TotalSteps:   10,
		LearningRateGroup: func(g string) float64 {
			count("LearningRateGroup " + g)
			return map[string]float64{"backbone": 1e-4, "default": 1e-3}[g]
		},
		LambdaGroup: func(g string) float64 {
			count("LambdaGroup " + g)
			return map[string]float64{"backbone": 0.01}[g]
		},
		DecayAnchor: func(g string) optimizers.Anchor { count("DecayAnchor " + g); return optimizers.AnchorW0 },
		OptimizerRule: func(g string) optimizers.Rule {
			count("OptimizerRule " + g)
			return optimizers.Momentum{Rho: 0.9}
		},
		Schedules: map[string]any{"eta": schedules.Cosine(1e-3, 0), "rho": 0.8, "Temperature": schedules.Linear(1, 2)},
	}
}

// The binding rows a plan reports, rendered as the binding report, match the golden text; each
// accessor ran once per group.
func TestPlanBindingReportGolden(t *testing.T) {
	calls := map[string]int{}
	p, err := optimizers.Resolve(twoGroupSpec(t, calls))
	if err != nil {
		t.Fatal(err)
	}
	for name, n := range calls {
		if n != 1 {
			t.Errorf("%s ran %d times, want once", name, n)
		}
	}
	if len(calls) != 8 {
		t.Errorf("accessor calls %v, want 4 accessors x 2 groups", calls)
	}
	rows := append([]schedules.Binding{p.DeviceBinding("Temperature", "1"), p.DeviceBinding("Shift", "[0]")}, p.GroupBindings()...)
	got := schedules.Report(rows)
	const path = "testdata/plan_report.golden"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run PlanBindingReportGolden -update once to create it)", err)
	}
	if got != string(want) {
		t.Errorf("binding rows changed (rerun with -update if intended):\ngot:\n%s\nwant:\n%s", got, want)
	}
	if !slices.Equal(p.ScheduledDevice(), []string{"Temperature"}) || !slices.Equal(p.Scheduled("backbone"), []string{"eta", "rho"}) {
		t.Errorf("scheduled: device %v, backbone %v", p.ScheduledDevice(), p.Scheduled("backbone"))
	}
}

// A scheduled eta's row leads with the rate its group really runs at step 1 (what Hyper gives the
// chain), not the schedule's own value, and prints the ratio without division noise.
func TestPlanBindingReportShowsTheGroupsOwnRate(t *testing.T) {
	p, err := optimizers.Resolve(twoGroupSpec(t, map[string]int{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range p.GroupBindings() {
		if b.Name != optimizers.EtaField {
			continue
		}
		h, err := p.Hyper(b.Group, 1)
		if err != nil {
			t.Fatal(err)
		}
		lead, _, _ := strings.Cut(b.Value, " ")
		got, err := strconv.ParseFloat(lead, 64)
		if err != nil || math.Abs(got-h[optimizers.EtaField]) > 1e-12*h[optimizers.EtaField] {
			t.Errorf("group %s: eta row %q leads with %q; the group's eta at step 1 is %g", b.Group, b.Value, lead, h[optimizers.EtaField])
		}
		if strings.Contains(b.Note, "99999") {
			t.Errorf("group %s: note %q shows the ratio's division noise", b.Group, b.Note)
		}
	}
}

// Hyper is the base values, overridden by the schedules at that step, then made effective: eta
// times the group's ratio, lambda times that eta.
func TestPlanHyperAtAStep(t *testing.T) {
	p, err := optimizers.Resolve(twoGroupSpec(t, map[string]int{}))
	if err != nil {
		t.Fatal(err)
	}
	at, err := p.At(1)
	if err != nil {
		t.Fatal(err)
	}
	eta := at[schedules.Target{Scope: schedules.ScopeOpt, Name: "eta"}]
	hv, err := p.Hyper("backbone", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"eta": eta * 0.1, "rho": 0.8, "lambda": 0.01 * eta * 0.1}
	for k, w := range want {
		if relErr(hv[k], w) > 1e-12 {
			t.Errorf("backbone %s = %v, want %v (all: %v)", k, hv[k], w, hv)
		}
	}
	if hv, _ := p.Hyper("default", 1); len(hv) != 2 || relErr(hv["eta"], eta) > 1e-12 {
		t.Errorf("default group (no decay: lambda 0): %v, want eta %v and rho only", hv, eta)
	}
	if _, err := p.Hyper("head", 1); err == nil || !strings.Contains(err.Error(), `no parameter group "head"`) {
		t.Errorf("unknown group: %v", err)
	}
}

// A Level 1 rule's own eta that differs from the rate the plan feeds it is refused, naming the
// rule field and where the resolved rate came from; an equal one, zero, or a scheduled eta is not.
func TestPlanRefusesARuleEtaItWouldOverride(t *testing.T) {
	spec := optimizers.PlanSpec{
		LearningRate: optimizers.Setting{Value: 0.05, Source: "run option"},
		Groups:       []*optimizers.Layout{groupLayout(t, "default")},
		TotalSteps:   1,
	}
	rule := func(eta float64) func(string) optimizers.Rule {
		return func(string) optimizers.Rule { return optimizers.SGD{Eta: eta} }
	}
	spec.OptimizerRule = rule(0.001)
	_, err := optimizers.Resolve(spec)
	mustContain(t, err, `OptimizerRule("default"): SGD.Eta is 0.001 but the resolved LearningRate is 0.05 (run option)`, "set LearningRate instead, or leave Eta zero")
	for _, eta := range []float64{0, 0.05} {
		spec.OptimizerRule = rule(eta)
		if _, err := optimizers.Resolve(spec); err != nil {
			t.Errorf("Eta %v: %v", eta, err)
		}
	}
	spec.OptimizerRule = rule(0.001)
	spec.Schedules = map[string]any{"eta": 0.01}
	if _, err := optimizers.Resolve(spec); err != nil {
		t.Errorf("scheduled eta: %v", err)
	}
	spec.Schedules = nil
	spec.LearningRateGroup = func(string) float64 { return 0.05 }
	_, err = optimizers.Resolve(spec)
	mustContain(t, err, `group "default"'s resolved learning rate is 0.05 (accessor LearningRateGroup(default))`, "set it in LearningRateGroup instead")
}

// Level 2: the factory runs twice per group (unscheduled, then final), and a scheduled key a
// group's chain does not read is a report row flagged unread (here rho, which only the head's
// momentum reads).
func TestPlanLevel2ReportsAnUnreadSchedule(t *testing.T) {
	runs := 0
	spec := optimizers.PlanSpec{
		LearningRate: optimizers.Setting{Value: 1e-3, Source: "default"},
		Groups:       []*optimizers.Layout{groupLayout(t, "default"), groupLayout(t, "head")},
		TotalSteps:   4,
		OptimizerChain: func(g optimizers.GroupSetup) (*optimizers.Chain, error) {
			runs++
			if g.Name == "head" {
				return optimizers.BuildRuleChain(optimizers.NewMomentum(), g)
			}
			return mustChain(t, buildRule(t, optimizers.SGD{})), nil // a chain without rho, built by hand
		},
		Schedules: map[string]any{"rho": 0.5},
	}
	p, err := optimizers.Resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	if runs != 4 {
		t.Errorf("factory ran %d times for 2 groups, want 4", runs)
	}
	g := p.Groups()[0]
	if g.Level != "Level 2: OptimizerChain" || !slices.Equal(g.Binding.Unused, []string{"rho"}) || len(p.Groups()[1].Binding.Unused) != 0 {
		t.Errorf("level %q, bindings %+v, %+v", g.Level, g.Binding, p.Groups()[1].Binding)
	}
	rep := schedules.Report(p.GroupBindings())
	if !strings.Contains(rep, "1 scheduled but not read") || !strings.Contains(rep, "NOT READ by this group's chain") {
		t.Errorf("report lacks the unread rho row:\n%s", rep)
	}
}

// A field the chain reads that nothing sets is refused with the fix; InitState builds each state
// leaf as one flat buffer, laid out as the parameters.
func TestPlanUnsetFieldAndInitState(t *testing.T) {
	spec := optimizers.PlanSpec{
		LearningRate: optimizers.Setting{Value: 1e-3, Source: "default"},
		Groups:       []*optimizers.Layout{groupLayout(t, "default")},
		TotalSteps:   1,
		OptimizerChain: func(g optimizers.GroupSetup) (*optimizers.Chain, error) {
			return optimizers.BuildRuleChain(optimizers.NewMomentum(), g) // reads rho, which no rule value feeds at Level 2
		},
	}
	_, err := optimizers.Resolve(spec)
	mustContain(t, err, `group "default": the optimizer chain reads hyperparameter "rho", which nothing sets`, `{"rho": 0.9}`)
	_, err = optimizers.Resolve(optimizers.PlanSpec{Groups: []*optimizers.Layout{nil}})
	mustContain(t, err, "PlanSpec.Groups[0] is nil")
	_, err = optimizers.Resolve(optimizers.PlanSpec{Groups: spec.Groups, LambdaGroup: func(string) float64 { panic("no lambda today") }})
	mustContain(t, err, "panicked: no lambda today")
	spec.OptimizerChain = nil
	spec.OptimizerRule = func(string) optimizers.Rule { return optimizers.Momentum{Rho: 0.9} }
	p, err := optimizers.Resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	state, err := p.Groups()[0].InitState(tensors.FromValue(make([]float32, 6)))
	if err != nil {
		t.Fatal(err)
	}
	if len(state) != 1 || !state[0].Shape().Equal(p.Groups()[0].Layout.FlatShape()) {
		t.Errorf("momentum state %v, want one flat leaf of the group's shape %s", state, p.Groups()[0].Layout.FlatShape())
	}
}

// VaryingOptKeys names the opt keys a schedule varies ("eta", a cosine) as written, and leaves
// out a bare number ("rho") and a Device field's schedule ("Temperature"); nothing scheduled
// lists nothing.
func TestPlanVaryingOptKeys(t *testing.T) {
	p, err := optimizers.Resolve(twoGroupSpec(t, map[string]int{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.VaryingOptKeys(); !slices.Equal(got, []string{"eta"}) {
		t.Errorf("VaryingOptKeys = %v, want [eta]", got)
	}
	spec := twoGroupSpec(t, map[string]int{})
	spec.Schedules = map[string]any{"opt.backbone.eta": schedules.Linear(1e-4, 0), "rho": 0.8}
	if p, err = optimizers.Resolve(spec); err != nil {
		t.Fatal(err)
	}
	if got := p.VaryingOptKeys(); !slices.Equal(got, []string{"opt.backbone.eta"}) {
		t.Errorf("VaryingOptKeys = %v, want [opt.backbone.eta]", got)
	}
	spec.Schedules = nil
	if p, err = optimizers.Resolve(spec); err != nil {
		t.Fatal(err)
	}
	if got := p.VaryingOptKeys(); len(got) != 0 {
		t.Errorf("nothing scheduled: VaryingOptKeys = %v", got)
	}
}

// An eta schedule replacing a Level 1 rule's own non-zero Eta is said, not refused: one notice
// for the group naming the schedule, the field, its value and the fix, and a note on the group's
// eta row. A rule with Eta unset, or with Eta equal to the group's LearningRateGroup rate (which
// the schedule keeps as the ratio, as manual mode's rules do), gets neither.
func TestScheduleReplacingRuleEtaIsSaid(t *testing.T) {
	spec := func(rule optimizers.Rule, rates map[string]float64) optimizers.PlanSpec {
		s := optimizers.PlanSpec{
			LearningRate:  optimizers.Setting{Value: 1e-3, Source: "default"},
			Groups:        []*optimizers.Layout{groupLayout(t, "backbone"), groupLayout(t, "default")},
			TotalSteps:    10,
			OptimizerRule: func(string) optimizers.Rule { return rule },
			Schedules:     map[string]any{"eta": schedules.Cosine(0.05, 0)},
		}
		if rates != nil {
			s.LearningRateGroup = func(g string) float64 { return rates[g] }
		}
		return s
	}
	etaNote := func(p *optimizers.Plan, group string) string {
		for _, b := range p.GroupBindings() {
			if b.Group == group && b.Name == "eta" {
				return b.Note
			}
		}
		t.Fatalf("no eta row for group %s", group)
		return ""
	}
	for _, c := range []struct {
		name   string
		rule   optimizers.Rule
		rates  map[string]float64
		groups []string // the groups said to lose their rule's Eta
	}{
		{"Eta set", optimizers.Momentum{Eta: 0.5, Rho: 0.9}, nil, []string{"backbone", "default"}},
		{"Eta unset", optimizers.Momentum{Rho: 0.9}, nil, nil},
		{"Eta is one group's rate", optimizers.SGD{Eta: 1e-3}, map[string]float64{"backbone": 1e-4, "default": 1e-3}, []string{"backbone"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := optimizers.Resolve(spec(c.rule, c.rates))
			if err != nil {
				t.Fatal(err)
			}
			notices := p.Notices()
			if len(notices) != len(c.groups) {
				t.Fatalf("notices %q; want one for each of %v", notices, c.groups)
			}
			for i, g := range c.groups {
				field := strings.TrimPrefix(fmt.Sprintf("%T", c.rule), "optimizers.")
				want := fmt.Sprintf("group %s: eta: schedule eta replaces %s.Eta=%g, which the group does not train at: leave Eta zero", g, field, map[string]float64{"Momentum": 0.5, "SGD": 1e-3}[field])
				if !strings.HasPrefix(notices[i], want) {
					t.Errorf("notice %q; want it to start %q", notices[i], want)
				}
				if note := etaNote(p, g); !strings.Contains(note, fmt.Sprintf("schedule eta replaces %s.Eta=", field)) {
					t.Errorf("group %s's eta row note %q does not say the schedule replaces the rule's Eta", g, note)
				}
			}
			for _, g := range []string{"backbone", "default"} {
				if !slices.Contains(c.groups, g) && strings.Contains(etaNote(p, g), "replaces") {
					t.Errorf("group %s's eta row note %q says a replacement there is none", g, etaNote(p, g))
				}
			}
		})
	}
}

// A run's schedules override the experiment's by target for that run: the group's eta follows
// the run's curve, the experiment's other schedules stay, the report marks the run's rows "run
// option", a notice names the key replaced, and a run key that binds nothing is refused by name.
func TestRunSchedulesOverride(t *testing.T) {
	spec := twoGroupSpec(t, map[string]int{})
	spec.Schedules["opt.eta"] = spec.Schedules["eta"] // the experiment's spelling differs from the run's
	delete(spec.Schedules, "eta")
	spec.RunSchedules = map[string]any{"eta": schedules.Constant(0.02)}
	p, err := optimizers.Resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.Hyper("default", 5)
	if err != nil || h["eta"] != 0.02 || h["rho"] != 0.8 {
		t.Errorf("default group at step 5: %v, %v; want eta 0.02 (the run's) and rho 0.8 (the experiment's)", h, err)
	}
	var etaSrc, rhoSrc string
	for _, b := range p.GroupBindings() {
		if b.Group == "default" && b.Name == "eta" {
			etaSrc = b.Source
		}
		if b.Group == "default" && b.Name == "rho" {
			rhoSrc = b.Source
		}
	}
	if etaSrc != "schedule eta (run option)" || rhoSrc != "schedule rho" {
		t.Errorf("sources: eta %q, rho %q; want the run's eta marked run option, the experiment's rho not", etaSrc, rhoSrc)
	}
	if dev := p.DeviceBinding("Temperature", "1"); dev.Source != "schedule Temperature" || !dev.Scheduled {
		t.Errorf("Temperature row %+v: want the experiment's schedule kept", dev)
	}
	want := "schedules: the run option's eta replaces the experiment's Schedules() key opt.eta for this run"
	if n := p.Notices(); len(n) != 1 || n[0] != want {
		t.Errorf("notices %q; want [%q]", n, want)
	}

	spec.RunSchedules = map[string]any{"lr": 0.01, "beta9": 1}
	_, err = optimizers.Resolve(spec)
	for _, w := range []string{"the run's schedules (run option)", "unknown schedule key beta9", "unknown schedule key lr", "the learning-rate key is eta"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
}
