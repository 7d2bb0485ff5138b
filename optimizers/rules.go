package optimizers

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// Rule is a Level 1 optimizer rule: a plain struct whose exported float64 fields are its
// hyperparameters, each named by its field key (the lower-cased field name, or the `opt:"key"`
// tag). Every field not declared Nonschedulable is schedulable: Build's transform reads it from
// Hyper (a device input), and the rule's own value is only the default core feeds when no
// schedule drives it. Declared fields are baked into the graph and appear in Describe. The one
// declaration drives both, so promotion and the schedule check cannot drift. Non-float64 fields
// are structural and must be declared.
type Rule interface {
	// RuleName is the rule's short name ("radam").
	RuleName() string
	// Nonschedulable maps field key -> reason the field may not be scheduled.
	Nonschedulable() map[string]string
	// Build validates the baked fields and returns the transform.
	Build() (Transform, error)
}

// RAdamThreshold is the rectification threshold of RAdam (optax's default): the adaptive step is
// used once rho_t >= 5, and plain bias-corrected momentum before.
const RAdamThreshold = 5.0

// RAdam is rectified Adam (Liu et al. 2019) in optax's form (scale_by_radam, eps_root 0, no
// Nesterov, then scale by -eta): the Level 0 default. Eta is the learning rate (schedulable);
// Beta1, Beta2 and Eps are baked. With t the 1-based step:
//
//	mu = (1-b1) g + b1 mu;  nu = (1-b2) g^2 + b2 nu;  mu_hat = mu/(1-b1^t);  nu_hat = nu/(1-b2^t)
//	rho_inf = 2/(1-b2) - 1;  rho_t = rho_inf - 2 t b2^t/(1-b2^t)
//	r_t = sqrt((rho_t-4)(rho_t-2) rho_inf / ((rho_inf-4)(rho_inf-2) rho_t))
//	update = -eta * (rho_t >= 5 ? r_t mu_hat/(sqrt(nu_hat)+eps) : mu_hat)
//
// so the first steps (rho_t < 5; t <= 5 at b2 = 0.999) are bias-corrected momentum, unadapted.
// The step-dependent scalars (b^t, the bias corrections, rho_t, r_t and the switch) are computed in
// float64 whatever the parameters' dtype, so the switch falls where float64 math puts it.
type RAdam struct {
	Eta   float64
	Beta1 float64
	Beta2 float64
	Eps   float64
}

// Adam is Adam (Kingma & Ba) in optax's form (scale_by_adam, eps_root 0, then scale by -eta):
// the moments and bias corrections of RAdam, and update = -eta mu_hat/(sqrt(nu_hat)+eps), eps
// outside the square root.
type Adam struct {
	Eta   float64
	Beta1 float64
	Beta2 float64
	Eps   float64
}

// SGD is plain gradient descent: update = -eta * g.
type SGD struct {
	Eta float64
}

// Momentum is heavy-ball momentum in optax's trace form: v = g + rho*v, update = -eta * v.
// (Optimisers.jl's form, v = rho*v + eta*g, differs once eta is scheduled.) Rho is schedulable.
type Momentum struct {
	Eta float64
	Rho float64
}

// NewRAdam returns RAdam with optax's defaults (eta 1e-3, betas 0.9/0.999, eps 1e-8).
func NewRAdam() RAdam { return RAdam{Eta: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} }

// NewAdam returns Adam with optax's defaults (eta 1e-3, betas 0.9/0.999, eps 1e-8).
func NewAdam() Adam { return Adam{Eta: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8} }

// NewSGD returns SGD with eta 1e-3.
func NewSGD() SGD { return SGD{Eta: 1e-3} }

// NewMomentum returns Momentum with eta 1e-3 and rho 0.9.
func NewMomentum() Momentum { return Momentum{Eta: 1e-3, Rho: 0.9} }

// DefaultRule is the Level 0 rule: RAdam, because it rectifies the adaptive term over the first
// steps instead of leaving a hand-tuned warmup to do the same job by feel.
func DefaultRule() Rule { return NewRAdam() }

const betaReason = "a beta is baked into the bias corrections and the rectification; a scalar schedule of it would change the estimator's meaning mid-run"
const epsReason = "eps is a numerical-stability constant, not a tuning curve"

// RuleName implements Rule.
func (RAdam) RuleName() string { return "radam" }

// Nonschedulable implements Rule: beta1, beta2, eps.
func (RAdam) Nonschedulable() map[string]string {
	return map[string]string{"beta1": betaReason, "beta2": betaReason, "eps": epsReason}
}

// Build implements Rule.
func (r RAdam) Build() (Transform, error) {
	if err := checkAdamFields("RAdam", r.Beta1, r.Beta2, r.Eps); err != nil {
		return nil, err
	}
	hf, err := schedulableKeys(r)
	if err != nil {
		return nil, err
	}
	return &adamTransform{rectified: true, b1: r.Beta1, b2: r.Beta2, eps: r.Eps, hyper: hf, nonsched: r.Nonschedulable()}, nil
}

// RuleName implements Rule.
func (Adam) RuleName() string { return "adam" }

// Nonschedulable implements Rule: beta1, beta2, eps.
func (Adam) Nonschedulable() map[string]string {
	return map[string]string{"beta1": betaReason, "beta2": betaReason, "eps": epsReason}
}

// Build implements Rule.
func (r Adam) Build() (Transform, error) {
	if err := checkAdamFields("Adam", r.Beta1, r.Beta2, r.Eps); err != nil {
		return nil, err
	}
	hf, err := schedulableKeys(r)
	if err != nil {
		return nil, err
	}
	return &adamTransform{b1: r.Beta1, b2: r.Beta2, eps: r.Eps, hyper: hf, nonsched: r.Nonschedulable()}, nil
}

// RuleName implements Rule.
func (SGD) RuleName() string { return "sgd" }

// Nonschedulable implements Rule: none.
func (SGD) Nonschedulable() map[string]string { return map[string]string{} }

// Build implements Rule.
func (r SGD) Build() (Transform, error) {
	hf, err := schedulableKeys(r)
	if err != nil {
		return nil, err
	}
	return &sgdTransform{hyper: hf}, nil
}

// RuleName implements Rule.
func (Momentum) RuleName() string { return "momentum" }

// Nonschedulable implements Rule: none (rho is schedulable).
func (Momentum) Nonschedulable() map[string]string { return map[string]string{} }

// Build implements Rule. Rho == 0 is refused: it is SGD spelled as the zero value of a struct
// literal, almost always a forgotten field.
func (r Momentum) Build() (Transform, error) {
	if r.Rho == 0 {
		return nil, fmt.Errorf("optimizers: Momentum field Rho is 0, which is plain SGD with extra state: set Rho (NewMomentum uses 0.9), or use SGD")
	}
	if err := checkUnitInterval("Momentum", "Rho", r.Rho, false); err != nil {
		return nil, err
	}
	hf, err := schedulableKeys(r)
	if err != nil {
		return nil, err
	}
	return &momentumTransform{hyper: hf}, nil
}

var (
	_ Rule = RAdam{}
	_ Rule = Adam{}
	_ Rule = SGD{}
	_ Rule = Momentum{}
)

func checkAdamFields(rule string, b1, b2, eps float64) error {
	if err := checkUnitInterval(rule, "Beta1", b1, true); err != nil {
		return err
	}
	if b2 == 0 {
		return fmt.Errorf("optimizers: %s field Beta2 is 0, so the second moment is the last squared gradient alone: set Beta2 (0.999 is the default; New%s sets it), a zero value usually means a struct literal missed the field", rule, rule)
	}
	if err := checkUnitInterval(rule, "Beta2", b2, false); err != nil {
		return err
	}
	if eps < 0 || eps != eps {
		return fmt.Errorf("optimizers: %s field Eps is %v: it must be >= 0 (1e-8 is the default)", rule, eps)
	}
	return nil
}

func checkUnitInterval(rule, field string, v float64, zeroOK bool) error {
	if v < 0 || v >= 1 || v != v || (!zeroOK && v == 0) {
		lo := "(0, 1)"
		if zeroOK {
			lo = "[0, 1)"
		}
		return fmt.Errorf("optimizers: %s field %s is %v: it must be in %s", rule, field, v, lo)
	}
	return nil
}

// RuleField is one hyperparameter field of a rule, found by reflection.
type RuleField struct {
	Key         string  // the name schedules and Hyper use ("eta", "beta1")
	GoName      string  // the struct field ("Eta")
	Value       float64 // the rule's value (0 for a non-float field)
	Schedulable bool
	Reason      string // why not schedulable; empty when schedulable
}

// RuleFields lists rule r's fields in declaration order, with their schedulability. It checks the
// declaration: every Nonschedulable key names a field, and every non-float64 field is declared.
func RuleFields(r Rule) ([]RuleField, error) {
	if r == nil {
		return nil, fmt.Errorf("optimizers: nil rule: return a rule value such as optimizers.NewRAdam()")
	}
	v := reflect.ValueOf(r)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil, fmt.Errorf("optimizers: rule %T is a nil pointer: return a rule value", r)
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("optimizers: rule %s is a %s: a rule must be a struct whose exported fields are its hyperparameters", r.RuleName(), v.Kind())
	}
	declared := r.Nonschedulable()
	seen := map[string]bool{}
	var out []RuleField
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		key := fieldKey(sf)
		if seen[key] {
			return nil, fmt.Errorf("optimizers: rule %s has two fields with key %q: rename one or give it an `opt:\"key\"` tag", r.RuleName(), key)
		}
		seen[key] = true
		f := RuleField{Key: key, GoName: sf.Name}
		reason, isDeclared := declared[key]
		switch {
		case sf.Type.Kind() == reflect.Float64:
			f.Value = v.Field(i).Float()
			f.Schedulable = !isDeclared
			f.Reason = reason
		case isDeclared:
			f.Reason = reason
		default:
			return nil, fmt.Errorf("optimizers: rule %s field %s is %s, not float64: a scalar schedule cannot produce it, so declare %q in the rule's Nonschedulable with the reason", r.RuleName(), sf.Name, sf.Type, key)
		}
		out = append(out, f)
	}
	for key := range declared {
		if !seen[key] {
			return nil, fmt.Errorf("optimizers: rule %s declares %q nonschedulable but has no such field (fields: %v): fix the Nonschedulable key", r.RuleName(), key, keysOf(out))
		}
	}
	return out, nil
}

// fieldKey is the field's key: the `opt` tag, else the lower-cased Go name.
func fieldKey(sf reflect.StructField) string {
	if tag := sf.Tag.Get("opt"); tag != "" {
		return tag
	}
	runes := []rune(sf.Name)
	// Lower-case the leading upper-case run, so Eta -> eta, Beta1 -> beta1, LR -> lr.
	for i := 0; i < len(runes) && unicode.IsUpper(runes[i]); i++ {
		runes[i] = unicode.ToLower(runes[i])
	}
	return string(runes)
}

func keysOf(fs []RuleField) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Key
	}
	return out
}

func schedulableKeys(r Rule) ([]string, error) {
	fs, err := RuleFields(r)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range fs {
		if f.Schedulable {
			out = append(out, f.Key)
		}
	}
	return out, nil
}

// RuleHyperValues returns the rule's own value of every schedulable field, by key: what core
// feeds Hyper for a field no schedule drives (core replaces "eta" with the group's effective
// learning rate).
func RuleHyperValues(r Rule) (map[string]float64, error) {
	fs, err := RuleFields(r)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range fs {
		if f.Schedulable {
			out[f.Key] = f.Value
		}
	}
	return out, nil
}

// CheckScheduleKey reports whether key may be scheduled for rule r: nil for a schedulable field,
// an error with the declared reason for a nonschedulable one, and an error listing the valid keys
// for an unknown one. "lambda" (the framework's Decay tail) is always accepted.
func CheckScheduleKey(r Rule, key string) error {
	fs, err := RuleFields(r)
	if err != nil {
		return err
	}
	if key == LambdaField {
		return nil
	}
	var valid []string
	for _, f := range fs {
		if f.Key == key {
			if f.Schedulable {
				return nil
			}
			return fmt.Errorf("optimizers: schedule key %q: field %s of rule %s is nonschedulable (%s); make it a constant in the rule instead of a schedule", key, f.GoName, r.RuleName(), f.Reason)
		}
		if f.Schedulable {
			valid = append(valid, f.Key)
		}
	}
	valid = append(valid, LambdaField)
	slices.Sort(valid)
	return fmt.Errorf("optimizers: schedule key %q: rule %s has no field %q; schedulable keys are %s", key, r.RuleName(), key, strings.Join(valid, ", "))
}
