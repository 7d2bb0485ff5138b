package core_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

// everyEpoch trains Reg for epochs epochs into a fresh run dir keeping every checkpoint, and
// returns the run dir and the manifest's entries, oldest first.
func everyEpoch(t *testing.T, epochs int) (string, []checkpoint.ManifestEntry) {
	t.Helper()
	dir := t.TempDir()
	every := must(checkpoint.NewEveryN(1, "", nil))
	n := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(epochs), core.WithCheckpointer(every))...)
	coretest.Train(t, n)
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
		err := newErr(t, &coretest.Reg{}, coretest.Data(t, 16), core.WithRunDir(dir), core.WithCheckpointer(must(checkpoint.NewEveryN(1, "", nil))), core.WithResume(core.ResumeAuto))
		coretest.WantErr(t, err, "resume auto", newest, problem, older+" (epoch 2,", filepath.Join(dir, entries[0].File), "--resume PATH")
		err = newErr(t, &coretest.Reg{}, coretest.Data(t, 16), core.WithCheckpoint(dir))
		coretest.WantErr(t, err, "WithCheckpoint", newest, problem, older, "--checkpoint PATH")
		if how == "directory" { // given by path, the replaced file is named as such
			err = newErr(t, &coretest.Reg{}, coretest.Data(t, 16), core.WithResume(newest))
			coretest.WantErr(t, err, newest, "is a directory", "lists it as a checkpoint file")
		}
		// The older one named loads.
		w := coretest.New(t, &coretest.Reg{}, coretest.GoOpts(nil, core.WithData(coretest.Data(t, 16)), core.WithResume(older))...)
		if w.Epoch() != 2 {
			t.Errorf("resumed from %s at epoch %d, want 2", older, w.Epoch())
		}
	}
}
