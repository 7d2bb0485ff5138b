package pjrthook

import (
	"path/filepath"
	"testing"
)

// Inside a ShareCompiles window a program compiled before is loaded from the first compile's
// executable instead of compiled again, and counted as Shared; a different program still
// compiles; once the window closes, the same program compiles again.
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
	compile := func(code string) {
		t.Helper()
		if _, err := compileThrough(so, client, code); err != nil {
			t.Fatal(err)
		}
	}
	before := Stats()
	done := ShareCompiles()
	compile("module @init {}")
	compile("module @init {}")
	compile("module @other {}")
	compile("module @init {}")
	done()
	done() // a second close is a no-op: the window count never goes below zero
	compile("module @init {}")
	after := Stats()
	want := "compiled\nserialized\nloaded\ncompiled\nserialized\nloaded\ncompiled\n"
	if ev := readEvents(t, events); ev != want {
		t.Fatalf("events %q, want %q", ev, want)
	}
	if shared, compiled := after.Shared-before.Shared, after.Compiled-before.Compiled; shared != 2 || compiled != 3 {
		t.Fatalf("%d shared, %d compiled; want 2 and 3", shared, compiled)
	}
	if shared.open != 0 || shared.blobs != nil {
		t.Fatalf("after the window closed: %d open, %d executables kept", shared.open, len(shared.blobs))
	}
}
