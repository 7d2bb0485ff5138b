package schedules

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Scopes of a Target: the two destinations a schedule can have.
const (
	ScopeDevice = "device" // written into the experiment's Device field, read by traced code
	ScopeOpt    = "opt"    // a hyperparameter of the optimizer rules
)

// Target is where a schedule binds: a Device field, an optimizer rule field for every group (Group ""),
// or a rule field of one parameter group.
type Target struct {
	Scope string
	Group string // "" = every group; only with ScopeOpt
	Name  string
}

// String is the target's fully qualified key: "device.x", "opt.x" or "opt.<group>.x".
func (t Target) String() string {
	if t.Group != "" {
		return t.Scope + "." + t.Group + "." + t.Name
	}
	return t.Scope + "." + t.Name
}

// Space is what schedule keys resolve against, as the caller (core) knows it at setup.
type Space struct {
	DeviceFields []string // the experiment's Device field names
	RuleFields   []string // schedulable and not, the union of the chains' rule field names ("eta", "lambda", ...)
	Groups       []string // parameter group names, for opt.<group>.<field> paths
	// Nonschedulable maps a rule field to why it cannot be scheduled, naming the rule (e.g. "RAdam: beta
	// is baked into the optimizer program"). Scheduling one is a setup error.
	Nonschedulable map[string]string
	// GroupLambdaAccessors says the experiment defines per-group lambda accessors, which an opt lambda
	// schedule would contradict.
	GroupLambdaAccessors bool
}

// boundSchedule is one resolved entry.
type boundSchedule struct {
	target   Target
	key      string // as the user wrote it, flattened
	schedule Schedule
	constant bool
}

// Bound is the resolved schedule set of a run: every target with its Schedule, built once at setup.
type Bound struct {
	total int
	items []boundSchedule // sorted by target
}

// Resolve binds every entry of a schedule map to its Target and calls each factory once with total.
// Values: a number (constant), a Factory or func(int) Schedule (factory of the horizon), a Parsed (text,
// see Parse), or a Schedule or func(int) float64 (ignores the horizon). Keys: "x" (a Device field or a rule field; one that is both must
// be qualified), "device.x", "opt.x", "opt.<group>.x". A map[string]any value nests: {"opt": {"backbone":
// {"eta": f}}} is "opt.backbone.eta". Every invalid key is reported, joined in key order.
func Resolve(entries map[string]any, space Space, total int) (*Bound, error) {
	if total < 1 {
		return nil, fmt.Errorf("schedule horizon %d optimizer steps: compute it with TotalSteps (max_epochs * batches_per_epoch / accum); it must be >= 1", total)
	}
	flat := map[string]any{}
	var errs []error
	flatten("", entries, flat, &errs)
	keys, targets := space.bind(flat, &errs)
	b := &Bound{total: total}
	for _, key := range keys {
		t := targets[key]
		sched, constant, err := normalize(key, flat[key], total)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.items = append(b.items, boundSchedule{target: t, key: key, schedule: sched, constant: constant})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sort.Slice(b.items, func(i, j int) bool { return targetLess(b.items[i].target, b.items[j].target) })
	return b, nil
}

// bind resolves the keys of a flat map to their targets, in key order: it returns the keys that
// bound and each one's target; a key that does not bind, or binds a target an earlier key bound,
// is added to errs.
func (s Space) bind(flat map[string]any, errs *[]error) ([]string, map[string]Target) {
	var keys []string
	targets, byTarget := map[string]Target{}, map[Target]string{}
	for _, key := range sortedKeys(flat) {
		t, err := s.resolveKey(key)
		if err != nil {
			*errs = append(*errs, err)
			continue
		}
		if prev, ok := byTarget[t]; ok {
			*errs = append(*errs, fmt.Errorf("schedule keys %s and %s both bind %s: keep one", prev, key, t))
			continue
		}
		byTarget[t] = key
		keys = append(keys, key)
		targets[key] = t
	}
	return keys, targets
}

// flatten turns nested maps into dotted keys; a key given both nested and dotted is an error.
func flatten(prefix string, in map[string]any, out map[string]any, errs *[]error) {
	for k, v := range in {
		full := prefix + k
		if k == "" || strings.HasPrefix(k, ".") || strings.HasSuffix(k, ".") || strings.Contains(k, "..") {
			*errs = append(*errs, fmt.Errorf("schedule key %q has an empty path part: write device.<field>, opt.<field> or opt.<group>.<field>", full))
			continue
		}
		if sub, ok := v.(map[string]any); ok {
			flatten(full+".", sub, out, errs)
			continue
		}
		if _, dup := out[full]; dup {
			*errs = append(*errs, fmt.Errorf("schedule key %s is given twice (dotted and nested): keep one", full))
			continue
		}
		out[full] = v
	}
}

func (s Space) resolveKey(key string) (Target, error) {
	parts := strings.Split(key, ".")
	isDevice, isRule := slices.Contains(s.DeviceFields, parts[len(parts)-1]), slices.Contains(s.RuleFields, parts[len(parts)-1])
	var t Target
	switch {
	case len(parts) == 1 && (key == ScopeDevice || key == ScopeOpt):
		return t, fmt.Errorf("schedule key %s is reserved for qualifying: write %s.<field>%s", key, key, s.hint(key))
	case len(parts) == 1 && isDevice && isRule:
		return t, fmt.Errorf("schedule key %s is both a Device field and an optimizer rule field: qualify it as device.%s or opt.%s", key, key, key)
	case len(parts) == 1 && isDevice:
		t = Target{Scope: ScopeDevice, Name: key}
	case len(parts) == 1 && isRule:
		t = Target{Scope: ScopeOpt, Name: key}
	case len(parts) == 1:
		return t, fmt.Errorf("unknown schedule key %s: %s", key, s.validKeys(key))
	case parts[0] == ScopeDevice && len(parts) == 2:
		if !isDevice {
			return t, fmt.Errorf("schedule key %s: %s is not a Device field; Device fields are %s", key, parts[1], list(s.DeviceFields))
		}
		t = Target{Scope: ScopeDevice, Name: parts[1]}
	case parts[0] == ScopeDevice:
		return t, fmt.Errorf("schedule key %s: device keys have no group paths; write device.<field> (Device fields are %s)", key, list(s.DeviceFields))
	case parts[0] == ScopeOpt && len(parts) == 2:
		if slices.Contains(s.Groups, parts[1]) && !isRule {
			return t, fmt.Errorf("schedule key %s names parameter group %s, not a field: bind a field of it as opt.%s.<field> (rule fields are %s)", key, parts[1], parts[1], list(s.RuleFields))
		}
		if !isRule {
			return t, fmt.Errorf("schedule key %s: %s is not an optimizer rule field; rule fields are %s%s", key, parts[1], list(s.RuleFields), s.hint(parts[1]))
		}
		t = Target{Scope: ScopeOpt, Name: parts[1]}
	case parts[0] == ScopeOpt && len(parts) == 3:
		if !slices.Contains(s.Groups, parts[1]) {
			return t, fmt.Errorf("schedule key %s: %s is not a parameter group; groups are %s", key, parts[1], list(s.Groups))
		}
		if !isRule {
			return t, fmt.Errorf("schedule key %s: %s is not an optimizer rule field; rule fields are %s%s", key, parts[2], list(s.RuleFields), s.hint(parts[2]))
		}
		t = Target{Scope: ScopeOpt, Group: parts[1], Name: parts[2]}
	case parts[0] == ScopeOpt:
		return t, fmt.Errorf("schedule key %s: group paths are one level (parameter groups are flat); write opt.<group>.<field>", key)
	default:
		// An unqualified dotted key could be a group path or a typo; the resolver refuses to guess.
		return t, fmt.Errorf("schedule key %s is dotted but not qualified: a group path is written opt.%s, a Device field device.<field>", key, key)
	}
	if t.Scope == ScopeOpt {
		if why, ok := s.Nonschedulable[t.Name]; ok {
			return t, fmt.Errorf("schedule key %s targets nonschedulable rule field %s (%s): remove it from the schedules and set it on the rule, where it is baked into the optimizer program", key, t.Name, why)
		}
		if t.Name == "lambda" && s.GroupLambdaAccessors {
			return t, fmt.Errorf("schedule key %s and the per-group lambda accessors both set the decay coefficient: the schedule supplies the base, so remove the per-group lambda accessors, or remove the %s schedule and keep the accessors' constant per-group values", key, key)
		}
	}
	return t, nil
}

// validKeys is the fix for an unknown key: everything it could have been.
func (s Space) validKeys(key string) string {
	msg := fmt.Sprintf("valid keys are the Device fields %s and the optimizer rule fields %s (qualify one that is both as device.<field> or opt.<field>)", list(s.DeviceFields), list(s.RuleFields))
	if len(s.Groups) > 0 {
		msg += fmt.Sprintf(", and group paths opt.<group>.<field> for groups %s", list(s.Groups))
	}
	return msg + s.hint(key)
}

// hint catches the learning rate's usual aliases: rule field names are the rules' own, so it is eta.
func (s Space) hint(name string) string {
	switch strings.ToLower(name) {
	case "lr", "learning_rate", "learningrate":
		if slices.Contains(s.RuleFields, "eta") {
			return "; the learning-rate key is eta"
		}
	}
	return ""
}

func list(names []string) string {
	if len(names) == 0 {
		return "(none)"
	}
	return "[" + strings.Join(names, " ") + "]"
}

// normalize turns an entry value into a Schedule, calling a factory exactly once.
func normalize(key string, v any, total int) (sched Schedule, constant bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, constant, err = nil, false, fmt.Errorf("schedule key %s: building its schedule for %d steps panicked: %v", key, total, r)
		}
	}()
	switch f := v.(type) {
	case Parsed:
		if f.Factory == nil {
			return nil, false, fmt.Errorf("schedule key %s: a Parsed with no Factory: build it with schedules.Parse", key)
		}
		sched = f.Factory(total)
	case Factory:
		sched = f(total)
	case func(int) Schedule:
		sched = f(total)
	case func(int) func(int) float64:
		sched = f(total)
	case Schedule:
		sched = f
	case func(int) float64:
		sched = f
	default:
		x, ok := number(v)
		if !ok {
			return nil, false, fmt.Errorf("schedule key %s: value of type %T: use a number (constant), a Factory (func(total int) Schedule) or a Schedule (func(step int) float64)", key, v)
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, false, fmt.Errorf("schedule key %s: constant %v is not finite: use a finite number", key, x)
		}
		return func(int) float64 { return x }, true, nil
	}
	if sched == nil {
		return nil, false, fmt.Errorf("schedule key %s: its factory returned a nil Schedule for %d steps: return a func(step int) float64", key, total)
	}
	return sched, false, nil
}

func number(v any) (float64, bool) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int()), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(rv.Uint()), true
	}
	return 0, false
}

func targetLess(a, b Target) bool {
	if a.Scope != b.Scope {
		return a.Scope < b.Scope // "device" before "opt"
	}
	if a.Group != b.Group {
		return a.Group < b.Group // every-group entries before group paths
	}
	return a.Name < b.Name
}

// Total is the horizon the factories were built with.
func (b *Bound) Total() int { return b.total }

// Targets lists the bound targets: device first, then opt for every group, then group paths, by name.
func (b *Bound) Targets() []Target {
	out := make([]Target, len(b.items))
	for i, it := range b.items {
		out[i] = it.target
	}
	return out
}

// Has says whether t is scheduled. A scheduled Device field is rewritten every optimizer step, so a
// write to it between steps would be lost: the caller refuses such writes.
func (b *Bound) Has(t Target) bool {
	_, ok := b.find(t)
	return ok
}

// Key returns the key the schedule map bound t with, as written (flattened), for the binding report.
func (b *Bound) Key(t Target) (string, bool) {
	it, ok := b.find(t)
	return it.key, ok
}

// IsConstant says whether t was bound to a bare number.
func (b *Bound) IsConstant(t Target) bool {
	it, ok := b.find(t)
	return ok && it.constant
}

// Constant is t's value when t was bound to a bare number, the same at every step, so a caller
// can check it at setup.
func (b *Bound) Constant(t Target) (float64, bool) {
	it, ok := b.find(t)
	if !ok || !it.constant {
		return 0, false
	}
	return it.schedule(1), true
}

func (b *Bound) find(t Target) (boundSchedule, bool) {
	for _, it := range b.items {
		if it.target == t {
			return it, true
		}
	}
	return boundSchedule{}, false
}

// Values are the scheduled values of one optimizer step.
type Values map[Target]float64

// At evaluates every schedule at optimizer step (1-based), once each: the caller calls it once per
// optimizer step, on the host, and uploads the result once. A schedule that panics or returns a
// non-finite value is an error naming the target and the step.
func (b *Bound) At(step int) (Values, error) {
	if step < 1 {
		return nil, fmt.Errorf("schedule step %d: optimizer steps are 1-based (step 1 is the first update)", step)
	}
	out := make(Values, len(b.items))
	for _, it := range b.items {
		v, err := evaluate(it, step)
		if err != nil {
			return nil, err
		}
		out[it.target] = v
	}
	return out, nil
}

func evaluate(it boundSchedule, step int) (v float64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("schedule %s (key %s) panicked at optimizer step %d: %v", it.target, it.key, step, r)
		}
	}()
	v = it.schedule(step)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("schedule %s (key %s) returned %v at optimizer step %d: a hyperparameter must be finite; fix the schedule", it.target, it.key, v, step)
	}
	return v, nil
}

// Opt returns the base value of rule field name for group: the group's path entry (opt.<group>.<name>)
// if scheduled, else the every-group entry (opt.<name>). ok is false when neither is scheduled and the
// caller falls back to the accessor's constant. Per-group ratios are the caller's to apply.
func (v Values) Opt(group, name string) (value float64, from Target, ok bool) {
	if group != "" {
		t := Target{Scope: ScopeOpt, Group: group, Name: name}
		if x, ok := v[t]; ok {
			return x, t, true
		}
	}
	t := Target{Scope: ScopeOpt, Name: name}
	x, ok := v[t]
	return x, t, ok
}

// Device returns the scheduled value of Device field name, if it is scheduled.
func (v Values) Device(name string) (float64, bool) {
	x, ok := v[Target{Scope: ScopeDevice, Name: name}]
	return x, ok
}

// Override lays a run's schedule map over an experiment's, by target: each entry of over
// replaces the base entry that binds the same target, whatever its spelling ("eta" replaces
// "opt.eta"), and the base's other entries stay, so a run that changes the learning-rate curve
// keeps the experiment's Device schedules. merged is flat (dotted keys); replaced maps each base
// key dropped to the over key that replaced it. An entry of over that does not bind (unknown,
// ambiguous, a baked field) is an error naming it, every one joined; a base key that does not
// bind is left in merged for Resolve to report as before (a malformed base path is an error here).
func Override(base, over map[string]any, space Space) (merged map[string]any, replaced map[string]string, err error) {
	var errs []error
	flatOver, flatBase := map[string]any{}, map[string]any{}
	flatten("", over, flatOver, &errs)
	_, targets := space.bind(flatOver, &errs)
	byTarget := map[Target]string{}
	for key, t := range targets {
		byTarget[t] = key
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	if flatten("", base, flatBase, &errs); len(errs) > 0 {
		return nil, nil, fmt.Errorf("the experiment's schedules: %w", errors.Join(errs...))
	}
	merged, replaced = map[string]any{}, map[string]string{}
	for key, v := range flatBase {
		if t, err := space.resolveKey(key); err == nil {
			if by, ok := byTarget[t]; ok {
				replaced[key] = by
				continue
			}
		}
		merged[key] = v
	}
	for key, v := range flatOver {
		merged[key] = v
	}
	return merged, replaced, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
