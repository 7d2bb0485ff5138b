package monitors

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestDisplayPlainOneLinePerEpoch(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	var out syncBuf
	d := NewDisplay(DisplayConfig{Out: &out, Interval: time.Hour, Now: clk.Now})
	defer d.Close()
	if d.Mode() != DisplayPlain {
		t.Fatal("buffer is not a terminal: want plain mode")
	}
	tr := NewTracker(TrackerOptions{})
	tr.Register(d)
	tr.SetStepsPerEpoch(4)
	tr.WithCompiling(GradientCompiling{}, func() error { return nil })
	tr.SetProgress(1, 0)
	tr.SetPhase(TrainStepping{}, Info{})
	for s := 1; s <= 4; s++ {
		tr.SetProgress(1, s)
		tr.Tick()
		tr.SetLoss(1.0 / float64(s))
		clk.Add(500 * time.Millisecond)
		d.Refresh()
		if s == 1 { // the first step's second program compiles mid-epoch: no epoch line for it
			tr.WithCompiling(OptimizerCompiling{}, func() error { return nil })
		}
	}
	if eta := d.ETA(); eta != 0 {
		t.Errorf("ETA at end of epoch = %v", eta)
	}
	tr.SetPhase(EvalStepping{}, Info{})
	tr.SetProgress(2, 4) // core sets the new epoch before entering TrainStepping; steps count the run
	tr.SetPhase(TrainStepping{}, Info{})
	tr.SetProgress(2, 6)
	tr.Tick()
	clk.Add(time.Second)
	d.Refresh()
	if eta := d.ETA(); eta != time.Second {
		t.Errorf("ETA = %v", eta)
	}
	tr.SetPhase(Done{}, Info{})
	tr.SetPhase(EvalStepping{}, Info{}) // a standalone evaluation returns the run to Done:
	tr.SetPhase(Done{}, Info{})         // said once
	got := out.String()
	want := "compiling gradient\n" +
		"compiling optimizer\n" +
		"epoch 1: step 4/4, 2.0 steps/s, 2s, loss 0.25\n" +
		"epoch 2: step 2/4, 1.0 steps/s, 1s, loss 0.25\n" +
		"Done\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestDisplayTerminalModeSmoke(t *testing.T) {
	var out syncBuf
	d := NewDisplay(DisplayConfig{Out: &out, Mode: DisplayTerminal, Interval: time.Millisecond})
	tr := NewTracker(TrackerOptions{})
	tr.Register(d)
	tr.SetStepsPerEpoch(10)
	tr.SetPhase(OptimizerCompiling{}, Info{})
	tr.SetProgress(1, 3)
	tr.SetLoss(0.5)
	tr.SetPhase(TrainStepping{}, Info{})
	// Wait for the redraw of the stepping line rather than for a fixed time.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(out.String(), "epoch 1"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no stepping line drawn within a minute: %q", out.String())
		}
	}
	tr.SetPhase(Done{}, Info{})
	d.Close()
	s := out.String()
	if !strings.Contains(s, "compiling optimizer") || !strings.Contains(s, "epoch 1") {
		t.Fatalf("terminal output %q", s)
	}
}
