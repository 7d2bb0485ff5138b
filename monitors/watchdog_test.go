package monitors

import (
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) Log(m string) { l.mu.Lock(); l.lines = append(l.lines, m); l.mu.Unlock() }
func (l *logSink) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

func TestWatchdogStallAndWidenedPatience(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	var n uint64
	var nmu sync.Mutex
	counter := func() uint64 { nmu.Lock(); defer nmu.Unlock(); return n }
	var log logSink
	w := NewWatchdog(WatchdogConfig{Patience: time.Second, Interval: time.Hour, Log: log.Log,
		Now: clk.Now, Counter: counter, StopOnStall: true})
	defer w.Close()
	tr := NewTracker(TrackerOptions{})
	tr.Register(w)

	// Compiling: patience widened x10.
	tr.SetPhase(GradientCompiling{}, Info{})
	clk.Add(5 * time.Second)
	if w.Check() {
		t.Fatal("stall reported during compile within widened patience")
	}
	clk.Add(6 * time.Second)
	if !w.Check() {
		t.Fatal("no stall after widened patience")
	}
	// Stepping: base patience; progress resets the clock.
	tr.SetPhase(TrainStepping{}, Info{})
	tr.SetProgress(2, 7)
	clk.Add(900 * time.Millisecond)
	nmu.Lock()
	n++
	nmu.Unlock()
	if w.Check() {
		t.Fatal("stall despite progress")
	}
	clk.Add(1500 * time.Millisecond)
	if !w.Check() {
		t.Fatal("no stall in TrainStepping")
	}
	if w.Check() {
		t.Fatal("stall reported twice")
	}
	lines := log.get()
	if len(lines) != 2 || !strings.Contains(lines[1], "TrainStepping") || !strings.Contains(lines[1], "epoch 2 step 7") ||
		!strings.Contains(lines[1], "1.5s") {
		t.Fatalf("log = %q", lines)
	}
	if !tr.StopRequested() {
		t.Fatal("StopOnStall did not request a stop")
	}
	// Repl is widened too.
	tr.Publish(Repl{}, Info{})
	clk.Add(5 * time.Second)
	if w.Check() {
		t.Fatal("stall in Repl within widened patience")
	}
}

func TestWatchdogGoroutineDetects(t *testing.T) {
	var log logSink
	w := NewWatchdog(WatchdogConfig{Patience: 20 * time.Millisecond, Interval: 5 * time.Millisecond, Log: log.Log,
		Counter: func() uint64 { return 0 }})
	deadline := time.Now().Add(5 * time.Second)
	for len(log.get()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	w.Close()
	w.Close()
	if len(log.get()) != 1 {
		t.Fatalf("log = %q", log.get())
	}
}
