package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/tensorfile"
)

// runDirOf3 writes a run dir of three small checkpoints (epochs 1..3, all kept) through the
// checkpoint package and returns it and the files, oldest first.
func runDirOf3(t *testing.T) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "MLP")
	every, err := checkpoint.NewEveryN(1, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for e := 1; e <= 3; e++ {
		p, err := every.Save(&checkpoint.Record{Epoch: e, Step: 10 * e, Tensors: []checkpoint.Tensor{{Name: "w", DType: tensorfile.U8, Shape: []int{1}, Data: []byte{byte(e)}}}})
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return dir, paths
}

// TestInfoSaysWhatIsWrongWithThePath: info of a checkpoint path that is gone, or a directory,
// says so (and where the run's checkpoints are), instead of taking it for an experiment name.
func TestInfoSaysWhatIsWrongWithThePath(t *testing.T) {
	dir, paths := runDirOf3(t)
	if code, out, errs := runCLI("info", paths[2]); code != 0 || !strings.Contains(out, "epoch        3\n") {
		t.Fatalf("info %s: exit %d (%s)\n%s", paths[2], code, errs, out)
	}
	os.Remove(paths[2])
	cases := []struct {
		name string
		arg  string
		want []string
	}{
		{"deleted, listed", paths[2], []string{paths[2], "no such file", "lists it as a checkpoint", "nitro ls " + dir}},
		{"never there", filepath.Join(dir, "epoch-0009.safetensors"), []string{"no such file", "nitro ls " + dir}},
		{"no run dir", filepath.Join(t.TempDir(), "x", "epoch-0001.safetensors"), []string{"no such file"}},
		{"a run dir", dir, []string{"a directory, not a checkpoint file", "is missing", paths[1]}},
		{"a directory", t.TempDir(), []string{"a directory, not a checkpoint file", "no run directory"}},
	}
	for _, c := range cases {
		code, _, errs := runCLI("info", c.arg)
		if code != 1 || strings.Contains(errs, "unknown experiment") {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and no experiment lookup", c.name, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: stderr %q lacks %q", c.name, errs, w)
			}
		}
	}
	// Replaced by a directory, the newest is named as such; a run dir whose newest is fine names it.
	os.Mkdir(paths[2], 0o755)
	if code, _, errs := runCLI("info", paths[2]); code != 1 || !strings.Contains(errs, "a directory, not a checkpoint file") {
		t.Errorf("info of a directory-replaced checkpoint: exit %d %q", code, errs)
	}
	dir2, paths2 := runDirOf3(t)
	if code, _, errs := runCLI("info", dir2); code != 1 || !strings.Contains(errs, "its newest checkpoint is "+paths2[2]) {
		t.Errorf("info of a run dir: exit %d %q", code, errs)
	}
	// A name is still looked up as an experiment.
	if code, _, errs := runCLI("info", "no-such-experiment"); code != 1 || !strings.Contains(errs, `unknown experiment "no-such-experiment"`) {
		t.Errorf("info of an unknown name: exit %d %q", code, errs)
	}
}

// TestResumeAutoNamesTheOlderCheckpoints: train --resume auto over a run dir whose newest
// checkpoint was deleted names it and the older ones with --resume PATH, before any training.
func TestResumeAutoNamesTheOlderCheckpoints(t *testing.T) {
	dir, paths := runDirOf3(t)
	os.Remove(paths[2])
	code, out, errs := runCLI("train", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=2000", "--set", "TestLimit=100", "--run-dir", dir, "--resume", "auto", "--no-progress", "--no-log")
	for _, w := range []string{paths[2], "is missing", paths[1] + " (epoch 2, step 20)", paths[0], "--resume PATH"} {
		if code != 1 || !strings.Contains(errs, w) {
			t.Errorf("train --resume auto: exit %d, stderr lacks %q:\n%s\n%s", code, w, errs, out)
		}
	}
	if strings.Contains(out, "epoch 1/") {
		t.Errorf("it trained:\n%s", out)
	}
}

// TestLsRefusesAnAbsurdManifest: ls prints no epoch 2^63-1; it names the field instead.
func TestLsRefusesAnAbsurdManifest(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, checkpoint.ManifestName), []byte(`{"version":1,"checkpoints":[{"file":"epoch-0001.safetensors","epoch":9223372036854775807,"step":1,"score":null}]}`), 0o644)
	code, out, errs := runCLI("ls", dir)
	if code != 1 || strings.Contains(out, "9223372036854775807") || !strings.Contains(errs, "checkpoints[0].epoch") || !strings.Contains(errs, "past the bound") {
		t.Errorf("ls: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestInfoSaysTheGlobalPosition: info prints a position counted in global batches with the
// epoch's count and the global batch, and one counted in a process's shard batches as before.
func TestInfoSaysTheGlobalPosition(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		pos  checkpoint.Position
		want string
	}{
		{checkpoint.Position{Epoch: 1, Batch: 19, GlobalBatch: 32, EpochBatches: 156}, "position     epoch 1, batch 19 of 156 (global batches of 32 samples)\n"},
		{checkpoint.Position{Epoch: 1, Batch: 19}, "position     epoch 1, batch 19\n"},
	} {
		path := filepath.Join(dir, "c.safetensors")
		rec := &checkpoint.Record{Epoch: 1, Step: 19, Position: c.pos, Tensors: []checkpoint.Tensor{{Name: "w", DType: tensorfile.U8, Shape: []int{1}, Data: []byte{1}}}}
		if err := checkpoint.Write(path, rec); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := runCLI("info", path); code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("info of %+v: exit %d (%s), want %q in\n%s", c.pos, code, errs, c.want, out)
		}
	}
}
