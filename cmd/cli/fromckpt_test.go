package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/exportbundle"
)

// TestCheckpointRebuildsItsExperiment: a run trained with --preset tiny and two --set overrides is
// evaluated, exported and resumed from its checkpoint alone, with no --preset or --set: each
// succeeds and gives what the same command gives with the flags told again (the same test
// metrics, the same exported weights). A --preset or a GraphConst --set that contradicts the
// checkpoint is refused naming both values; a Host --set wins, reported; --weights-only builds
// the flags' experiment (the defaults here, which the tiny weights do not fit).
func TestCheckpointRebuildsItsExperiment(t *testing.T) {
	t.Cleanup(compilecache.Default().Reset)
	dir := t.TempDir()
	flags := []string{"--preset", "tiny", "--set", "TrainLimit=2000", "--set", "TestLimit=500"}
	code, out, errs := runCLI(append([]string{"train", "mnist-mlp", "--run-dir", dir, "--no-progress"}, flags...)...)
	if code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errs, out)
	}
	testLine := regexp.MustCompile(`\ntest:[^\n]*\n`).FindString(out)
	ck := regexp.MustCompile(`\ncheckpoint: (\S+)\n`).FindStringSubmatch(out)
	if testLine == "" || ck == nil {
		t.Fatalf("train printed no test line or checkpoint:\n%s", out)
	}

	// evaluate: the run's test metrics, from the run dir and from the file, flags told or not.
	for _, args := range [][]string{
		{"--checkpoint", dir},
		{"--checkpoint", ck[1]},
		append([]string{"--checkpoint", dir}, flags...),
		append([]string{"--checkpoint", dir, "--weights-only"}, flags...),
	} {
		code, ev, errs := runCLI(append([]string{"evaluate", "mnist-mlp", "--no-progress"}, args...)...)
		if code != 0 || !strings.Contains(ev, testLine) {
			t.Errorf("evaluate %v: exit %d (%s); want %q in:\n%s", args, code, errs, testLine, ev)
		}
	}

	// export: the same bundle weights without the flags as with them.
	bundles := map[string][]string{"bare": nil, "flags": flags, "weights-only": append([]string{"--weights-only"}, flags...)}
	weights := map[string][]byte{}
	for name, extra := range bundles {
		b := filepath.Join(t.TempDir(), name)
		code, ex, errs := runCLI(append([]string{"export", "mnist-mlp", "--checkpoint", dir, "--out", b}, extra...)...)
		if code != 0 || !strings.Contains(ex, "input:  pixels U8 [-1 784]") {
			t.Fatalf("export %v: exit %d (%s):\n%s", extra, code, errs, ex)
		}
		w, err := os.ReadFile(filepath.Join(b, exportbundle.WeightsFile))
		if err != nil {
			t.Fatal(err)
		}
		weights[name] = w
	}
	if !bytes.Equal(weights["bare"], weights["flags"]) || !bytes.Equal(weights["bare"], weights["weights-only"]) {
		t.Error("export without --preset wrote other weights than with it")
	}

	// train --resume PATH, and --resume auto in a copy of the run dir: one more epoch, the same
	// test metrics as the resume told the flags.
	resumed := map[string]string{}
	copied := t.TempDir()
	for _, f := range must(os.ReadDir(dir)) {
		if strings.HasSuffix(f.Name(), ".safetensors") || f.Name() == checkpoint.ManifestName {
			if err := os.WriteFile(filepath.Join(copied, f.Name()), must(os.ReadFile(filepath.Join(dir, f.Name()))), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for name, args := range map[string][]string{
		"bare":     {"--resume", ck[1], "--run-dir", t.TempDir()},
		"auto":     {"--resume", "auto", "--run-dir", copied},
		"flags":    append([]string{"--resume", ck[1], "--run-dir", t.TempDir()}, flags...),
		"straight": append([]string{"--run-dir", t.TempDir()}, flags...), // the uninterrupted run
	} {
		if name == "straight" {
			args = append(args, "--no-checkpoints")
		}
		code, out, errs := runCLI(append([]string{"train", "mnist-mlp", "--max-epochs", "3", "--no-log", "--no-progress"}, args...)...)
		if code != 0 || (name != "straight") != strings.Contains(out, "resumed from ") || !strings.Contains(out, "epoch 3/3") || (name != "straight") == strings.Contains(out, "epoch 1/3") {
			t.Fatalf("train %v: exit %d (%s):\n%s", args, code, errs, out)
		}
		resumed[name] = regexp.MustCompile(`\ntest:[^\n]*\n`).FindString(out)
	}
	if resumed["bare"] == "" || resumed["bare"] != resumed["flags"] || resumed["auto"] != resumed["flags"] || resumed["bare"] != resumed["straight"] {
		t.Errorf("resumed test lines differ: without flags %q, auto %q, with flags %q, the uninterrupted run's %q", resumed["bare"], resumed["auto"], resumed["flags"], resumed["straight"])
	}

	// A Host --set wins, reported.
	code, ev, errs := runCLI("evaluate", "mnist-mlp", "--no-progress", "--checkpoint", dir, "--set", "TestLimit=100")
	if code != 0 || !strings.Contains(ev, "Host field TestLimit: checkpoint 500, override 100") || strings.Contains(ev, testLine) {
		t.Errorf("evaluate --set TestLimit=100: exit %d (%s):\n%s", code, errs, ev)
	}

	// Refusals, naming both values.
	out2 := filepath.Join(t.TempDir(), "b")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"evaluate", "mnist-mlp", "--checkpoint", dir, "--preset", "small"}, []string{"--preset small contradicts the checkpoint", "trained with preset tiny", "--weights-only"}},
		{[]string{"export", "mnist-mlp", "--checkpoint", dir, "--out", out2, "--preset", "small"}, []string{"--preset small contradicts the checkpoint", "trained with preset tiny"}},
		{[]string{"train", "mnist-mlp", "--resume", ck[1], "--no-log", "--run-dir", t.TempDir(), "--preset", "small"}, []string{"--preset small contradicts the checkpoint", "trained with preset tiny"}},
		{[]string{"render", "mnist-mlp", "--checkpoint", dir, "--predictions", "--set", "Hidden=128"}, []string{"--set Hidden=128 contradicts the checkpoint", "GraphConst Hidden = 64", "(the flag gives 128)"}},
		{[]string{"evaluate", "mnist-mlp", "--checkpoint", dir, "--weights-only"}, []string{"does not fit this model"}},
		{[]string{"evaluate", "mnist-mlp", "--weights-only"}, []string{"--weights-only loads a checkpoint's weights", "--checkpoint PATH"}},
		{[]string{"train", "mnist-mlp", "--resume", "auto", "--weights-only"}, []string{"--weights-only with --resume auto"}},
	} {
		if c.args[0] != "export" {
			c.args = append(c.args, "--no-progress")
		}
		if code, _, errs := runCLI(c.args...); code != 1 || !containsAll(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", c.args, code, errs, c.want)
		}
	}
}

func containsAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
