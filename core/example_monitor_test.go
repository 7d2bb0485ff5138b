package core_test

import (
	"fmt"

	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
)

// A monitor watches the run's phases: here it prints each transition and the validation loss
// that the transitions out of EvalStepping carry. Compiles show up as Compiling leaves inside the
// phase they interrupt; Repl is published when an outermost call (New, Train) returns.
func ExampleWithMonitor() {
	print := monitors.MonitorFunc(func(p monitors.Phase, at monitors.Progress, info monitors.Info) error {
		line := fmt.Sprintf("%-18s %s", p, at)
		if v, ok := info.Metrics["val_loss"]; ok {
			line += fmt.Sprintf(" (val_loss %.1f)", v)
		}
		fmt.Println(line)
		return nil
	})
	e := newLine()
	e.MaxEpochs = 1
	n, err := core.New(e, core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()), core.WithMonitor(print))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := n.Train(); err != nil {
		fmt.Println(err)
	}
	fmt.Println("phase after Train:", n.Phase())
	// Output:
	// Starting           before first epoch
	// Repl               before first epoch
	// TrainStepping      epoch 1 step 0
	// GradientCompiling  epoch 1 step 0
	// TrainStepping      epoch 1 step 0
	// OptimizerCompiling epoch 1 step 0
	// TrainStepping      epoch 1 step 0
	// EvalStepping       epoch 1 step 4
	// EvalCompiling      epoch 1 step 4
	// EvalStepping       epoch 1 step 4
	// EvalCompiling      epoch 1 step 4
	// EvalStepping       epoch 1 step 4
	// Done               epoch 1 step 4 (val_loss 8.7)
	// Repl               epoch 1 step 4
	// phase after Train: Done
}

// Interrupt is what Ctrl+C does in the CLI: the epoch stops at the next step boundary, validates,
// and Train returns normally with the stop reason "requested".
func ExampleNitro_Interrupt() {
	e := newLine()
	e.MaxEpochs = 5
	d, err := e.BuildData()
	if err != nil {
		fmt.Println(err)
		return
	}
	b := &budget{ArrayBatches: d["train"].(*prefetch.ArrayBatches)}
	d["train"] = prefetch.NoPrefetch(b) // read in step with the loop, so "Ctrl+C" lands at batch 2
	n, err := core.New(e, core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()), core.WithData(d))
	if err != nil {
		fmt.Println(err)
		return
	}
	b.stop, b.left = n.Interrupt, 2 // "Ctrl+C" while the loop reads the second batch
	err = n.Train()
	fmt.Println("err:", err, "stop:", n.StopReason(), "epochs:", n.Epoch(), "steps:", n.Step())
	fmt.Println("validated:", n.History()[0].Val != nil)
	// Output:
	// err: <nil> stop: requested epochs: 1 steps: 2
	// validated: true
}
