package optimizers

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nitro-go/nitro/schedules"
)

// DeviceBinding is a Device field's row of the binding report: its schedule when one drives it,
// else the field's value (value, as the caller prints the field).
func (p *Plan) DeviceBinding(name, value string) schedules.Binding {
	b := schedules.Binding{Name: name, Value: value, Source: "field " + name}
	t := schedules.Target{Scope: schedules.ScopeDevice, Name: name}
	if p.bound != nil && p.bound.Has(t) {
		b.Value, b.Source, b.Scheduled = p.scheduleValue(t), p.scheduleSource(t), true
	}
	return b
}

// scheduleSource is a bound target's source in the report: "schedule <key>", and "(run option)"
// when the run's schedules gave it rather than the experiment's.
func (p *Plan) scheduleSource(t schedules.Target) string {
	key, _ := p.bound.Key(t)
	if p.runKeys[key] {
		return "schedule " + key + " (run option)"
	}
	return "schedule " + key
}

// GroupBindings are the groups' rows of the binding report: per group its chain and level, every
// hyperparameter the chain reads with what won (accessor, run-wide setting, rule field or
// schedule), the scheduled keys the chain ignores (Binding.Unused), and the decay anchor.
func (p *Plan) GroupBindings() []schedules.Binding {
	var bs []schedules.Binding
	for _, g := range p.groups {
		bs = append(bs, schedules.Binding{Group: g.Name, Name: "optimizer", Value: g.Chain.Describe(), Source: g.Level})
		for _, f := range g.Chain.HyperFields() {
			bs = append(bs, p.fieldBinding(g, f))
		}
		for _, f := range g.Binding.Unused {
			t, _ := p.scheduleTarget(g.Name, f)
			bs = append(bs, schedules.Binding{Group: g.Name, Name: f, Value: p.scheduleValue(t), Source: p.scheduleSource(t), Scheduled: true, Unread: true})
		}
		if g.Chain.HasDecay() {
			src := "default"
			if p.spec.DecayAnchor != nil {
				src = fmt.Sprintf("accessor DecayAnchor(%s)", g.Name)
			}
			bs = append(bs, schedules.Binding{Group: g.Name, Name: "anchor", Value: g.anchor.String(), Source: src})
		}
	}
	return bs
}

// fieldBinding is the row of one hyperparameter a group's chain reads.
func (p *Plan) fieldBinding(g *GroupPlan, f string) schedules.Binding {
	s := p.spec
	b := schedules.Binding{Group: g.Name, Name: f}
	switch f {
	case EtaField:
		b.Value, b.Source = derived(s.LearningRate.Value*g.ratio), "LearningRate "+s.LearningRate.Source
		if s.LearningRateGroup != nil {
			b.Source = fmt.Sprintf("accessor LearningRateGroup(%s)", g.Name)
			b.Note = fmt.Sprintf("ratio %s of default", derived(g.ratio))
		}
	case LambdaField:
		b.Value, b.Source = fmt.Sprint(g.lambda), "Lambda "+s.Lambda.Source
		if s.LambdaGroup != nil {
			b.Source = fmt.Sprintf("accessor LambdaGroup(%s)", g.Name)
		}
		b.Note = "pre-multiplied by the group's effective eta"
	default:
		b.Value, b.Source = fmt.Sprint(g.base[f]), "rule field "+f
	}
	if t, ok := p.scheduleTarget(g.Name, f); ok {
		b.Value, b.Source, b.Scheduled = p.scheduleValue(t), p.scheduleSource(t), true
		if g.ratio != 1 && f == EtaField {
			// The group runs at the schedule times its ratio: show the rate it really gets.
			b.Value, b.Source = p.scaledScheduleValue(t, g.ratio), b.Source+" x ratio"
		}
	}
	if f == EtaField && g.etaReplaced != "" {
		b.Note = strings.TrimPrefix(b.Note+"; "+g.etaReplaced, "; ")
	}
	return b
}

// scheduleTarget is the target that drives a group's field: the group's own, else every group's.
func (p *Plan) scheduleTarget(group, field string) (schedules.Target, bool) {
	if p.bound == nil {
		return schedules.Target{}, false
	}
	for _, t := range []schedules.Target{{Scope: schedules.ScopeOpt, Group: group, Name: field}, {Scope: schedules.ScopeOpt, Name: field}} {
		if p.bound.Has(t) {
			return t, true
		}
	}
	return schedules.Target{}, false
}

// scheduleValue is a schedule's value as the report prints it: a constant as itself, else its
// value at step 1.
func (p *Plan) scheduleValue(t schedules.Target) string {
	at, err := p.bound.At(1)
	if err != nil {
		return "error: " + err.Error()
	}
	if p.bound.IsConstant(t) {
		return fmt.Sprint(at[t])
	}
	return fmt.Sprintf("%g at step 1", at[t])
}

// scaledScheduleValue is an eta schedule's row for a group at ratio r: the group's own rate at step
// 1 (or its constant), then the schedule's value it comes from.
func (p *Plan) scaledScheduleValue(t schedules.Target, r float64) string {
	at, err := p.bound.At(1)
	if err != nil {
		return "error: " + err.Error()
	}
	v := at[t]
	if p.bound.IsConstant(t) {
		return fmt.Sprintf("%s (schedule %g x ratio %s)", derived(v*r), v, derived(r))
	}
	return fmt.Sprintf("%s at step 1 (schedule %g x ratio %s)", derived(v*r), v, derived(r))
}

// derived prints a value nitro computed (a ratio of two rates, a rate times a ratio) to 12
// significant digits: enough for any rate a user sets, and none of the last-bit noise of the
// division (1e-4 / 1e-3 prints 0.1, not 0.09999999999999999).
func derived(v float64) string { return strconv.FormatFloat(v, 'g', 12, 64) }
