package cli

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// splitRunDirs: a run folder and a folder that does not exist yet are runs; any other folder (a
// parent such as runs/, a run dir whose file is not written yet) is watched.
func TestSplitRunDirs(t *testing.T) {
	root := t.TempDir()
	run := filepath.Join(root, "runs", "MLP")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(run, "metrics.jsonl"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	parent, waiting := filepath.Join(root, "runs"), filepath.Join(root, "not-yet")
	runs, watch := splitRunDirs([]string{parent, run, waiting})
	if !slices.Equal(runs, []string{run, waiting}) || !slices.Equal(watch, []string{parent}) {
		t.Errorf("runs %v, watched %v; want [%s %s], [%s]", runs, watch, run, waiting, parent)
	}
}
