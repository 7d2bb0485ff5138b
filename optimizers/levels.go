package optimizers

import (
	"fmt"
	"math"
	"slices"
)

// GroupSetup is one parameter group's resolved, host-side optimizer configuration: what Levels 0
// and 1 build a chain from, and what a Level 2 factory receives. Values a schedule can reach are
// not here: the chain reads them from Hyper at every step.
type GroupSetup struct {
	Name    string
	Layout  *Layout
	Lambda  float64      // the group's base decay coefficient; 0 (and unscheduled) means no Decay
	Anchor  Anchor       // what the group decays toward (AnchorZero by default)
	NoDecay *NoDecayMask // per-leaf exclusions (DefaultNoDecay: every 1-D leaf); nil decays all
	// Scheduled lists the opt keys a schedule drives for this group ("eta", "lambda", "rho", ...).
	Scheduled []string
}

// decays reports whether the group gets a Decay tail.
func (g GroupSetup) decays() bool {
	return g.Lambda != 0 || slices.Contains(g.Scheduled, LambdaField)
}

// decayFieldKeys are the field keys by which a rule declares weight decay of its own.
var decayFieldKeys = []string{LambdaField, "weight_decay", "wd"}

// BuildRuleChain is Levels 0 and 1: the rule (nil: DefaultRule, i.e. Level 0) followed, when the
// group decays, by Decay(g.Anchor, g.NoDecay). It refuses a rule with a weight-decay field of its
// own (an AdamW), a scheduled key the rule declares nonschedulable or does not have, and a
// negative or non-finite lambda.
func BuildRuleChain(rule Rule, g GroupSetup) (*Chain, error) {
	if rule == nil {
		rule = DefaultRule()
	}
	fields, err := RuleFields(rule)
	if err != nil {
		return nil, err
	}
	for _, f := range fields {
		if slices.Contains(decayFieldKeys, f.Key) {
			return nil, fmt.Errorf("optimizers: group %q: rule %s has its own weight-decay field %s: at Level 1 the framework appends Decay to every decaying group, so this rule would decay twice, silently, and a lambda schedule would bind to two rules; use the rule without decay (e.g. Adam) with the lambda accessor, or compose the chain yourself at Level 2", g.Name, rule.RuleName(), f.GoName)
		}
	}
	if g.Lambda < 0 || math.IsNaN(g.Lambda) || math.IsInf(g.Lambda, 0) {
		return nil, fmt.Errorf("optimizers: group %q: lambda is %v: the decay coefficient must be a finite number >= 0 (0 turns decay off)", g.Name, g.Lambda)
	}
	for _, key := range g.Scheduled {
		if err := CheckScheduleKey(rule, key); err != nil {
			return nil, fmt.Errorf("group %q: %w", g.Name, err)
		}
	}
	t, err := rule.Build()
	if err != nil {
		return nil, fmt.Errorf("group %q: %w", g.Name, err)
	}
	ts := []Transform{t}
	if g.decays() {
		ts = append(ts, Decay(g.Anchor, g.NoDecay))
	}
	return NewChain(ts...)
}

// ChainFactory is the Level 2 hook: it builds one group's chain from the group's resolved setup.
// It owns hyperparameter application: the framework does not check that the chain reads what is
// scheduled, and reports it instead (Binding).
type ChainFactory func(g GroupSetup) (*Chain, error)

// BuildFactoryChain runs a Level 2 factory for one group, validates the chain it returned (Decay
// last, built with NewChain), refuses a scheduled key the chain declares nonschedulable, and
// returns the group's Binding: which scheduled keys the chain reads and which it ignores.
func BuildFactoryChain(f ChainFactory, g GroupSetup) (*Chain, Binding, error) {
	if f == nil {
		return nil, Binding{}, fmt.Errorf("optimizers: group %q: nil chain factory: pass a function, or use Level 0/1 (BuildRuleChain)", g.Name)
	}
	c, err := f(g)
	if err != nil {
		return nil, Binding{}, fmt.Errorf("optimizers: group %q: chain factory: %w", g.Name, err)
	}
	if c == nil || len(c.ts) == 0 {
		return nil, Binding{}, fmt.Errorf("optimizers: group %q: the chain factory returned an empty chain: build it with NewChain", g.Name)
	}
	if _, err := NewChain(c.ts...); err != nil {
		return nil, Binding{}, fmt.Errorf("group %q: %w", g.Name, err)
	}
	for _, key := range g.Scheduled {
		if err := c.CheckScheduleKey(key); err != nil {
			return nil, Binding{}, fmt.Errorf("group %q: %w", g.Name, err)
		}
	}
	return c, c.Bind(g.Name, g.Scheduled), nil
}
