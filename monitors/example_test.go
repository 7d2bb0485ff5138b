package monitors_test

import (
	"fmt"

	"github.com/nitro-go/nitro/monitors"
)

// A process-level monitor applies to runs started after it is registered; a run's own
// monitors fire after it. Unregister by the handle, from either registry, any number of times.
func ExampleRegister() {
	h := monitors.RegisterFunc(func(p monitors.Phase, at monitors.Progress, info monitors.Info) error {
		fmt.Println("process:", p, at)
		return nil
	})
	defer h.Unregister()

	run := monitors.NewTracker(monitors.TrackerOptions{})
	own := run.RegisterFunc(func(p monitors.Phase, _ monitors.Progress, _ monitors.Info) error {
		fmt.Println("run:", p)
		return nil
	})
	run.SetPhase(monitors.GradientCompiling{}, monitors.Info{})
	own.Unregister()
	own.Unregister() // no-op
	run.SetProgress(1, 1)
	run.SetPhase(monitors.TrainStepping{}, monitors.Info{})
	run.SetPhase(monitors.TrainStepping{}, monitors.Info{}) // not a transition: no event
	// Output:
	// process: GradientCompiling before first epoch
	// run: GradientCompiling
	// process: TrainStepping epoch 1 step 1
}

// A monitor tests phase categories, not leaves, so new leaves do not break it.
func ExampleMonitorFunc() {
	run := monitors.NewTracker(monitors.TrackerOptions{})
	run.RegisterFunc(func(p monitors.Phase, _ monitors.Progress, info monitors.Info) error {
		switch {
		case monitors.IsCompiling(p):
			fmt.Println("slow phase, do not kill me:", p)
		case monitors.IsTerminal(p):
			fmt.Println("closing heartbeat:", p)
		case p == monitors.Phase(monitors.EvalStepping{}):
		default:
			if info.Metrics != nil {
				fmt.Println("val_loss", info.Metrics["val_loss"])
			}
		}
		return nil
	})
	_ = run.WithCompiling(monitors.EvalCompiling{}, func() error { return nil })
	run.SetPhase(monitors.EvalStepping{}, monitors.Info{})
	run.SetPhase(monitors.TrainStepping{}, monitors.Info{Metrics: map[string]float64{"val_loss": 0.25}})
	run.SetPhase(monitors.Done{}, monitors.Info{})
	// Output:
	// slow phase, do not kill me: EvalCompiling
	// val_loss 0.25
	// closing heartbeat: Done
}
