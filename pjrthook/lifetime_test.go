package pjrthook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/nitro-go/nitro/pjrthook/diskcache"
)

// lifetimeSetup registers the fake plugin with a disk cache on, and returns a client of it, the
// cache's folder, the events file and the gate that lets the fake's serializations through.
func lifetimeSetup(t *testing.T) (so string, client unsafe.Pointer, dir, events, gate string) {
	so = buildFakePlugin(t)
	tmp := t.TempDir()
	dir, events, gate = filepath.Join(tmp, "cache"), filepath.Join(tmp, "events"), filepath.Join(tmp, "gate")
	t.Setenv("FAKE_PJRT_EVENTS", events)
	t.Setenv("FAKE_PJRT_GATE", gate)
	t.Setenv(envFakeReport, filepath.Join(tmp, "report"))
	if _, err := Register(so); err != nil {
		t.Fatal(err)
	}
	c, err := diskcache.Open(diskcache.Options{Dir: dir, Notice: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	SetDisk(c)
	t.Cleanup(func() { Flush(); SetDisk(nil) })
	client, err = createThrough(so, "caller_option", 1)
	if err != nil {
		t.Fatal(err)
	}
	return so, client, dir, events, gate
}

func readEvents(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func entries(t *testing.T, dir string) int {
	t.Helper()
	_, n, err := diskcache.Size(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func openGate(t *testing.T, gate string) {
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A compile returns before its serialization, and destroying the executable returns at once too:
// the plugin's destroy waits for the serialization, which runs it, so the plugin never serializes
// a destroyed executable, and the entry lands.
func TestDestroyWaitsInTheBackgroundForSerialization(t *testing.T) {
	so, client, dir, events, gate := lifetimeSetup(t)
	loaded, err := compileThrough(so, client, "module @g {}")
	if err != nil {
		t.Fatal(err)
	}
	// The gate is shut: had the compile waited for its serialization, it would not be back.
	if ev := readEvents(t, events); ev != "compiled\n" || entries(t, dir) != 0 {
		t.Fatalf("at the compile's return: events %q, %d entries; want only the compile", ev, entries(t, dir))
	}
	released := make(chan error, 1)
	go func() { released <- releaseThrough(so, slotDestroyLoaded, loaded) }()
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the destroy waited for the serialization held at the gate")
	}
	if ev := readEvents(t, events); ev != "compiled\n" {
		t.Fatalf("after the destroy returned, with the serialization held: events %q, want only the compile", ev)
	}
	openGate(t, gate)
	Flush()
	if ev, want := readEvents(t, events), "compiled\nserialized\ndestroyed\n"; ev != want {
		t.Fatalf("events %q, want %q", ev, want)
	}
	if n := entries(t, dir); n != 1 {
		t.Fatalf("%d entries after the destroy, want 1", n)
	}

	// An executable whose destroy waits for its write is freed before its client: the client's
	// destroy finishes the write, which destroys the executable first.
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	if loaded, err = compileThrough(so, client, "module @h {}"); err != nil {
		t.Fatal(err)
	}
	if err := releaseThrough(so, slotDestroyLoaded, loaded); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(100 * time.Millisecond); openGate(t, gate) }()
	if err := releaseThrough(so, slotDestroyClient, client); err != nil {
		t.Fatal(err)
	}
	want := "compiled\nserialized\ndestroyed\ncompiled\nserialized\ndestroyed\nclient destroyed\n"
	if ev := readEvents(t, events); ev != want {
		t.Fatalf("events %q, want %q", ev, want)
	}
	if n := entries(t, dir); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
}

// Flush writes what is pending while the executable lives; destroying the client first finishes
// the writes of its executables.
func TestFlushAndClientDestroyFinishWrites(t *testing.T) {
	so, client, dir, events, gate := lifetimeSetup(t)
	if _, err := compileThrough(so, client, "module @a {}"); err != nil {
		t.Fatal(err)
	}
	openGate(t, gate)
	Flush()
	if n := entries(t, dir); n != 1 {
		t.Fatalf("%d entries after Flush, want 1", n)
	}
	if err := os.Remove(gate); err != nil {
		t.Fatal(err)
	}
	if _, err := compileThrough(so, client, "module @b {}"); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(100 * time.Millisecond); openGate(t, gate) }()
	if err := releaseThrough(so, slotDestroyClient, client); err != nil {
		t.Fatal(err)
	}
	ev := readEvents(t, events)
	if want := "compiled\nserialized\ncompiled\nserialized\nclient destroyed\n"; ev != want {
		t.Fatalf("events %q, want %q", ev, want)
	}
	if strings.Contains(ev, "destroyed executable") || entries(t, dir) != 2 {
		t.Fatalf("events %q, %d entries; want 2 entries", ev, entries(t, dir))
	}
}
