package core_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/dist"
)

// heldOpts write into dir the way a run does by default: the JSON Lines logger and the TopK
// checkpointer, both in the run dir.
func heldOpts(t *testing.T, dir string, more ...core.Option) []core.Option {
	return append([]core.Option{core.WithBackend("go"), core.Quiet(), core.WithData(coretest.Data(t, 32)),
		core.WithRunDir(dir), core.WithMaxEpochs(1)}, more...)
}

// trainInto trains a Reg into dir with the default logger and checkpointer.
func trainInto(t *testing.T, dir string, more ...core.Option) *core.Nitro {
	t.Helper()
	n, err := core.New(&coretest.Reg{}, heldOpts(t, dir, more...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	return n
}

func paramsLines(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, core.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), `"type":"params"`)
}

// TestFreshRunIntoHeldRunDirRefused: a second fresh run into a run dir that holds a run is
// refused by New, naming the dir, what it holds, why and the three ways out; a weights-only
// start is a fresh run too. A resume continues it; a run that writes nothing there, or a rank
// other than 0, is not checked.
func TestFreshRunIntoHeldRunDirRefused(t *testing.T) {
	dir := t.TempDir()
	trainInto(t, dir)
	_, err := core.New(&coretest.Reg{}, heldOpts(t, dir)...)
	coretest.WantErr(t, err, `RunDir "`+dir+`" (from run option) already holds a run (1 checkpoint, a `, "B metrics.jsonl)",
		"one metrics.jsonl and one top-K checkpoint ranking", "core.WithResume(core.ResumeAuto)", "--resume auto",
		"core.WithRunDir", "--run-dir", "core.WithOverwrite()", "--overwrite")
	_, err = core.New(&coretest.Reg{}, heldOpts(t, dir, core.WithCheckpoint(dir))...)
	coretest.WantErr(t, err, "already holds a run")
	if got := paramsLines(t, dir); got != 1 {
		t.Fatalf("the refused runs wrote into %s: %d params lines, want 1", dir, got)
	}

	r := trainInto(t, dir, core.WithResume(core.ResumeAuto), core.WithMaxEpochs(2))
	if r.Epoch() != 2 {
		t.Errorf("resume auto: epoch %d, want 2", r.Epoch())
	}
	if _, err := core.New(&coretest.Reg{}, heldOpts(t, dir, core.WithoutLogger(), core.WithoutCheckpoints())...); err != nil {
		t.Errorf("a run that writes nothing into the run dir was refused: %v", err)
	}
	if _, err := core.New(&coretest.Reg{}, heldOpts(t, dir, core.WithDist(dist.Dist{Rank: 1, WorldSize: 2}), core.WithIndependentRanks())...); err != nil {
		t.Errorf("rank 1 writes nothing into the run dir, yet was refused: %v", err)
	}
}

// TestResumeAutoFindsNothingButARecord: WithResume(ResumeAuto) in a run dir whose earlier run
// stopped before its first checkpoint (a record, no checkpoint) starts afresh, keeping the
// earlier record byte for byte as metrics.attempt-N.jsonl, so a supervisor that restarts with
// resume auto is never stuck (it was refused) and nothing is lost. A setup that fails moves
// nothing.
func TestResumeAutoFindsNothingButARecord(t *testing.T) {
	dir := t.TempDir()
	trainInto(t, dir, core.WithoutCheckpoints())
	first, err := os.ReadFile(filepath.Join(dir, core.MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.New(&failingBuild{}, heldOpts(t, dir, core.WithResume(core.ResumeAuto))...); err == nil {
		t.Fatal("a BuildModel error did not fail New")
	}
	if _, err := os.Stat(filepath.Join(dir, "metrics.attempt-1.jsonl")); err == nil {
		t.Fatal("a setup that failed moved the earlier record aside")
	}
	con := &core.MemoryConsole{}
	n, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.WithConsole(con), core.WithData(coretest.Data(t, 32)),
		core.WithRunDir(dir), core.WithMaxEpochs(1), core.WithResume(core.ResumeAuto))
	if err != nil {
		t.Fatalf("resume auto over a record with no checkpoint: %v", err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if kept, err := os.ReadFile(filepath.Join(dir, "metrics.attempt-1.jsonl")); err != nil || !bytes.Equal(kept, first) {
		t.Errorf("the earlier record was not kept as metrics.attempt-1.jsonl byte for byte: %v", err)
	}
	if got := paramsLines(t, dir); got != 1 {
		t.Errorf("the new record holds %d params lines, want its own 1", got)
	}
	if !strings.Contains(strings.Join(con.Notices, "\n"), "is kept as metrics.attempt-1.jsonl, and this run starts afresh") {
		t.Errorf("the console does not say where the earlier record went:\n%s", strings.Join(con.Notices, "\n"))
	}
	if n.LastCheckpoint() == "" {
		t.Error("the fresh run wrote no checkpoint")
	}
	// An empty run dir: resume auto starts afresh, as before, and moves nothing.
	empty := t.TempDir()
	trainInto(t, empty, core.WithResume(core.ResumeAuto))
	if _, err := os.Stat(filepath.Join(empty, "metrics.attempt-1.jsonl")); err == nil {
		t.Error("resume auto into an empty run dir made an attempt file")
	}
}

// TestResumeIntoAnotherHeldRunDir: a resume from a checkpoint of one run dir into another run
// dir that holds a run is refused; into the checkpoint's own dir, or an empty one, it goes on.
func TestResumeIntoAnotherHeldRunDir(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	file := trainInto(t, a).LastCheckpoint()
	trainInto(t, b)
	_, err := core.New(&coretest.Reg{}, heldOpts(t, b, core.WithResume(file), core.WithMaxEpochs(2))...)
	coretest.WantErr(t, err, "resume from "+file+` into RunDir "`+b+`"`, "holds another run (1 checkpoint", "core.WithRunDir(\""+a+"\")")
	trainInto(t, t.TempDir(), core.WithResume(file), core.WithMaxEpochs(2))
	trainInto(t, a, core.WithResume(file), core.WithMaxEpochs(2))
}

type failingBuild struct{ coretest.Base }

func (*failingBuild) BuildModel(*context.Context) error { return errors.New("no model today") }

// TestOverwriteRemovesOnlyTheRun: WithOverwrite removes the earlier run's metrics.jsonl, its
// manifest and the checkpoints it lists, says so, and keeps every other file; a setup that fails
// removes nothing; with WithResume it is refused.
func TestOverwriteRemovesOnlyTheRun(t *testing.T) {
	dir := t.TempDir()
	trainInto(t, dir, core.WithMaxEpochs(2))
	oldFiles, err := checkpoint.ReadManifest(dir)
	if err != nil || len(oldFiles) != 2 {
		t.Fatalf("the first run's manifest: %v, %v", oldFiles, err)
	}
	foreign := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(foreign, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}

	if _, err := core.New(&failingBuild{}, heldOpts(t, dir, core.WithOverwrite())...); err == nil {
		t.Fatal("failingBuild set up")
	}
	if got, _ := checkpoint.ReadManifest(dir); len(got) != 2 {
		t.Fatalf("a failed setup with WithOverwrite removed the earlier run: manifest %v", got)
	}

	coretest.WantErr(t, func() error {
		_, err := core.New(&coretest.Reg{}, heldOpts(t, dir, core.WithOverwrite(), core.WithResume(core.ResumeAuto))...)
		return err
	}(), "WithOverwrite with WithResume", "drop one of them")

	var out bytes.Buffer
	n, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.WithOutput(&out), core.WithData(coretest.Data(t, 32)),
		core.WithRunDir(dir), core.WithMaxEpochs(1), core.WithOverwrite())
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, "the notice", out.String(), "overwrite: removed the earlier run from "+dir+": 2 checkpoint file(s), manifest.json, metrics.jsonl (", "other files there stay")
	for _, e := range oldFiles {
		if _, err := os.Stat(filepath.Join(dir, e.File)); !os.IsNotExist(err) {
			t.Errorf("the earlier run's checkpoint %s is still there (%v)", e.File, err)
		}
	}
	if b, err := os.ReadFile(foreign); err != nil || string(b) != "mine" {
		t.Errorf("the foreign file: %q, %v; want it kept", b, err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.ReadManifest(dir)
	if err != nil || len(got) != 1 || got[0].Epoch != 1 {
		t.Errorf("after the overwrite the manifest lists %v (%v); want the new run's one checkpoint", got, err)
	}
	if p := paramsLines(t, dir); p != 1 {
		t.Errorf("metrics.jsonl holds %d params lines after the overwrite, want 1", p)
	}
}

// TestOverwriteClearsTensorBoardEvents: WithOverwrite also removes the earlier run's TensorBoard
// event files from <run dir>/tb (a new run's file beside them would show as one run in
// TensorBoard) and says so; a file of the user's there stays, and a run dir holding only event
// files is cleared too.
func TestOverwriteClearsTensorBoardEvents(t *testing.T) {
	plant := plantEvents
	events := []string{"events.out.tfevents.1700000000.host", "events.out.tfevents.1700000000.host.1"}

	dir := t.TempDir()
	trainInto(t, dir)
	plant(t, dir, append(events, "mine.txt")...)
	var out bytes.Buffer
	if _, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.WithOutput(&out), core.WithData(coretest.Data(t, 32)),
		core.WithRunDir(dir), core.WithMaxEpochs(1), core.WithOverwrite()); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "the notice", out.String(), "metrics.jsonl (", "tb/ (2 TensorBoard event file(s))")
	for _, f := range events {
		if _, err := os.Stat(filepath.Join(dir, "tb", f)); !os.IsNotExist(err) {
			t.Errorf("the earlier run's %s is still there (%v)", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tb", "mine.txt")); err != nil {
		t.Errorf("the user's tb/mine.txt: %v; want it kept", err)
	}

	only := t.TempDir()
	plant(t, only, events[0])
	out.Reset()
	if _, err := core.New(&coretest.Reg{}, core.WithBackend("go"), core.WithOutput(&out), core.WithData(coretest.Data(t, 32)),
		core.WithRunDir(only), core.WithMaxEpochs(1), core.WithOverwrite()); err != nil {
		t.Fatal(err)
	}
	wantContains(t, "the notice", out.String(), "overwrite: removed the earlier run from "+only+": tb/ (1 TensorBoard event file(s))")
	if _, err := os.Stat(filepath.Join(only, "tb")); !os.IsNotExist(err) {
		t.Errorf("tb/ holding only the earlier run's events is still there (%v)", err)
	}
}
