package schedules_test

import (
	"fmt"

	"github.com/nitro-go/nitro/schedules"
)

// printSteps prints a factory's values over a horizon of total steps.
func printSteps(f schedules.Factory, total int) {
	s := f(total)
	for step := 1; step <= total; step++ {
		fmt.Printf("%.3g ", s(step))
	}
	fmt.Println()
}

func ExampleConstant() {
	printSteps(schedules.Constant(0.1), 3)
	// Output: 0.1 0.1 0.1
}

func ExampleLinear() {
	printSteps(schedules.Linear(1, 0), 5)
	// Output: 1 0.75 0.5 0.25 0
}

func ExampleCosine() {
	printSteps(schedules.Cosine(1, 0), 5)
	// Output: 1 0.854 0.5 0.146 0
}

func ExampleWarmupCosine() {
	printSteps(schedules.WarmupCosine(0.25, 1, 0), 8) // 2 warmup steps of 8
	// Output: 0.5 1 0.933 0.75 0.5 0.25 0.067 0
}

func ExampleWarmupCosineSteps() {
	printSteps(schedules.WarmupCosineSteps(3, 1, 0.1), 7)
	// Output: 0.333 0.667 1 0.868 0.55 0.232 0.1
}

func ExamplePiecewise() {
	printSteps(schedules.Piecewise([]int{3, 5}, []float64{1, 0.1, 0.01}), 6)
	// Output: 1 1 0.1 0.1 0.01 0.01
}

func ExampleStepDecay() {
	printSteps(schedules.StepDecay(1, 0.5, 2), 6)
	// Output: 1 1 0.5 0.5 0.25 0.25
}

func ExampleTotalSteps() {
	total, err := schedules.TotalSteps(10, 100, 4)
	fmt.Println(total, err)
	_, err = schedules.TotalSteps(10, 100, 3)
	fmt.Println(err)
	// Output:
	// 250 <nil>
	// batches per epoch 100 is not divisible by accum 3: choose an accum that divides it (1, 2, 4, 5, 10, 20, ..., 100), or make the training split a multiple of 3 batches
}

func exampleSpace() schedules.Space {
	return schedules.Space{
		DeviceFields:   []string{"threshold", "lambda"},
		RuleFields:     []string{"eta", "lambda", "beta"},
		Groups:         []string{"backbone", "head"},
		Nonschedulable: map[string]string{"beta": "RAdam: baked into the optimizer program"},
	}
}

func ExampleResolve() {
	bound, err := schedules.Resolve(map[string]any{
		"eta":              schedules.Cosine(1e-3, 0), // a factory of the horizon
		"opt.backbone.eta": schedules.Linear(0, 1e-3), // that group's base curve
		"device.lambda":    0.5,                       // a bare number is a constant
	}, exampleSpace(), 100)
	fmt.Println(err)
	for _, t := range bound.Targets() {
		fmt.Println(t)
	}
	// Output:
	// <nil>
	// device.lambda
	// opt.eta
	// opt.backbone.eta
}

func ExampleResolve_ambiguous() {
	_, err := schedules.Resolve(map[string]any{"lambda": 0.1}, exampleSpace(), 100)
	fmt.Println(err)
	// Output: schedule key lambda is both a Device field and an optimizer rule field: qualify it as device.lambda or opt.lambda
}

func ExampleResolve_nonschedulable() {
	_, err := schedules.Resolve(map[string]any{"opt.beta": 0.9}, exampleSpace(), 100)
	fmt.Println(err)
	// Output: schedule key opt.beta targets nonschedulable rule field beta (RAdam: baked into the optimizer program): remove it from the schedules and set it on the rule, where it is baked into the optimizer program
}

func ExampleBound_At() {
	bound, _ := schedules.Resolve(map[string]any{"eta": schedules.Linear(1, 0), "threshold": 0.5}, exampleSpace(), 3)
	for step := 1; step <= 3; step++ { // once per optimizer step
		values, _ := bound.At(step)
		eta, _, _ := values.Opt("head", "eta")
		thr, _ := values.Device("threshold")
		fmt.Println(step, eta, thr)
	}
	// Output:
	// 1 1 0.5
	// 2 0.5 0.5
	// 3 0 0.5
}

func ExampleBound_Targets() {
	bound, _ := schedules.Resolve(map[string]any{"opt": map[string]any{"head": map[string]any{"eta": 1e-3}}}, exampleSpace(), 10)
	fmt.Println(bound.Targets())
	// Output: [opt.head.eta]
}

func ExampleBound_Has() {
	bound, _ := schedules.Resolve(map[string]any{"threshold": schedules.Linear(0.3, 0.7)}, exampleSpace(), 10)
	// A scheduled Device field is rewritten every step, so a manual write to it would be lost.
	fmt.Println(bound.Has(schedules.Target{Scope: schedules.ScopeDevice, Name: "threshold"}))
	// Output: true
}

func ExampleBound_Key() {
	bound, _ := schedules.Resolve(map[string]any{"eta": 1e-3}, exampleSpace(), 10)
	key, _ := bound.Key(schedules.Target{Scope: schedules.ScopeOpt, Name: "eta"})
	fmt.Println(key, bound.IsConstant(schedules.Target{Scope: schedules.ScopeOpt, Name: "eta"}), bound.Total())
	// Output: eta true 10
}

func ExampleValues_Opt() {
	bound, _ := schedules.Resolve(map[string]any{"eta": 1e-3, "opt.backbone.eta": 1e-4}, exampleSpace(), 10)
	values, _ := bound.At(1)
	for _, g := range []string{"backbone", "head"} {
		v, from, _ := values.Opt(g, "eta") // the base value; the caller applies the group's ratio
		fmt.Println(g, v, from)
	}
	// Output:
	// backbone 0.0001 opt.backbone.eta
	// head 0.001 opt.eta
}

func ExampleTarget_String() {
	fmt.Println(schedules.Target{Scope: schedules.ScopeOpt, Group: "backbone", Name: "eta"})
	// Output: opt.backbone.eta
}

func ExampleReport() {
	fmt.Print(schedules.Report([]schedules.Binding{
		{Name: "threshold", Value: "0.5", Source: "schedule device.threshold", Scheduled: true},
		{Group: "head", Name: "eta", Value: "1e-3", Source: "accessor LearningRate"},
		{Group: "head", Name: "momentum", Value: "0.9", Source: "schedule momentum", Scheduled: true, Unread: true},
	}))
	// Output:
	// binding report: 3 values, 2 scheduled, 1 scheduled but not read by their group's chain
	// run-wide
	//   threshold  0.5  schedule device.threshold  scheduled
	// group head
	//   eta       1e-3  accessor LearningRate
	//   momentum  0.9   schedule momentum      scheduled; NOT READ by this group's chain: the schedule does nothing here
}

func ExampleParse() {
	_, err := schedules.Parse("cosine:1")
	fmt.Println(err)
	p, err := schedules.Parse("warmup_cosine:0.25,1,0")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p)
	printSteps(p.Factory, 8)
	// Output:
	// schedule "cosine:1": cosine takes 2 arguments (peak,floor), got 1
	// warmup_cosine:0.25,1,0
	// 0.5 1 0.933 0.75 0.5 0.25 0.067 0
}

func ExampleOverride() {
	space := schedules.Space{DeviceFields: []string{"Temperature"}, RuleFields: []string{"eta"}}
	experiment := map[string]any{"opt.eta": schedules.Cosine(0.1, 0), "Temperature": 2.0}
	run := map[string]any{"eta": 0.01}
	merged, replaced, err := schedules.Override(experiment, run, space)
	fmt.Println(len(merged), merged["eta"], merged["Temperature"], replaced, err)
	_, _, err = schedules.Override(experiment, map[string]any{"lr": 0.01}, space)
	fmt.Println(err)
	// Output:
	// 2 0.01 2 map[opt.eta:eta] <nil>
	// unknown schedule key lr: valid keys are the Device fields [Temperature] and the optimizer rule fields [eta] (qualify one that is both as device.<field> or opt.<field>); the learning-rate key is eta
}
