package monitors

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func readHB(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %q", err, b)
	}
	return m
}

func TestHeartbeatContentsAndAtomicRewrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hb.json")
	clk := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	h, err := NewHeartbeat(HeartbeatConfig{Path: path, Interval: time.Hour, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	m := readHB(t, path)
	if m["phase"] != "Starting" || m["step"] != nil || m["epoch"] != nil || m["time"] != "2025-01-02T03:04:05Z" {
		t.Fatalf("initial = %v", m)
	}
	tr := NewTracker(TrackerOptions{})
	tr.Register(h)
	tr.SetProgress(3, 42)
	tr.Tick()
	tr.SetPhase(TrainStepping{}, Info{})
	m = readHB(t, path)
	if m["phase"] != "TrainStepping" || m["step"] != 42.0 || m["epoch"] != 3.0 || m["counter"] != float64(ProgressCounter()) {
		t.Fatalf("after step = %v", m)
	}
	tr.SetProgress(3, 43)
	if err := h.Write(); err != nil {
		t.Fatal(err)
	}
	if m = readHB(t, path); m["step"] != 43.0 {
		t.Fatalf("rewrite = %v", m)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	h.Close()
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "hb.json" {
		t.Fatalf("temp files left behind: %v", ents)
	}
}

func TestHeartbeatTicks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hb.json")
	h, err := NewHeartbeat(HeartbeatConfig{Path: path, Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	st0, _ := os.Stat(path)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		st, err := os.Stat(path)
		if err == nil && !os.SameFile(st, st0) {
			return // replaced by rename: a new inode
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("heartbeat not rewritten by its goroutine")
}

func TestHeartbeatBadPath(t *testing.T) {
	if _, err := NewHeartbeat(HeartbeatConfig{Path: filepath.Join(t.TempDir(), "missing", "hb.json")}); err == nil {
		t.Fatal("no error for missing folder")
	}
}

// Under Repl the file still says how the run ended: phase is what was published last, run_phase
// the run's own record (Failed here), and both agree while the run works.
func TestHeartbeatRunPhaseOutlivesRepl(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hb.json")
	h, err := NewHeartbeat(HeartbeatConfig{Path: path, Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if m := readHB(t, path); m["run_phase"] != nil {
		t.Fatalf("before any run event run_phase is %v, want it left out", m["run_phase"])
	}
	tr := NewTracker(TrackerOptions{})
	tr.Register(h)
	tr.Enter()
	tr.SetPhase(TrainStepping{}, Info{})
	if m := readHB(t, path); m["phase"] != "TrainStepping" || m["run_phase"] != "TrainStepping" {
		t.Fatalf("while training: %v", m)
	}
	tr.SetPhase(Failed{}, Info{})
	tr.Exit()
	if m := readHB(t, path); m["phase"] != "Repl" || m["run_phase"] != "Failed" {
		t.Fatalf("after the run returned: %v; want phase Repl and run_phase Failed", m)
	}
}
