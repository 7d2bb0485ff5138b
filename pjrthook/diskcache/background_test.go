package diskcache

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// heldCall is a fakeCall whose executable outlives Compile, as the interposer's does: its
// Serialize blocks until release is closed, and it records the pending write it was handed.
type heldCall struct {
	*fakeCall
	release   chan struct{}
	serialize func() // when set, runs inside Serialize (a test's panic)

	mu        sync.Mutex
	held      *PendingWrite
	destroyed bool // the owner destroyed the executable: Serialize must not run after
	badUse    bool
}

func (h *heldCall) Hold(w *PendingWrite) { h.mu.Lock(); h.held = w; h.mu.Unlock() }
func (h *heldCall) Serialize() ([]byte, error) {
	<-h.release
	if h.serialize != nil {
		h.serialize()
	}
	h.mu.Lock()
	h.badUse = h.badUse || h.destroyed
	h.mu.Unlock()
	return h.fakeCall.Serialize()
}

// destroy is the owner's destroy: the pending write first, then the executable.
func (h *heldCall) destroy() {
	h.mu.Lock()
	w := h.held
	h.mu.Unlock()
	if w != nil {
		w.Finish()
	}
	h.mu.Lock()
	h.destroyed = true
	h.mu.Unlock()
}

var _ Holder = (*heldCall)(nil)

func newHeld(plugin, code string) *heldCall {
	return &heldCall{fakeCall: newCall(plugin, code), release: make(chan struct{})}
}

func entryCount(t *testing.T, dir string) int {
	t.Helper()
	entries, _, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// A Holder's compile returns while its serialization is still blocked; the entry appears once
// the write is let through, and Flush waits for it.
func TestHolderReturnsBeforeSerializing(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	h := newHeld(plugin, "g")
	done := make(chan error, 1)
	go func() { _, err := c.Compile(h); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Compile waited for the serialization it should leave to the background")
	}
	if h.held == nil {
		t.Fatal("the pending write was not handed to the call's owner")
	}
	if n := entryCount(t, dir); n != 0 {
		t.Fatalf("%d entries before the serialization ran, want 0", n)
	}
	close(h.release)
	c.Flush()
	if n := entryCount(t, dir); n != 1 {
		t.Fatalf("after Flush the folder holds %d entries, want 1", n)
	}
	c2, _ := open(t, dir, Options{})
	warm := newCall(plugin, "g")
	if hit, err := c2.Compile(warm); err != nil || !hit || warm.result != h.result {
		t.Fatalf("the background entry: hit=%v err=%v result %q want %q", hit, err, warm.result, h.result)
	}
}

// Destroying the executable while its write is queued or running waits for the write: the
// serialization never reads a destroyed executable, and the entry is still written.
func TestDestroyWaitsForPendingWrite(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	h := newHeld(plugin, "g")
	if _, err := c.Compile(h); err != nil {
		t.Fatal(err)
	}
	destroyed := make(chan struct{})
	go func() { h.destroy(); close(destroyed) }()
	select {
	case <-destroyed:
		t.Fatal("destroy returned while the serialization was blocked")
	case <-time.After(50 * time.Millisecond):
	}
	close(h.release)
	<-destroyed
	c.Flush()
	if h.badUse {
		t.Fatal("Serialize ran after the executable was destroyed")
	}
	if n := entryCount(t, dir); n != 1 {
		t.Fatalf("%d entries, want 1", n)
	}
}

// A panic in a background serialization is said once and costs only the entry.
func TestBackgroundPanicIsSaidNotCrash(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, n := open(t, dir, Options{})
	for _, code := range []string{"g", "h"} {
		h := newHeld(plugin, code)
		h.serialize = func() { panic("plugin fault") }
		close(h.release)
		if _, err := c.Compile(h); err != nil {
			t.Fatal(err)
		}
		h.destroy()
	}
	c.Flush()
	if got := strings.Count(n.all(), "plugin fault"); got != 1 {
		t.Fatalf("the failure was said %d times, want once:\n%s", got, n.all())
	}
	if k := entryCount(t, dir); k != 0 {
		t.Fatalf("%d entries after failed writes, want 0", k)
	}
}

// Only rank 0 queues writes: another rank hands its owner nothing to wait for.
func TestHolderOtherRankQueuesNothing(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{Rank: 1})
	h := newHeld(plugin, "g")
	close(h.release)
	if _, err := c.Compile(h); err != nil {
		t.Fatal(err)
	}
	c.Flush()
	if h.held != nil || entryCount(t, dir) != 0 {
		t.Fatalf("rank 1: held=%v entries=%d, want no write", h.held != nil, entryCount(t, dir))
	}
}

// Flush while other compiles keep queueing writes: no misuse panic, and every entry lands.
func TestFlushWhileCompilesQueue(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	const n = 40
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			h := newHeld(plugin, fmt.Sprintf("g%d", i))
			close(h.release)
			if _, err := c.Compile(h); err != nil {
				t.Error(err)
			}
		}
	}()
	for flushing := true; flushing; {
		select {
		case <-done:
			flushing = false
		default:
			c.Flush()
		}
	}
	c.Flush()
	if k := entryCount(t, dir); k != n {
		t.Fatalf("%d entries, want %d", k, n)
	}
}

// A queued write waits until no compile has run for quietFor: a start's compiles and first step
// go first. Flush does not wait for the quiet.
func TestBackgroundWriteWaitsForQuiet(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	first := newHeld(plugin, "g")
	began := make(chan time.Time, 1)
	first.serialize = func() { began <- time.Now() }
	close(first.release)
	if _, err := c.Compile(first); err != nil {
		t.Fatal(err)
	}
	// A second compile half the quiet period later restarts the wait.
	time.Sleep(quietFor / 2)
	second := newHeld(plugin, "h")
	close(second.release)
	if _, err := c.Compile(second); err != nil {
		t.Fatal(err)
	}
	lastEnd := time.Now()
	select {
	case at := <-began:
		if quiet := at.Sub(lastEnd); quiet < quietFor-quietPoll {
			t.Fatalf("the write began %v after the last compile, want >= %v", quiet, quietFor)
		}
	case <-time.After(10 * quietFor):
		t.Fatal("the queued write never began")
	}
	c.Flush()

	// Flush right after a compile writes at once.
	third := newHeld(plugin, "k")
	close(third.release)
	if _, err := c.Compile(third); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c.Flush()
	if took := time.Since(start); took >= quietFor/2 {
		t.Fatalf("Flush waited %v for the quiet period", took)
	}
	if n := entryCount(t, dir); n != 3 {
		t.Fatalf("%d entries, want 3", n)
	}
}

// Defer before the write is done hands the destroy to the write, which runs it after writing;
// after the write it is refused and the caller destroys.
func TestDeferRunsAfterTheWrite(t *testing.T) {
	dir, plugin := t.TempDir(), pluginFile(t, "plugin A")
	c, _ := open(t, dir, Options{})
	h := newHeld(plugin, "g")
	if _, err := c.Compile(h); err != nil {
		t.Fatal(err)
	}
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	h.serialize = func() { note("serialized") }
	if !h.held.Defer(func() { note("destroyed") }) {
		t.Fatal("Defer refused while the write was pending")
	}
	close(h.release)
	c.Flush()
	if got := strings.Join(order, ","); got != "serialized,destroyed" {
		t.Fatalf("order %s, want serialized,destroyed", got)
	}
	if h.held.Defer(func() { note("late") }) {
		t.Fatal("Defer accepted after the write was done")
	}
	if entryCount(t, dir) != 1 {
		t.Fatal("no entry written")
	}
}
