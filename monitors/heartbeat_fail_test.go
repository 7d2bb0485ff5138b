package monitors

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hbHangGuard bounds a wait for the heartbeat's goroutine: far longer than a tick takes on a
// loaded machine, so it catches a write that never comes, never a slow one.
const hbHangGuard = time.Minute

// A heartbeat whose file cannot be written says so: from NewHeartbeat, from Observe (an event's
// write), from its goroutine through OnError (once per failure, again after a recovery), and
// from Close's final write. Each error names the heartbeat file and the cause.
func TestHeartbeatWriteFailures(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "hb.json")
	want := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "heartbeat "+path) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v; want an error naming %s and wrapping the missing folder", what, err, path)
		}
	}
	_, err := NewHeartbeat(HeartbeatConfig{Path: filepath.Join(root, "missing", "hb.json")})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "missing", "hb.json")) {
		t.Fatalf("NewHeartbeat under a missing folder: %v", err)
	}

	var mu sync.Mutex
	var reported []error
	onError := make(chan struct{}, 16)
	var attempts atomic.Int64 // every write attempt reads the clock once
	now := func() time.Time { attempts.Add(1); return time.Now() }
	h, err := NewHeartbeat(HeartbeatConfig{Path: path, Interval: time.Millisecond, Now: now, OnError: func(err error) {
		mu.Lock()
		reported = append(reported, err)
		mu.Unlock()
		select {
		case onError <- struct{}{}:
		default: // a signal is already waiting
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			h.Close()
		}
	}()
	nextReport := func(what string) error {
		t.Helper()
		select {
		case <-onError:
		case <-time.After(hbHangGuard):
			t.Fatalf("no OnError within %v %s", hbHangGuard, what)
		}
		mu.Lock()
		defer mu.Unlock()
		return reported[len(reported)-1]
	}

	// The folder goes away (between two writes, so none fails halfway through): every tick
	// fails the same way, and OnError hears of it once.
	removeBetweenWrites := func() {
		h.writeMu.Lock()
		defer h.writeMu.Unlock()
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
	removeBetweenWrites()
	want("the goroutine's write (OnError)", nextReport("after the folder was removed"))
	want("Observe", h.Observe(TrainStepping{}, Progress{}, Info{}))
	for from := attempts.Load(); attempts.Load() < from+20; {
		time.Sleep(time.Millisecond) // twenty more failing writes
	}
	mu.Lock()
	n := len(reported)
	mu.Unlock()
	if n != 1 {
		t.Errorf("OnError heard of one unchanged failure %d times; want once", n)
	}

	// The folder comes back: the goroutine rewrites the file; then the same failure is news.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(hbHangGuard); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the heartbeat was not rewritten within %v of its folder's return", hbHangGuard)
		}
	}
	if m := readHB(t, path); m["phase"] != "TrainStepping" {
		t.Errorf("after the recovery the file says %v; want the last event, TrainStepping", m)
	}
	removeBetweenWrites()
	want("the goroutine's write after a recovery (OnError)", nextReport("for a failure after a recovery"))

	closed = true
	want("Close's final write", h.Close())
}
