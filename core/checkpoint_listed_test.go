package core_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/internal/prereq"
)

// everyEpoch trains Reg for epochs epochs into a fresh run dir keeping every checkpoint, and
// returns the run dir and the manifest's entries, oldest first.
func everyEpoch(t *testing.T, epochs int) (string, []checkpoint.ManifestEntry) {
	t.Helper()
	dir := t.TempDir()
	every := must(checkpoint.NewEveryN(1, "", nil))
	n := newNitro(t, &Reg{}, ckptOpts(dir, core.WithData(data(t, 16)), core.WithMaxEpochs(epochs), core.WithCheckpointer(every))...)
	train(t, n)
	entries, err := checkpoint.ReadManifest(dir)
	if err != nil || len(entries) != epochs {
		t.Fatalf("manifest %+v, %v; want %d checkpoints", entries, err, epochs)
	}
	return dir, entries
}

// TestResumeNamesAMissingNewest: with the newest checkpoint deleted or replaced by a directory,
// resume auto (and a run dir given to WithCheckpoint) says which file and what is wrong with it,
// and names the older checkpoints with the flag that takes one.
func TestResumeNamesAMissingNewest(t *testing.T) {
	for _, how := range []string{"deleted", "directory"} {
		dir, entries := everyEpoch(t, 3)
		newest := filepath.Join(dir, entries[2].File)
		if err := os.Remove(newest); err != nil {
			t.Fatal(err)
		}
		problem := "is missing"
		if how == "directory" {
			if err := os.Mkdir(newest, 0o755); err != nil {
				t.Fatal(err)
			}
			problem = "is a directory"
		}
		older := filepath.Join(dir, entries[1].File)
		err := newErr(t, &Reg{}, data(t, 16), core.WithRunDir(dir), core.WithCheckpointer(must(checkpoint.NewEveryN(1, "", nil))), core.WithResume(core.ResumeAuto))
		wantErr(t, err, "resume auto", newest, problem, older+" (epoch 2,", filepath.Join(dir, entries[0].File), "--resume PATH")
		err = newErr(t, &Reg{}, data(t, 16), core.WithCheckpoint(dir))
		wantErr(t, err, "WithCheckpoint", newest, problem, older, "--checkpoint PATH")
		if how == "directory" { // given by path, the replaced file is named as such
			err = newErr(t, &Reg{}, data(t, 16), core.WithResume(newest))
			wantErr(t, err, newest, "is a directory", "lists it as a checkpoint file")
		}
		// The older one named loads.
		w := newNitro(t, &Reg{}, goOpts(nil, core.WithData(data(t, 16)), core.WithResume(older))...)
		if w.Epoch() != 2 {
			t.Errorf("resumed from %s at epoch %d, want 2", older, w.Epoch())
		}
	}
}

// TestExportNamesTheCheckpointEpoch: a bundle exported from WithCheckpoint's weights records the
// checkpoint's epoch and step, not the fresh run's zeros.
func TestExportNamesTheCheckpointEpoch(t *testing.T) {
	dir, entries := everyEpoch(t, 2)
	w := newNitro(t, &Reg{}, goOpts(nil, core.WithData(data(t, 16)), core.WithCheckpoint(dir))...)
	b, err := core.Export(w, filepath.Join(t.TempDir(), "bundle"), core.ExportSpec{Name: "reg"})
	if err != nil {
		wantErr(t, err, "no plugin found")
		prereq.XLAPlugin.Absent(t, fmt.Errorf("export needs the XLA plugin: %w", err))
	}
	last := entries[1]
	for k, v := range map[string]int{"epoch": last.Epoch, "step": last.Step, "checkpoint_epoch": last.Epoch, "checkpoint_step": last.Step} {
		if got := b.Provenance[k]; got != strconv.Itoa(v) {
			t.Errorf("provenance %s = %q, want %d (the checkpoint's)", k, got, v)
		}
	}
	if last.Epoch != 2 || last.Step == 0 {
		t.Fatalf("the checkpoint is at epoch %d, step %d: the test cannot tell it from a fresh run", last.Epoch, last.Step)
	}
}
