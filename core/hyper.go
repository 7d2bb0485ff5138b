package core

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/schedules"
)

// The optimizer is declared at one of three levels, all optional:
//
//	Level 0: declare nothing: RAdam per group, rates and decay from the accessors below.
//	Level 1: OptimizerRule(group) names a rule (optimizers.Adam{...}); the framework feeds it the
//	         resolved values by field name and appends Decay when the group decays.
//	Level 2: OptimizerChain(setup) builds the group's whole chain from the resolved setup.
//
// Per-group accessors: LearningRateGroup (a rate; groups run at its ratio to LearningRate),
// LambdaGroup, DecayAnchor, NoDecay, ParamGroup. Schedules() maps keys to a number or a
// schedules.Factory; see package schedules for the key grammar.
type (
	// RuleChooser is Level 1.
	RuleChooser interface {
		OptimizerRule(group string) optimizers.Rule
	}
	// ChainBuilder is Level 2.
	ChainBuilder interface {
		OptimizerChain(setup optimizers.GroupSetup) (*optimizers.Chain, error)
	}
	// GroupLearningRater gives a group's base learning rate.
	GroupLearningRater interface{ LearningRateGroup(group string) float64 }
	// GroupLambdaer gives a group's decay coefficient (default: Lambda, itself 0 by default).
	GroupLambdaer interface{ LambdaGroup(group string) float64 }
	// DecayAnchorer gives what a group decays toward (default: zero).
	DecayAnchorer interface {
		DecayAnchor(group string) optimizers.Anchor
	}
	// NoDecayer says whether a parameter leaf is excluded from decay (default: 1-D leaves).
	NoDecayer interface {
		NoDecay(keypath []string, shape shapes.Shape) bool
	}
	// Scheduler declares schedules: key -> number or schedules.Factory.
	Scheduler interface{ Schedules() map[string]any }
)

// accessors are the experiment's optional hooks that setup and the loop read more than once,
// found once at setup as findHook finds the traced hooks. The optimization accessors are read
// once, by planSpec: optimizers.Resolve calls each once per group, so the binding report cannot
// describe a binding the programs do not use.
type accessors struct {
	grouper   ParamGrouper
	finalizer MetricsFinalizer
}

func resolveAccessors(e any) accessors {
	var a accessors
	a.grouper, _ = e.(ParamGrouper)
	a.finalizer, _ = e.(MetricsFinalizer)
	return a
}

// optSetup is the resolved optimization and the binding report's rows, both fixed at setup.
type optSetup struct {
	*optimizers.Plan
	bindings []schedules.Binding
}

// setupOptimization is setup's optimizer phase: it resolves the optimization
// (optimizers.Resolve: levels, rates, decay and schedules for every group, in host code), then
// has the engine initialize each group's optimizer state from its initial values and upload it.
// It runs at setup, once; the per-step work is the plan's Hyper.
func (bld *builder) setupOptimization() error {
	n := bld.n
	plan, err := bld.resolvePlan() // manual.go: optimizers.Resolve, with manual mode's rules
	if err != nil {
		return err
	}
	n.spec.opt = &optSetup{Plan: plan}
	if err := n.eng.InitOptimizer(plan); err != nil {
		return err
	}
	// Step 1's values, which the binding report shows, are checked now: a schedule that cannot
	// give its first step (a negative eta, a fraction for an integer Device field) fails New.
	if _, err := n.spec.deviceScheduleValues(1, true); err != nil {
		return err
	}
	n.spec.opt.bindings = bld.manualBindings(bld.bindings()) // manual.go: SetupOptimizers named
	// What the plan resolved against a value the experiment wrote (a rule's own Eta that an eta
	// schedule replaces) is said once, as a warning; report records it with the reports.
	for _, msg := range plan.Notices() {
		n.spec.warn(msg)
	}
	return nil
}

// planSpec is what the experiment declares about its optimization, for optimizers.Resolve: the
// resolved run-wide knobs, the groups' layouts, the Device fields, the horizon and the optional
// accessors (each called by Resolve, once per group).
func (bld *builder) planSpec() optimizers.PlanSpec {
	n := bld.n
	e := n.spec.e
	s := optimizers.PlanSpec{
		LearningRate: optimizers.Setting{Value: n.spec.cfg.lr.value, Source: n.spec.cfg.lr.source},
		Lambda:       optimizers.Setting{Value: n.spec.cfg.lambda.value, Source: n.spec.cfg.lambda.source},
		DeviceFields: n.spec.traits.DeviceFields(),
		TotalSteps:   n.TotalSteps(),
	}
	s.Groups = n.eng.Layouts()
	// Each optional accessor the experiment implements fills its field of the optimizers.PlanSpec.
	ifImplements(e, func(h GroupLearningRater) { s.LearningRateGroup = h.LearningRateGroup })
	ifImplements(e, func(h GroupLambdaer) { s.LambdaGroup = h.LambdaGroup })
	ifImplements(e, func(h DecayAnchorer) { s.DecayAnchor = h.DecayAnchor })
	ifImplements(e, func(h NoDecayer) { s.NoDecay = h.NoDecay })
	ifImplements(e, func(h RuleChooser) { s.OptimizerRule = h.OptimizerRule })
	ifImplements(e, func(h ChainBuilder) { s.OptimizerChain = h.OptimizerChain })
	ifImplements(e, func(h Scheduler) { s.Schedules = h.Schedules() })
	s.RunSchedules = n.spec.opts.schedules
	return s
}

// WithSchedules overrides the experiment's Schedules() for this run, key by key: each entry
// replaces the experiment's entry binding the same target (eta replaces opt.eta), and the
// experiment's other schedules stay, so a run sweeps a learning-rate curve without editing code.
// Values are what Schedules() may return: a number, a schedules.Factory, or a schedules.Parsed
// (schedules.Parse's text, as nitro train --schedule gives it). New refuses a key that binds
// nothing, by name, as for Schedules(); the binding report marks these rows "(run option)", a
// notice names the experiment's keys replaced, and the params line records each as
// schedule.<key> (a Parsed as its text).
func WithSchedules(m map[string]any) Option {
	return func(o *options) { o.schedules = m }
}

// scheduleParams are the run's schedules as the params line records them: schedule.<key>, a
// Parsed as its text, a number as itself, Go code by its type (a func has no text to record).
func scheduleParams(m map[string]any) map[string]any {
	out := map[string]any{}
	flat, err := logjson.FlattenParams(m)
	if err != nil { // two spellings of one key: Resolve refused the run already
		return out
	}
	for k, v := range flat {
		switch x := v.(type) {
		case fmt.Stringer:
			out["schedule."+k] = x.String()
		case float64, float32, int, int64, int32:
			out["schedule."+k] = x
		default:
			out["schedule."+k] = fmt.Sprintf("%T (Go code)", v)
		}
	}
	return out
}

// applyDeviceSchedules writes the scheduled Device fields' values for an optimizer step: computed
// on the host once per step and uploaded once per step.
func (n *Nitro) applyDeviceSchedules(step int) error {
	if n.spec.opt == nil {
		return nil
	}
	names := n.spec.opt.ScheduledDevice()
	if len(names) == 0 {
		return nil
	}
	vals, err := n.spec.deviceScheduleValues(step, false)
	if err != nil {
		return err
	}
	for i, name := range names {
		nv := vals[i]
		if err := n.eng.SetDevice(name, nv); err != nil {
			return err
		}
	}
	return nil
}

// deviceScheduleValues are the scheduled Device fields' values for an optimizer step, each in its
// field's type (ScheduledDevice's order). A value the type cannot hold exactly is refused rather
// than converted: a Device[int32] fed 0.6 would hold 0, 3e9 would wrap, and a Device[float32] fed
// 1e40 would hold +Inf, each surfacing later, if at all, as a wrong loss. preview evaluates the
// step without keeping it (a check at setup), so the step still evaluates its own when it runs.
func (su *runSpec) deviceScheduleValues(step int, preview bool) ([]any, error) {
	eval := su.opt.At
	if preview {
		eval = su.opt.Preview
	}
	at, err := eval(step)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, name := range su.opt.ScheduledDevice() {
		v, _ := at.Device(name)
		cur, err := markers.DeviceValueOf(su.e, name)
		if err != nil {
			return nil, err
		}
		ct := reflect.TypeOf(cur)
		if !isNumber(ct) {
			return nil, fmt.Errorf("Device field %s holds %s: only scalar number fields can be scheduled", name, ct)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("schedule for Device field %s returned %v at step %d", name, v, step)
		}
		if why := inexact(ct, v); why != "" {
			src := su.opt.DeviceBinding(name, "").Source // "schedule <key>"
			return nil, fmt.Errorf("%s returned %v at optimizer step %d for Device field %s (%s): %s", src, v, step, name, ct, why)
		}
		out = append(out, reflect.ValueOf(v).Convert(ct).Interface())
	}
	return out, nil
}

// inexact says why a finite v does not fit a number type t exactly ("" when it does): a fraction
// for an integer type, a value outside an integer type's range, or beyond float32's (where it
// would be ±Inf, or 0 for a non-zero value). float32 rounding within its range is expected.
func inexact(t reflect.Type, v float64) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lo, hi := -math.Ldexp(1, t.Bits()-1), math.Ldexp(1, t.Bits()-1)
		return intFit(t, v, lo, hi)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return intFit(t, v, 0, math.Ldexp(1, t.Bits()))
	case reflect.Float32:
		if f := float32(v); math.IsInf(float64(f), 0) || (f == 0 && v != 0) {
			return fmt.Sprintf("outside float32's range (magnitudes %g to %g), where it would become %v: keep the schedule in range, or declare the field markers.Device[float64]", math.SmallestNonzeroFloat32, math.MaxFloat32, f)
		}
	}
	return ""
}

// intFit checks v against an integer type's range [lo, hi) and for a fraction.
func intFit(t reflect.Type, v, lo, hi float64) string {
	switch {
	case v != math.Trunc(v):
		return fmt.Sprintf("a %s holds whole numbers only, and %v would be truncated to %v: make the schedule return whole numbers (math.Round), or declare the field a float (markers.Device[float32])", t, v, math.Trunc(v))
	case v < lo || v >= hi:
		return fmt.Sprintf("outside %s's range [%.0f, %.0f]: keep the schedule in range, or declare a wider field", t, lo, hi-1)
	}
	return ""
}

// isScheduledDevice reports whether a Device field is driven by a schedule.
func (su *runSpec) isScheduledDevice(name string) bool {
	return su.opt != nil && slices.Contains(su.opt.ScheduledDevice(), name)
}

// bindings lists where every configured optimization value bound: the run-wide knobs, then the
// Device fields and the groups, as the plan resolved them.
func (bld *builder) bindings() []schedules.Binding {
	n := bld.n
	var bs []schedules.Binding
	run := func(name, value, source string) {
		bs = append(bs, schedules.Binding{Name: name, Value: value, Source: source})
	}
	run("max_epochs", fmt.Sprint(n.spec.cfg.maxEpochs.value), n.spec.cfg.maxEpochs.source)
	run("accum", fmt.Sprint(n.spec.cfg.accum.value), n.spec.cfg.accum.source)
	run("gradient_clip_norm", fmt.Sprint(n.spec.cfg.clip.value), n.spec.cfg.clip.source)
	if ms := n.spec.cfg.maxSteps; ms.value > 0 {
		run("total_steps", fmt.Sprint(n.TotalSteps()), "max_steps, "+ms.source)
	} else {
		run("total_steps", fmt.Sprint(n.TotalSteps()), "max_epochs * (train batches / accum)")
	}
	for _, split := range sortedKeys(n.spec.data) {
		run("prefetch "+split, strings.TrimPrefix(describePrefetch(n.spec.data[split]), "prefetch: "), n.spec.prefetchFrom[split])
	}
	for _, name := range n.eng.DeviceNames() {
		v, _ := markers.DeviceValueOf(n.spec.e, name)
		bs = append(bs, n.spec.opt.DeviceBinding(name, fmt.Sprint(v)))
	}
	return append(bs, n.spec.opt.GroupBindings()...)
}

// BindingReport is plain text saying where every configured optimization value bound: which
// accessor, field, schedule or default won, per group.
func (n *Nitro) BindingReport() string { return schedules.Report(n.spec.opt.bindings) }

// ifImplements calls set with the experiment as the accessor interface I, when it implements it.
func ifImplements[I any](e any, set func(I)) {
	if h, ok := e.(I); ok {
		set(h)
	}
}
