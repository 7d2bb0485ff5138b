package schedules_test

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/schedules"
)

func space() schedules.Space {
	return schedules.Space{
		DeviceFields: []string{"threshold", "lambda", "aux_weight"},
		RuleFields:   []string{"eta", "lambda", "beta", "epsilon", "momentum"},
		Groups:       []string{"backbone", "head"},
		Nonschedulable: map[string]string{
			"beta":    "RAdam: a tuple, which a scalar schedule cannot produce",
			"epsilon": "RAdam: baked as a constant",
		},
	}
}

func TestResolveBindsEachKeyToItsTarget(t *testing.T) {
	b, err := schedules.Resolve(map[string]any{
		"eta":              schedules.Linear(1, 0),
		"threshold":        0.5,
		"device.lambda":    float32(0.25),
		"opt.lambda":       1e-4,
		"opt.backbone.eta": schedules.Constant(0.5),
		"momentum":         schedules.Schedule(func(step int) float64 { return 0.9 }),
	}, space(), 5)
	if err != nil {
		t.Fatal(err)
	}
	want := []schedules.Target{
		{Scope: "device", Name: "lambda"},
		{Scope: "device", Name: "threshold"},
		{Scope: "opt", Name: "eta"},
		{Scope: "opt", Name: "lambda"},
		{Scope: "opt", Name: "momentum"},
		{Scope: "opt", Group: "backbone", Name: "eta"},
	}
	if got := b.Targets(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Targets() = %v, want %v", got, want)
	}
	if b.Total() != 5 {
		t.Fatalf("Total() = %d", b.Total())
	}
	v, err := b.At(5)
	if err != nil {
		t.Fatal(err)
	}
	wantValues := schedules.Values{
		{Scope: "device", Name: "lambda"}:              0.25,
		{Scope: "device", Name: "threshold"}:           0.5,
		{Scope: "opt", Name: "eta"}:                    0,
		{Scope: "opt", Name: "lambda"}:                 1e-4,
		{Scope: "opt", Name: "momentum"}:               0.9,
		{Scope: "opt", Group: "backbone", Name: "eta"}: 0.5,
	}
	if !reflect.DeepEqual(v, wantValues) {
		t.Fatalf("At(5) = %v, want %v", v, wantValues)
	}
	if k, ok := b.Key(schedules.Target{Scope: "opt", Name: "eta"}); !ok || k != "eta" {
		t.Fatalf("Key(opt.eta) = %q, %v; want the key as written, eta", k, ok)
	}
	if !b.IsConstant(schedules.Target{Scope: "device", Name: "threshold"}) || b.IsConstant(schedules.Target{Scope: "opt", Name: "eta"}) {
		t.Fatal("IsConstant does not tell a bare number from a factory")
	}
	if !b.Has(schedules.Target{Scope: "device", Name: "threshold"}) || b.Has(schedules.Target{Scope: "device", Name: "aux_weight"}) {
		t.Fatal("Has disagrees with the schedule map")
	}
}

func TestTargetString(t *testing.T) {
	for want, tg := range map[string]schedules.Target{
		"device.threshold": {Scope: "device", Name: "threshold"},
		"opt.eta":          {Scope: "opt", Name: "eta"},
		"opt.backbone.eta": {Scope: "opt", Group: "backbone", Name: "eta"},
	} {
		if tg.String() != want {
			t.Errorf("%#v.String() = %q, want %q", tg, tg.String(), want)
		}
	}
}

// A group without a path key falls back to the every-group key; with neither the caller uses its accessor.
func TestValuesOptFallsBackFromGroupPathToBareKey(t *testing.T) {
	b, err := schedules.Resolve(map[string]any{"eta": 1e-3, "opt.backbone.eta": 1e-4}, space(), 10)
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.At(1)
	if err != nil {
		t.Fatal(err)
	}
	if x, from, ok := v.Opt("backbone", "eta"); !ok || x != 1e-4 || from.String() != "opt.backbone.eta" {
		t.Fatalf("Opt(backbone, eta) = %v from %v (%v), want 1e-4 from opt.backbone.eta", x, from, ok)
	}
	if x, from, ok := v.Opt("head", "eta"); !ok || x != 1e-3 || from.String() != "opt.eta" {
		t.Fatalf("Opt(head, eta) = %v from %v (%v), want 1e-3 from opt.eta", x, from, ok)
	}
	if _, _, ok := v.Opt("head", "momentum"); ok {
		t.Fatal("Opt found an unscheduled field")
	}
	if _, ok := v.Device("threshold"); ok {
		t.Fatal("Device found an unscheduled field")
	}
}

func TestNestedMapsAreGroupPaths(t *testing.T) {
	b, err := schedules.Resolve(map[string]any{
		"opt":    map[string]any{"backbone": map[string]any{"eta": 1e-4}, "lambda": 0.1},
		"device": map[string]any{"lambda": 0.5},
	}, space(), 10)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, tg := range b.Targets() {
		got = append(got, tg.String())
	}
	if strings.Join(got, ",") != "device.lambda,opt.lambda,opt.backbone.eta" {
		t.Fatalf("Targets() = %v", got)
	}
	if k, _ := b.Key(schedules.Target{Scope: "opt", Group: "backbone", Name: "eta"}); k != "opt.backbone.eta" {
		t.Fatalf("Key = %q, want the flattened key opt.backbone.eta", k)
	}
}

func TestResolveErrors(t *testing.T) {
	withLambdaAccessors := space()
	withLambdaAccessors.GroupLambdaAccessors = true
	cases := []struct {
		name    string
		entries map[string]any
		space   schedules.Space
		wants   []string
	}{
		{"ambiguous", map[string]any{"lambda": 0.1}, space(), []string{"lambda is both a Device field and an optimizer rule field", "device.lambda or opt.lambda"}},
		{"unknown", map[string]any{"width": 0.1}, space(), []string{"unknown schedule key width", "[threshold lambda aux_weight]", "[eta lambda beta epsilon momentum]", "opt.<group>.<field> for groups [backbone head]"}},
		{"learning rate alias", map[string]any{"lr": 0.1}, space(), []string{"unknown schedule key lr", "the learning-rate key is eta"}},
		{"not a device field", map[string]any{"device.eta": 0.1}, space(), []string{"device.eta", "eta is not a Device field", "[threshold lambda aux_weight]"}},
		{"not a rule field", map[string]any{"opt.threshold": 0.1}, space(), []string{"opt.threshold", "threshold is not an optimizer rule field", "[eta lambda beta epsilon momentum]"}},
		{"unknown group", map[string]any{"opt.encoder.eta": 0.1}, space(), []string{"opt.encoder.eta", "encoder is not a parameter group", "[backbone head]"}},
		{"group field unknown", map[string]any{"opt.head.lr": 0.1}, space(), []string{"lr is not an optimizer rule field", "the learning-rate key is eta"}},
		{"group without field", map[string]any{"opt.backbone": 0.1}, space(), []string{"names parameter group backbone, not a field", "opt.backbone.<field>"}},
		{"unqualified dotted", map[string]any{"backbone.eta": 0.1}, space(), []string{"backbone.eta is dotted but not qualified", "opt.backbone.eta"}},
		{"two levels", map[string]any{"opt.backbone.l1.eta": 0.1}, space(), []string{"group paths are one level", "opt.<group>.<field>"}},
		{"device path", map[string]any{"device.backbone.threshold": 0.1}, space(), []string{"device keys have no group paths", "device.<field>"}},
		{"reserved", map[string]any{"opt": 0.1}, space(), []string{"opt is reserved", "opt.<field>"}},
		{"empty part", map[string]any{"opt..eta": 0.1}, space(), []string{`"opt..eta" has an empty path part`}},
		{"nonschedulable", map[string]any{"opt.beta": 0.9}, space(), []string{"opt.beta", "nonschedulable rule field beta", "RAdam: a tuple", "set it on the rule"}},
		{"nonschedulable bare", map[string]any{"epsilon": schedules.Constant(1e-8)}, space(), []string{"key epsilon", "nonschedulable rule field epsilon", "RAdam: baked"}},
		{"nonschedulable group path", map[string]any{"opt.head.beta": 0.9}, space(), []string{"opt.head.beta", "nonschedulable rule field beta"}},
		{"lambda with accessors", map[string]any{"opt.lambda": 1e-4}, withLambdaAccessors, []string{"schedule key opt.lambda and the per-group lambda accessors", "remove the per-group lambda accessors", "remove the opt.lambda schedule"}},
		{"group lambda with accessors", map[string]any{"opt.head.lambda": 1e-4}, withLambdaAccessors, []string{"opt.head.lambda and the per-group lambda accessors"}},
		{"same target twice", map[string]any{"eta": 0.1, "opt.eta": 0.2}, space(), []string{"schedule keys eta and opt.eta both bind opt.eta", "keep one"}},
		{"dotted and nested", map[string]any{"opt.eta": 0.1, "opt": map[string]any{"eta": 0.2}}, space(), []string{"opt.eta is given twice", "keep one"}},
		{"bad value type", map[string]any{"eta": "0.1"}, space(), []string{"schedule key eta: value of type string", "a number", "Factory"}},
		{"non-finite constant", map[string]any{"eta": math.Inf(1)}, space(), []string{"schedule key eta", "constant +Inf is not finite"}},
		{"nil schedule", map[string]any{"eta": schedules.Factory(func(int) schedules.Schedule { return nil })}, space(), []string{"schedule key eta", "nil Schedule"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := schedules.Resolve(tc.entries, tc.space, 10)
			if b != nil {
				t.Error("Resolve returned a Bound with an error")
			}
			wantErr(t, err, tc.wants...)
		})
	}
	_, err := schedules.Resolve(nil, space(), 0)
	wantErr(t, err, "horizon 0", "TotalSteps")
}

func TestResolveReportsEveryBadKey(t *testing.T) {
	_, err := schedules.Resolve(map[string]any{"width": 1, "lambda": 2, "eta": 3}, space(), 10)
	wantErr(t, err, "unknown schedule key width", "lambda is both")
	if strings.Index(err.Error(), "lambda is both") > strings.Index(err.Error(), "unknown schedule key width") {
		t.Fatalf("errors not in key order: %q", err)
	}
}

// The framework calls each factory once at setup, and each schedule once per At.
func TestFactoryOnceScheduleOncePerStep(t *testing.T) {
	factoryCalls, schedCalls := 0, 0
	var gotTotal int
	f := func(total int) schedules.Schedule {
		factoryCalls++
		gotTotal = total
		return func(step int) float64 { schedCalls++; return float64(step) / float64(total) }
	}
	b, err := schedules.Resolve(map[string]any{"eta": f, "threshold": func(step int) float64 { return 1 }}, space(), 40)
	if err != nil {
		t.Fatal(err)
	}
	if factoryCalls != 1 || gotTotal != 40 {
		t.Fatalf("factory called %d times with total %d, want once with 40", factoryCalls, gotTotal)
	}
	for step := 1; step <= 40; step++ {
		v, err := b.At(step)
		if err != nil {
			t.Fatal(err)
		}
		if x, _, _ := v.Opt("", "eta"); x != float64(step)/40 {
			t.Fatalf("eta at step %d = %v", step, x)
		}
	}
	if factoryCalls != 1 || schedCalls != 40 {
		t.Fatalf("after 40 steps: factory %d calls, schedule %d calls; want 1 and 40", factoryCalls, schedCalls)
	}
}

func TestAtErrors(t *testing.T) {
	b, err := schedules.Resolve(map[string]any{
		"eta":       schedules.Schedule(func(step int) float64 { return 1 / float64(3-step) }),
		"threshold": func(step int) float64 { return []float64{0.1, 0.2}[step-1] },
	}, space(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.At(1); err != nil {
		t.Fatal(err)
	}
	_, err = b.At(0)
	wantErr(t, err, "step 0", "1-based")
	_, err = b.At(3)
	wantErr(t, err, "schedule device.threshold (key threshold) panicked at optimizer step 3")
	b, _ = schedules.Resolve(map[string]any{"eta": schedules.Schedule(func(step int) float64 { return 1 / float64(3-step) })}, space(), 10)
	_, err = b.At(3)
	wantErr(t, err, "schedule opt.eta (key eta) returned +Inf at optimizer step 3", "must be finite")
}

// Override replaces the experiment's entry of each target the run schedules, whatever its
// spelling, keeps the rest, and refuses a run key that binds nothing, by name.
func TestOverride(t *testing.T) {
	space := schedules.Space{DeviceFields: []string{"Temperature"}, RuleFields: []string{"eta", "rho"}, Groups: []string{"head"}}
	base := map[string]any{"opt.eta": 0.1, "Temperature": 2.0, "opt": map[string]any{"head": map[string]any{"rho": 0.8}}}
	merged, replaced, err := schedules.Override(base, map[string]any{"eta": 0.5, "opt.head.eta": 0.3}, space)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"eta": 0.5, "opt.head.eta": 0.3, "Temperature": 2.0, "opt.head.rho": 0.8}
	if !reflect.DeepEqual(merged, want) || !reflect.DeepEqual(replaced, map[string]string{"opt.eta": "eta"}) {
		t.Errorf("merged %v, replaced %v; want %v, {opt.eta: eta}", merged, replaced, want)
	}
	_, _, err = schedules.Override(base, map[string]any{"lr": 0.5, "opt.tail.eta": 1}, space)
	for _, w := range []string{"unknown schedule key lr", "the learning-rate key is eta", "schedule key opt.tail.eta: tail is not a parameter group"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	_, _, err = schedules.Override(nil, map[string]any{"eta": 0.5, "opt.eta": 0.4}, space)
	if err == nil || !strings.Contains(err.Error(), "schedule keys eta and opt.eta both bind opt.eta") {
		t.Errorf("two run keys on one target: %v", err)
	}
}
