package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// quick trains at most one short epoch: a mistake the CLI fails to refuse still ends soon.
var quick = []string{"--preset", "tiny", "--set", "TrainLimit=1500", "--set", "ValSize=500", "--set", "TestLimit=500", "--max-epochs", "1", "--no-progress"}

// TestOutOfRangeFieldsAndFlagCombinations: a field out of its range is refused by name, value and
// range, never read as another value (TrainLimit = -1 trained on all 60000 images) or reported by
// its symptom (`split "train" is empty`, "batch size 0"); flag combinations are refused in flags,
// not in core's Go option names; `completion` with a shell it cannot write for fails.
func TestOutOfRangeFieldsAndFlagCombinations(t *testing.T) {
	// --max-epochs 0 and no record: were the value accepted, the run would only set up and test.
	off := []string{"--max-epochs", "0", "--no-log", "--no-checkpoints", "--no-progress"}
	cases := []struct {
		args       []string
		want, lack []string
	}{
		{append([]string{"train", "mnist-mlp", "--set", "TrainLimit=-1"}, off...), []string{"TrainLimit = -1: want 0 (all 60000) or 1..60000"}, nil},
		{append([]string{"train", "mnist-mlp", "--set", "ValSize=-5"}, off...), []string{"ValSize = -5: want 1..59999"}, nil},
		{append([]string{"train", "mnist-mlp", "--set", "BatchSize=100000"}, off...), []string{"BatchSize = 100000", "exceeds the train split's 55000 samples"}, []string{"is empty"}},
		{[]string{"evaluate", "mnist-mlp", "--set", "EvalBatchSize=0", "--no-progress"}, []string{"EvalBatchSize = 0: want >= 1"}, nil},
		{append([]string{"train", "mnist-mlp", "--resume", "auto", "--no-checkpoints"}, quick...), []string{"--resume auto", "--no-checkpoints", "--resume PATH"}, []string{"WithResume", "WithoutCheckpoints"}},
		{[]string{"completion", "tcsh"}, []string{`unknown shell "tcsh"`, "bash", "fish", "powershell", "zsh"}, nil},
		{[]string{"completion"}, []string{"completion needs a shell", "bash", "zsh"}, nil},
	}
	for _, c := range cases {
		code, out, errs := runCLI(c.args...)
		if code == 0 {
			t.Errorf("%v: exit 0, want an error\nstdout:\n%s", c.args, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errs, w)
			}
		}
		for _, w := range c.lack {
			if strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q says %q", c.args, errs, w)
			}
		}
	}
}

// TestRunDirRefusedBeforeTraining: a --run-dir the run cannot write into (a file, a path under a
// file) is refused before anything is set up, naming the flag, the path and why, rather than at
// the first checkpoint after a whole epoch; with nothing to write (--no-log --no-checkpoints) it
// is not looked at.
func TestRunDirRefusedBeforeTraining(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir   string
		extra []string
		want  string
	}{
		{file, nil, "is a file, not a directory"},
		{filepath.Join(file, "run"), []string{"--no-log"}, "cannot create it"}, // the checkpoints alone write there
	} {
		args := append(append([]string{"train", "mnist-mlp", "--run-dir", c.dir}, quick...), c.extra...)
		code, out, errs := runCLI(args...)
		if code == 0 {
			t.Errorf("%v: exit 0\n%s", args, out)
			continue
		}
		for _, w := range []string{"--run-dir " + c.dir, c.want, "writable directory"} {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q lacks %q", args, errs, w)
			}
		}
		if strings.Contains(out, "epoch 1/") {
			t.Errorf("%v: it trained an epoch before refusing the run dir:\n%s", args, out)
		}
	}
	args := append([]string{"train", "mnist-mlp", "--run-dir", file, "--no-log", "--no-checkpoints"}, quick...)
	args = append(args, "--max-epochs", "0")
	if code, out, errs := runCLI(args...); code != 0 {
		t.Errorf("%v: nothing is written into the run dir, yet exit %d: %s\n%s", args, code, errs, out)
	}
}

// TestExportInputSpecMisfitNamesTheFlag: a checkpoint that does not fit the model an
// --input-spec builds is blamed on the flag, naming the --input-spec, the shape it gave and the shape the
// checkpoint's model reads.
func TestExportInputSpecMisfitNamesTheFlag(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	if code, out, errs := runCLI(append([]string{"train", "mnist-mlp", "--run-dir", run, "--no-log"}, quick...)...); code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errs, out)
	}
	code, out, errs := runCLI("export", "mnist-mlp", "--preset", "tiny", "--checkpoint", run, "--out", filepath.Join(dir, "bundle"), "--input-spec", "image=float32:783")
	if code == 0 {
		t.Fatalf("export with a 783-wide image spec: exit 0\n%s", out)
	}
	for _, w := range []string{"--input-spec image=float32:783", `"image" is [783] per row`, "trained on 784 values per row", "give --input-spec image=float32:784"} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr %q lacks %q", errs, w)
		}
	}
	// A misfit the --input-spec's width does not explain (a rank the layer reads differently) still names
	// the flag.
	code, _, errs = runCLI("export", "mnist-mlp", "--preset", "tiny", "--checkpoint", run, "--out", filepath.Join(dir, "bundle2"), "--input-spec", "image=float32:28x28")
	if code == 0 || !strings.Contains(errs, "--input-spec image=float32:28x28") || !strings.Contains(errs, "[784 64] in the checkpoint") {
		t.Errorf("28x28 spec: exit %d, stderr %q", code, errs)
	}
	// A dtype that makes the model unbuildable (integer weights) is blamed on the flag too, not
	// left as the optimizer's complaint about a parameter.
	code, _, errs = runCLI("export", "mnist-mlp", "--preset", "tiny", "--checkpoint", run, "--out", filepath.Join(dir, "bundle3"), "--input-spec", "image=int32:784")
	if code == 0 || !strings.Contains(errs, "--input-spec image=int32:784: the model does not build from these specs alone") {
		t.Errorf("int32 spec: exit %d, stderr %q", code, errs)
	}
}
