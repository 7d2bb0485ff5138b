package core_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/monitors"
	"go.uber.org/goleak"
)

// TestTrainContextStopsAsInterruptDoes: a context done while the first epoch steps ends the run as
// Interrupt does, at the next step boundary (validated, stop reason requested, nil error), and
// TrainContext leaves no goroutine and no pending interrupt behind: a later Evaluate runs whole.
func TestTrainContextStopsAsInterruptDoes(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n *core.Nitro
	// Cancelled on entering TrainStepping, then waiting until the watcher has interrupted, so the
	// epoch breaks after exactly its first step (the check follows each step).
	cancelOnce := monitors.MonitorFunc(func(p monitors.Phase, _ monitors.Progress, _ monitors.Info) error {
		if _, ok := p.(monitors.TrainStepping); ok && ctx.Err() == nil {
			cancel()
			// The minute stops a hang (no watcher), it times nothing.
			for deadline := time.Now().Add(time.Minute); !n.Run().(*monitors.Tracker).StopRequested(); runtime.Gosched() {
				if time.Now().After(deadline) {
					t.Error("the context was cancelled, but the run got no stop request within a minute")
					break
				}
			}
		}
		return nil
	})
	n = coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(3), core.WithMonitor(cancelOnce))
	if err := n.TrainContext(ctx); err != nil {
		t.Fatalf("TrainContext after its context was cancelled: %v, want nil (as after Interrupt)", err)
	}
	h := n.History()
	if n.StopReason() != core.StopRequested || len(h) != 1 || h[0].Steps != 1 || h[0].Val == nil {
		t.Fatalf("stop %q after %d epochs (steps %v), want %q after one validated epoch of 1 step", n.StopReason(), len(h), stepsOf(h), core.StopRequested)
	}
	if _, err := n.Validate(); err != nil {
		t.Fatalf("Validate after TrainContext: %v, want the whole split (the stop is consumed)", err)
	}
}

// TestTrainContextDoneBeforeTheCall: a context already done stops the run after its first step,
// whatever the scheduler does; a nil one is refused, naming the fix.
func TestTrainContextDoneBeforeTheCall(t *testing.T) {
	defer goleak.VerifyNone(t)
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(3))
	var nilCtx context.Context
	coretest.WantErr(t, n.TrainContext(nilCtx), "TrainContext", "nil", "context.Background()")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := n.TrainContext(ctx); err != nil {
		t.Fatal(err)
	}
	if n.StopReason() != core.StopRequested || n.Step() != 1 {
		t.Fatalf("stop %q at step %d, want %q at step 1", n.StopReason(), n.Step(), core.StopRequested)
	}
}

// TestTrainContextBackgroundRunsWhole: a context never done changes nothing.
func TestTrainContextBackgroundRunsWhole(t *testing.T) {
	defer goleak.VerifyNone(t)
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(2))
	if err := n.TrainContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n.StopReason() != core.StopCompleted || n.Epoch() != 2 {
		t.Fatalf("stop %q at epoch %d, want %q at 2", n.StopReason(), n.Epoch(), core.StopCompleted)
	}
}

func stepsOf(h []core.EpochResult) []int {
	var s []int
	for _, e := range h {
		s = append(s, e.Steps)
	}
	return s
}
