package core_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/prefetch"
	"go.uber.org/goleak"
)

// event is one monitor callback as a test sees it.
type event struct {
	phase   string
	at      monitors.Progress
	metrics map[string]float64
}

// recorder is a Monitor that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Observe(p monitors.Phase, at monitors.Progress, info monitors.Info) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := p.String()
	if f, ok := p.(monitors.Failed); ok && f.Err != nil {
		name = "Failed"
	}
	r.events = append(r.events, event{phase: name, at: at, metrics: info.Metrics})
	return nil
}

func (r *recorder) phases() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, len(r.events))
	for i, e := range r.events {
		names[i] = e.phase
	}
	return strings.Join(names, " ")
}

func TestMonitorSeesTheRunsExactPhaseSequence(t *testing.T) {
	defer goleak.VerifyNone(t)
	rec := &recorder{}
	before := monitors.ProgressCounter()
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithMonitor(rec))
	if _, ok := n.Phase().(monitors.Starting); !ok {
		t.Fatalf("a fresh handle's phase is %v, want Starting", n.Phase())
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	// New is an entry point (Starting, then Repl when it returns); the first step's two programs
	// compile inside TrainStepping; validation compiles its program once; Repl is published
	// after Train returns, never recorded.
	want := "Starting Repl " +
		"TrainStepping GradientCompiling TrainStepping OptimizerCompiling TrainStepping " +
		"EvalStepping EvalCompiling EvalStepping " +
		"TrainStepping EvalStepping " +
		"Done Repl"
	if got := rec.phases(); got != want {
		t.Fatalf("phases:\n got %s\nwant %s", got, want)
	}
	if _, ok := n.Phase().(monitors.Done); !ok {
		t.Errorf("phase after Train = %v, want Done", n.Phase())
	}
	ev := rec.events
	if ev[0].at.Started || ev[1].at.Started {
		t.Errorf("step and epoch must be absent before the first epoch: %+v %+v", ev[0].at, ev[1].at)
	}
	// The transitions out of EvalStepping carry the finalized metrics: epoch 2's TrainStepping and Done.
	for _, i := range []int{10, 12} {
		if ev[i].metrics["val_loss"] <= 0 {
			t.Errorf("event %d (%s) carries metrics %v, want val_loss", i, ev[i].phase, ev[i].metrics)
		}
	}
	if ev[12].at != (monitors.Progress{Epoch: 2, Step: 8, Started: true}) {
		t.Errorf("Done at %+v, want epoch 2 step 8", ev[12].at)
	}
	// One tick per optimizer step (2 epochs x 4) and per eval batch (2 epochs x 2).
	if d := monitors.ProgressCounter() - before; d != 12 {
		t.Errorf("progress counter advanced %d, want 12", d)
	}
	if monitors.WorkInFlight() {
		t.Error("work in flight after Train returned")
	}
}

func TestPanickingMonitorIsWarnedOnceAndTheRunFinishes(t *testing.T) {
	defer goleak.VerifyNone(t)
	var warnings []string
	calls := 0
	bad := monitors.MonitorFunc(func(monitors.Phase, monitors.Progress, monitors.Info) error {
		calls++
		panic("monitor bug")
	})
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithMonitor(bad),
		core.WithWarn(func(msg string) { warnings = append(warnings, msg) }))
	if err := n.Train(); err != nil {
		t.Fatalf("a panicking monitor stopped the run: %v", err)
	}
	if n.StopReason() != core.StopCompleted || n.Epoch() != 2 {
		t.Errorf("stop reason %q after %d epochs, want completed after 2", n.StopReason(), n.Epoch())
	}
	if calls < 10 {
		t.Errorf("the monitor was called %d times; it must keep being called", calls)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "monitor bug") {
		t.Errorf("warnings %q, want exactly one naming the panic", warnings)
	}
}

func TestMonitorRegisteredOnALiveRunFiresInThatRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	late := &recorder{}
	var n *core.Nitro
	registered := make(chan struct{})
	once := sync.Once{}
	first := monitors.MonitorFunc(func(p monitors.Phase, _ monitors.Progress, _ monitors.Info) error {
		if _, ok := p.(monitors.TrainStepping); ok {
			once.Do(func() {
				// Another goroutine registers while the run is live; the run waits here until it has.
				go func() { n.RegisterMonitor(late); close(registered) }()
				<-registered
			})
		}
		return nil
	})
	n = coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithMonitor(first))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	got := late.phases()
	if !strings.HasPrefix(got, "GradientCompiling") || !strings.HasSuffix(got, "Done Repl") {
		t.Errorf("late monitor saw %q; want everything from the first compile to Done and Repl", got)
	}
	h := n.RegisterMonitor(late)
	h.Unregister()
	h.Unregister() // idempotent
}

// failingSource fails at one batch index, as a broken file would mid-epoch.
type failingSource struct {
	prefetch.Source
	at int
}

func (f failingSource) DropsPartial() bool { return true }
func (f failingSource) BatchAt(i int) (prefetch.Batch, error) {
	if i == f.at {
		return nil, errors.New("disk read failed")
	}
	return f.Source.BatchAt(i)
}

func TestErrorMidEpochEndsInFailedWithoutLeaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	rec := &recorder{}
	d := coretest.Data(t, 32)
	d["train"] = failingSource{Source: d["train"], at: 2}
	n := coretest.MustNew(t, &coretest.Reg{}, d, core.WithMaxEpochs(2), core.WithMonitor(rec))
	err := n.Train()
	coretest.WantErr(t, err, "epoch 1, step 3", "train batch 2", "disk read failed")
	f, ok := n.Phase().(monitors.Failed)
	if !ok || !errors.Is(f.Err, err) && f.Err.Error() != err.Error() {
		t.Fatalf("phase after a failed Train = %v, want Failed carrying the error", n.Phase())
	}
	if got := rec.phases(); !strings.HasSuffix(got, "TrainStepping Failed Repl") {
		t.Errorf("phases %q, want the run to end in Failed, then Repl", got)
	}
	if n.Step() != 2 {
		t.Errorf("steps taken %d, want 2 before the failing batch", n.Step())
	}
}

// interruptingSource calls Interrupt when the loop reads batch at, as Ctrl+C would.
type interruptingSource struct {
	prefetch.Source
	at int
	n  **core.Nitro
}

func (s interruptingSource) DropsPartial() bool { return true }
func (s interruptingSource) BatchAt(i int) (prefetch.Batch, error) {
	if i == s.at {
		(*s.n).Interrupt()
	}
	return s.Source.BatchAt(i)
}

func TestRequestStopAndInterruptAreGracefulWithoutLeaks(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct {
		name      string
		interrupt bool
		steps     int
	}{
		{"RequestStop from a monitor: the epoch finishes", false, 4},
		{"Interrupt: the epoch breaks at the next step boundary", true, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n *core.Nitro
			d := coretest.Data(t, 32)
			var opts []core.Option
			if tc.interrupt {
				// Inline (no read-ahead), so the interrupt lands while the loop is at batch 1.
				d["train"] = prefetch.NoPrefetch(interruptingSource{Source: d["train"], at: 1, n: &n})
			} else {
				stopper := monitors.MonitorFunc(func(p monitors.Phase, _ monitors.Progress, info monitors.Info) error {
					if _, ok := p.(monitors.TrainStepping); ok {
						info.Run.RequestStop()
					}
					return nil
				})
				opts = append(opts, core.WithMonitor(stopper))
			}
			n = coretest.MustNew(t, &coretest.Reg{}, d, append(opts, core.WithMaxEpochs(3))...)
			if err := n.Train(); err != nil {
				t.Fatal(err)
			}
			h := n.History()
			if n.StopReason() != core.StopRequested || len(h) != 1 || h[0].Steps != tc.steps || h[0].Val == nil {
				t.Fatalf("stop %q, history %+v: want requested after one validated epoch of %d steps", n.StopReason(), h, tc.steps)
			}
			if _, ok := n.Phase().(monitors.Done); !ok {
				t.Errorf("phase %v, want Done (a requested stop is a normal end)", n.Phase())
			}
		})
	}
}

func TestEvaluateRestoresThePhaseAndCarriesMetrics(t *testing.T) {
	rec := &recorder{}
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMonitor(rec))
	m, err := n.Evaluate("val")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rec.phases(), "Starting Repl EvalStepping EvalCompiling EvalStepping Starting Repl"; got != want {
		t.Fatalf("phases %q, want %q", got, want)
	}
	if last := rec.events[len(rec.events)-2]; fmt.Sprint(last.metrics) != fmt.Sprint(m) {
		t.Errorf("the transition out of EvalStepping carries %v, want %v", last.metrics, m)
	}
	if _, err := n.Evaluate("holdout"); !errors.Is(err, core.ErrNoSplit) {
		t.Errorf("missing split: %v, want errors.Is ErrNoSplit", err)
	}
}
