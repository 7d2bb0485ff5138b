package monitors

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckpointingIsItsOwnCategory(t *testing.T) {
	p := Checkpointing{}
	if !IsCheckpointing(p) || IsCompiling(p) || IsStepping(p) || IsTerminal(p) || IsRepl(p) {
		t.Errorf("%v: wrong category", p)
	}
	if p.String() != "Checkpointing" || SamePhase(p, EvalStepping{}) || !SamePhase(p, Checkpointing{}) {
		t.Errorf("%q: wrong leaf", p.String())
	}
	for _, q := range []Phase{TrainStepping{}, EvalStepping{}, GradientCompiling{}, Done{}, Repl{}} {
		if IsCheckpointing(q) {
			t.Errorf("IsCheckpointing(%v)", q)
		}
	}
}

// WithCheckpointing interrupts the phase it is entered from and restores it, after a write that
// succeeded, failed or panicked; the transitions carry no metrics.
func TestWithCheckpointingRestoresThePhase(t *testing.T) {
	tr := NewTracker(TrackerOptions{})
	r := &recorder{}
	tr.Register(r.mon("m"))
	var metrics []map[string]float64
	tr.RegisterFunc(func(_ Phase, _ Progress, info Info) error { metrics = append(metrics, info.Metrics); return nil })
	tr.SetPhase(EvalStepping{}, Info{})
	var during Phase
	if err := tr.WithCheckpointing(func() error { during = tr.Phase(); return nil }); err != nil {
		t.Fatal(err)
	}
	if !IsCheckpointing(during) {
		t.Errorf("phase during the write = %v, want Checkpointing", during)
	}
	boom := errors.New("disk full")
	if err := tr.WithCheckpointing(func() error { return boom }); err != boom {
		t.Fatalf("err = %v, want the write's", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = tr.WithCheckpointing(func() error { panic("write bug") })
	}()
	if _, ok := tr.Phase().(EvalStepping); !ok {
		t.Fatalf("phase after the writes = %v, want EvalStepping restored", tr.Phase())
	}
	eq(t, r.seq(), []string{"m:EvalStepping",
		"m:Checkpointing", "m:EvalStepping", "m:Checkpointing", "m:EvalStepping", "m:Checkpointing", "m:EvalStepping"})
	for i, m := range metrics {
		if m != nil {
			t.Errorf("event %d carries metrics %v; only the transition that ends EvalStepping does", i, m)
		}
	}
}

// A write slower than the stall patience is not a stall: the watchdog widens its patience while
// Checkpointing as it does for a compile, yet still reports a write that hangs past the widened
// patience, and the base patience is back once the write is over. Driven by a fake clock and
// explicit Check calls: the "slow write" is the clock advancing while fn runs.
func TestWatchdogGivesACheckpointWriteTheWidenedPatience(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	counter := func() uint64 { return 7 } // no step completes during a write
	var log logSink
	w := NewWatchdog(WatchdogConfig{Patience: time.Second, Interval: time.Hour, Log: log.Log,
		Now: clk.Now, Counter: counter, StopOnStall: true})
	defer w.Close()
	tr := NewTracker(TrackerOptions{})
	tr.Register(w)
	tr.SetPhase(EvalStepping{}, Info{})
	if got, want := w.PatienceFor(Checkpointing{}), 10*time.Second; got != want {
		t.Fatalf("PatienceFor(Checkpointing) = %v, want %v (Patience x Widen)", got, want)
	}
	err := tr.WithCheckpointing(func() error {
		clk.Add(5 * time.Second) // five times the step patience
		if w.Check() {
			t.Errorf("stall reported during a checkpoint write within the widened patience: %q", log.get())
		}
		if !IsCheckpointing(tr.Phase()) {
			t.Errorf("phase during the write = %v", tr.Phase())
		}
		clk.Add(6 * time.Second) // 11 s: past the widened patience, a hung write
		if !w.Check() {
			t.Error("a write hung past the widened patience was not reported")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lines := log.get(); len(lines) != 1 || !strings.Contains(lines[0], "phase Checkpointing") {
		t.Fatalf("log = %q, want one stall line naming Checkpointing", lines)
	}
	tr.ClearStop()
	// Back in EvalStepping (the restore is a transition, so the clock restarts): base patience.
	clk.Add(1500 * time.Millisecond)
	if !w.Check() {
		t.Error("no stall at 1.5 s after the write: the base patience must be back")
	}
	if !tr.StopRequested() {
		t.Error("StopOnStall did not request a stop")
	}
}

// The heartbeat file names the phase while the write runs.
func TestHeartbeatShowsCheckpointing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hb.json")
	h, err := NewHeartbeat(HeartbeatConfig{Path: path, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tr := NewTracker(TrackerOptions{})
	tr.Register(h)
	tr.SetProgress(2, 8)
	tr.SetPhase(EvalStepping{}, Info{})
	_ = tr.WithCheckpointing(func() error {
		if m := readHB(t, path); m["phase"] != "Checkpointing" || m["epoch"] != 2.0 || m["step"] != 8.0 {
			t.Errorf("heartbeat during the write = %v, want phase Checkpointing at epoch 2 step 8", m)
		}
		return nil
	})
	if m := readHB(t, path); m["phase"] != "EvalStepping" {
		t.Errorf("heartbeat after the write = %v, want EvalStepping", m)
	}
}
