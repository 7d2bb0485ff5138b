package pjrthook

import (
	"path/filepath"
	"testing"
	"unsafe"
)

// Inside a ShareCompiles window a program compiled before is answered with that executable
// (counted as Shared), which the plugin frees only when its last holder destroys it; a
// different program still compiles; once the window closes, the same program compiles again.
func TestShareCompilesCompilesEachProgramOnce(t *testing.T) {
	so := buildFakePlugin(t)
	events := filepath.Join(t.TempDir(), "events")
	t.Setenv("FAKE_PJRT_EVENTS", events)
	if _, err := Register(so); err != nil {
		t.Fatal(err)
	}
	SetDisk(nil)
	client, err := createThrough(so, "caller_option", 1)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(code string) unsafe.Pointer {
		t.Helper()
		exe, err := compileThrough(so, client, code)
		if err != nil {
			t.Fatal(err)
		}
		return exe
	}
	destroy := func(exe unsafe.Pointer) {
		t.Helper()
		if err := releaseThrough(so, slotDestroyLoaded, exe); err != nil {
			t.Fatal(err)
		}
	}
	before := Stats()
	done := ShareCompiles()
	a := compile("module @init {}")
	b := compile("module @init {}")
	other := compile("module @other {}")
	c := compile("module @init {}")
	done()
	done() // a second close is a no-op: the window count never goes below zero
	d := compile("module @init {}")
	after := Stats()
	if a != b || a != c || a == other || a == d {
		t.Fatalf("executables %p %p %p %p (other %p): want the first three one, the last another", a, b, c, d, other)
	}
	if shared, compiled := after.Shared-before.Shared, after.Compiled-before.Compiled; shared != 2 || compiled != 3 {
		t.Fatalf("%d shared, %d compiled; want 2 and 3", shared, compiled)
	}
	destroy(a)
	destroy(b)
	if ev := readEvents(t, events); ev != "compiled\ncompiled\ncompiled\n" {
		t.Fatalf("events %q after two of three holders destroyed the shared executable: want it alive", ev)
	}
	destroy(c)
	if ev, want := readEvents(t, events), "compiled\ncompiled\ncompiled\ndestroyed\n"; ev != want {
		t.Fatalf("events %q after its last holder destroyed it, want %q", ev, want)
	}
	destroy(d)
	if ev, want := readEvents(t, events), "compiled\ncompiled\ncompiled\ndestroyed\ndestroyed\n"; ev != want {
		t.Fatalf("events %q, want %q", ev, want)
	}
	if shared.open != 0 || shared.byKey != nil || len(shared.holders) != 0 {
		t.Fatalf("after the window closed: %d open, %d programs, %d shared executables held", shared.open, len(shared.byKey), len(shared.holders))
	}
}
