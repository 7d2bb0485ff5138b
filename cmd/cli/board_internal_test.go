package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// expandRunDirs: a parent folder stands for the runs below it (up to three levels, not inside a
// run), a run folder and a folder that does not exist yet stay as given.
func TestExpandRunDirs(t *testing.T) {
	root := t.TempDir()
	mk := func(rel string, run bool) string {
		dir := filepath.Join(root, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if run {
			if err := os.WriteFile(filepath.Join(dir, "metrics.jsonl"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	runs := mk("runs", false)
	mlp := mk("runs/MLP", true)
	mk("runs/MLP/old/inner", true) // inside a run: not a run of its own here
	cnn := mk("runs/sweep/CNN/lr-0.1", true)
	mk("runs/a/b/c/too-deep", true)
	mk("runs/empty", false)
	waiting := filepath.Join(root, "not-yet")

	got, expanded := expandRunDirs([]string{runs, mlp, waiting})
	want := []string{mlp, cnn, mlp, waiting}
	if !slices.Equal(got, want) {
		t.Errorf("runs %v, want %v", got, want)
	}
	if len(expanded) != 1 || !strings.Contains(expanded[0], runs+" holds 2 runs: "+mlp+", "+cnn) {
		t.Errorf("expanded %q, want one line saying %s holds 2 runs", expanded, runs)
	}
	if got, expanded := expandRunDirs([]string{filepath.Join(root, "runs/empty")}); len(got) != 1 || len(expanded) != 0 {
		t.Errorf("a folder holding no run: %v, %v; want it as given, nothing expanded", got, expanded)
	}
}
