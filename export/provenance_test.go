package export_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/export"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/prefetch"
)

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// exportOrSkipLocally exports n; without the XLA plugin it stops the test (a failure in CI,
// where the plugin is a prerequisite).
func exportOrSkipLocally(t *testing.T, n *core.Nitro, dir string) map[string]string {
	t.Helper()
	b, err := export.Export(n, dir, export.ExportSpec{Name: "prov", BatchSizes: []int{2}})
	if err != nil && strings.Contains(err.Error(), "no plugin found") {
		prereq.XLAPlugin.Absent(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The manifest on disk says what the returned bundle says.
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Provenance map[string]string `json:"provenance"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range b.Provenance {
		if m.Provenance[k] != v {
			t.Errorf("manifest provenance %s = %q, the bundle says %q", k, m.Provenance[k], v)
		}
	}
	return m.Provenance
}

// Exporting the weights of a run directory names, in the bundle's provenance, the checkpoint
// file that was restored (the directory's newest) and the sha256 of its bytes, with the
// directory kept as the argument given; a file argument is recorded as itself.
func TestExportProvenanceNamesTheRestoredFile(t *testing.T) {
	runDir := t.TempDir()
	trained := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(runDir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(2))...)
	coretest.Train(t, trained)
	newest, err := core.NewestCheckpoint(runDir)
	if err != nil {
		t.Fatal(err)
	}
	newest, _ = filepath.Abs(newest)
	absDir, _ := filepath.Abs(runDir)

	spec := prefetch.FieldSpec{Name: "x", DType: dtypes.Float32, Shape: []int{coretest.Features}}
	n := coretest.New(t, &coretest.Reg{}, coretest.GoOpts(nil, core.WithInputSpecs(spec), core.WithCheckpoint(runDir))...)
	prov := exportOrSkipLocally(t, n, filepath.Join(t.TempDir(), "from_dir"))
	if prov["checkpoint"] != newest {
		t.Errorf("provenance checkpoint = %q, want the restored file %q", prov["checkpoint"], newest)
	}
	if want := fileSHA256(t, newest); prov["checkpoint_sha256"] != want {
		t.Errorf("provenance checkpoint_sha256 = %q, want %q", prov["checkpoint_sha256"], want)
	}
	if prov["checkpoint_arg"] != absDir {
		t.Errorf("provenance checkpoint_arg = %q, want the directory given, %q", prov["checkpoint_arg"], absDir)
	}

	// The first checkpoint named as a file: that file and its own hash, no _arg (it is the file).
	entries, err := os.ReadDir(runDir)
	if err != nil {
		t.Fatal(err)
	}
	var other string
	for _, e := range entries {
		if p, _ := filepath.Abs(filepath.Join(runDir, e.Name())); strings.HasSuffix(e.Name(), filepath.Ext(newest)) && p != newest {
			other = p
		}
	}
	if other == "" {
		t.Fatalf("want a second checkpoint in %s: %v", runDir, entries)
	}
	n2 := coretest.New(t, &coretest.Reg{}, coretest.GoOpts(nil, core.WithInputSpecs(spec), core.WithCheckpoint(other))...)
	prov2 := exportOrSkipLocally(t, n2, filepath.Join(t.TempDir(), "from_file"))
	if prov2["checkpoint"] != other || prov2["checkpoint_sha256"] != fileSHA256(t, other) {
		t.Errorf("provenance checkpoint %q sha256 %q, want %q %q", prov2["checkpoint"], prov2["checkpoint_sha256"], other, fileSHA256(t, other))
	}
	if _, ok := prov2["checkpoint_arg"]; ok || prov2["checkpoint_sha256"] == prov["checkpoint_sha256"] {
		t.Errorf("a file argument: provenance %v", prov2)
	}

	// A resumed run names the file it resumed from, and its hash.
	r := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(runDir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(2), core.WithResume(core.ResumeAuto))...)
	prov3 := exportOrSkipLocally(t, r, filepath.Join(t.TempDir(), "resumed"))
	if prov3["resumed_from"] != newest || prov3["resumed_from_sha256"] != fileSHA256(t, newest) {
		t.Errorf("resumed provenance %v, want resumed_from %s with its sha256", prov3, newest)
	}
	if _, ok := prov3["checkpoint"]; ok {
		t.Errorf("a resumed run records checkpoint = %q; it started from no WithCheckpoint", prov3["checkpoint"])
	}
}

// TestExportNamesTheCheckpointEpoch: a bundle exported from WithCheckpoint's weights records the
// checkpoint's epoch and step, not the fresh run's zeros.
func TestExportNamesTheCheckpointEpoch(t *testing.T) {
	dir := t.TempDir()
	every, err := checkpoint.NewEveryN(1, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	coretest.Train(t, coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(coretest.Data(t, 16)), core.WithMaxEpochs(2), core.WithCheckpointer(every))...))
	entries, err := checkpoint.ReadManifest(dir)
	if err != nil || len(entries) != 2 {
		t.Fatalf("manifest %+v, %v; want 2 checkpoints", entries, err)
	}
	w := coretest.New(t, &coretest.Reg{}, coretest.GoOpts(nil, core.WithData(coretest.Data(t, 16)), core.WithCheckpoint(dir))...)
	b, err := export.Export(w, filepath.Join(t.TempDir(), "bundle"), export.ExportSpec{Name: "reg"})
	if err != nil {
		coretest.WantErr(t, err, "no plugin found")
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
