package core_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/schedules"
)

// Level 1: a rule by name.
type Level1SGD struct{ coretest.Base }

func (*Level1SGD) OptimizerRule(group string) optimizers.Rule { return optimizers.SGD{} } // eta: LearningRate

// sgdw is a Level 1 rule with a weight-decay field of its own.
type sgdw struct {
	Eta    float64
	Lambda float64
}

func (sgdw) RuleName() string                       { return "sgdw" }
func (sgdw) Nonschedulable() map[string]string      { return nil }
func (r sgdw) Build() (optimizers.Transform, error) { return optimizers.SGD{Eta: r.Eta}.Build() }

type Level1DecayTwice struct{ coretest.Base }

func (*Level1DecayTwice) OptimizerRule(group string) optimizers.Rule {
	return sgdw{Eta: 1e-3, Lambda: 1e-2}
}

// Level 2: whole chains.
type (
	Level2Good       struct{ coretest.Base }
	Level2DecayFirst struct{ coretest.Base }
)

func (*Level2Good) Lambda() float64 { return 1e-2 }

func (*Level2Good) OptimizerChain(setup optimizers.GroupSetup) (*optimizers.Chain, error) {
	sgd, err := optimizers.NewSGD().Build()
	if err != nil {
		return nil, err
	}
	return optimizers.NewChain(sgd, optimizers.Decay(setup.Anchor, setup.NoDecay))
}

func (*Level2DecayFirst) OptimizerChain(setup optimizers.GroupSetup) (*optimizers.Chain, error) {
	sgd, err := optimizers.NewSGD().Build()
	if err != nil {
		return nil, err
	}
	return optimizers.NewChain(optimizers.Decay(setup.Anchor, setup.NoDecay), sgd)
}

func TestLevel1RuleTrains(t *testing.T) {
	n := coretest.MustNew(t, &Level1SGD{}, coretest.Data(t, 40), core.WithMaxEpochs(3), core.WithLearningRate(0.05))
	before, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	after := n.History()[2].Val[core.ValLoss]
	if !(after < before[core.ValLoss]/2) {
		t.Errorf("SGD did not learn: val_loss %v -> %v", before[core.ValLoss], after)
	}
	rep := n.BindingReport()
	wantContains(t, "binding report", rep, "sgd", "Level 1: OptimizerRule", "0.05")
	if strings.Contains(rep, "radam") || strings.Contains(rep, "decay") {
		t.Errorf("a Level 1 SGD with lambda 0 should be plain sgd:\n%s", rep)
	}
}

func TestLevel1RuleWithItsOwnDecayIsRefused(t *testing.T) {
	err := newErr(t, &Level1DecayTwice{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, `group "default"`, "rule sgdw has its own weight-decay field Lambda", "decay twice", "Level 2")
}

func TestLevel2Chains(t *testing.T) {
	n := coretest.MustNew(t, &Level2Good{}, coretest.Data(t, 0), core.WithMaxEpochs(2))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "binding report", n.BindingReport(), "Level 2: OptimizerChain", "sgd() > decay(anchor=zero")

	err := newErr(t, &Level2DecayFirst{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, `group "default"`, "chain factory", "Decay is at position 0 of 2 but must be last", "reorder to [sgd decay]")
}

// Groups puts the first layer in "backbone" and the rest in "head", with per-group rates,
// decay coefficients and anchors.
type Groups struct{ Deep }

func (*Groups) ParamGroup(keypath []string) string {
	if keypath[0] == "backbone" {
		return "backbone"
	}
	return "head"
}

func (*Groups) LearningRateGroup(g string) float64 {
	if g == "backbone" {
		return 1e-4
	}
	return 1e-3
}

func (*Groups) LambdaGroup(g string) float64 {
	if g == "backbone" {
		return 1e-2
	}
	return 1e-3
}

func (*Groups) DecayAnchor(g string) optimizers.Anchor {
	if g == "backbone" {
		return optimizers.AnchorW0
	}
	return optimizers.AnchorZero
}

func TestParameterGroups(t *testing.T) {
	n := coretest.MustNew(t, &Groups{}, coretest.Data(t, 40), core.WithMaxEpochs(2))
	cfg := n.ConfigReport()
	// backbone: Dense 4->8 (32 weights + 8 biases); head: Dense 8->1 (8 + 1).
	wantContains(t, "config report", cfg, "backbone (2 arrays, 40 values), head (2 arrays, 9 values)")
	rep := n.BindingReport()
	wantContains(t, "binding report", rep, "group backbone", "group head", "ratio 0.1", "ratio 1 of default",
		"accessor LearningRateGroup(backbone)", "accessor LambdaGroup(head)", "accessor DecayAnchor(backbone)",
		"decay(anchor=w0", "decay(anchor=zero")
	// Each group's section names its own anchor.
	back, head := section(rep, "group backbone"), section(rep, "group head")
	if !hasRow(back, "anchor", "w0") || !hasRow(head, "anchor", "zero") {
		t.Errorf("anchors per group wrong:\nbackbone:\n%s\nhead:\n%s", back, head)
	}
	if !hasRow(back, "eta", "0.0001") || !hasRow(head, "eta", "0.001") {
		t.Errorf("eta per group wrong:\nbackbone:\n%s\nhead:\n%s", back, head)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if l := n.History()[1].Val[core.ValLoss]; l != l {
		t.Errorf("val_loss NaN with two groups")
	}
}

// section returns the lines of a binding report's section, from its header to the next one.
func section(rep, header string) string {
	var out []string
	in := false
	for _, line := range strings.Split(rep, "\n") {
		if strings.HasPrefix(line, "group ") || strings.HasPrefix(line, "run-wide") {
			in = line == header
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// hasRow reports whether a section has a row named name whose value is value.
func hasRow(sec, name, value string) bool {
	for _, line := range strings.Split(sec, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name && f[1] == value {
			return true
		}
	}
	return false
}

// Scheduled is Reg with its learning rate annealed linearly to 0.
type Scheduled struct{ coretest.Base }

func (*Scheduled) Schedules() map[string]any {
	return map[string]any{"eta": schedules.Linear(1e-3, 0)}
}

type (
	UnknownKey     struct{ coretest.Base }
	Nonschedulable struct{ coretest.Base }
)

func (*UnknownKey) Schedules() map[string]any     { return map[string]any{"etta": 1e-3} }
func (*Nonschedulable) Schedules() map[string]any { return map[string]any{"beta1": 0.8} }

func TestSchedulingNeverRecompiles(t *testing.T) {
	run := func(e any) (*core.Nitro, int, int) {
		c := newCache()
		n, err := core.New(e, coretest.GoOpts(c, core.WithData(coretest.Data(t, 40)), core.WithMaxEpochs(2))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		s := c.Stats()
		return n, s.Misses, s.Entries
	}
	plain, pm, pe := run(&coretest.Reg{})
	sched, sm, se := run(&Scheduled{})
	if sm != pm || se != pe || sm != se {
		t.Errorf("compile-cache misses/entries: scheduled %d/%d, unscheduled %d/%d; want identical and equal", sm, se, pm, pe)
	}
	if slices.Equal(flatParams(t, plain), flatParams(t, sched)) {
		t.Errorf("the eta schedule had no effect on training")
	}
	wantContains(t, "binding report", sched.BindingReport(), "schedule eta", "0.001 at step 1")
}

func TestScheduleKeyErrors(t *testing.T) {
	err := newErr(t, &UnknownKey{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "unknown schedule key etta", "valid keys are", "eta", "lambda")
	err = newErr(t, &Nonschedulable{}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "schedule key beta1", "nonschedulable", "set it on the rule")
}

// GroupsSGD is Groups at Level 1 (plain SGD, so one step is exact), with its per-group backbone
// rate and decay coefficients in Host fields.
type GroupsSGD struct {
	Groups
	BackboneLR, BackboneLambda, HeadLambda float64
}

func (*GroupsSGD) OptimizerRule(string) optimizers.Rule { return optimizers.SGD{} } // eta: LearningRate

func (e *GroupsSGD) LearningRateGroup(g string) float64 {
	if g == "backbone" {
		return e.BackboneLR
	}
	return 0.1
}

func (e *GroupsSGD) LambdaGroup(g string) float64 {
	if g == "backbone" {
		return e.BackboneLambda
	}
	return e.HeadLambda
}

// TestGroupRatesAndDecayOneStep checks one SGD step per configuration against a reference step
// (every ratio 1, no decay), all from the same initial parameters and batch:
//   - a backbone rate of a tenth of the default moves the backbone exactly a tenth as far;
//   - decoupled decay toward zero adds -eta*lambda*x to the head's weights but not to its
//     biases (1-D leaves are excluded by default);
//   - decay toward w0 adds nothing on the first step, where the parameters are w0.
func TestGroupRatesAndDecayOneStep(t *testing.T) {
	const lr = 0.1
	step := func(e *GroupsSGD) (p0, p1 map[string][]float64) {
		t.Helper()
		n := coretest.MustNew(t, e, prefetch.Data{"train": coretest.Arrays(t, 16, 16, 1, prefetch.ArrayOptions{DropPartial: true})},
			core.WithLearningRate(lr))
		p0 = paramsByKey(t, n)
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		if n.Step() != 1 {
			t.Fatalf("%d steps, want 1", n.Step())
		}
		return p0, paramsByKey(t, n)
	}
	r0, r1 := step(&GroupsSGD{BackboneLR: lr})
	for _, c := range []struct {
		name string
		e    *GroupsSGD
		want func(key string, i int, x0, refDelta float64) float64 // expected delta
	}{
		{"backbone ratio 0.1", &GroupsSGD{BackboneLR: lr / 10}, func(k string, _ int, _, d float64) float64 {
			if strings.HasPrefix(k, "backbone/") {
				return d / 10
			}
			return d
		}},
		{"decay", &GroupsSGD{BackboneLR: lr, BackboneLambda: 0.5, HeadLambda: 0.5}, func(k string, _ int, x0, d float64) float64 {
			if k == "head/dense/weights" {
				return d - lr*0.5*x0
			}
			return d
		}},
	} {
		p0, p1 := step(c.e)
		for _, k := range keys(r0) {
			for i := range r0[k] {
				if p0[k][i] != r0[k][i] {
					t.Fatalf("%s: initial %s[%d] differs from the reference run's", c.name, k, i)
				}
				ref := r1[k][i] - r0[k][i]
				want, got := c.want(k, i, r0[k][i], ref), p1[k][i]-p0[k][i]
				if d := got - want; d > 1e-6+1e-3*abs(want) || -d > 1e-6+1e-3*abs(want) {
					t.Errorf("%s: %s[%d] moved %.6g, want %.6g (reference step %.6g)", c.name, k, i, got, want, ref)
				}
			}
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// paramsByKey reads the parameters back as float64 slices by keypath.
func paramsByKey(t testing.TB, n *core.Nitro) map[string][]float64 {
	t.Helper()
	p, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for k, v := range p {
		v.ConstFlatData(func(flat any) {
			for _, x := range flat.([]float32) {
				out[k] = append(out[k], float64(x))
			}
		})
	}
	return out
}

// DeviceLambda has a traced input named Lambda (e.g. an auxiliary loss weight). A Device field and
// the decay coefficient are different things (schedule keys device.lambda vs opt.lambda; the
// coefficient defaults to 0), so a Device field never binds a driver knob: were it read as one,
// every group would silently decay with lambda 0.5.
type DeviceLambda struct {
	coretest.Base
	Lambda markers.Device[float32]
}

func TestADeviceFieldNamedLambdaIsNotTheDecayCoefficient(t *testing.T) {
	n := coretest.MustNew(t, &DeviceLambda{Lambda: markers.NewDevice[float32](0.5)}, coretest.Data(t, 0))
	rep := n.BindingReport()
	if strings.Contains(rep, "decay(") || hasRow(section(rep, "group default"), "lambda", "0.5") {
		t.Errorf("the Device field Lambda became the decay coefficient:\n%s", rep)
	}
}

// DeviceLearningRate declares the optimizer's knob name as a Device field: a traced input, so the
// run's learning rate stays the default. New says so, in a warning and in the knob's source,
// rather than train at 1e-3 while the field reads 0.01. A Device Lambda gets no warning.
type DeviceLearningRate struct {
	coretest.Base
	LearningRate markers.Device[float32]
	Lambda       markers.Device[float32]
}

func TestADeviceFieldNamedLearningRateIsNotTheKnobAndNewWarns(t *testing.T) {
	var warned []string
	n := coretest.MustNew(t, &DeviceLearningRate{LearningRate: markers.NewDevice[float32](0.01), Lambda: markers.NewDevice[float32](0.5)}, coretest.Data(t, 0),
		core.WithWarn(func(msg string) { warned = append(warned, msg) }))
	if len(warned) != 1 || !strings.Contains(warned[0], "field LearningRate is a markers.Device") || !strings.Contains(warned[0], "its default 0.001") {
		t.Errorf("warnings %q: want exactly one, naming the LearningRate field and the default it leaves", warned)
	}
	if rep := n.BindingReport(); !strings.Contains(rep, "LearningRate default; field LearningRate is a markers.Device") {
		t.Errorf("the eta row's source does not say why the field was not read:\n%s", rep)
	}
}

// Recorded schedules eta with a factory that records the horizon and the steps it is asked for.
type Recorded struct {
	coretest.Base
	total int
	steps []int
}

func (e *Recorded) Schedules() map[string]any {
	return map[string]any{"eta": schedules.Factory(func(total int) schedules.Schedule {
		e.total = total
		return func(step int) float64 {
			e.steps = append(e.steps, step)
			return 1e-3
		}
	})}
}

// TestSchedulesCountOptimizerSteps: the horizon and the step a schedule sees are optimizer steps,
// not micro-batches; each step evaluates the schedule for that step.
func TestSchedulesCountOptimizerSteps(t *testing.T) {
	e := &Recorded{}
	n := coretest.MustNew(t, e, coretest.Data(t, 0), core.WithMaxEpochs(2), core.WithAccum(2))
	if e.total != 4 {
		t.Errorf("factory horizon %d, want 4 (2 epochs x 4 batches / accum 2)", e.total)
	}
	e.steps = nil
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, s := range e.steps {
		if s < 1 || s > 4 {
			t.Errorf("schedule evaluated at step %d, outside [1, 4]", s)
		}
		seen[s] = true
	}
	if len(seen) != 4 {
		t.Errorf("schedule evaluated at steps %v, want each of 1..4", e.steps)
	}
}

// AnchoredSGD decays its single layer toward its initial weights (L2-SP), at Level 1 SGD.
type AnchoredSGD struct {
	coretest.Base
	ExcludeAll bool
}

func (*AnchoredSGD) OptimizerRule(string) optimizers.Rule       { return optimizers.SGD{} } // eta: LearningRate
func (*AnchoredSGD) Lambda() float64                            { return 0.5 }
func (*AnchoredSGD) DecayAnchor(string) optimizers.Anchor       { return optimizers.AnchorW0 }
func (e *AnchoredSGD) NoDecay(kp []string, s shapes.Shape) bool { return e.ExcludeAll || s.Rank() == 1 }

// TestDecayTowardW0TwoSteps replays two SGD steps on the host: step 1 has no decay term (the
// parameters are w0), step 2 adds eta*lambda*(w1 - w0) to the weights and nothing to the bias
// (1-D, excluded). With NoDecay excluding everything, decay contributes nothing at all.
func TestDecayTowardW0TwoSteps(t *testing.T) {
	const lr, lambda = 0.1, 0.5
	for _, excludeAll := range []bool{false, true} {
		tr := coretest.Arrays(t, 32, 16, 5, prefetch.ArrayOptions{DropPartial: true})
		n := coretest.MustNew(t, &AnchoredSGD{ExcludeAll: excludeAll}, prefetch.Data{"train": tr}, core.WithLearningRate(lr))
		w0, b0 := linearParams(t, n)
		gw, gb := mseGrad(t, must(tr.BatchAt(0)), w0, b0)
		w1, b1 := make([]float64, len(w0)), b0-lr*gb
		for j := range w0 {
			w1[j] = w0[j] - lr*gw[j]
		}
		gw, gb = mseGrad(t, must(tr.BatchAt(1)), w1, b1)
		want, wantB := make([]float64, len(w0)), b1-lr*gb
		for j := range w1 {
			decay := lr * lambda * (w1[j] - w0[j])
			if excludeAll {
				decay = 0
			}
			want[j] = w1[j] - lr*gw[j] - decay
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		w2, b2 := linearParams(t, n)
		for j := range want {
			if !near(w2[j], want[j]) {
				t.Errorf("excludeAll=%v: w[%d] = %v after two steps, want %v", excludeAll, j, w2[j], want[j])
			}
		}
		if !near(b2, wantB) {
			t.Errorf("excludeAll=%v: b = %v, want %v (biases are not decayed)", excludeAll, b2, wantB)
		}
	}
}

// TestGradientClipNormBoundsTheStep: with plain SGD, one step under a global-norm clip of c moves
// the parameters by exactly lr*c in global norm when the gradient's norm exceeds c.
func TestGradientClipNormBoundsTheStep(t *testing.T) {
	const lr, clip = 0.1, 0.01
	tr := coretest.Arrays(t, 16, 16, 7, prefetch.ArrayOptions{DropPartial: true})
	n := coretest.MustNew(t, &SGDOne{}, prefetch.Data{"train": tr}, core.WithLearningRate(lr), core.WithGradientClipNorm(clip))
	w0, b0 := linearParams(t, n)
	gw, gb := mseGrad(t, must(tr.BatchAt(0)), w0, b0)
	norm := gb * gb
	for _, g := range gw {
		norm += g * g
	}
	norm = math.Sqrt(norm)
	if norm <= clip {
		t.Fatalf("gradient norm %v is under the clip; the test needs a larger one", norm)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	w1, b1 := linearParams(t, n)
	for j := range w0 {
		if want := w0[j] - lr*gw[j]*clip/norm; !near(w1[j], want) {
			t.Errorf("w[%d] = %v, want %v (gradient scaled by clip/norm)", j, w1[j], want)
		}
	}
	if want := b0 - lr*gb*clip/norm; !near(b1, want) {
		t.Errorf("b = %v, want %v", b1, want)
	}
}
