package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/nitro-go/nitro/tensorfile"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var fast = WithIORetry(3, time.Millisecond)

// manifestEpochs lists the epochs the manifest holds, oldest first.
func manifestEpochs(t *testing.T, fsys FS, dir string) []int {
	t.Helper()
	m, err := readManifest(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	var eps []int
	for _, e := range m.Checkpoints {
		eps = append(eps, e.Epoch)
	}
	return eps
}

// checkDir requires the directory to hold exactly the manifest and the files it lists, each
// loading and verifying.
func checkDir(t *testing.T, fsys FS, dir string) {
	t.Helper()
	m, err := readManifest(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ManifestName}
	for _, e := range m.Checkpoints {
		want = append(want, e.File)
		r, err := readRecord(fsys, filepath.Join(dir, e.File))
		if err != nil {
			t.Fatal(err)
		}
		checkEpochRecord(t, r)
		if r.Epoch != e.Epoch {
			t.Fatalf("%s holds epoch %d, the manifest says %d", e.File, r.Epoch, e.Epoch)
		}
	}
	slices.Sort(want)
	got, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("directory holds %q, want %q", got, want)
	}
}

func TestTopKRetention(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   string
		scores []float64
		want   [][]int // epochs after each save
	}{
		{"min, newest worse", "min", []float64{0.5, 0.4, 0.6, 0.3, 0.7},
			[][]int{{1}, {1, 2}, {1, 2, 3}, {2, 4}, {2, 4, 5}}},
		{"min, newest better", "min", []float64{0.5, 0.4, 0.6, 0.3, 0.2},
			[][]int{{1}, {1, 2}, {1, 2, 3}, {2, 4}, {4, 5}}},
		{"max", "max", []float64{0.5, 0.4, 0.6, 0.3, 0.7},
			[][]int{{1}, {1, 2}, {1, 3}, {1, 3, 4}, {3, 5}}},
		{"ties keep the older", "min", []float64{0.5, 0.5, 0.5, 0.5, 0.5},
			[][]int{{1}, {1, 2}, {1, 2, 3}, {1, 2, 4}, {1, 2, 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			tk, err := NewTopK(2, "val_loss", tc.mode, dir, nil, fast)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range tc.scores {
				path, err := tk.Save(epochRecord(i+1, 64, s))
				if err != nil {
					t.Fatal(err)
				}
				if want := filepath.Join(dir, Filename(NameArgs{Epoch: i + 1, Step: (i + 1) * 100, Metric: "val_loss", Score: s, Scored: true})); path != want {
					t.Fatalf("Save returned %s, want %s", path, want)
				}
				if got := manifestEpochs(t, OSFS{}, dir); !slices.Equal(got, tc.want[i]) {
					t.Fatalf("after save %d: manifest holds epochs %v, want %v", i+1, got, tc.want[i])
				}
				checkDir(t, OSFS{}, dir)
				latest, ok, err := tk.Latest()
				if err != nil || !ok || latest != path {
					t.Fatalf("Latest = %s, %v, %v; want %s", latest, ok, err, path)
				}
			}
			entries, err := ReadManifest(dir)
			if err != nil || len(entries) == 0 || entries[len(entries)-1].Metric != "val_loss" || *entries[len(entries)-1].Score != tc.scores[4] {
				t.Errorf("ReadManifest = %+v, %v", entries, err)
			}
		})
	}
}

func TestTopKUnscoredAndRefusals(t *testing.T) {
	m := NewMemFS()
	tk, _ := NewTopK(2, "val_loss", "min", "/run", nil, WithFS(m), fast)
	for ep := 1; ep <= 3; ep++ {
		r := epochRecord(ep, 8, 0)
		r.Metrics = map[string]float64{"train_loss": 1}
		if _, err := tk.Save(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := manifestEpochs(t, m, "/run"); !slices.Equal(got, []int{3}) {
		t.Errorf("unscored: manifest holds %v, want only the newest", got)
	}
	checkDir(t, m, "/run")
	if names, _ := m.ReadDir("/run"); !slices.Contains(names, "epoch-0003-step-300.safetensors") {
		t.Errorf("an unscored checkpoint's name has a metric segment: %v", names)
	}
	before, _ := m.ReadDir("/run")
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := tk.Save(epochRecord(4, 8, v))
		if err == nil || !strings.Contains(err.Error(), "val_loss") {
			t.Errorf("score %v: %v", v, err)
		}
	}
	if after, _ := m.ReadDir("/run"); !slices.Equal(before, after) {
		t.Errorf("a refused save changed the directory: %v -> %v", before, after)
	}
	bad := epochRecord(5, 8, 1)
	bad.Tensors = append(bad.Tensors, Tensor{Name: "w", DType: tensorfile.U8, Shape: []int{0}})
	if _, err := tk.Save(bad); err == nil {
		t.Error("a record with a duplicate tensor was saved")
	}
	if _, err := tk.Save(nil); err == nil {
		t.Error("nil record saved")
	}
	for _, args := range []struct {
		k            int
		metric, mode string
	}{{-1, "m", "min"}, {1, "", "min"}, {1, "m", "lowest"}} {
		if _, err := NewTopK(args.k, args.metric, args.mode, "/d", nil); err == nil {
			t.Errorf("NewTopK%+v accepted", args)
		}
	}
	if _, err := NewEveryN(0, "/d", nil); err == nil {
		t.Error("NewEveryN(0) accepted")
	}
}

func TestEveryN(t *testing.T) {
	m := NewMemFS()
	en, _ := NewEveryN(2, "/run", nil, WithFS(m), fast)
	want := [][]int{{1}, {2}, {2, 3}, {2, 4}, {2, 4, 5}}
	for ep := 1; ep <= 5; ep++ {
		path, err := en.Save(epochRecord(ep, 8, 0.1))
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(path) != fmt.Sprintf("epoch-%04d-step-%d.safetensors", ep, ep*100) {
			t.Errorf("EveryN named %s", path)
		}
		if got := manifestEpochs(t, m, "/run"); !slices.Equal(got, want[ep-1]) {
			t.Fatalf("after epoch %d: %v, want %v", ep, got, want[ep-1])
		}
		checkDir(t, m, "/run")
	}
	latest, ok, err := en.Latest()
	if !ok || err != nil || filepath.Base(latest) != "epoch-0005-step-500.safetensors" {
		t.Errorf("Latest = %s %v %v", latest, ok, err)
	}
	r, err := en.Load(latest)
	if err != nil || r.Epoch != 5 {
		t.Errorf("Load = %v", err)
	}
}

func TestAdoptNameAndLatest(t *testing.T) {
	m := NewMemFS()
	tk, _ := NewTopK(1, "val_loss", "min", "", nil, WithFS(m), fast)
	if _, err := tk.Save(epochRecord(1, 8, 1)); err == nil {
		t.Error("Save without a directory succeeded")
	}
	if _, _, err := tk.Latest(); err == nil {
		t.Error("Latest without a directory succeeded")
	}
	same := func(NameArgs) string { return "same.safetensors" }
	tk.Adopt("/run", same)
	tk.Adopt("/other", nil) // already set: ignored
	if tk.Dir() != "/run" {
		t.Errorf("Dir = %q", tk.Dir())
	}
	if _, ok, err := tk.Latest(); ok || err != nil {
		t.Errorf("Latest of an empty dir: %v %v", ok, err)
	}
	for ep := 1; ep <= 3; ep++ {
		if _, err := tk.Save(epochRecord(ep, 8, float64(ep))); err != nil {
			t.Fatal(err)
		}
	}
	// One name reused: the file holds the newest and the manifest lists it once.
	if got := manifestEpochs(t, m, "/run"); !slices.Equal(got, []int{3}) {
		t.Errorf("manifest %v", got)
	}
	checkDir(t, m, "/run")

	for _, name := range []string{"", "../x.safetensors", "a/b", ".nitro-tmp-x", ManifestName, ".."} {
		tk2, _ := NewTopK(1, "val_loss", "min", "/run2", func(NameArgs) string { return name }, WithFS(m))
		if _, err := tk2.Save(epochRecord(1, 8, 1)); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}

func TestTempLeftoversCleaned(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, tmpPrefix+"epoch-0001.safetensors.123")
	os.WriteFile(junk, []byte("partial"), 0o644)
	tk, _ := NewTopK(2, "val_loss", "min", dir, nil, fast)
	if _, err := tk.Save(epochRecord(1, 8, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(junk); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temporary leftover not removed: %v", err)
	}
	checkDir(t, OSFS{}, dir)
}

// faultSetup is a MemFS directory with three checkpoints (epochs 1-3, scores .5 .4 .6, k=2);
// saving epoch 4 at .3 would displace epochs 1 and 3.
func faultSetup(t *testing.T) (*MemFS, *TopK, map[string][]byte) {
	t.Helper()
	m := NewMemFS()
	tk, _ := NewTopK(2, "val_loss", "min", "/run", nil, WithFS(m), fast)
	for i, s := range []float64{0.5, 0.4, 0.6} {
		if _, err := tk.Save(epochRecord(i+1, 256, s)); err != nil {
			t.Fatal(err)
		}
	}
	return m, tk, snapshot(t, m, "/run")
}

func snapshot(t *testing.T, m *MemFS, dir string) map[string][]byte {
	t.Helper()
	names, _ := m.ReadDir(dir)
	out := map[string][]byte{}
	for _, n := range names {
		out[n], _ = m.ReadFile(filepath.Join(dir, n))
	}
	return out
}

const path4 = "/run/epoch-0004-step-400-val_loss=0.3.safetensors"

func TestSaveFaults(t *testing.T) {
	eio, eacces := syscall.EIO, syscall.EACCES
	for _, tc := range []struct {
		name   string
		inject func(m *MemFS)
		is     error
		names  string // a path the error must name
	}{
		{"write error", func(m *MemFS) { m.Fail(Fault{Op: OpWrite, Match: "epoch-0004", Err: eio}) }, eio, path4},
		{"fsync error", func(m *MemFS) { m.Fail(Fault{Op: OpSync, Match: "epoch-0004", Err: eio}) }, eio, path4},
		{"close error", func(m *MemFS) { m.Fail(Fault{Op: OpClose, Match: "epoch-0004", Err: eio}) }, eio, path4},
		{"rename error", func(m *MemFS) { m.Fail(Fault{Op: OpRename, Match: "epoch-0004", Err: eio}) }, eio, path4},
		{"create refused", func(m *MemFS) { m.Fail(Fault{Op: OpCreate, Match: "epoch-0004", Err: eacces}) }, eacces, path4},
		{"full disk", func(m *MemFS) { m.SetCapacity(m.used() + 100) }, syscall.ENOSPC, path4},
		{"full disk, not retried", func(m *MemFS) { m.Fail(Fault{Op: OpWrite, Match: "epoch-0004", Err: syscall.ENOSPC, Count: 1}) }, syscall.ENOSPC, path4},
		{"manifest rename error", func(m *MemFS) { m.Fail(Fault{Op: OpRename, Match: ManifestName, Err: eio}) }, eio, "/run/" + ManifestName},
		{"manifest full disk", func(m *MemFS) {
			m.Fail(Fault{Op: OpWrite, Match: ManifestName, Err: syscall.ENOSPC, Skip: 1}) // the second manifest write
		}, syscall.ENOSPC, "/run/" + ManifestName},
		{"intent manifest error", func(m *MemFS) { m.Fail(Fault{Op: OpSync, Match: ManifestName, Err: eio}) }, eio, "/run/" + ManifestName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, tk, before := faultSetup(t)
			tc.inject(m)
			path, err := tk.Save(epochRecord(4, 256, 0.3))
			if err == nil {
				t.Fatal("Save succeeded")
			}
			if path != "" || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.names) {
				t.Errorf("Save = %q, %v; want an error naming %s that is %v", path, err, tc.names, tc.is)
			}
			m.ClearFaults()
			m.SetCapacity(0)
			after := snapshot(t, m, "/run")
			for name, b := range before {
				if name == ManifestName { // its list is the same; a pending removal may be added
					mb, _ := parseManifest(name, b)
					ma, err := parseManifest(name, after[name])
					if err != nil || !reflect.DeepEqual(mb.Checkpoints, ma.Checkpoints) {
						t.Errorf("the manifest's list changed: %v", err)
					}
					continue
				}
				if !bytes.Equal(after[name], b) {
					t.Errorf("%s changed or was removed", name)
				}
			}
			for name := range after {
				if _, ok := before[name]; !ok && (IsTemp(name) || tc.names == path4) {
					t.Errorf("new file %s left behind", name)
				}
			}
			checkDirAllowing(t, m, "/run", path4)
			// The next save works and rotates as it should.
			if _, err := tk.Save(epochRecord(5, 256, 0.1)); err != nil {
				t.Fatal(err)
			}
			if got := manifestEpochs(t, m, "/run"); !slices.Equal(got, []int{2, 5}) {
				t.Errorf("after recovery: %v", got)
			}
		})
	}
}

// checkDirAllowing is checkDir that also lets one unlisted complete file exist.
func checkDirAllowing(t *testing.T, m *MemFS, dir, extra string) {
	t.Helper()
	if b, err := m.ReadFile(extra); err == nil {
		if _, err := decode(extra, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatalf("a partial file is visible under a final name: %v", err)
		}
		defer m.WriteFile(extra, b)
		m.Remove(extra)
	}
	checkDir(t, m, dir)
}

func TestSaveTransientRetried(t *testing.T) {
	for _, op := range []Op{OpCreate, OpWrite, OpSync, OpRename, OpSyncDir} {
		m, tk, _ := faultSetup(t)
		m.Fail(Fault{Op: op, Match: "", Err: syscall.EIO, Count: 2}) // the third attempt succeeds
		if _, err := tk.Save(epochRecord(4, 256, 0.3)); err != nil {
			t.Errorf("%s failing twice: %v", op, err)
		}
		if got := manifestEpochs(t, m, "/run"); !slices.Equal(got, []int{2, 4}) {
			t.Errorf("%s: %v", op, got)
		}
		checkDir(t, m, "/run")
	}
}

func TestRotationFailure(t *testing.T) {
	m, tk, _ := faultSetup(t)
	m.Fail(Fault{Op: OpRemove, Match: "epoch-0001", Err: syscall.EACCES})
	path, err := tk.Save(epochRecord(4, 256, 0.3))
	if path != path4 || !errors.Is(err, ErrNotRotated) || !strings.Contains(err.Error(), "epoch-0001") {
		t.Fatalf("Save = %q, %v", path, err)
	}
	mf, _ := readManifest(m, "/run")
	// The file that would not go stays listed displaced; the one removed is no longer named.
	if got := manifestEpochs(t, m, "/run"); !slices.Equal(got, []int{2, 4}) || len(mf.Displaced) != 1 || !strings.HasPrefix(mf.Displaced[0], "epoch-0001") {
		t.Fatalf("manifest %v, displaced %v", got, mf.Displaced)
	}
	if _, err := m.ReadFile("/run/epoch-0001-step-100-val_loss=0.5.safetensors"); err != nil {
		t.Fatal("the undeletable file is gone")
	}
	m.ClearFaults()
	if _, err := tk.Save(epochRecord(5, 256, 0.35)); err != nil {
		t.Fatal(err)
	}
	mf, _ = readManifest(m, "/run")
	if len(mf.Displaced) != 0 {
		t.Errorf("displaced %v; want none: every removal succeeded", mf.Displaced)
	}
	if _, err := m.ReadFile("/run/epoch-0001-step-100-val_loss=0.5.safetensors"); err == nil {
		t.Error("the file that could not be removed before is still there")
	}
	checkDir(t, m, "/run")
}

// TestLastSaveLeavesNoDisplaced: a save that rotates a checkpoint out leaves a manifest naming
// no displaced file once the removal succeeded, so a finished run's manifest lists only files
// that exist (it kept an entry for a file deleted right after it was written).
func TestLastSaveLeavesNoDisplaced(t *testing.T) {
	m, tk, _ := faultSetup(t)
	if _, err := tk.Save(epochRecord(4, 256, 0.3)); err != nil {
		t.Fatal(err)
	}
	mf, err := readManifest(m, "/run")
	if err != nil {
		t.Fatal(err)
	}
	if len(mf.Displaced) != 0 {
		t.Errorf("after a rotating save the manifest still names %v as displaced", mf.Displaced)
	}
	for _, e := range mf.Checkpoints {
		if _, err := m.ReadFile("/run/" + e.File); err != nil {
			t.Errorf("the manifest lists %s, which is not there: %v", e.File, err)
		}
	}
}

func TestManifest(t *testing.T) {
	if got, err := ReadManifest(filepath.Join(t.TempDir(), "missing")); err != nil || len(got) != 0 {
		t.Errorf("missing dir: %v, %v", got, err)
	}
	if got, err := ReadManifest(t.TempDir()); err != nil || len(got) != 0 {
		t.Errorf("empty dir: %v, %v", got, err)
	}
	for name, body := range map[string]string{
		"not JSON":        `{"version":1,`,
		"wrong version":   `{"version":2,"checkpoints":[]}`,
		"unknown field":   `{"version":1,"checkpoints":[],"x":1}`,
		"path in file":    `{"version":1,"checkpoints":[{"file":"../x","epoch":1,"step":1,"score":null}]}`,
		"empty file":      `{"version":1,"checkpoints":[{"file":"","epoch":1,"step":1,"score":null}]}`,
		"listed twice":    `{"version":1,"checkpoints":[{"file":"a","epoch":1,"step":1,"score":null},{"file":"a","epoch":2,"step":2,"score":null}]}`,
		"negative epoch":  `{"version":1,"checkpoints":[{"file":"a","epoch":-1,"step":1,"score":null}]}`,
		"trailing data":   `{"version":1,"checkpoints":[]} x`,
		"bad displaced":   `{"version":1,"checkpoints":[],"displaced":["a/b"]}`,
		"score as string": `{"version":1,"checkpoints":[{"file":"a","epoch":1,"step":1,"score":"1"}]}`,
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, ManifestName)
		os.WriteFile(path, []byte(body), 0o644)
		if _, err := ReadManifest(dir); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v; want an error naming %s", name, err, path)
		}
		tk, _ := NewTopK(1, "m", "min", dir, nil, fast)
		if _, err := tk.Save(epochRecord(1, 8, 1)); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: Save over a malformed manifest: %v", name, err)
		}
	}
}

// TestCrashAtEveryOperation cuts the power at each file-system operation of a save in turn
// (MemFS drops what was not synced) and checks that every checkpoint the manifest lists
// loads and verifies, that the manifest is the one from before or after the save, and that
// the next process saves and resumes.
func TestCrashAtEveryOperation(t *testing.T) {
	crash := errors.New("power cut")
	for cut := 0; ; cut++ {
		m := NewMemFS()
		tk, _ := NewTopK(2, "val_loss", "min", "/run", nil, WithFS(m), WithIORetry(1, 0))
		for i, s := range []float64{0.5, 0.4, 0.6} {
			if _, err := tk.Save(epochRecord(i+1, 64, s)); err != nil {
				t.Fatal(err)
			}
		}
		m.FailAfter(cut, crash)
		_, err := tk.Save(epochRecord(4, 64, 0.3))
		m.Crash()
		m.ClearFaults()

		got := manifestEpochs(t, m, "/run")
		if !slices.Equal(got, []int{1, 2, 3}) && !slices.Equal(got, []int{2, 4}) {
			t.Fatalf("cut %d: manifest lists %v", cut, got)
		}
		names, _ := m.ReadDir("/run")
		for _, n := range names {
			if IsTemp(n) || n == ManifestName {
				continue
			}
			if _, err := readRecord(m, "/run/"+n); err != nil {
				t.Fatalf("cut %d: a partial file under a final name: %v", cut, err)
			}
		}
		for _, e := range mustManifest(t, m).Checkpoints {
			r, err := readRecord(m, "/run/"+e.File)
			if err != nil {
				t.Fatalf("cut %d: listed %s does not load: %v", cut, e.File, err)
			}
			checkEpochRecord(t, r)
		}
		// A new process resumes from the newest and saves on.
		tk2, _ := NewTopK(2, "val_loss", "min", "/run", nil, WithFS(m), WithIORetry(1, 0))
		latest, ok, lerr := tk2.Latest()
		if lerr != nil || !ok {
			t.Fatalf("cut %d: Latest: %v %v", cut, ok, lerr)
		}
		if _, err := tk2.Load(latest); err != nil {
			t.Fatalf("cut %d: resume: %v", cut, err)
		}
		if _, err := tk2.Save(epochRecord(5, 64, 0.1)); err != nil {
			t.Fatalf("cut %d: save after the crash: %v", cut, err)
		}
		checkDir(t, m, "/run") // leftovers (temp files, displaced files) are gone
		if err == nil {
			if cut < 5 {
				t.Fatalf("the save completed within %d operations", cut)
			}
			t.Logf("cut the power at each of %d operations", cut)
			return
		}
	}
}

func mustManifest(t *testing.T, m *MemFS) *manifest {
	t.Helper()
	mf, err := readManifest(m, "/run")
	if err != nil {
		t.Fatal(err)
	}
	return mf
}

func TestConcurrentSaves(t *testing.T) {
	m := NewMemFS()
	tk, _ := NewTopK(3, "val_loss", "min", "/run", nil, WithFS(m), fast)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				ep := g*5 + i + 1
				if _, err := tk.Save(epochRecord(ep, 32, float64(ep%7))); err != nil {
					t.Error(err)
				}
				tk.Latest()
			}
		}()
	}
	wg.Wait()
	checkDir(t, m, "/run")
	if n := len(mustManifest(t, m).Checkpoints); n < 3 || n > 4 {
		t.Errorf("%d checkpoints, want K or K+1", n)
	}
}

func TestMemory(t *testing.T) {
	mem := NewMemory()
	if _, ok, _ := mem.Latest(); ok {
		t.Error("Latest of an empty Memory")
	}
	r := sampleRecord()
	path, err := mem.Save(r)
	if err != nil {
		t.Fatal(err)
	}
	r.Tensors[0].Data[0] ^= 1 // the saved copy is independent
	got, err := mem.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sameRecord(t, got, sampleRecord())
	if latest, ok, _ := mem.Latest(); !ok || latest != path {
		t.Errorf("Latest = %s", latest)
	}
	if _, err := mem.Load("mem:9/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of an unknown path: %v", err)
	}
	boom := errors.New("boom")
	mem.FailSaves(boom)
	if _, err := mem.Save(r); !errors.Is(err, boom) {
		t.Errorf("FailSaves: %v", err)
	}
	if len(mem.Paths()) != 1 {
		t.Errorf("Paths = %v", mem.Paths())
	}
}

func TestTransient(t *testing.T) {
	for err, want := range map[error]bool{
		syscall.EIO: true, syscall.EAGAIN: true, syscall.EINTR: true,
		syscall.ENOSPC: false, syscall.EACCES: false, fs.ErrNotExist: false,
		&fs.PathError{Op: "write", Path: "x", Err: syscall.EBUSY}: true,
	} {
		if Transient(err) != want {
			t.Errorf("Transient(%v) = %v", err, !want)
		}
	}
	var slept []time.Duration
	rt := retry{attempts: 4, base: 10 * time.Millisecond, sleep: func(d time.Duration) { slept = append(slept, d) }}
	calls := 0
	err := rt.do(func() error { calls++; return syscall.EIO })
	if calls != 4 || !errors.Is(err, syscall.EIO) || !slices.Equal(slept, []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}) {
		t.Errorf("calls %d, slept %v, err %v", calls, slept, err)
	}
}
