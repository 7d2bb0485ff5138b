package core

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/schedules"
)

// Manual mode: an experiment that defines TrainStep owns the optimizer step (its forwards, its
// backwards, each group's optimizer step, its per-step stats), compiled as one program, and the
// framework keeps everything around it: the batch stream, accounting, validation, checkpoints
// (every group's optimizer state), logging, phases, early stopping, RequestStop and the Device
// schedules. This file resolves the mode at setup and checks what it refuses; the engine
// (engine/manual_step.go) builds and traces the step program and holds the verbs TrainStep calls.

// ManualChooser overrides the mode: ManualTraining() false keeps a TrainStep in the source and
// trains with the automatic loop; true without a TrainStep is an error. A bool field named
// ManualTraining does the same. Without either, defining TrainStep is what selects manual mode.
type ManualChooser interface {
	ManualTraining() bool
}

// OptimizerSetter is manual mode's optimizer hook: one rule per parameter group (the
// sub-networks ParamGroup names), each rule's own Eta its learning rate (Eta 0: LearningRate).
// Each group gets its own chain, built as Level 1 builds one (Decay appended when the group's
// lambda is non-zero). Without it, manual mode resolves the optimizers as the automatic loop
// does (OptimizerRule, OptimizerChain, the default RAdam).
type OptimizerSetter interface {
	SetupOptimizers() (map[string]optimizers.Rule, error)
}

// resolveManual finds TrainStep and decides the mode (ManualChooser's rule); in manual mode
// n.trainStep is set and Loss becomes optional.
func (bld *builder) resolveManual(et reflect.Type) error {
	su := &bld.n.spec
	h, err := findHook(et, "TrainStep", false)
	if err != nil {
		return err
	}
	on, from, err := manualFlag(su.e)
	switch {
	case err != nil:
		return err
	case from == "":
		on = h != nil
	case on && h == nil:
		return fmt.Errorf("%s is true, but experiment %s has no TrainStep: define %s, or drop %s to train with the automatic loop",
			from, su.typeName, tracedHooks["TrainStep"].signature, from)
	}
	if on {
		su.trainStep = h
	}
	return nil
}

// manualFlag reads ManualTraining: the method, else a bool field; from is "" when neither exists.
func manualFlag(e any) (on bool, from string, err error) {
	if m, ok := e.(ManualChooser); ok {
		return m.ManualTraining(), "method ManualTraining()", nil
	}
	if m, ok := reflect.TypeOf(e).MethodByName("ManualTraining"); ok {
		return false, "", fmt.Errorf("method ManualTraining has signature %s: want func() bool", m.Type)
	}
	f := reflect.ValueOf(e).Elem().FieldByName("ManualTraining")
	if !f.IsValid() {
		return false, "", nil
	}
	if f.Kind() != reflect.Bool {
		return false, "", fmt.Errorf("field ManualTraining has type %s: want bool (true: train with TrainStep; false: the automatic loop)", f.Type())
	}
	return f.Bool(), "field ManualTraining", nil
}

// manualConfig refuses, once the knobs are resolved, what manual mode cannot honour.
func (bld *builder) manualConfig() error {
	su := &bld.n.spec
	if su.trainStep == nil {
		return nil
	}
	if a := su.cfg.accum; a.value > 1 {
		return fmt.Errorf("Accum = %d from %s: manual mode (TrainStep) runs its step program once per optimizer step on one batch; accumulation is the automatic loop's mechanism and TrainStep owns any multi-batch work of its own: set Accum to 1 (or use batches %d times larger)",
			a.value, a.source, a.value)
	}
	if su.opts.fused {
		// The fused step joins the automatic loop's gradient and update programs; manual mode
		// has neither (TrainStep compiles its own), so the option would change nothing.
		return fmt.Errorf("WithFusedStep (--fused) with experiment %s in manual mode (TrainStep): a fused step joins the automatic loop's gradient and optimizer programs into one, and TrainStep runs its own step program instead; drop WithFusedStep (--fused), or set ManualTraining false to train in the automatic loop", su.typeName)
	}
	if su.trainMetrics != nil {
		return fmt.Errorf("experiment %s defines TrainMetrics, which manual mode never calls (TrainStep computes its own per-step values): return them in hooks.StepResult.Stats and remove TrainMetrics, or set ManualTraining false", su.typeName)
	}
	return nil
}

// manualSplits checks TrainStep's declared fields against the train split, and that every
// evaluated split has something to report: Metrics, or Loss for val_loss.
func (bld *builder) manualSplits() error {
	su := &bld.n.spec
	if su.trainStep == nil {
		return nil
	}
	if avail, ok := su.splitAvail["train"]; ok {
		if err := su.trainStep.checkAgainst("train", avail); err != nil {
			return err
		}
	}
	if su.metrics != nil || su.loss != nil {
		return nil
	}
	for _, split := range sortedKeys(su.data) {
		if split != "train" {
			return fmt.Errorf("split %q is evaluated, but experiment %s defines neither Metrics nor Loss: in manual mode Loss is optional, so define Metrics (what validation reports) or Loss (reported as %s)", split, su.typeName, ValLoss)
		}
	}
	return nil
}

// trainHooks are the hooks whose declared fields the train stream transfers: TrainStep's alone in
// manual mode (a field only it reads, such as a GAN's noise, travels only because it declares it).
func (su *runSpec) trainHooks() []*hook {
	if su.trainStep != nil {
		return []*hook{su.trainStep}
	}
	return []*hook{su.forward, su.loss, su.trainMetrics}
}

// resolvePlan resolves the optimization (optimizers.Resolve) with manual mode's rules applied:
// SetupOptimizers' rules in place of the Level 0/1/2 accessors, and no varying schedule of an
// optimizer hyperparameter.
func (bld *builder) resolvePlan() (*optimizers.Plan, error) {
	n := bld.n
	spec := bld.planSpec()
	if err := bld.manualSpec(&spec); err != nil {
		return nil, err
	}
	plan, err := optimizers.Resolve(spec)
	if err != nil || n.spec.trainStep == nil {
		return plan, err
	}
	if keys := plan.VaryingOptKeys(); len(keys) > 0 {
		return nil, fmt.Errorf("Schedules() key %q varies an optimizer hyperparameter over the run, which manual mode refuses: a TrainStep's optimizers are fixed for the run (SetupOptimizers' rules, or the resolved chains), so there is no per-step rule rebuild to follow it; give the key a constant, or schedule a Device field and use it in TrainStep (Device schedules work as in the automatic loop)", keys[0])
	}
	return plan, nil
}

// manualSpec puts SetupOptimizers' rules into the plan: each group's rule, and its Eta as the
// group's learning rate (through LearningRateGroup, so the rate report and checks are the usual
// ones). It refuses SetupOptimizers outside manual mode, next to the accessors it replaces, and a
// map that does not name every group exactly.
func (bld *builder) manualSpec(spec *optimizers.PlanSpec) error {
	n := bld.n
	setter, ok := n.spec.e.(OptimizerSetter)
	if !ok {
		return nil
	}
	if n.spec.trainStep == nil {
		return fmt.Errorf("experiment %s defines SetupOptimizers, manual mode's optimizer hook, but trains with the automatic loop (no TrainStep, or ManualTraining false): define TrainStep, or give per-group rules with OptimizerRule(group)", n.spec.typeName)
	}
	var clash []string
	for name, set := range map[string]bool{"OptimizerRule": spec.OptimizerRule != nil, "OptimizerChain": spec.OptimizerChain != nil, "LearningRateGroup": spec.LearningRateGroup != nil} {
		if set {
			clash = append(clash, name)
		}
	}
	if len(clash) > 0 {
		return fmt.Errorf("experiment %s defines SetupOptimizers and %s: SetupOptimizers gives each group its rule and (by the rule's Eta) its rate, so it replaces them; keep one", n.spec.typeName, strings.Join(sortedStrings(clash), " and "))
	}
	rules, err := setter.SetupOptimizers()
	if err != nil {
		return fmt.Errorf("SetupOptimizers: %w", err)
	}
	rates := map[string]float64{}
	for _, g := range n.eng.GroupNames() {
		r, ok := rules[g]
		if !ok || r == nil {
			return fmt.Errorf("SetupOptimizers returned no rule for parameter group %q (groups: %v): give every group (ParamGroup's names) a rule", g, n.eng.GroupNames())
		}
		rates[g] = spec.LearningRate.Value
		fields, err := optimizers.RuleFields(r)
		if err != nil {
			return fmt.Errorf("SetupOptimizers, group %q: %w", g, err)
		}
		for _, f := range fields {
			if f.Key == optimizers.EtaField && f.Value != 0 {
				rates[g] = f.Value
			}
		}
	}
	for name := range rules {
		if _, ok := rates[name]; !ok {
			return fmt.Errorf("SetupOptimizers returned a rule for %q, which is no parameter group (groups: %v): name the groups ParamGroup returns", name, n.eng.GroupNames())
		}
	}
	spec.OptimizerRule = func(g string) optimizers.Rule { return rules[g] }
	spec.LearningRateGroup = func(g string) float64 { return rates[g] }
	return nil
}

func sortedStrings(s []string) []string {
	m := make(map[string]bool, len(s))
	for _, x := range s {
		m[x] = true
	}
	return sortedKeys(m)
}

// manualBindings names SetupOptimizers where the binding report would name the accessors it
// stands in for (the plan sees its rules as Level 1 rules and its rates as LearningRateGroup).
func (bld *builder) manualBindings(bs []schedules.Binding) []schedules.Binding {
	su := &bld.n.spec
	if _, ok := su.e.(OptimizerSetter); !ok || su.trainStep == nil {
		return bs
	}
	for i, b := range bs {
		switch {
		case b.Group != "" && b.Name == "optimizer":
			bs[i].Source = "SetupOptimizers"
		case b.Group != "" && b.Name == optimizers.EtaField && strings.HasPrefix(b.Source, "accessor LearningRateGroup("):
			bs[i].Source = fmt.Sprintf("SetupOptimizers: %s's rule's Eta", b.Group)
		}
	}
	return bs
}

// noEvalHook is evaluating a split with neither Metrics nor Loss, which only manual mode allows.
func (su *runSpec) noEvalHook(split string) error {
	return fmt.Errorf("evaluating split %q: experiment %s defines neither Metrics nor Loss (manual mode does not need Loss to train): define Metrics, or Loss (reported as %s)", split, su.typeName, ValLoss)
}
