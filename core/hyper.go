package core

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
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

// accessors are the experiment's optional accessors, found once at setup as findHook finds the
// hooks. The optimization setup, the programs and the binding report all read this one value
// (and the per-group values resolved from it in optSetup), so the report cannot describe a binding
// the programs do not use, and a user's accessor method runs once per group, not once per use.
type accessors struct {
	lrGroup     GroupLearningRater
	lambdaGroup GroupLambdaer
	anchor      DecayAnchorer
	noDecay     NoDecayer
	grouper     ParamGrouper
	rule        RuleChooser
	chain       ChainBuilder
	scheduler   Scheduler
	finalizer   MetricsFinalizer
}

func resolveAccessors(e any) accessors {
	var a accessors
	a.lrGroup, _ = e.(GroupLearningRater)
	a.lambdaGroup, _ = e.(GroupLambdaer)
	a.anchor, _ = e.(DecayAnchorer)
	a.noDecay, _ = e.(NoDecayer)
	a.grouper, _ = e.(ParamGrouper)
	a.rule, _ = e.(RuleChooser)
	a.chain, _ = e.(ChainBuilder)
	a.scheduler, _ = e.(Scheduler)
	a.finalizer, _ = e.(MetricsFinalizer)
	return a
}

// optSetup is the resolved optimization: per group its chain inputs, and the bound schedules.
type optSetup struct {
	rule     map[string]optimizers.Rule   // group -> OptimizerRule(group), nil when none
	anchor   map[string]optimizers.Anchor // group -> DecayAnchor(group), AnchorZero by default
	lambda   map[string]float64           // group -> LambdaGroup(group), else Lambda
	bound    *schedules.Bound
	ratio    map[string]float64
	rate     map[string]float64            // group -> LearningRateGroup(group), when that accessor exists
	base     map[string]map[string]float64 // group -> field -> constant base value
	level    map[string]string
	bindings []schedules.Binding
	devSched []string // scheduled Device fields
	at       schedules.Values
	atStep   int // the step at holds
}

// setupOptimization resolves levels, rates, decay and schedules for every group, then builds and
// initializes each group's chain. It runs at setup, once; the per-step work is hyperValues.
func (n *Nitro) setupOptimization(flat map[string]*tensors.Tensor) error {
	o := &optSetup{ratio: map[string]float64{}, rate: map[string]float64{}, base: map[string]map[string]float64{}, level: map[string]string{},
		rule: map[string]optimizers.Rule{}, anchor: map[string]optimizers.Anchor{}, lambda: map[string]float64{}}
	n.opt = o
	a := n.acc
	var lrs []optimizers.GroupLR
	for _, g := range n.groups {
		lr := n.cfg.lr.value
		if a.lrGroup != nil {
			lr = a.lrGroup.LearningRateGroup(g.name)
			o.rate[g.name] = lr
		}
		lrs = append(lrs, optimizers.GroupLR{Group: g.name, LR: lr})
		if a.rule != nil {
			o.rule[g.name] = a.rule.OptimizerRule(g.name)
		}
		o.anchor[g.name] = optimizers.AnchorZero
		if a.anchor != nil {
			o.anchor[g.name] = a.anchor.DecayAnchor(g.name)
		}
		o.lambda[g.name] = n.cfg.lambda.value
		if a.lambdaGroup != nil {
			o.lambda[g.name] = a.lambdaGroup.LambdaGroup(g.name)
		}
	}
	if a.lrGroup != nil {
		// The default group's rate is the accessor's for "default" when there is such a group.
		ratios, err := optimizers.LRRatios(n.cfg.lr.value, lrs)
		if err != nil {
			return err
		}
		o.ratio = ratios
	} else {
		for _, g := range n.groups {
			o.ratio[g.name] = 1
		}
	}

	// Phase A: build each chain unscheduled, to learn the fields a schedule may reach.
	for _, g := range n.groups {
		c, err := n.buildChain(g, nil)
		if err != nil {
			return err
		}
		g.opt = c
	}
	// Phase B: resolve the schedules against Device fields and the chains' fields.
	var entries map[string]any
	if a.scheduler != nil {
		entries = a.scheduler.Schedules()
	}
	space := schedules.Space{DeviceFields: n.traits.DeviceFields(), Nonschedulable: map[string]string{}}
	space.GroupLambdaAccessors = a.lambdaGroup != nil
	ruleFields := map[string]bool{optimizers.EtaField: true, optimizers.LambdaField: true}
	for _, g := range n.groups {
		space.Groups = append(space.Groups, g.name)
		c := g.opt
		for _, f := range c.HyperFields() {
			ruleFields[f] = true
		}
		for f, why := range c.Nonschedulable() {
			ruleFields[f] = true
			space.Nonschedulable[f] = why
		}
		if rule := o.rule[g.name]; rule != nil {
			if fs, err := optimizers.RuleFields(rule); err == nil {
				for _, f := range fs {
					ruleFields[f.Key] = true
					if !f.Schedulable {
						space.Nonschedulable[f.Key] = rule.RuleName() + ": " + f.Reason
					}
				}
			}
		}
	}
	for f := range ruleFields {
		space.RuleFields = append(space.RuleFields, f)
	}
	sort.Strings(space.RuleFields)
	total := n.TotalSteps()
	if len(entries) > 0 {
		b, err := schedules.Resolve(entries, space, max(total, 1))
		if err != nil {
			return err
		}
		o.bound = b
	}
	// Phase C: the final chains, knowing what is scheduled, then their initial state.
	for gi, g := range n.groups {
		if rule := o.rule[g.name]; rule != nil && a.chain == nil {
			if err := n.checkRuleOverrides(g.name, rule); err != nil {
				return err
			}
		}
		c, err := n.buildChain(g, o.scheduledFor(g.name))
		if err != nil {
			return err
		}
		g.opt = c
		g.constant = c.ConstantLeaves()
		base := map[string]float64{}
		for _, f := range c.HyperFields() {
			switch f {
			case optimizers.EtaField:
				base[f] = n.cfg.lr.value
			case optimizers.LambdaField:
				base[f] = o.lambda[g.name]
			default:
				if rule := o.rule[g.name]; rule != nil {
					vals, err := optimizers.RuleHyperValues(rule)
					if err != nil {
						return err
					}
					if v, ok := vals[f]; ok {
						base[f] = v
						continue
					}
				}
				if !slices.Contains(o.scheduledFor(g.name), f) {
					return fmt.Errorf("group %q: the optimizer chain reads hyperparameter %q, which nothing sets: give it a value with Schedules() (a bare number is a constant), e.g. {%q: 0.9}", g.name, f, f)
				}
			}
		}
		o.base[g.name] = base
		state, err := g.opt.Init(flat[g.name])
		if err != nil {
			return fmt.Errorf("group %q: optimizer init: %w", g.name, err)
		}
		// Initialized on the group's flat buffer (what a transform's Init is defined on), then kept
		// per parameter array on the device, as the optimizer program reads it.
		for _, s := range state {
			leaves, err := g.layout.Unflatten(s)
			if err != nil {
				return fmt.Errorf("group %q: optimizer init: %w", g.name, err)
			}
			for j := range leaves {
				if leaves[j], err = n.upload(leaves[j], &n.uploads.OptState); err != nil {
					return fmt.Errorf("group %q: optimizer state: %w", g.name, err)
				}
			}
			n.st.groups[gi].opt = append(n.st.groups[gi].opt, leaves)
		}
	}
	if o.bound != nil {
		for _, t := range o.bound.Targets() {
			if t.Scope == schedules.ScopeDevice {
				o.devSched = append(o.devSched, t.Name)
			}
		}
	}
	o.bindings = n.bindings()
	return nil
}

// checkRuleOverrides refuses a Level 1 rule whose eta the framework replaces with the resolved
// learning rate (LearningRate, or the group's LearningRateGroup) while the rule holds a different
// non-zero value: the rule's value would be silently ignored and the run would train at another
// rate than the rule reads. Zero means unset; a value equal to the resolved one is accepted. A
// schedule of eta is the user's own declaration of where eta comes from, and a schedule
// replacing a rule's value is the documented precedence for every rule field (the rule's value
// is the default when no schedule drives it), so a scheduled eta is not checked here.
func (n *Nitro) checkRuleOverrides(group string, rule optimizers.Rule) error {
	o := n.opt
	if slices.Contains(o.scheduledFor(group), optimizers.EtaField) {
		return nil
	}
	fields, err := optimizers.RuleFields(rule)
	if err != nil {
		return err
	}
	rt := reflect.TypeOf(rule)
	for rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	for _, f := range fields {
		if f.Key != optimizers.EtaField || !f.Schedulable || f.Value == 0 {
			continue
		}
		where, field := fmt.Sprintf("OptimizerRule(%q)", group), rt.Name()+"."+f.GoName
		if n.acc.lrGroup != nil {
			if rate := o.rate[group]; f.Value != rate {
				return fmt.Errorf("%s: %s is %g but group %q's resolved learning rate is %g (accessor LearningRateGroup(%s)), which the framework feeds the rule's eta in its place: set it in LearningRateGroup instead, or leave %s zero",
					where, field, f.Value, group, rate, group, f.GoName)
			}
			continue
		}
		if lr := n.cfg.lr; f.Value != lr.value {
			return fmt.Errorf("%s: %s is %g but the resolved LearningRate is %g (%s), which the framework feeds the rule's eta in its place: set LearningRate instead, or leave %s zero",
				where, field, f.Value, lr.value, lr.source, f.GoName)
		}
	}
	return nil
}

// valuesAt evaluates every schedule at an optimizer step, once: the Device schedules and each
// group's hyperparameters of that step all read the same evaluation.
func (o *optSetup) valuesAt(step int) (schedules.Values, error) {
	if o.atStep != step || o.at == nil {
		at, err := o.bound.At(step)
		if err != nil {
			return nil, err
		}
		o.at, o.atStep = at, step
	}
	return o.at, nil
}

// scheduledFor lists the opt keys a schedule drives for a group.
func (o *optSetup) scheduledFor(group string) []string {
	if o.bound == nil {
		return nil
	}
	var keys []string
	for _, t := range o.bound.Targets() {
		if t.Scope == schedules.ScopeOpt && (t.Group == "" || t.Group == group) && !slices.Contains(keys, t.Name) {
			keys = append(keys, t.Name)
		}
	}
	sort.Strings(keys)
	return keys
}

// buildChain builds one group's chain at the experiment's level.
func (n *Nitro) buildChain(g *paramGroup, scheduled []string) (*optimizers.Chain, error) {
	o := n.opt
	noDecay := optimizers.DefaultNoDecay
	if n.acc.noDecay != nil {
		noDecay = n.acc.noDecay.NoDecay
	}
	setup := optimizers.GroupSetup{
		Name: g.name, Layout: g.layout, Lambda: o.lambda[g.name], Anchor: o.anchor[g.name],
		NoDecay: g.layout.NoDecayMask(noDecay), Scheduled: scheduled,
	}
	if n.acc.chain != nil {
		c, _, err := optimizers.BuildFactoryChain(n.acc.chain.OptimizerChain, setup)
		o.level[g.name] = "Level 2: OptimizerChain"
		return c, err
	}
	if rule := o.rule[g.name]; rule != nil {
		o.level[g.name] = "Level 1: OptimizerRule"
		return optimizers.BuildRuleChain(rule, setup)
	}
	o.level[g.name] = "Level 0: default RAdam"
	return optimizers.BuildRuleChain(nil, setup)
}

// hyperValues are a group's schedulable values at an optimizer step (1-based): the base values,
// overridden by the group's schedules, then made effective (eta times the group's ratio; lambda,
// decoupled, times that eta).
func (n *Nitro) hyperValues(g *paramGroup, step int) (map[string]float64, error) {
	o := n.opt
	vals := make(map[string]float64, len(o.base[g.name]))
	for k, v := range o.base[g.name] {
		vals[k] = v
	}
	if o.bound != nil {
		at, err := o.valuesAt(step)
		if err != nil {
			return nil, err
		}
		for _, f := range g.opt.HyperFields() {
			if v, _, ok := at.Opt(g.name, f); ok {
				vals[f] = v
			}
		}
	}
	return optimizers.EffectiveHyper(vals, o.ratio[g.name])
}

// applyDeviceSchedules writes the scheduled Device fields' values for an optimizer step: computed
// on the host once per step and uploaded once per step.
func (n *Nitro) applyDeviceSchedules(step int) error {
	if n.opt == nil || len(n.opt.devSched) == 0 {
		return nil
	}
	at, err := n.opt.valuesAt(step)
	if err != nil {
		return err
	}
	for _, name := range n.opt.devSched {
		v, _ := at.Device(name)
		cur, err := markers.DeviceValueOf(n.e, name)
		if err != nil {
			return err
		}
		ct := reflect.TypeOf(cur)
		if !isNumber(ct) {
			return fmt.Errorf("Device field %s holds %s: only scalar number fields can be scheduled", name, ct)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("schedule for Device field %s returned %v at step %d", name, v, step)
		}
		nv := reflect.ValueOf(v).Convert(ct).Interface()
		if err := markers.SetDevice(n.e, name, nv); err != nil {
			return err
		}
		t, err := hostTensor(nv)
		if err != nil {
			return err
		}
		if err := n.replaceDevice(name, t); err != nil {
			return err
		}
	}
	return nil
}

// isScheduledDevice reports whether a Device field is driven by a schedule.
func (n *Nitro) isScheduledDevice(name string) bool {
	return n.opt != nil && slices.Contains(n.opt.devSched, name)
}

// bindings lists where every configured optimization value bound.
func (n *Nitro) bindings() []schedules.Binding {
	o := n.opt
	var bs []schedules.Binding
	run := func(name, value, source string) {
		bs = append(bs, schedules.Binding{Name: name, Value: value, Source: source})
	}
	run("max_epochs", fmt.Sprint(n.cfg.maxEpochs.value), n.cfg.maxEpochs.source)
	run("accum", fmt.Sprint(n.cfg.accum.value), n.cfg.accum.source)
	run("gradient_clip_norm", fmt.Sprint(n.cfg.clip.value), n.cfg.clip.source)
	run("total_steps", fmt.Sprint(n.TotalSteps()), "max_epochs * (train batches / accum)")
	for _, split := range sortedKeys(n.data) {
		run("prefetch "+split, strings.TrimPrefix(describePrefetch(n.data[split]), "prefetch: "), n.prefetchFrom[split])
	}
	for _, name := range n.devNames {
		v, _ := markers.DeviceValueOf(n.e, name)
		b := schedules.Binding{Name: name, Value: fmt.Sprint(v), Source: "field " + name}
		if o.bound != nil && o.bound.Has(schedules.Target{Scope: schedules.ScopeDevice, Name: name}) {
			key, _ := o.bound.Key(schedules.Target{Scope: schedules.ScopeDevice, Name: name})
			b.Value, b.Source, b.Scheduled = n.scheduleValue(schedules.Target{Scope: schedules.ScopeDevice, Name: name}), "schedule "+key, true
		}
		bs = append(bs, b)
	}
	hasLRG := n.acc.lrGroup != nil
	for _, g := range n.groups {
		c := g.opt
		bs = append(bs, schedules.Binding{Group: g.name, Name: "optimizer", Value: c.Describe(), Source: o.level[g.name]})
		read := c.HyperFields()
		for _, f := range read {
			b := schedules.Binding{Group: g.name, Name: f}
			switch f {
			case optimizers.EtaField:
				b.Value, b.Source = fmt.Sprint(n.cfg.lr.value*o.ratio[g.name]), "LearningRate "+n.cfg.lr.source
				if hasLRG {
					b.Source = fmt.Sprintf("accessor LearningRateGroup(%s)", g.name)
					b.Note = fmt.Sprintf("ratio %g of default", o.ratio[g.name])
				}
			case optimizers.LambdaField:
				b.Value, b.Source = fmt.Sprint(o.lambda[g.name]), "Lambda "+n.cfg.lambda.source
				if n.acc.lambdaGroup != nil {
					b.Source = fmt.Sprintf("accessor LambdaGroup(%s)", g.name)
				}
				b.Note = "pre-multiplied by the group's effective eta"
			default:
				b.Value, b.Source = fmt.Sprint(o.base[g.name][f]), "rule field "+f
			}
			if t, ok := n.scheduleTarget(g.name, f); ok {
				key, _ := o.bound.Key(t)
				b.Value, b.Source, b.Scheduled = n.scheduleValue(t), "schedule "+key, true
				if o.ratio[g.name] != 1 && f == optimizers.EtaField {
					b.Source += " x ratio"
				}
			}
			bs = append(bs, b)
		}
		for _, f := range o.scheduledFor(g.name) {
			if !slices.Contains(read, f) {
				t, _ := n.scheduleTarget(g.name, f)
				key, _ := o.bound.Key(t)
				bs = append(bs, schedules.Binding{Group: g.name, Name: f, Value: n.scheduleValue(t), Source: "schedule " + key, Scheduled: true, Unread: true})
			}
		}
		if c.HasDecay() {
			src := "default"
			if n.acc.anchor != nil {
				src = fmt.Sprintf("accessor DecayAnchor(%s)", g.name)
			}
			bs = append(bs, schedules.Binding{Group: g.name, Name: "anchor", Value: o.anchor[g.name].String(), Source: src})
		}
	}
	return bs
}

func (n *Nitro) scheduleTarget(group, field string) (schedules.Target, bool) {
	if n.opt.bound == nil {
		return schedules.Target{}, false
	}
	for _, t := range []schedules.Target{{Scope: schedules.ScopeOpt, Group: group, Name: field}, {Scope: schedules.ScopeOpt, Name: field}} {
		if n.opt.bound.Has(t) {
			return t, true
		}
	}
	return schedules.Target{}, false
}

func (n *Nitro) scheduleValue(t schedules.Target) string {
	at, err := n.opt.bound.At(1)
	if err != nil {
		return "error: " + err.Error()
	}
	if n.opt.bound.IsConstant(t) {
		return fmt.Sprint(at[t])
	}
	return fmt.Sprintf("%g at step 1", at[t])
}

// BindingReport is plain text saying where every configured optimization value bound: which
// accessor, field, schedule or default won, per group.
func (n *Nitro) BindingReport() string { return schedules.Report(n.opt.bindings) }
