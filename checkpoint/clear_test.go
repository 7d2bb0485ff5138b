package checkpoint

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestClear: Clear removes the checkpoints the manifest lists and the manifest, and keeps every
// other file; a malformed manifest removes nothing; a folder without one is an empty answer.
func TestClear(t *testing.T) {
	dir := t.TempDir()
	top, err := NewTopK(1, "val_loss", "min", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for e, score := range []float64{3, 2, 1} {
		if _, err := top.Save(epochRecord(e+1, 4, score)); err != nil {
			t.Fatal(err)
		}
	}
	listed, err := ReadManifest(dir)
	if err != nil || len(listed) != 1 {
		t.Fatalf("manifest %v, %v", listed, err)
	}
	foreign := filepath.Join(dir, "notes.txt")
	os.WriteFile(foreign, []byte("mine"), 0o644)

	removed, err := Clear(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{listed[0].File, ManifestName}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 || names[0].Name() != "notes.txt" {
		t.Errorf("after Clear the folder holds %v; want notes.txt alone", names)
	}
	if removed, err := Clear(dir); err != nil || len(removed) != 0 {
		t.Errorf("Clear of a folder without a manifest: %v, %v", removed, err)
	}

	os.WriteFile(filepath.Join(dir, ManifestName), []byte("{not json"), 0o644)
	if removed, err := Clear(dir); err == nil || len(removed) != 0 {
		t.Errorf("Clear with a malformed manifest: removed %v, err %v; want nothing removed and an error", removed, err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Error(err)
	}
}
