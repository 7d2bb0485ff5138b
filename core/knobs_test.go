package core_test

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/schedules"
)

// lrField sets LearningRate as a field.
type lrField struct {
	coretest.Base
	LearningRate float64
}

// lrIntField sets LearningRate as an int field, which converts exactly.
type lrIntField struct {
	coretest.Base
	LearningRate int
}

// etaSched schedules eta (or any key) with the schedule map it holds.
type etaSched struct {
	coretest.Base
	sched map[string]any
}

func (e *etaSched) Schedules() map[string]any { return e.sched }

// groupedSched is Deep split into two groups, with a schedule map.
type groupedSched struct {
	Deep
	sched map[string]any
}

func (*groupedSched) ParamGroup(keypath []string) string {
	if keypath[0] == "backbone" {
		return "backbone"
	}
	return "head"
}

func (e *groupedSched) Schedules() map[string]any { return e.sched }

// firstNegative is the first step (1-based) of f's schedule over total steps below zero.
func firstNegative(t *testing.T, f schedules.Factory, total int) int {
	t.Helper()
	s := f(total)
	for step := 1; step <= total; step++ {
		if s(step) < 0 {
			return step
		}
	}
	t.Fatalf("the schedule never goes negative over %d steps", total)
	return 0
}

// A negative or non-finite learning rate is refused at New, naming the knob and its source; a
// schedule of eta (every group's or one group's) negative at any step is refused at that step,
// naming the schedule and the step (a constant one at New); a schedule reaching 0 trains.
func TestNegativeLearningRateIsRefused(t *testing.T) {
	err := newErr(t, &lrField{LearningRate: -0.01}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "LearningRate = -0.01 from field LearningRate", "must be a finite number > 0", "loss rises")
	err = newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithLearningRate(math.Inf(1)))
	coretest.WantErr(t, err, "LearningRate = +Inf from run option", "finite number > 0")
	err = newErr(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithLearningRate(math.NaN()))
	coretest.WantErr(t, err, "LearningRate = NaN from run option", "finite number > 0")

	err = newErr(t, &etaSched{sched: map[string]any{"eta": -0.01}}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "schedule opt.eta (key eta) is the constant -0.01", "learning rate must be >= 0", "0 is allowed")

	lin := schedules.Linear(0.01, -0.05)
	n := coretest.MustNew(t, &etaSched{sched: map[string]any{"eta": lin}}, coretest.Data(t, 0), core.WithMaxEpochs(2))
	at := firstNegative(t, lin, n.TotalSteps())
	coretest.WantErr(t, n.Train(), "schedule opt.eta (key eta) returned -", "at optimizer step "+strconv.Itoa(at)+":", "learning rate must be >= 0")
	if n.Step() != at-1 {
		t.Errorf("stopped at step %d; want %d, the step before the negative value", n.Step(), at-1)
	}

	late := func(step int) float64 {
		if step >= 3 {
			return -1e-3
		}
		return 1e-2
	}
	n = coretest.MustNew(t, &groupedSched{sched: map[string]any{"opt.backbone.eta": late}}, coretest.Data(t, 0), core.WithMaxEpochs(2))
	coretest.WantErr(t, n.Train(), "schedule opt.backbone.eta (key opt.backbone.eta) returned -0.001 at optimizer step 3")

	// Freezing late in a run is a real use: a schedule reaching 0 trains to the end.
	n = coretest.MustNew(t, &etaSched{sched: map[string]any{"eta": schedules.Linear(0.01, 0)}}, coretest.Data(t, 0), core.WithMaxEpochs(2))
	if err := n.Train(); err != nil {
		t.Fatalf("an eta schedule ending at 0: %v", err)
	}
}

// An int field for the float LearningRate converts exactly and is accepted.
func TestIntFieldSetsAFloatKnob(t *testing.T) {
	n := coretest.MustNew(t, &lrIntField{LearningRate: 1}, coretest.Data(t, 0))
	if !strings.Contains(n.ConfigReport(), "1 (field LearningRate)") {
		t.Errorf("config report does not show LearningRate 1 from the field:\n%s", n.ConfigReport())
	}
}

type epochsFloat struct {
	coretest.Base
	MaxEpochs float64
}

type seedFloatMethod struct{ coretest.Base }

func (*seedFloatMethod) Seed() float64 { return 7 }

type accumFloat32 struct {
	coretest.Base
	Accum float32
}

type runDirIntMethod struct{ coretest.Base }

func (*runDirIntMethod) RunDir() int { return 65 }

// A float field or method result for an int knob is refused (it would be truncated), and a
// number for a string knob (Go would convert it to a rune).
func TestIntKnobRefusesAFloat(t *testing.T) {
	coretest.WantErr(t, newErr(t, &epochsFloat{MaxEpochs: 2.5}, coretest.Data(t, 0)),
		"field MaxEpochs has type float64", "the MaxEpochs knob needs int", "would be truncated", "declare it int")
	coretest.WantErr(t, newErr(t, &seedFloatMethod{}, coretest.Data(t, 0)),
		"accessor method Seed has signature func() float64: want func() int", "would be truncated")
	coretest.WantErr(t, newErr(t, &accumFloat32{Accum: 1}, coretest.Data(t, 0)), "field Accum has type float32", "needs int")
	coretest.WantErr(t, newErr(t, &runDirIntMethod{}, coretest.Data(t, 0)), "accessor method RunDir has signature func() int: want func() string")
}

// devInt reads an int32 Device field K and a float32 one S in Forward.
type devInt struct {
	K     markers.Device[int32]
	S     markers.Device[float32]
	sched map[string]any
}

func (*devInt) BuildModel(*context.Context) error { return nil }

func (e *devInt) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	p := layers.Dense(ctx.In("dense_0"), in.X, true, 1)
	scale := graph.Mul(graph.ConvertDType(e.K.Node(), dtypes.Float32), e.S.Node())
	return core.Outputs{"pred": graph.Mul(p, scale)}
}

func (*devInt) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["pred"], in.Y)
}

func (e *devInt) Schedules() map[string]any { return e.sched }

func newDevInt(sched map[string]any) *devInt {
	return &devInt{K: markers.NewDevice[int32](1), S: markers.NewDevice[float32](1), sched: sched}
}

// A schedule value a Device field's type cannot hold exactly is refused, naming the field, its
// type, the schedule, the step and the value: at New for step 1 (so the binding report never shows
// a value the field would not hold), at its step otherwise.
func TestDeviceScheduleRefusesAnInexactValue(t *testing.T) {
	err := newErr(t, newDevInt(map[string]any{"K": 0.6}), coretest.Data(t, 0))
	coretest.WantErr(t, err, "schedule K returned 0.6 at optimizer step 1 for Device field K (int32)", "whole numbers only", "truncated to 0")

	at := func(bad int, v float64) func(int) float64 {
		return func(step int) float64 {
			if step == bad {
				return v
			}
			return 1
		}
	}
	n := coretest.MustNew(t, newDevInt(map[string]any{"device.K": at(3, 3e9)}), coretest.Data(t, 0))
	coretest.WantErr(t, n.Train(), "schedule device.K returned 3e+09 at optimizer step 3 for Device field K (int32)",
		"outside int32's range [-2147483648, 2147483647]")
	if n.Step() != 2 {
		t.Errorf("stopped at step %d; want 2, before the out-of-range value", n.Step())
	}
	n = coretest.MustNew(t, newDevInt(map[string]any{"S": at(2, 1e40)}), coretest.Data(t, 0))
	coretest.WantErr(t, n.Train(), "schedule S returned 1e+40 at optimizer step 2 for Device field S (float32)",
		"outside float32's range", "would become +Inf", "markers.Device[float64]")
	coretest.WantErr(t, newErr(t, newDevInt(map[string]any{"S": -1e-50}), coretest.Data(t, 0)),
		"schedule S returned -1e-50 at optimizer step 1 for Device field S (float32)", "would become -0")

	// Whole numbers in range, and float32 rounding, train; the field holds the scheduled value.
	e := newDevInt(map[string]any{"K": func(step int) float64 { return float64(step) }, "S": 0.1})
	n = coretest.MustNew(t, e, coretest.Data(t, 0))
	if err := n.Train(); err != nil {
		t.Fatalf("whole-number schedule: %v", err)
	}
	if e.K.Value() != int32(n.Step()) || e.S.Value() != float32(0.1) {
		t.Errorf("after %d steps K = %d, S = %v; want %d and 0.1", n.Step(), e.K.Value(), e.S.Value(), n.Step())
	}
}

// TrainSteps and TrainEpochs take the run's step (epoch) to train up to: a negative one is
// refused naming the argument; one already reached trains nothing and warns, even when Quiet.
func TestTrainBoundArguments(t *testing.T) {
	var warns []string
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithMaxEpochs(2), core.WithWarn(func(m string) { warns = append(warns, m) }))
	coretest.WantErr(t, n.TrainSteps(-1), "TrainSteps(-1)", "must be >= 0", "n.TrainSteps(n.Step()+k)")
	coretest.WantErr(t, n.TrainEpochs(-1), "TrainEpochs(-1)", "must be >= 0", "n.TrainEpochs(n.Epoch()+1)")
	if n.Step() != 0 || len(warns) != 0 {
		t.Fatalf("refused calls trained %d steps, warned %q", n.Step(), warns)
	}
	if err := n.TrainSteps(3); err != nil {
		t.Fatal(err)
	}
	if err := n.TrainSteps(3); err != nil {
		t.Fatal(err)
	}
	if err := n.TrainSteps(2); err != nil {
		t.Fatal(err)
	}
	if n.Step() != 3 {
		t.Fatalf("step %d after TrainSteps(3), (3), (2); want 3", n.Step())
	}
	if len(warns) != 2 || !slices.ContainsFunc(warns, func(w string) bool {
		return strings.Contains(w, "TrainSteps(2): the run has taken 3 steps already: nothing to train") && strings.Contains(w, "not a count")
	}) {
		t.Errorf("warnings %q: want one per call with nothing to train, saying total is not a count", warns)
	}
}
