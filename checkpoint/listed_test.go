package checkpoint

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// threeEpochs saves epochs 1..3 through an EveryN(1), which keeps them all, and returns the
// checkpointer and the paths, oldest first.
func threeEpochs(t *testing.T, opts ...Option) (*EveryN, string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	if len(opts) > 0 {
		dir = "/run"
	}
	en, err := NewEveryN(1, dir, nil, append([]Option{fast}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for e := 1; e <= 3; e++ {
		p, err := en.Save(epochRecord(e, 16, 1/float64(e)))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return en, dir, paths
}

// editManifest rewrites dir's manifest through edit.
func editManifest(t *testing.T, dir string, edit func(*manifest)) {
	t.Helper()
	path := filepath.Join(dir, ManifestName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestManifestCrossCheck: the manifest is an index, not under any checksum; Read, Info and Load
// of a listed file refuse when its entry disagrees with the record, naming the field and both
// values.
func TestManifestCrossCheck(t *testing.T) {
	en, dir, paths := threeEpochs(t)
	score := 0.25
	for _, tc := range []struct {
		name string
		edit func(*ManifestEntry)
		want string
	}{
		{"epoch", func(e *ManifestEntry) { e.Epoch = 7 }, "epoch: manifest 7, record 2"},
		{"step", func(e *ManifestEntry) { e.Step++ }, "step: manifest 201, record 200"},
		{"stop reason", func(e *ManifestEntry) { e.StopReason = "early_stop" }, `stop_reason: manifest "early_stop", record ""`},
		{"score", func(e *ManifestEntry) { e.Metric, e.Score = "val_loss", &score }, "score: manifest 0.25, record's val_loss 0.5"},
		{"metric", func(e *ManifestEntry) { e.Metric, e.Score = "accuracy", &score }, `metric "accuracy", which the record lacks`},
	} {
		editManifest(t, dir, func(m *manifest) { tc.edit(&m.Checkpoints[1]) })
		for what, err := range map[string]error{
			"Read": second(Read(paths[1])),
			"Info": second(Info(paths[1])),
			"Load": second(en.Load(paths[1])),
		} {
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "checkpoints[1]") {
				t.Errorf("%s, %s: %v; want an error with %q", tc.name, what, err, tc.want)
			}
		}
		editManifest(t, dir, func(m *manifest) {
			m.Checkpoints[1] = ManifestEntry{File: filepath.Base(paths[1]), Epoch: 2, Step: 200}
		})
		if _, err := Read(paths[1]); err != nil {
			t.Fatalf("%s: the restored entry: %v", tc.name, err)
		}
	}
	// A file copied out of the run dir has no manifest beside it; an unlisted one is not checked.
	b, _ := os.ReadFile(paths[0])
	out := filepath.Join(t.TempDir(), "copy.safetensors")
	os.WriteFile(out, b, 0o644)
	if _, err := Read(out); err != nil {
		t.Errorf("a copy outside the run dir: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

// TestNewestMissing: when the newest listed checkpoint was deleted or replaced by a directory,
// Latest and Newest say so, naming the file and the older checkpoints, instead of answering
// with a path that fails later (or a run dir with no manifest).
func TestNewestMissing(t *testing.T) {
	for _, how := range []string{"deleted", "directory"} {
		en, dir, paths := threeEpochs(t)
		os.Remove(paths[2])
		want := "is missing"
		if how == "directory" {
			os.Mkdir(paths[2], 0o755)
			want = "is a directory"
		}
		_, ok, err := en.Latest()
		_, ok2, err2 := Newest(dir)
		for _, e := range []error{err, err2} {
			var ne *NewestError
			if !errors.As(e, &ne) || ok || ok2 {
				t.Fatalf("%s: error %v, want a *NewestError", how, e)
			}
			if ne.Path != paths[2] || !strings.Contains(e.Error(), want) || !strings.Contains(e.Error(), paths[2]) {
				t.Errorf("%s: %v; want %s named as %q", how, e, paths[2], want)
			}
			if len(ne.Older) != 2 || !strings.HasPrefix(ne.Older[0], paths[1]+" (epoch 2, step 200)") || !strings.HasPrefix(ne.Older[1], paths[0]) {
				t.Errorf("%s: older %q, want %s then %s", how, ne.Older, paths[1], paths[0])
			}
		}
	}
	// The same through MemFS, whose directories are not files either.
	m := NewMemFS()
	en, dir, paths := threeEpochs(t, WithFS(m))
	m.Remove(paths[2])
	m.MkdirAll(paths[2])
	var ne *NewestError
	if _, _, err := en.Latest(); !errors.As(err, &ne) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("MemFS %s: %v", dir, err)
	}
}

// TestPendingRotationFinished kills a save after its final manifest and before it removed the
// displaced file: the next process's first open of the directory (Latest, as a resume does, or
// Load) removes the file and drops it from the manifest, with no Save needed.
func TestPendingRotationFinished(t *testing.T) {
	for _, open := range []string{"Latest", "Load"} {
		m, first, newest := pendingRemoval(t)
		if _, err := m.ReadFile(first); err != nil {
			t.Fatalf("the displaced file is already gone (%v): the test does not reach the state it tests", err)
		}

		next, _ := NewTopK(1, "val_loss", "min", "/run", nil, WithFS(m), fast)
		switch open {
		case "Latest":
			if p, ok, err := next.Latest(); err != nil || !ok || p != newest {
				t.Fatalf("Latest = %s, %v, %v", p, ok, err)
			}
		case "Load":
			if _, err := next.Load(newest); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := m.ReadFile(first); err == nil {
			t.Errorf("%s: the displaced %s is still there", open, first)
		}
		mf, err := readManifest(m, "/run")
		if err != nil || len(mf.Displaced) != 0 || len(mf.Checkpoints) != 1 || mf.Checkpoints[0].File != filepath.Base(newest) {
			t.Errorf("%s: manifest %+v, %v; want only %s and nothing displaced", open, mf, err, newest)
		}
		if names, _ := m.ReadDir("/run"); slices.Contains(names, filepath.Base(first)) {
			t.Errorf("%s: directory %v", open, names)
		}
	}
}

// TestCrashDuringAnOverwrite cuts the power at each operation of a save that overwrites a
// listed name (the same epoch and step trained again, another stop reason and metric): after
// the crash every listed checkpoint still agrees with its manifest entry and loads, and the
// next process resumes and saves on.
func TestCrashDuringAnOverwrite(t *testing.T) {
	crash := errors.New("power cut")
	for cut := 0; ; cut++ {
		m := NewMemFS()
		en, _ := NewEveryN(1, "/run", nil, WithFS(m), WithIORetry(1, 0))
		for e := 1; e <= 3; e++ {
			r := epochRecord(e, 64, 0.5)
			r.StopReason = "completed"
			if _, err := en.Save(r); err != nil {
				t.Fatal(err)
			}
		}
		again := epochRecord(3, 64, 0.25)
		again.StopReason = "requested"
		m.FailAfter(cut, crash)
		_, err := en.Save(again)
		m.Crash()
		m.ClearFaults()

		for _, e := range mustManifest(t, m).Checkpoints {
			if _, err := readRecord(m, "/run/"+e.File); err != nil {
				t.Fatalf("cut %d: listed %s: %v", cut, e.File, err)
			}
		}
		en2, _ := NewEveryN(1, "/run", nil, WithFS(m), WithIORetry(1, 0))
		latest, ok, lerr := en2.Latest()
		if lerr != nil || !ok {
			t.Fatalf("cut %d: Latest: %v %v", cut, ok, lerr)
		}
		if _, err := en2.Load(latest); err != nil {
			t.Fatalf("cut %d: resume: %v", cut, err)
		}
		if _, err := en2.Save(epochRecord(4, 64, 0.1)); err != nil {
			t.Fatalf("cut %d: save after the crash: %v", cut, err)
		}
		checkDir(t, m, "/run")
		if err == nil {
			t.Logf("cut the power at each of %d operations", cut)
			return
		}
	}
}

// TestSaveRefusesOutOfBounds: a record past the counters' bounds is refused before the
// directory changes at all.
func TestSaveRefusesOutOfBounds(t *testing.T) {
	m := NewMemFS()
	en, _ := NewEveryN(1, "/run", nil, WithFS(m), fast)
	r := epochRecord(1, 8, 0.5)
	r.Epoch = MaxEpoch + 1
	if _, err := en.Save(r); err == nil || !strings.Contains(err.Error(), "record epoch") {
		t.Fatalf("Save of epoch %d: %v", r.Epoch, err)
	}
	if names, err := m.ReadDir("/run"); err == nil && len(names) > 0 {
		t.Errorf("a refused Save left %v", names)
	}
}
