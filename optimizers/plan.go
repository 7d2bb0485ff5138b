package optimizers

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"sync"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/schedules"
)

// Setting is a run-wide value and where it came from ("default", "run option", "preset small"),
// as the messages and the binding report name it.
type Setting struct {
	Value  float64
	Source string
}

// PlanSpec is everything an experiment declares about its optimization, as plain host values and
// functions: what Resolve turns into a Plan. The function fields are the experiment's optional
// accessors (nil: not declared), and messages and the binding report name them by these field
// names, which are also the names of the experiment methods they stand for.
//
// The optimizer is declared at one of three levels, all optional:
//
//	Level 0: declare nothing: DefaultRule per group, rates and decay from the accessors.
//	Level 1: OptimizerRule(group) names a rule; Resolve feeds it the resolved values by field
//	         name and appends Decay when the group decays.
//	Level 2: OptimizerChain builds the group's whole chain from the resolved GroupSetup.
type PlanSpec struct {
	LearningRate Setting   // the default group's rate; the others run at their ratio to it
	Lambda       Setting   // the decay coefficient of a group without LambdaGroup
	Groups       []*Layout // one per parameter group, in report order; Layout.Group names it
	DeviceFields []string  // the experiment's Device fields, which schedule keys may also name
	TotalSteps   int       // the schedules' horizon in optimizer steps (below 1 resolves as 1)

	LearningRateGroup func(group string) float64 // a group's base rate
	LambdaGroup       func(group string) float64 // a group's decay coefficient
	DecayAnchor       func(group string) Anchor  // what a group decays toward (AnchorZero)
	NoDecay           NoDecayFunc                // leaves excluded from decay (DefaultNoDecay)
	OptimizerRule     func(group string) Rule    // Level 1
	OptimizerChain    ChainFactory               // Level 2
	// Schedules maps schedule keys to a number or a schedules.Factory (see package schedules).
	Schedules map[string]any
	// RunSchedules are one run's schedules over the experiment's (schedules.Override: each
	// replaces the entry of the same target, the others stay); the binding report marks them
	// "run option". Their keys must bind, as Schedules' must.
	RunSchedules map[string]any
}

// Plan is a resolved optimization: per group its final chain and the base value of every
// hyperparameter the chain reads, and the bound schedules. It is host data only: the caller
// initializes state with GroupPlan.InitState, uploads it, and asks Hyper for each step's values.
// A Plan does not change after Resolve; its one memo (the last step's schedule evaluation) is
// guarded, so a Plan is safe for concurrent use.
type Plan struct {
	spec     PlanSpec
	groups   []*GroupPlan
	bound    *schedules.Bound // nil when nothing is scheduled
	devSched []string         // scheduled Device fields, in target order

	runKeys  map[string]bool   // the schedule keys RunSchedules gave (flattened)
	replaced map[string]string // the experiment's schedule keys a run key replaced, to that key

	mu     sync.Mutex
	at     schedules.Values
	atStep int
}

// GroupPlan is one group's resolved optimization.
type GroupPlan struct {
	Name   string
	Layout *Layout
	Chain  *Chain // the final chain, built knowing what is scheduled
	// Level says which level built the chain, as the binding report writes it.
	Level string
	// Binding is which scheduled keys the chain reads and which it ignores.
	Binding Binding

	rule   Rule    // OptimizerRule(group); nil at Levels 0 and 2
	anchor Anchor  // DecayAnchor(group), else AnchorZero
	lambda float64 // LambdaGroup(group), else Lambda
	rate   float64 // LearningRateGroup(group), when that accessor exists
	ratio  float64 // rate / the default group's rate; 1 without LearningRateGroup
	base   map[string]float64
	// etaReplaced says which eta schedule replaces the rule's own non-zero Eta ("" when none).
	etaReplaced string
}

// Resolve resolves levels, rates, decay and schedules for every group and builds each group's
// chain, in three phases: each chain unscheduled (to learn the fields a schedule may reach), the
// schedules against those fields and the Device fields, then the final chains knowing what is
// scheduled. Each accessor runs once per group; a Level 2 factory runs twice per group. A spec
// function that panics is an error naming the panic.
func Resolve(spec PlanSpec) (_ *Plan, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("optimizers: resolving the optimization: an accessor, rule or chain factory panicked: %v", r)
		}
	}()
	p := &Plan{spec: spec}
	if err := p.resolveGroups(); err != nil {
		return nil, err
	}
	for _, g := range p.groups {
		c, err := p.buildChain(g, nil)
		if err != nil {
			return nil, err
		}
		g.Chain = c
	}
	if err := p.resolveSchedules(); err != nil {
		return nil, err
	}
	for _, g := range p.groups {
		if err := p.finishGroup(g); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// resolveGroups calls the per-group accessors, once each, and computes the rate ratios.
func (p *Plan) resolveGroups() error {
	s := p.spec
	var lrs []GroupLR
	for i, l := range s.Groups {
		if l == nil {
			return fmt.Errorf("optimizers: PlanSpec.Groups[%d] is nil: give every parameter group its Layout (NewLayout)", i)
		}
		g := &GroupPlan{Name: l.Group, Layout: l, anchor: AnchorZero, lambda: s.Lambda.Value, ratio: 1}
		lr := s.LearningRate.Value
		if s.LearningRateGroup != nil {
			lr = s.LearningRateGroup(g.Name)
			g.rate = lr
		}
		lrs = append(lrs, GroupLR{Group: g.Name, LR: lr})
		if s.OptimizerRule != nil {
			g.rule = s.OptimizerRule(g.Name)
		}
		if s.DecayAnchor != nil {
			g.anchor = s.DecayAnchor(g.Name)
		}
		if s.LambdaGroup != nil {
			g.lambda = s.LambdaGroup(g.Name)
		}
		p.groups = append(p.groups, g)
	}
	if s.LearningRateGroup == nil {
		return nil
	}
	// The default group's rate is the accessor's for "default" when there is such a group.
	ratios, err := LRRatios(s.LearningRate.Value, lrs)
	if err != nil {
		return err
	}
	for _, g := range p.groups {
		g.ratio = ratios[g.Name]
	}
	return nil
}

// buildChain builds one group's chain at the experiment's level.
func (p *Plan) buildChain(g *GroupPlan, scheduled []string) (*Chain, error) {
	noDecay := p.spec.NoDecay
	if noDecay == nil {
		noDecay = DefaultNoDecay
	}
	setup := GroupSetup{
		Name: g.Name, Layout: g.Layout, Lambda: g.lambda, Anchor: g.anchor,
		NoDecay: g.Layout.NoDecayMask(noDecay), Scheduled: scheduled,
	}
	if p.spec.OptimizerChain != nil {
		g.Level = "Level 2: OptimizerChain"
		c, b, err := BuildFactoryChain(p.spec.OptimizerChain, setup)
		g.Binding = b
		return c, err
	}
	if g.rule != nil {
		g.Level = "Level 1: OptimizerRule"
	} else {
		g.Level = "Level 0: default RAdam"
	}
	c, err := BuildRuleChain(g.rule, setup)
	if err == nil {
		g.Binding = c.Bind(g.Name, scheduled)
	}
	return c, err
}

// resolveSchedules binds the schedule entries against the Device fields and the unscheduled
// chains' fields (schedulable or not, so a nonschedulable one is refused with its reason).
func (p *Plan) resolveSchedules() error {
	s := p.spec
	if len(s.Schedules) == 0 && len(s.RunSchedules) == 0 {
		return nil
	}
	space := schedules.Space{DeviceFields: s.DeviceFields, Nonschedulable: map[string]string{}, GroupLambdaAccessors: s.LambdaGroup != nil}
	ruleFields := map[string]bool{EtaField: true, LambdaField: true}
	for _, g := range p.groups {
		space.Groups = append(space.Groups, g.Name)
		for _, f := range g.Chain.HyperFields() {
			ruleFields[f] = true
		}
		for f, why := range g.Chain.Nonschedulable() {
			ruleFields[f] = true
			space.Nonschedulable[f] = why
		}
		if g.rule == nil {
			continue
		}
		// An unreadable rule is refused by the chain build already; here it only adds no fields.
		fs, _ := RuleFields(g.rule)
		for _, f := range fs {
			ruleFields[f.Key] = true
			if !f.Schedulable {
				space.Nonschedulable[f.Key] = g.rule.RuleName() + ": " + f.Reason
			}
		}
	}
	for f := range ruleFields {
		space.RuleFields = append(space.RuleFields, f)
	}
	sort.Strings(space.RuleFields)
	entries, err := p.overrideSchedules(space)
	if err != nil {
		return err
	}
	b, err := schedules.Resolve(entries, space, max(s.TotalSteps, 1))
	if err != nil {
		return err
	}
	p.bound = b
	for _, t := range b.Targets() {
		if t.Scope == schedules.ScopeDevice {
			p.devSched = append(p.devSched, t.Name)
		}
		// A constant is the same at every step: a negative one is refused now, not at step 1.
		if v, ok := b.Constant(t); ok {
			if err := checkSign(b, t, v, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// overrideSchedules lays the run's schedules over the experiment's, remembering which keys the
// run gave (the report's "run option") and which of the experiment's they replaced.
func (p *Plan) overrideSchedules(space schedules.Space) (map[string]any, error) {
	s := p.spec
	if len(s.RunSchedules) == 0 {
		return s.Schedules, nil
	}
	merged, replaced, err := schedules.Override(s.Schedules, s.RunSchedules, space)
	if err != nil {
		return nil, fmt.Errorf("the run's schedules (run option): %w", err)
	}
	p.replaced, p.runKeys = replaced, map[string]bool{}
	over, _, _ := schedules.Override(nil, s.RunSchedules, space) // its keys, flattened
	for k := range over {
		p.runKeys[k] = true
	}
	return merged, nil
}

// roundingZero is the largest magnitude of a negative eta or lambda taken as a schedule's rounding
// on its way to 0 (0.3 - 3*0.1 is -5.6e-17) rather than a sign error: far below any rate that
// moves a parameter, so it is used as 0.
const roundingZero = 1e-12

// checkSign refuses a scheduled learning rate (eta) or decay coefficient (lambda) below zero: a
// negative eta steps up the gradient, so the loss rises, and a negative lambda grows the weights,
// and neither fails on its own. Zero is allowed: a schedule that reaches 0 freezes the group (or
// turns its decay off) from that step, which is a real use late in a run. step 0 means a constant.
func checkSign(b *schedules.Bound, t schedules.Target, v float64, step int) error {
	if t.Scope != schedules.ScopeOpt || v >= -roundingZero {
		return nil
	}
	var what string
	switch t.Name {
	case EtaField:
		what = "a learning rate must be >= 0 (a negative one steps up the gradient, so the loss rises; 0 is allowed and freezes the group from that step)"
	case LambdaField:
		what = "a decay coefficient must be >= 0 (a negative one grows the weights; 0 is allowed and turns decay off from that step)"
	default:
		return nil
	}
	key, _ := b.Key(t)
	if step == 0 {
		return fmt.Errorf("schedule %s (key %s) is the constant %v: %s; fix the schedule", t, key, v, what)
	}
	return fmt.Errorf("schedule %s (key %s) returned %v at optimizer step %d: %s; fix the schedule", t, key, v, step, what)
}

// finishGroup builds the group's final chain and the base value of every field it reads.
func (p *Plan) finishGroup(g *GroupPlan) error {
	if g.rule != nil && p.spec.OptimizerChain == nil {
		if err := p.checkRuleOverrides(g); err != nil {
			return err
		}
	}
	c, err := p.buildChain(g, p.Scheduled(g.Name))
	if err != nil {
		return err
	}
	g.Chain = c
	g.base = map[string]float64{}
	for _, f := range c.HyperFields() {
		switch f {
		case EtaField:
			g.base[f] = p.spec.LearningRate.Value
		case LambdaField:
			g.base[f] = g.lambda
		default:
			if g.rule != nil {
				vals, err := RuleHyperValues(g.rule)
				if err != nil {
					return err
				}
				if v, ok := vals[f]; ok {
					g.base[f] = v
					continue
				}
			}
			if !slices.Contains(p.Scheduled(g.Name), f) {
				return fmt.Errorf("group %q: the optimizer chain reads hyperparameter %q, which nothing sets: give it a value with Schedules() (a bare number is a constant), e.g. {%q: 0.9}", g.Name, f, f)
			}
		}
	}
	return nil
}

// checkRuleOverrides refuses a Level 1 rule whose eta the plan replaces with the resolved
// learning rate (LearningRate, or the group's LearningRateGroup) while the rule holds a different
// non-zero value: the rule's value would be silently ignored and the run would train at another
// rate than the rule reads. Zero means unset; a value equal to the resolved one is accepted.
//
// A schedule of eta is the user's own declaration of where eta comes from, and a schedule
// replacing a rule's value is the precedence for every rule field, so a scheduled eta is not
// refused (manual mode relies on it: its rules' Eta are the groups' rates, which the schedule
// scales). It is said instead (Notices, and a note on the eta row), unless the rule's Eta is
// the group's LearningRateGroup rate, which the schedule keeps as the group's ratio.
func (p *Plan) checkRuleOverrides(g *GroupPlan) error {
	scheduled := slices.Contains(p.Scheduled(g.Name), EtaField)
	fields, err := RuleFields(g.rule)
	if err != nil {
		return err
	}
	rt := reflect.TypeOf(g.rule)
	for rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	for _, f := range fields {
		if f.Key != EtaField || !f.Schedulable || f.Value == 0 {
			continue
		}
		where, field := fmt.Sprintf("OptimizerRule(%q)", g.Name), rt.Name()+"."+f.GoName
		if scheduled {
			if p.spec.LearningRateGroup == nil || f.Value != g.rate {
				t, _ := p.scheduleTarget(g.Name, EtaField)
				key, _ := p.bound.Key(t)
				g.etaReplaced = fmt.Sprintf("schedule %s replaces %s=%g", key, field, f.Value)
			}
			continue
		}
		if p.spec.LearningRateGroup != nil {
			if f.Value != g.rate {
				return fmt.Errorf("%s: %s is %g but group %q's resolved learning rate is %g (accessor LearningRateGroup(%s)), which the framework feeds the rule's eta in its place: set it in LearningRateGroup instead, or leave %s zero",
					where, field, f.Value, g.Name, g.rate, g.Name, f.GoName)
			}
			continue
		}
		if lr := p.spec.LearningRate; f.Value != lr.Value {
			return fmt.Errorf("%s: %s is %g but the resolved LearningRate is %g (%s), which the framework feeds the rule's eta in its place: set LearningRate instead, or leave %s zero",
				where, field, f.Value, lr.Value, lr.Source, f.GoName)
		}
	}
	return nil
}

// Notices are what the plan resolved that a reader should hear about, one sentence each, in
// order: the experiment's schedule keys a run option replaced, then per group a Level 1 rule's
// own non-zero Eta that an eta schedule replaces, naming the group, the schedule, the field, its
// value and the fix. The caller prints them once.
func (p *Plan) Notices() []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(p.replaced)) {
		out = append(out, fmt.Sprintf("schedules: the run option's %s replaces the experiment's Schedules() key %s for this run", p.replaced[key], key))
	}
	for _, g := range p.groups {
		if g.etaReplaced != "" {
			out = append(out, fmt.Sprintf("group %s: eta: %s, which the group does not train at: leave Eta zero to take the rate from the schedule, or drop the eta schedule to train at the rule's Eta (and set LearningRate to it)", g.Name, g.etaReplaced))
		}
	}
	return out
}

// Groups lists the groups' plans, in the order of PlanSpec.Groups.
func (p *Plan) Groups() []*GroupPlan { return slices.Clone(p.groups) }

// Scheduled lists the opt keys a schedule drives for a group, sorted.
func (p *Plan) Scheduled(group string) []string {
	if p.bound == nil {
		return nil
	}
	var keys []string
	for _, t := range p.bound.Targets() {
		if t.Scope == schedules.ScopeOpt && (t.Group == "" || t.Group == group) && !slices.Contains(keys, t.Name) {
			keys = append(keys, t.Name)
		}
	}
	sort.Strings(keys)
	return keys
}

// ScheduledDevice lists the Device fields a schedule drives.
func (p *Plan) ScheduledDevice() []string { return slices.Clone(p.devSched) }

// At evaluates every schedule at an optimizer step (1-based), once: the Device schedules and each
// group's hyperparameters of that step all read the same evaluation. Nil when nothing is
// scheduled. A negative eta or lambda (every group's or one group's) is an error naming the
// schedule and the step; 0 is allowed.
func (p *Plan) At(step int) (schedules.Values, error) {
	if p.bound == nil {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.atStep != step || p.at == nil {
		at, err := p.Preview(step)
		if err != nil {
			return nil, err
		}
		p.at, p.atStep = at, step
	}
	return p.at, nil
}

// Preview is At without keeping the result, for a check ahead of the step (core checks step 1 at
// setup): the step itself still evaluates its schedules when it runs, so a schedule reading state
// that changes before then sees the step's state.
func (p *Plan) Preview(step int) (schedules.Values, error) {
	if p.bound == nil {
		return nil, nil
	}
	at, err := p.bound.At(step)
	if err != nil {
		return nil, err
	}
	for _, t := range p.bound.Targets() {
		if err := checkSign(p.bound, t, at[t], step); err != nil {
			return nil, err
		}
		if t.Scope == schedules.ScopeOpt && (t.Name == EtaField || t.Name == LambdaField) && at[t] < 0 {
			at[t] = 0 // a rounding negative, which checkSign let through
		}
	}
	return at, nil
}

// Group is the named group's plan, nil when there is no such group.
func (p *Plan) Group(name string) *GroupPlan {
	for _, g := range p.groups {
		if g.Name == name {
			return g
		}
	}
	return nil
}

// Hyper is a group's chain's values at an optimizer step (1-based): the base values, overridden
// by the group's schedules, then made effective (eta times the group's ratio; lambda, decoupled,
// times that eta), as EffectiveHyper defines.
func (p *Plan) Hyper(group string, step int) (map[string]float64, error) {
	g := p.Group(group)
	if g == nil {
		return nil, fmt.Errorf("optimizers: no parameter group %q in the plan (groups: %v)", group, p.groupNames())
	}
	vals := make(map[string]float64, len(g.base))
	for k, v := range g.base {
		vals[k] = v
	}
	at, err := p.At(step)
	if err != nil {
		return nil, err
	}
	if at != nil {
		for _, f := range g.Chain.HyperFields() {
			if v, _, ok := at.Opt(g.Name, f); ok {
				vals[f] = v
			}
		}
	}
	return EffectiveHyper(vals, g.ratio)
}

func (p *Plan) groupNames() []string {
	names := make([]string, len(p.groups))
	for i, g := range p.groups {
		names[i] = g.Name
	}
	return names
}

// InitState builds the group's initial optimizer state from its flat parameter buffer (what a
// transform's Init is defined on), one flat host tensor per state leaf, laid out as the
// parameters: the optimizer program reads it so.
func (g *GroupPlan) InitState(flat *tensors.Tensor) ([]*tensors.Tensor, error) {
	st, err := g.Chain.Init(flat)
	if err != nil {
		return nil, fmt.Errorf("group %q: optimizer init: %w", g.Name, err)
	}
	return st.Leaves(), nil
}

// VaryingOptKeys lists, as the schedule map wrote them, the keys whose schedule drives an
// optimizer hyperparameter with a value that changes over the run (every opt-scope key but the
// bare numbers), sorted. A caller that fixes the rules for the run refuses these by name.
func (p *Plan) VaryingOptKeys() []string {
	if p.bound == nil {
		return nil
	}
	var keys []string
	for _, t := range p.bound.Targets() {
		if t.Scope != schedules.ScopeOpt || p.bound.IsConstant(t) {
			continue
		}
		if k, ok := p.bound.Key(t); ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
