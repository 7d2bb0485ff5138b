package optimizers_test

import (
	"slices"
	"testing"

	"github.com/nitro-go/nitro/optimizers"
)

// TestOneDeclarationDrivesPromotionAndScheduleCheck: for every shipped rule, the fields a built
// transform reads from Hyper (promotion to device inputs) are exactly the fields the schedule
// check accepts, both computed from the rule's single Nonschedulable declaration.
func TestOneDeclarationDrivesPromotionAndScheduleCheck(t *testing.T) {
	for _, r := range []optimizers.Rule{optimizers.NewRAdam(), optimizers.NewAdam(), optimizers.NewSGD(), optimizers.NewMomentum()} {
		fields, err := optimizers.RuleFields(r)
		if err != nil {
			t.Fatal(err)
		}
		var schedulable []string
		for _, f := range fields {
			err := optimizers.CheckScheduleKey(r, f.Key)
			if f.Schedulable {
				schedulable = append(schedulable, f.Key)
				if err != nil {
					t.Errorf("%s: schedulable field %s refused: %v", r.RuleName(), f.Key, err)
				}
			} else if err == nil {
				t.Errorf("%s: nonschedulable field %s accepted by the schedule check", r.RuleName(), f.Key)
			}
		}
		if got := buildRule(t, r).HyperFields(); !slices.Equal(got, schedulable) {
			t.Errorf("%s: transform reads %v from Hyper, the declaration makes %v schedulable", r.RuleName(), got, schedulable)
		}
	}
}

func TestRuleFieldsRAdam(t *testing.T) {
	fields, err := optimizers.RuleFields(optimizers.NewRAdam())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range fields {
		keys = append(keys, f.Key)
	}
	if !slices.Equal(keys, []string{"eta", "beta1", "beta2", "eps"}) {
		t.Errorf("keys %v", keys)
	}
	if !fields[0].Schedulable || fields[1].Schedulable || fields[1].Reason == "" || fields[2].Value != 0.999 {
		t.Errorf("fields %+v", fields)
	}
}

func TestCheckScheduleKeyErrors(t *testing.T) {
	mustContain(t, optimizers.CheckScheduleKey(optimizers.NewRAdam(), "beta1"),
		`"beta1"`, "field Beta1 of rule radam is nonschedulable", "make it a constant")
	mustContain(t, optimizers.CheckScheduleKey(optimizers.NewAdam(), "lr"),
		`rule adam has no field "lr"`, "schedulable keys are eta, lambda")
	if err := optimizers.CheckScheduleKey(optimizers.NewMomentum(), "rho"); err != nil {
		t.Errorf("rho is schedulable: %v", err)
	}
	if err := optimizers.CheckScheduleKey(optimizers.NewSGD(), "lambda"); err != nil {
		t.Errorf("lambda (the Decay tail) is always schedulable: %v", err)
	}
}

func TestZeroValueRulesAreRefused(t *testing.T) {
	_, err := optimizers.Momentum{Eta: 0.1}.Build()
	mustContain(t, err, "Momentum field Rho is 0", "NewMomentum", "use SGD")
	_, err = optimizers.RAdam{}.Build()
	mustContain(t, err, "RAdam field Beta2 is 0", "NewRAdam")
	_, err = optimizers.Adam{Beta1: 1, Beta2: 0.9}.Build()
	mustContain(t, err, "Adam field Beta1 is 1", "[0, 1)")
	_, err = optimizers.Adam{Beta1: 0.9, Beta2: 0.9, Eps: -1}.Build()
	mustContain(t, err, "Adam field Eps is -1", ">= 0")
	if _, err := (optimizers.Adam{Beta1: 0, Beta2: 0.9}).Build(); err != nil {
		t.Errorf("beta1 = 0 (no momentum, as GANs use) must be accepted: %v", err)
	}
}

// adamW is a user rule with weight decay of its own.
type adamW struct {
	Eta, Beta1, Beta2, Eps, Lambda float64
}

func (adamW) RuleName() string { return "adamw" }
func (adamW) Nonschedulable() map[string]string {
	return map[string]string{"beta1": "b", "beta2": "b", "eps": "e"}
}
func (r adamW) Build() (optimizers.Transform, error) {
	return optimizers.Adam{Eta: r.Eta, Beta1: r.Beta1, Beta2: r.Beta2, Eps: r.Eps}.Build()
}

// stepsRule has an integer field its declaration forgot.
type stepsRule struct {
	Eta   float64
	Steps int
}

func (stepsRule) RuleName() string                     { return "steps" }
func (stepsRule) Nonschedulable() map[string]string    { return map[string]string{} }
func (stepsRule) Build() (optimizers.Transform, error) { return optimizers.NewSGD().Build() }

// staleRule declares a field it does not have.
type staleRule struct{ Eta float64 }

func (staleRule) RuleName() string                     { return "stale" }
func (staleRule) Nonschedulable() map[string]string    { return map[string]string{"beta": "gone"} }
func (staleRule) Build() (optimizers.Transform, error) { return optimizers.NewSGD().Build() }

func TestRuleFieldsChecksTheDeclaration(t *testing.T) {
	_, err := optimizers.RuleFields(stepsRule{})
	mustContain(t, err, "field Steps is int", `declare "steps" in the rule's Nonschedulable`)
	_, err = optimizers.RuleFields(staleRule{})
	mustContain(t, err, `declares "beta" nonschedulable but has no such field`, "fields: [eta]")
	_, err = optimizers.RuleFields(nil)
	mustContain(t, err, "nil rule", "NewRAdam")
	_, err = optimizers.RuleFields((*adamW)(nil))
	mustContain(t, err, "nil pointer")
}

func TestRuleHyperValues(t *testing.T) {
	v, err := optimizers.RuleHyperValues(optimizers.Momentum{Eta: 0.1, Rho: 0.8})
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != 2 || v["eta"] != 0.1 || v["rho"] != 0.8 {
		t.Errorf("RuleHyperValues = %v, want eta 0.1 rho 0.8 (and no baked fields)", v)
	}
	v, _ = optimizers.RuleHyperValues(optimizers.NewRAdam())
	if _, baked := v["beta1"]; baked || len(v) != 1 {
		t.Errorf("RAdam hyper values %v, want only eta", v)
	}
}
