package core_test

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/schedules"
)

// Duel has two one-number groups, "a" and "b", and no Loss. Forward reads only a, so b exists
// only because setup traces TrainStep too. TrainStep steps b on L(a, b) = mean((u·a·b - v)²), then
// a on L(a, b') through the stepped b': b' depends on a, and a's gradient must not flow through it.
type Duel struct{ base0 }

// base0 is BuildModel alone: Duel defines neither Loss nor Metrics.
type base0 struct{}

func (*base0) BuildModel(ctx *context.Context) error { return nil }

type DuelX struct {
	U *graph.Node `batch:"u"`
}

type DuelBatch struct {
	U *graph.Node `batch:"u"`
	V *graph.Node `batch:"v"`
}

const duelA0, duelB0, duelEtaA, duelEtaB = 1.5, -0.5, 0.1, 0.5

func duelParam(ctx *context.Context, group string, init float32, like *graph.Node) *graph.Node {
	return ctx.In(group).VariableWithValue("w", init).ValueGraph(like.Graph())
}

func (*Duel) Forward(ctx *context.Context, in DuelX) core.Outputs {
	return core.Outputs{"pred": graph.Mul(in.U, duelParam(ctx, "a", duelA0, in.U))}
}

func (*Duel) ParamGroup(kp []string) string { return kp[0] }

func (*Duel) SetupOptimizers() (map[string]optimizers.Rule, error) {
	return map[string]optimizers.Rule{"a": optimizers.SGD{Eta: duelEtaA}, "b": optimizers.SGD{Eta: duelEtaB}}, nil
}

func (*Duel) TrainStep(s hooks.ManualStep, in DuelBatch) hooks.StepResult {
	objective := func(ctx *context.Context) *graph.Node {
		a, b := duelParam(ctx, "a", duelA0, in.U), duelParam(ctx, "b", duelB0, in.U)
		return coretest.MSE(graph.Mul(graph.Mul(in.U, a), b), in.V)
	}
	lossB, gb := s.Backward(objective, "b")
	s.StepOptimizer("b", gb)
	lossA, ga := s.Backward(objective, "a") // reads the stepped b
	s.StepOptimizer("a", ga)
	return hooks.StepResult{Loss: graph.Add(lossA, lossB), Stats: map[string]*graph.Node{"loss_a": lossA, "loss_b": lossB}}
}

var duelU, duelV = []float32{1, 2, -1, 0.5}, []float32{2, 1, 0, 3}

func duelData(t testing.TB) prefetch.Data {
	n := len(duelU)
	a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"u": tensors.FromFlatDataAndDimensions(duelU, n, 1), "v": tensors.FromFlatDataAndDimensions(duelV, n, 1),
	}, n, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		t.Fatal(err)
	}
	return prefetch.Data{"train": a}
}

// duelHost is one Duel step in float64: b steps on dL/db, then a on dL/da at the new b, b held
// constant there (the gradient that reaches a only through b' is what Backward must cut).
func duelHost() (a, b, lossA, lossB float64) {
	a, b = duelA0, duelB0
	var gb float64
	for i := range duelU {
		u, v := float64(duelU[i]), float64(duelV[i])
		r := u*a*b - v
		lossB += r * r / 4
		gb += 2 * r * u * a / 4
	}
	b -= duelEtaB * gb
	var ga float64
	for i := range duelU {
		u, v := float64(duelU[i]), float64(duelV[i])
		r := u*a*b - v
		lossA += r * r / 4
		ga += 2 * r * u * b / 4
	}
	return a - duelEtaA*ga, b, lossA, lossB
}

// TestManualStepMatchesTheHost: one manual step of two groups with their own SGD rates equals the
// float64 computation: b steps first, a's gradient is taken at the stepped b and does not flow
// into b (a leak through b' would change a), and the stats are the two losses. Loss is not
// defined: manual mode does not need it.
func TestManualStepMatchesTheHost(t *testing.T) {
	n := coretest.MustNew(t, &Duel{}, duelData(t))
	coretest.Train(t, n)
	p, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	a, b, lossA, lossB := duelHost()
	got := func(k string) float64 { return float64(p[k].Value().(float32)) }
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"a/w", got("a/w"), a}, {"b/w", got("b/w"), b}, {"loss_a", n.History()[0].Train["loss_a"], lossA},
		{"loss_b", n.History()[0].Train["loss_b"], lossB}, {"train loss", n.History()[0].TrainLoss, lossA + lossB}} {
		if math.Abs(c.got-c.want) > 1e-5*math.Max(1, math.Abs(c.want)) {
			t.Errorf("%s = %.7g, want %.7g (host, float64)", c.name, c.got, c.want)
		}
	}
	if n.Step() != 1 {
		t.Errorf("Step = %d, want 1", n.Step())
	}
	wantContains(t, "config report", n.ConfigReport(), "1, manual (TrainStep owns the step)")
}

// ManualDeep is a two-group regressor (backbone, head) trained in manual mode with its own Adam
// per group, with Loss for validation. Weight is a Device field TrainStep multiplies the head's
// loss by and reports as a stat, so a schedule of it is visible in the history.
type ManualDeep struct {
	Deep
	Weight markers.Device[float32]
	Sched  bool
}

func newManualDeep() *ManualDeep { return &ManualDeep{Weight: markers.NewDevice[float32](1)} }

func (*ManualDeep) ParamGroup(kp []string) string { return kp[0] }

func (*ManualDeep) SetupOptimizers() (map[string]optimizers.Rule, error) {
	head, backbone := optimizers.NewAdam(), optimizers.NewRAdam()
	head.Eta, backbone.Eta = 2e-2, 5e-3
	return map[string]optimizers.Rule{"head": head, "backbone": backbone}, nil
}

func (e *ManualDeep) Schedules() map[string]any {
	if !e.Sched {
		return nil
	}
	return map[string]any{"Weight": schedules.Linear(1, 2)}
}

func (e *ManualDeep) TrainStep(s hooks.ManualStep, in DeepBatch) hooks.StepResult {
	objective := func(ctx *context.Context) *graph.Node {
		return coretest.MSE(e.Forward(ctx, coretest.In{X: in.X})["pred"], in.Y)
	}
	lossH, gh := s.Backward(func(ctx *context.Context) *graph.Node {
		return graph.Mul(objective(ctx), e.Weight.Node())
	}, "head")
	s.StepOptimizer("head", gh)
	lossB, gb := s.Backward(objective, "backbone")
	s.StepOptimizer("backbone", gb)
	return hooks.StepResult{Loss: lossB, Stats: map[string]*graph.Node{"head": lossH, "weight": e.Weight.Node()}}
}

type DeepBatch struct {
	X *graph.Node `batch:"x"`
	Y *graph.Node `batch:"y"`
}

// TestManualCompilesOneStepProgram: a manual run of several epochs with validation compiles the
// manual step once and the eval program once, nothing of the automatic loop's (no gradient or
// optimizer program), and it learns. A second Nitro over the same experiment compiles nothing.
func TestManualCompilesOneStepProgram(t *testing.T) {
	c := newCache()
	n, err := core.New(newManualDeep(), coretest.GoOpts(c, core.WithData(coretest.Data(t, 32)), core.WithMaxEpochs(4))...)
	if err != nil {
		t.Fatal(err)
	}
	coretest.Train(t, n)
	if st := c.Stats(); st.Misses != 2 || st.Entries != 2 {
		t.Errorf("cache %+v after 4 epochs of 4 steps with validation: want 2 misses (the manual step, eval)", st)
	}
	kinds := keys(c.CompileTimes())
	if len(kinds) != 2 || kinds[0] != "eval" || kinds[1] != "train_step" {
		t.Errorf("compiled kinds %v: want [eval train_step]", kinds)
	}
	h := n.History()
	if first, last := h[0].Val[core.ValLoss], h[3].Val[core.ValLoss]; !(last < first/2) {
		t.Errorf("val_loss %v -> %v over 4 epochs: manual training does not learn", first, last)
	}
	again, err := core.New(newManualDeep(), coretest.GoOpts(c, core.WithData(coretest.Data(t, 32)), core.WithMaxEpochs(1))...)
	if err != nil {
		t.Fatal(err)
	}
	coretest.Train(t, again)
	if st := c.Stats(); st.Misses != 2 {
		t.Errorf("a second Nitro compiled again: %+v", st)
	}
}

// TestManualResumeIsExact: trained k epochs, checkpointed, and resumed, a manual run with two
// Adam-family optimizers ends bit for bit where the uninterrupted run does: both groups'
// optimizer state, the step and the data position are restored.
func TestManualResumeIsExact(t *testing.T) {
	for _, k := range []int{1, 2} {
		resumeCase(t, func() any { return newManualDeep() }, k, 3)
	}
}

// TestManualKeepsTheDeviceSchedules: a scheduled Device field is written every step in manual mode
// too: the stat TrainStep reports from it averages the schedule's values over the steps.
func TestManualKeepsTheDeviceSchedules(t *testing.T) {
	e := newManualDeep()
	e.Sched = true
	n := coretest.MustNew(t, e, coretest.Data(t, 16), core.WithMaxEpochs(2))
	coretest.Train(t, n)
	total := n.TotalSteps()
	var want float64
	for s := 1; s <= total/2; s++ { // epoch 1's steps
		want += schedules.Linear(1, 2)(total)(s)
	}
	want /= float64(total / 2)
	if got := n.History()[0].Train["weight"]; math.Abs(got-want) > 1e-6 {
		t.Errorf("epoch 1's mean weight stat = %v, want %v (the schedule's mean over its steps)", got, want)
	}
}

// TestManualRequestStopAndEarlyStopping: a stop requested before Train trains one epoch,
// validates and stops; early stopping (no epoch can beat the best by 1e9) stops after patience
// 1 + 1 epochs; both as in the automatic loop.
func TestManualRequestStopAndEarlyStopping(t *testing.T) {
	n := coretest.MustNew(t, newManualDeep(), coretest.Data(t, 16), core.WithMaxEpochs(5))
	n.RequestStop()
	coretest.Train(t, n)
	if n.Epoch() != 1 || n.StopReason() != core.StopRequested {
		t.Errorf("epoch %d, stop reason %q: want 1 and %q", n.Epoch(), n.StopReason(), core.StopRequested)
	}
	n = coretest.MustNew(t, newManualDeep(), coretest.Data(t, 16), core.WithMaxEpochs(5), core.WithEarlyStopping(core.ValLoss, "min", 1, 1e9))
	coretest.Train(t, n)
	if n.Epoch() != 2 || n.StopReason() != core.StopEarly {
		t.Errorf("epoch %d, stop reason %q: want 2 and %q", n.Epoch(), n.StopReason(), core.StopEarly)
	}
}

// Declined keeps a TrainStep but sets ManualTraining false: it trains with the automatic loop.
type Declined struct{ Duel }

func (*Declined) ManualTraining() bool { return false }

func (*Declined) Loss(out core.Outputs, in DuelBatch) *graph.Node {
	return coretest.MSE(out["pred"], in.V)
}

func (*Declined) SetupOptimizers() (map[string]optimizers.Rule, error) { return nil, nil }

// TestManualTrainingFalseDeclines: ManualTraining false (a method or a bool field) with a
// TrainStep trains automatically (gradient and optimizer programs), and then SetupOptimizers, a
// manual-mode hook, is refused; a ManualTraining field that is not a bool is refused.
func TestManualTrainingFalseDeclines(t *testing.T) {
	coretest.WantErr(t, newErr(t, &Declined{}, duelData(t)), "SetupOptimizers", "automatic loop", "OptimizerRule")
	for _, e := range []any{&DeclinedAuto{}, &FieldOff{}} {
		c := newCache()
		n, err := core.New(e, coretest.GoOpts(c, core.WithData(duelData(t)))...)
		if err != nil {
			t.Fatal(err)
		}
		coretest.Train(t, n)
		if kinds := keys(c.CompileTimes()); len(kinds) != 2 || kinds[0] != "gradient" || kinds[1] != "optimizer" {
			t.Errorf("%T compiled %v: want the automatic loop's [gradient optimizer]", e, kinds)
		}
	}
	coretest.WantErr(t, newErr(t, &BadField{}, duelData(t)), "field ManualTraining has type int", "want bool")
}

// autoHooks has a TrainStep that must not run, and Loss for the automatic loop.
type autoHooks struct{ base0 }

func (*autoHooks) Forward(ctx *context.Context, in DuelX) core.Outputs {
	return (&Duel{}).Forward(ctx, in)
}
func (*autoHooks) TrainStep(s hooks.ManualStep, in DuelBatch) hooks.StepResult {
	panic("TrainStep of a declined manual mode is called")
}
func (*autoHooks) Loss(out core.Outputs, in DuelBatch) *graph.Node {
	return coretest.MSE(out["pred"], in.V)
}

// DeclinedAuto declines by method, FieldOff by a bool field; BadField's field is not a bool.
type (
	DeclinedAuto struct{ autoHooks }
	FieldOff     struct {
		autoHooks
		ManualTraining bool
	}
	BadField struct {
		autoHooks
		ManualTraining int
	}
)

func (*DeclinedAuto) ManualTraining() bool { return false }

// manualCase is a Duel variant for the refusals.
type (
	ForcedManual  struct{ coretest.Reg }
	DuelMetrics   struct{ Duel }
	DuelNoRule    struct{ Duel }
	DuelTwice     struct{ Duel }
	DuelBadGroup  struct{ Duel }
	DuelScheduled struct{ Duel }
	DuelRuleToo   struct{ Duel }
)

func (*ForcedManual) ManualTraining() bool { return true }
func (*DuelMetrics) TrainMetrics(out core.Outputs, in DuelBatch) map[string]*graph.Node {
	return nil
}
func (*DuelNoRule) SetupOptimizers() (map[string]optimizers.Rule, error) {
	return map[string]optimizers.Rule{"a": optimizers.NewSGD(), "c": optimizers.NewSGD()}, nil
}
func (*DuelTwice) TrainStep(s hooks.ManualStep, in DuelBatch) hooks.StepResult {
	loss, g := s.Backward(func(ctx *context.Context) *graph.Node {
		return graph.ReduceAllSum(duelParam(ctx, "b", duelB0, in.U))
	}, "b")
	s.StepOptimizer("b", g)
	s.StepOptimizer("b", g)
	return hooks.StepResult{Loss: loss}
}
func (*DuelBadGroup) TrainStep(s hooks.ManualStep, in DuelBatch) hooks.StepResult {
	loss, _ := s.Backward(func(ctx *context.Context) *graph.Node {
		return graph.Mul(duelParam(ctx, "a", duelA0, in.U), duelParam(ctx, "b", duelB0, in.U))
	}, "gen")
	return hooks.StepResult{Loss: loss}
}
func (*DuelScheduled) Schedules() map[string]any {
	return map[string]any{"opt.a.eta": schedules.Linear(0.1, 0)}
}
func (*DuelRuleToo) OptimizerRule(group string) optimizers.Rule { return optimizers.NewSGD() }

// TestManualRefusals: what manual mode cannot honour is refused at New (or, for a misuse inside
// TrainStep, by Train), each naming the knob or hook and the fix.
func TestManualRefusals(t *testing.T) {
	withVal := duelData(t)
	withVal["val"] = withVal["train"]
	for _, c := range []struct {
		name string
		e    any
		d    prefetch.Data
		opts []core.Option
		want []string
	}{
		{"accum", &Duel{}, duelData(t), []core.Option{core.WithAccum(2)}, []string{"Accum = 2 from run option", "manual mode", "set Accum to 1"}},
		{"fused", &Duel{}, duelData(t), []core.Option{core.WithFusedStep()}, []string{"WithFusedStep (--fused)", "manual mode (TrainStep)", "drop WithFusedStep", "ManualTraining false"}},
		{"opt schedule", &DuelScheduled{}, duelData(t), nil, []string{`Schedules() key "opt.a.eta"`, "manual mode refuses", "Device field"}},
		{"train metrics", &DuelMetrics{}, duelData(t), nil, []string{"TrainMetrics", "StepResult.Stats"}},
		{"forced without TrainStep", &ForcedManual{}, coretest.Data(t, 0), nil, []string{"method ManualTraining() is true", "no TrainStep", "func (e *E) TrainStep(s hooks.ManualStep, in B) hooks.StepResult"}},
		{"rules", &DuelNoRule{}, duelData(t), nil, []string{`no rule for parameter group "b"`}},
		{"rule and SetupOptimizers", &DuelRuleToo{}, duelData(t), nil, []string{"SetupOptimizers and OptimizerRule", "keep one"}},
		{"nothing to validate with", &Duel{}, withVal, nil, []string{`split "val" is evaluated`, "neither Metrics nor Loss"}},
	} {
		t.Run(c.name, func(t *testing.T) { coretest.WantErr(t, newErr(t, c.e, c.d, c.opts...), c.want...) })
	}
	for _, c := range []struct {
		name string
		e    any
		want []string
	}{
		{"stepped twice", &DuelTwice{}, []string{`StepOptimizer("b") called twice`}},
		{"unknown group", &DuelBadGroup{}, []string{`Backward("gen"): no such parameter group`, "[a b]"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := coretest.MustNew(t, c.e, duelData(t))
			coretest.WantErr(t, n.Train(), c.want...)
		})
	}
}

// TestManualWithoutLoss: with neither Loss nor Metrics, Predict runs Forward alone (the trained a
// times u) and Evaluate refuses, naming both hooks.
func TestManualWithoutLoss(t *testing.T) {
	n := coretest.MustNew(t, &Duel{}, duelData(t))
	coretest.Train(t, n)
	_, err := n.Evaluate("train")
	coretest.WantErr(t, err, `evaluating split "train"`, "neither Metrics nor Loss")
	b, err := duelData(t)["train"].BatchAt(0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.Predict(b)
	if err != nil {
		t.Fatal(err)
	}
	a, _, _, _ := duelHost()
	for i, got := range p["pred"].Value().([][]float32) {
		if want := float64(duelU[i]) * a; math.Abs(float64(got[0])-want) > 1e-5 {
			t.Errorf("pred[%d] = %v, want u·a = %v", i, got[0], want)
		}
	}
}

// DuelNaN steps both groups on a loss that is NaN.
type DuelNaN struct{ Duel }

func (e *DuelNaN) TrainStep(s hooks.ManualStep, in DuelBatch) hooks.StepResult {
	res := e.Duel.TrainStep(s, in)
	res.Loss = graph.Div(res.Loss, graph.ScalarZero(in.U.Graph(), res.Loss.DType()))
	res.Loss = graph.Mul(res.Loss, graph.ScalarZero(in.U.Graph(), res.Loss.DType())) // 0·inf = NaN
	return res
}

// TestManualNonFiniteLossKeepsTheState: a NaN loss stops the run naming the step, and the
// parameters TrainStep stepped are the initial ones: the step program keeps the old parameters
// and optimizer state when its loss is not finite.
func TestManualNonFiniteLossKeepsTheState(t *testing.T) {
	n := coretest.MustNew(t, &DuelNaN{}, duelData(t))
	coretest.WantErr(t, n.Train(), "non-finite loss NaN at epoch 1, step 1")
	p, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	if a, b := p["a/w"].Value().(float32), p["b/w"].Value().(float32); a != duelA0 || b != duelB0 {
		t.Errorf("after a NaN step a = %v, b = %v: want the initial %v and %v", a, b, duelA0, duelB0)
	}
}
