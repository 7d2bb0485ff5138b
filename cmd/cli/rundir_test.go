package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/tblog"
)

// TestTrainTwiceIntoOneRunDir: a second fresh train into a run dir that holds a run is refused,
// naming the ways out; --overwrite starts afresh, removing the earlier run's files (and the
// plots nitro plot drew, and the TensorBoard events in tb/) but no other; --overwrite with
// --resume is refused.
func TestTrainTwiceIntoOneRunDir(t *testing.T) {
	t.Cleanup(compilecache.Default().Reset)
	dir := t.TempDir()
	tiny := []string{"train", "mnist-mlp", "--preset", "tiny", "--set", "TrainLimit=2000", "--set", "TestLimit=200", "--max-epochs", "1", "--run-dir", dir, "--no-progress"}
	if code, out, errs := runCLI(tiny...); code != 0 {
		t.Fatalf("train: exit %d: %s\n%s", code, errs, out)
	}
	code, out, errs := runCLI(append(tiny, "--set", "Hidden=16")...)
	if code != 1 {
		t.Fatalf("a second fresh train into %s: exit %d, want 1:\n%s", dir, code, out)
	}
	for _, w := range []string{`RunDir "` + dir + `"`, "already holds a run (1 checkpoint, a ", "metrics.jsonl", "--resume auto", "--run-dir", "--overwrite"} {
		if !strings.Contains(errs, w) {
			t.Errorf("the refusal lacks %q:\n%s", w, errs)
		}
	}
	if code, _, errs := runCLI("plot", dir); code != 0 {
		t.Fatalf("plot: %s", errs)
	}
	foreign := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(foreign, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}

	// The earlier run's TensorBoard events, as the tblog logger writes them.
	tb := tblog.ForRun(dir)
	if err := tb.LogParams(map[string]any{"Hidden": 8}); err != nil {
		t.Fatal(err)
	}
	if err := tb.Finish(logjson.StatusCompleted); err != nil {
		t.Fatal(err)
	}

	code, _, errs = runCLI(append(tiny, "--overwrite", "--resume", "auto")...)
	if code != 1 || !strings.Contains(errs, "--overwrite with --resume auto") {
		t.Errorf("--overwrite --resume auto: exit %d, stderr %q; want the two refused together", code, errs)
	}

	code, out, errs = runCLI(append(tiny, "--set", "Hidden=16", "--overwrite")...)
	if code != 0 {
		t.Fatalf("train --overwrite: exit %d: %s\n%s", code, errs, out)
	}
	for _, w := range []string{"overwrite: removed the earlier run from " + dir + ": 1 checkpoint file(s), manifest.json, metrics.jsonl (",
		"tb/ (1 TensorBoard event file(s))", "overwrite: removed " + filepath.Join(dir, "plots")} {
		if !strings.Contains(out, w) {
			t.Errorf("train --overwrite does not say %q:\n%s", w, out)
		}
	}
	if b, err := os.ReadFile(foreign); err != nil || string(b) != "mine" {
		t.Errorf("--overwrite touched %s: %q, %v", foreign, b, err)
	}
	if _, err := os.Stat(tb.Dir()); !os.IsNotExist(err) {
		t.Errorf("the earlier run's TensorBoard folder %s is still there (%v)", tb.Dir(), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "plots")); !os.IsNotExist(err) {
		t.Errorf("the earlier run's plots are still there (%v)", err)
	}
	rec, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil || strings.Count(string(rec), `"type":"params"`) != 1 || !strings.Contains(string(rec), `"Hidden":16`) {
		t.Errorf("metrics.jsonl after --overwrite: want the new run's params alone (%v):\n%.600s", err, rec)
	}
	if m, err := checkpoint.ReadManifest(dir); err != nil || len(m) != 1 {
		t.Errorf("the manifest after --overwrite: %v (%v); want the new run's one checkpoint", m, err)
	}
}
