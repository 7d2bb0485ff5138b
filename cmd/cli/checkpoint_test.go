package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/compilecache"
)

// TestCheckpointCommands trains the tiny preset into a temporary run dir, which leaves a
// checkpoint per epoch; then ls lists them from the manifest, info reads one's header,
// evaluate --checkpoint scores the trained weights (the same test metrics the training run
// printed), and train --resume auto with a larger --max-epochs trains only the epochs left.
func TestCheckpointCommands(t *testing.T) {
	t.Cleanup(compilecache.Default().Reset) // the CLI reports the process-level cache: leave it empty
	dir := t.TempDir()
	tiny := []string{"--preset", "tiny", "--set", "TrainLimit=2000", "--set", "TestLimit=500", "--run-dir", dir, "--no-progress"}
	code, out, errs := runCLI(append([]string{"train", "mnist-mlp"}, tiny...)...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errs, out)
	}
	ranOn(t, "train", out)
	ck := regexp.MustCompile(`\ncheckpoint: (\S+)\n`).FindStringSubmatch(out)
	if ck == nil || !strings.HasPrefix(ck[1], filepath.Join(dir, "epoch-0002-step-")) || !strings.Contains(ck[1], "-val_loss=") {
		t.Fatalf("train does not name its newest checkpoint in %s:\n%s", dir, out)
	}
	testLine := regexp.MustCompile(`\ntest:[^\n]*\n`).FindString(out)

	code, ls, errs := runCLI("ls", dir)
	lines := strings.Split(strings.TrimSpace(ls), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "epoch 1 ") || !strings.Contains(lines[1], "epoch 2 ") ||
		!strings.Contains(lines[1], "val_loss ") || !strings.Contains(lines[1], "stopped: completed") || strings.Contains(lines[0], "stopped") {
		t.Fatalf("ls: exit %d, %s\n%s", code, errs, ls)
	}

	code, info, errs := runCLI("info", ck[1])
	for _, w := range []string{"epoch        2\n", "preset       tiny\n", "run id       -\n", "stop reason  completed\n", "val_accuracy ", "val_loss ", "train_loss "} {
		if code != 0 || !strings.Contains(info, w) {
			t.Fatalf("info %s: exit %d (%s), output lacks %q:\n%s", ck[1], code, errs, w, info)
		}
	}

	// The trained weights, from the file and from the run dir (its newest), score what the run
	// scored on the test split; no checkpoint or record is written.
	for _, from := range []string{ck[1], dir} {
		code, ev, errs := runCLI("evaluate", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=2000", "--set", "TestLimit=500", "--checkpoint", from, "--no-progress")
		if code != 0 || !strings.Contains(ev, testLine) || !strings.Contains(ev, "weights from "+ck[1]) {
			t.Fatalf("evaluate --checkpoint %s: exit %d (%s); want %q in:\n%s", from, code, errs, testLine, ev)
		}
	}

	code, out, errs = runCLI(append([]string{"train", "mnist-mlp", "--resume", "auto", "--max-epochs", "3"}, tiny...)...)
	if code != 0 {
		t.Fatalf("train --resume auto: exit %d: %s\n%s", code, errs, out)
	}
	for _, w := range []string{"resumed from " + ck[1], "epoch 3/3", "stopped: completed after 3 epochs", "checkpoint: " + filepath.Join(dir, "epoch-0003-step-")} {
		if !strings.Contains(out, w) {
			t.Fatalf("train --resume auto lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "epoch 1/3") || strings.Contains(out, "epoch 2/3") {
		t.Errorf("the resumed run trained epochs already done:\n%s", out)
	}
	if _, ls, _ = runCLI("ls", dir); !strings.Contains(ls, "epoch 3 ") {
		t.Errorf("ls after the resume:\n%s", ls)
	}
	// --resume PATH continues from that file; the same epoch trained again lands on the same name.
	code, again, errs := runCLI(append([]string{"train", "mnist-mlp", "--resume", ck[1], "--max-epochs", "3", "--no-log"}, tiny...)...)
	if code != 0 || !strings.Contains(again, "resumed from "+ck[1]) || !strings.Contains(again, "epoch 3/3") || strings.Contains(again, "epoch 2/3") {
		t.Fatalf("train --resume %s: exit %d (%s):\n%s", ck[1], code, errs, again)
	}
	if n3 := regexp.MustCompile(`checkpoint: \S+`).FindString(again); n3 == "" || !strings.Contains(out, n3) {
		t.Errorf("resuming the same epoch from the file wrote %q; the auto resume wrote the same epoch as:\n%s", n3, out)
	}

	// Info still describes an experiment; the commands refuse what they cannot do.
	if code, out, _ := runCLI("info", "mnist-mlp"); code != 0 || !strings.Contains(out, "Hidden") {
		t.Errorf("info mnist-mlp: exit %d\n%s", code, out)
	}
	empty := t.TempDir()
	if code, out, _ := runCLI("ls", empty); code != 0 || !strings.Contains(out, "no checkpoints in "+empty) {
		t.Errorf("ls of an empty dir: exit %d %q", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "ls needs one run directory"},
		{[]string{"train", "mnist-mlp", "--checkpoint", ck[1]}, "--checkpoint is an evaluate flag"},
		{[]string{"evaluate", "mnist-mlp", "--resume", "auto"}, "train flags"},
		{[]string{"evaluate", "mnist-mlp", "--preset", "tiny", "--checkpoint", empty}, "holds no checkpoint"},
		{[]string{"info", filepath.Join(dir, "metrics.jsonl")}, "metrics.jsonl"},
	} {
		if code, _, errs := runCLI(c.args...); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, errs, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "metrics.jsonl")); err != nil {
		t.Error(err)
	}
}
