package monitors

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

type event struct {
	who   string
	phase string
	at    Progress
	info  Info
}

type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) mon(who string) MonitorFunc {
	return func(p Phase, at Progress, info Info) error {
		r.mu.Lock()
		r.events = append(r.events, event{who, p.String(), at, info})
		r.mu.Unlock()
		return nil
	}
}

func (r *recorder) seq() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, e := range r.events {
		s = append(s, e.who+":"+e.phase)
	}
	return s
}

func eq(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestPhaseCategories(t *testing.T) {
	for _, p := range []Phase{GradientCompiling{}, OptimizerCompiling{}, EvalCompiling{}, ExportCompiling{}} {
		if !IsCompiling(p) || IsStepping(p) || IsTerminal(p) {
			t.Errorf("%v: wrong category", p)
		}
	}
	for _, p := range []Phase{TrainStepping{}, EvalStepping{}} {
		if !IsStepping(p) || IsCompiling(p) || IsTerminal(p) {
			t.Errorf("%v: wrong category", p)
		}
	}
	err := errors.New("boom")
	for _, p := range []Phase{Done{}, Failed{Err: err}} {
		if !IsTerminal(p) || IsStepping(p) || IsCompiling(p) {
			t.Errorf("%v: wrong category", p)
		}
	}
	for _, p := range []Phase{Starting{}, Repl{}} {
		if IsTerminal(p) || IsStepping(p) || IsCompiling(p) {
			t.Errorf("%v: wrong category", p)
		}
	}
	if f := (Failed{Err: err}); !errors.Is(f.Unwrap(), err) || f.String() != "Failed: boom" {
		t.Error("Failed does not carry its error")
	}
	if !SamePhase(Failed{Err: err}, Failed{}) || SamePhase(Done{}, Failed{}) {
		t.Error("SamePhase")
	}
}

func TestFreshTrackerReportsStarting(t *testing.T) {
	tr := NewTracker(TrackerOptions{})
	if _, ok := tr.Phase().(Starting); !ok {
		t.Fatalf("fresh tracker phase %v", tr.Phase())
	}
	if tr.Progress().Started {
		t.Fatal("progress started before first epoch")
	}
}

func TestOrderProcessThenRun(t *testing.T) {
	var r recorder
	h1 := RegisterFunc(r.mon("p1"))
	h2 := RegisterFunc(r.mon("p2"))
	defer h1.Unregister()
	defer h2.Unregister()
	tr := NewTracker(TrackerOptions{})
	tr.RegisterFunc(r.mon("r1"))
	tr.RegisterFunc(r.mon("r2"))
	tr.SetPhase(TrainStepping{}, Info{})
	eq(t, r.seq(), []string{"p1:TrainStepping", "p2:TrainStepping", "r1:TrainStepping", "r2:TrainStepping"})
}

func TestSnapshotSemantics(t *testing.T) {
	var r recorder
	h := RegisterFunc(r.mon("p"))
	tr := NewTracker(TrackerOptions{})
	late := RegisterFunc(r.mon("late"))
	defer late.Unregister()
	h.Unregister() // mid-run: the run's copy keeps firing
	tr.SetPhase(GradientCompiling{}, Info{})
	eq(t, r.seq(), []string{"p:GradientCompiling"})
	tr.Snapshot() // next train: takes effect
	tr.SetPhase(TrainStepping{}, Info{})
	eq(t, r.seq(), []string{"p:GradientCompiling", "late:TrainStepping"})
}

func TestLiveRegistrationReachesLiveRun(t *testing.T) {
	var r recorder
	tr := NewTracker(TrackerOptions{})
	tr.SetPhase(TrainStepping{}, Info{})
	h := tr.RegisterFunc(r.mon("live"))
	tr.SetPhase(EvalStepping{}, Info{})
	h.Unregister()
	h.Unregister() // idempotent
	Unregister(h)
	tr.SetPhase(Done{}, Info{})
	eq(t, r.seq(), []string{"live:EvalStepping"})
}

func TestUnregisterIdempotentProcess(t *testing.T) {
	var r recorder
	h := RegisterFunc(r.mon("p"))
	h.Unregister()
	h.Unregister()
	Unregister(Handle{})
	tr := NewTracker(TrackerOptions{})
	tr.SetPhase(Done{}, Info{})
	eq(t, r.seq(), nil)
}

func TestFailingMonitorWarnedOnceRunContinues(t *testing.T) {
	var r recorder
	var warns []string
	tr := NewTracker(TrackerOptions{Warn: func(m string) { warns = append(warns, m) }})
	tr.RegisterFunc(func(Phase, Progress, Info) error { panic("kaboom") })
	tr.RegisterFunc(func(Phase, Progress, Info) error { return errors.New("nope") })
	tr.RegisterFunc(r.mon("ok"))
	for _, p := range []Phase{GradientCompiling{}, TrainStepping{}, EvalStepping{}, Done{}} {
		tr.SetPhase(p, Info{})
	}
	eq(t, r.seq(), []string{"ok:GradientCompiling", "ok:TrainStepping", "ok:EvalStepping", "ok:Done"})
	if len(warns) != 2 || !strings.Contains(warns[0], "kaboom") || !strings.Contains(warns[1], "nope") {
		t.Fatalf("warns = %q", warns)
	}
}

func TestTransitionOnlyAndInfo(t *testing.T) {
	var r recorder
	tr := NewTracker(TrackerOptions{Logger: "lg", Rank: 0})
	tr.RegisterFunc(r.mon("m"))
	if !tr.SetPhase(TrainStepping{}, Info{}) {
		t.Fatal("first SetPhase not a transition")
	}
	tr.SetProgress(1, 1)
	if tr.SetPhase(TrainStepping{}, Info{}) {
		t.Fatal("re-entering the phase fired")
	}
	tr.SetPhase(EvalStepping{}, Info{})
	tr.SetPhase(TrainStepping{}, Info{Metrics: map[string]float64{"val_loss": 0.5}})
	eq(t, r.seq(), []string{"m:TrainStepping", "m:EvalStepping", "m:TrainStepping"})
	e0, e2 := r.events[0], r.events[2]
	if e0.at.Started {
		t.Error("step/epoch present before first epoch")
	}
	if !e2.at.Started || e2.at.Epoch != 1 || e2.at.Step != 1 {
		t.Errorf("progress = %+v", e2.at)
	}
	if e2.info.Run != Run(tr) || e2.info.Logger != "lg" || !e2.info.IsRank0 || e2.info.Metrics["val_loss"] != 0.5 {
		t.Errorf("info = %+v", e2.info)
	}
	if NewTracker(TrackerOptions{Rank: 1}).opts.Rank == 0 {
		t.Error("rank")
	}
}

func TestReplPublishedNotRecorded(t *testing.T) {
	var r recorder
	tr := NewTracker(TrackerOptions{})
	tr.RegisterFunc(r.mon("m"))
	tr.SetPhase(Done{}, Info{})
	tr.Publish(Repl{}, Info{})
	tr.Publish(Repl{}, Info{}) // no transition guard
	if _, ok := tr.Phase().(Done); !ok {
		t.Fatalf("phase = %v, want Done", tr.Phase())
	}
	eq(t, r.seq(), []string{"m:Done", "m:Repl", "m:Repl"})
	defer func() {
		if recover() == nil {
			t.Error("SetPhase(Repl) did not panic")
		}
	}()
	tr.SetPhase(Repl{}, Info{})
}

func TestDepthCounterOutermostPublishesRepl(t *testing.T) {
	var r recorder
	tr := NewTracker(TrackerOptions{})
	tr.RegisterFunc(r.mon("m"))
	if WorkInFlight() {
		t.Fatal("work in flight at rest")
	}
	tr.Enter() // train
	tr.Enter() // validate inside train
	if !WorkInFlight() {
		t.Fatal("no work in flight")
	}
	tr.Exit()
	eq(t, r.seq(), nil)
	tr.Exit()
	eq(t, r.seq(), []string{"m:Repl"})
	if WorkInFlight() {
		t.Fatal("work in flight after outermost exit")
	}
}

func TestWithCompilingRestores(t *testing.T) {
	var r recorder
	tr := NewTracker(TrackerOptions{})
	tr.RegisterFunc(r.mon("m"))
	tr.SetPhase(TrainStepping{}, Info{})
	if err := tr.WithCompiling(EvalCompiling{}, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := tr.WithCompiling(ExportCompiling{}, func() error { return boom }); err != boom {
		t.Fatalf("err = %v", err)
	}
	if _, ok := tr.Phase().(TrainStepping); !ok {
		t.Fatalf("phase = %v", tr.Phase())
	}
	eq(t, r.seq(), []string{"m:TrainStepping", "m:EvalCompiling", "m:TrainStepping", "m:ExportCompiling", "m:TrainStepping"})
}

func TestProgressCounterAndStop(t *testing.T) {
	tr := NewTracker(TrackerOptions{})
	c0 := tr.ProgressCounter()
	tr.Tick()
	Tick()
	if tr.ProgressCounter()-c0 != 2 {
		t.Fatal("counter")
	}
	tr.RegisterFunc(func(_ Phase, _ Progress, info Info) error { info.Run.RequestStop(); return nil })
	tr.SetPhase(EvalStepping{}, Info{})
	if !tr.StopRequested() {
		t.Fatal("stop not requested")
	}
	tr.ClearStop()
	if tr.StopRequested() {
		t.Fatal("stop not cleared")
	}
}

func TestPublishProcess(t *testing.T) {
	var r recorder
	var warned []string
	SetProcessWarn(func(m string) { warned = append(warned, m) })
	defer SetProcessWarn(nil)
	h := RegisterFunc(r.mon("p"))
	defer h.Unregister()
	h2 := RegisterFunc(func(Phase, Progress, Info) error { return fmt.Errorf("x") })
	defer h2.Unregister()
	PublishProcess(Starting{}, Progress{}, Info{})
	PublishProcess(Repl{}, Progress{}, Info{})
	eq(t, r.seq(), []string{"p:Starting", "p:Repl"})
	if len(warned) != 1 {
		t.Fatalf("warned %q", warned)
	}
}

// TestConcurrentUse: goroutines register, publish, tick and unregister at once. Every
// transition reaches a monitor registered for the whole run exactly once, a run monitor
// registered before a transition sees it, every tick counts, the last progress written is one
// a goroutine ended on, and once the goroutines are gone none of their monitors fires again.
func TestConcurrentUse(t *testing.T) {
	tr := NewTracker(TrackerOptions{})
	var steady, loopCalls atomic.Int64
	tr.RegisterFunc(func(Phase, Progress, Info) error { steady.Add(1); return nil })
	c0 := tr.ProgressCounter()
	var wg sync.WaitGroup
	var fired atomic.Int64
	const workers, rounds = 4, 50
	phases := []Phase{TrainStepping{}, EvalStepping{}, GradientCompiling{}}
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < rounds; j++ {
				var mine atomic.Int64
				h := tr.RegisterFunc(func(Phase, Progress, Info) error { mine.Add(1); loopCalls.Add(1); return nil })
				hp := RegisterFunc(func(Phase, Progress, Info) error { loopCalls.Add(1); return nil })
				if tr.SetPhase(phases[(i+j)%3], Info{}) {
					fired.Add(1)
					if mine.Load() == 0 {
						t.Errorf("goroutine %d round %d: a transition did not reach the run monitor registered before it", i, j)
					}
				}
				tr.SetProgress(i, j)
				tr.Tick()
				_ = tr.Phase()
				tr.Snapshot()
				h.Unregister()
				hp.Unregister()
			}
		}(i)
	}
	wg.Wait()
	if got, want := steady.Load(), fired.Load(); got != want || want == 0 {
		t.Errorf("the steady monitor saw %d events, SetPhase reported %d transitions (want equal and > 0)", got, want)
	}
	if d := tr.ProgressCounter() - c0; d != workers*rounds {
		t.Errorf("progress counter moved by %d, want %d ticks", d, workers*rounds)
	}
	if p := tr.Progress(); !p.Started || p.Step != rounds-1 || p.Epoch < 0 || p.Epoch >= workers {
		t.Errorf("progress %+v: the last SetProgress of any goroutine has step %d and epoch in [0, %d)", p, rounds-1, workers)
	}
	tr.Snapshot() // drops the process monitors the goroutines' snapshots still held
	before := loopCalls.Load()
	if !tr.SetPhase(Done{}, Info{}) {
		t.Fatal("SetPhase(Done) after the goroutines fired no event")
	}
	if n := loopCalls.Load() - before; n != 0 {
		t.Errorf("%d unregistered monitors fired after the goroutines ended", n)
	}
	if got := steady.Load(); got != fired.Load()+1 {
		t.Errorf("the steady monitor saw %d events, want %d", got, fired.Load()+1)
	}
}
