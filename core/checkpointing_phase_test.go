package core_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/monitors"
)

// slowFS is the fault-injecting in-memory file system made slow: the first fsync of a file
// blocks until the test releases it, so "a write slower than the stall patience" is an event
// the test controls rather than a sleep.
type slowFS struct {
	*checkpoint.MemFS
	started chan struct{} // closed when the first fsync begins
	release chan struct{} // close to let it finish
	once    sync.Once
}

func newSlowFS() *slowFS {
	return &slowFS{MemFS: checkpoint.NewMemFS(), started: make(chan struct{}), release: make(chan struct{})}
}

func (s *slowFS) CreateTemp(dir, prefix string) (checkpoint.File, error) {
	f, err := s.MemFS.CreateTemp(dir, prefix)
	if err != nil {
		return nil, err
	}
	return &slowFile{File: f, fs: s}, nil
}

type slowFile struct {
	checkpoint.File
	fs *slowFS
}

func (f *slowFile) Sync() error {
	first := false
	f.fs.once.Do(func() { first = true })
	if first {
		close(f.fs.started)
		<-f.fs.release
	}
	return f.File.Sync()
}

type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// A checkpoint write slower than the stall patience does not trip a StopOnStall watchdog: the run
// reads Checkpointing during the write (Phase, the heartbeat file, the monitors' events), the
// watchdog applies its widened patience there, and the run completes instead of stopping.
func TestSlowCheckpointWriteIsNotAStall(t *testing.T) {
	fs := newSlowFS()
	ck, err := checkpoint.NewTopK(3, "val_loss", "min", "/mem/run", nil, checkpoint.WithFS(fs))
	if err != nil {
		t.Fatal(err)
	}
	clk := &stepClock{t: time.Unix(1000, 0)}
	var mu sync.Mutex
	var stalls []string
	w := monitors.NewWatchdog(monitors.WatchdogConfig{Patience: time.Second, Interval: time.Hour, StopOnStall: true,
		Now: clk.Now, Log: func(m string) { mu.Lock(); stalls = append(stalls, m); mu.Unlock() }})
	defer w.Close()
	hbPath := filepath.Join(t.TempDir(), "hb.json")
	hb, err := monitors.NewHeartbeat(monitors.HeartbeatConfig{Path: hbPath, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	rec := &recorder{}
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithCheckpointer(ck),
		core.WithMonitor(w), core.WithMonitor(hb), core.WithMonitor(rec))

	done := make(chan error, 1)
	go func() { done <- n.Train() }()
	select {
	case <-fs.started:
	case err := <-done:
		t.Fatalf("Train returned (%v) before writing a checkpoint", err)
	}
	// The write is in progress and will not finish until released.
	if !monitors.IsCheckpointing(n.Phase()) {
		t.Errorf("phase during the write = %v, want Checkpointing", n.Phase())
	}
	b, err := os.ReadFile(hbPath)
	if err != nil {
		t.Fatal(err)
	}
	var beat map[string]any
	if err := json.Unmarshal(b, &beat); err != nil || beat["phase"] != "Checkpointing" {
		t.Errorf("heartbeat during the write = %s (%v), want phase Checkpointing", b, err)
	}
	slow := 5 * time.Second
	if w.PatienceFor(monitors.EvalStepping{}) >= slow {
		t.Fatalf("the test needs a write slower than the stepping patience %v", w.PatienceFor(monitors.EvalStepping{}))
	}
	w.Check() // takes in the steps done so far: from here the counter stands still
	clk.Add(slow)
	if w.Check() {
		t.Error("the watchdog reported a stall during a checkpoint write within the widened patience")
	}
	close(fs.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stalls) != 0 || n.StopReason() != core.StopCompleted || n.Epoch() != 2 {
		t.Errorf("stalls %q, stop reason %q after %d epochs: want no stall, completed after 2", stalls, n.StopReason(), n.Epoch())
	}
	// Each epoch's write interrupts EvalStepping, which is restored; the metrics still go with
	// the transition that ends the validation (TrainStepping, Done), not with the write's.
	got := rec.phases()
	if want := "EvalStepping Checkpointing EvalStepping TrainStepping EvalStepping Checkpointing EvalStepping Done Repl"; !strings.HasSuffix(got, want) {
		t.Errorf("phases:\n got %s\nwant ... %s", got, want)
	}
	for _, e := range rec.events {
		if e.phase == "Checkpointing" && e.metrics != nil {
			t.Errorf("the transition into Checkpointing carries metrics %v", e.metrics)
		}
	}
	if n.LastCheckpoint() == "" || !strings.HasPrefix(n.LastCheckpoint(), "/mem/run/") {
		t.Errorf("last checkpoint %q, want one in /mem/run", n.LastCheckpoint())
	}
}
