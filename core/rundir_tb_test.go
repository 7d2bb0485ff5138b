package core_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

// plantEvents writes files into <dir>/tb, as an earlier run's TensorBoard logger left them.
func plantEvents(t *testing.T, dir string, files ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "tb"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, "tb", f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResumeAutoArchivesTensorBoardEvents: resume auto after an attempt that stopped before its
// first checkpoint keeps that attempt's TensorBoard events with its record, in tb.attempt-N/ beside
// metrics.attempt-N.jsonl (left in tb/, TensorBoard showed them as one run with the new one); a
// file of the user's in tb/ stays. A run dir holding only events is archived the same way.
func TestResumeAutoArchivesTensorBoardEvents(t *testing.T) {
	events := []string{"events.out.tfevents.1700000000.host", "events.out.tfevents.1700000001.host"}
	dir := t.TempDir()
	trainInto(t, dir, core.WithoutCheckpoints())
	plantEvents(t, dir, append(events, "mine.txt")...)
	// An earlier archive holds attempt 1: this one is attempt 2, record and events alike.
	if err := os.Mkdir(filepath.Join(dir, "tb.attempt-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	con := &core.MemoryConsole{}
	if _, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.WithConsole(con), core.WithData(coretest.Data(t, 32)),
		core.WithRunDir(dir), core.WithMaxEpochs(1), core.WithResume(core.ResumeAuto)); err != nil {
		t.Fatalf("resume auto over a record and events with no checkpoint: %v", err)
	}
	for _, f := range events {
		if _, err := os.Stat(filepath.Join(dir, "tb", f)); !os.IsNotExist(err) {
			t.Errorf("the earlier attempt's tb/%s is still in tb/ (%v), where the new run's events go", f, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "tb.attempt-2", f)); err != nil {
			t.Errorf("the earlier attempt's %s was not kept in tb.attempt-2/: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "metrics.attempt-2.jsonl")); err != nil {
		t.Errorf("the record was not kept as metrics.attempt-2.jsonl beside its events: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tb", "mine.txt")); err != nil {
		t.Errorf("the user's tb/mine.txt: %v; want it kept", err)
	}
	wantContains(t, "the notice", strings.Join(con.Notices, "\n"), "kept as metrics.attempt-2.jsonl", "2 TensorBoard event file(s) in tb.attempt-2/")

	only := t.TempDir()
	plantEvents(t, only, events[0])
	con = &core.MemoryConsole{}
	if _, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.WithConsole(con), core.WithData(coretest.Data(t, 32)),
		core.WithRunDir(only), core.WithMaxEpochs(1), core.WithResume(core.ResumeAuto)); err != nil {
		t.Fatalf("resume auto over events alone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(only, "tb.attempt-1", events[0])); err != nil {
		t.Errorf("events alone: not kept in tb.attempt-1/: %v", err)
	}
	if _, err := os.Stat(filepath.Join(only, "tb")); !os.IsNotExist(err) {
		t.Errorf("tb/, emptied by the archive, is still there (%v)", err)
	}
	wantContains(t, "the notice", strings.Join(con.Notices, "\n"), "1 TensorBoard event file(s) in tb.attempt-1/")
}

// TestFreshRunIntoTensorBoardEventsRefused: a fresh run into a run dir holding only an earlier
// run's TensorBoard events is refused as one holding a record is (the new events would show in
// TensorBoard as one run with the old); a tb/ holding no event file is no run.
func TestFreshRunIntoTensorBoardEventsRefused(t *testing.T) {
	dir := t.TempDir()
	plantEvents(t, dir, "events.out.tfevents.1700000000.host")
	var out bytes.Buffer
	_, err := core.New(&coretest.Reg{}, heldOpts(t, dir, core.WithOutput(&out))...)
	coretest.WantErr(t, err, `RunDir "`+dir+`" (from run option) already holds a run (1 TensorBoard event file in tb/)`, "--resume auto", "--overwrite")

	mine := t.TempDir()
	plantEvents(t, mine, "notes.txt")
	if _, err := core.New(&coretest.Reg{}, heldOpts(t, mine)...); err != nil {
		t.Errorf("a tb/ holding no event file was taken for a run: %v", err)
	}
}
