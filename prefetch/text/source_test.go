package text

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nitro-go/nitro/prefetch"
)

func TestWindowsAreTheText(t *testing.T) {
	dir, files := randomTree(t, 12)
	src, err := Open(Config{Path: dir, Context: 64, BatchSize: 8, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var total int
	for _, b := range files {
		total += len(b)
	}
	if src.Bytes() != int64(total) || src.Len() != total/(8*64) {
		t.Fatalf("Bytes %d, Len %d: want %d and %d", src.Bytes(), src.Len(), total, total/(8*64))
	}
	seen := map[string]bool{}
	for _, w := range allRows(t, src) {
		name := findIn(w, files)
		if name == "" {
			t.Fatalf("window %q is in no file", w)
		}
		seen[name] = true
	}
	if len(seen) < len(files)/2 {
		t.Errorf("windows came from %d of %d files: positions are not spread", len(seen), len(files))
	}
}

func TestDeterminism(t *testing.T) {
	dir, _ := randomTree(t, 10)
	cfg := Config{Path: dir, Context: 32, BatchSize: 4, BatchesPerEpoch: 6, Seed: 11, Val: 0.3}
	a, b := mustSplit(t, cfg), mustSplit(t, cfg)
	epoch := func(d prefetch.Data, split string, e int) [][]byte {
		if err := d[split].(prefetch.EpochSource).BeginEpoch(e); err != nil {
			t.Fatal(err)
		}
		return allRows(t, d[split])
	}
	if !slices.EqualFunc(epoch(a, "train", 2), epoch(b, "train", 2), bytes.Equal) {
		t.Fatal("the same seed and epoch gave different batches")
	}
	e0, e1 := epoch(a, "train", 0), epoch(a, "train", 1)
	if slices.EqualFunc(e0, e1, bytes.Equal) {
		t.Fatal("epochs 0 and 1 drew the same windows")
	}
	if !slices.EqualFunc(e0, epoch(a, "train", 0), bytes.Equal) {
		t.Fatal("replaying epoch 0 gave other windows")
	}
	if !slices.EqualFunc(epoch(a, "val", 0), epoch(a, "val", 5), bytes.Equal) {
		t.Fatal("the val split's windows changed with the epoch")
	}
	cfg.Seed++
	c := mustSplit(t, cfg)
	if slices.EqualFunc(e0, epoch(c, "train", 0), bytes.Equal) {
		t.Fatal("another seed drew the same windows")
	}
	// Window j does not depend on the batch size (SampleOrdered).
	cfg.Seed--
	cfg.BatchSize, cfg.BatchesPerEpoch = 8, 3
	if !slices.EqualFunc(e0, epoch(mustSplit(t, cfg), "train", 0), bytes.Equal) {
		t.Fatal("batch size 8 drew other windows than batch size 4")
	}
}

func TestCheckBatchAt(t *testing.T) {
	dir, _ := randomTree(t, 20)
	data := mustSplit(t, Config{Path: dir, Context: 48, BatchSize: 5, Seed: 1, Val: 0.25})
	for _, split := range []string{"train", "val"} {
		src := data[split].(*Source)
		for _, e := range []int{0, 4} {
			if err := src.BeginEpoch(e); err != nil {
				t.Fatal(err)
			}
			if err := prefetch.CheckBatchAt(src, true); err != nil {
				t.Errorf("%s, epoch %d: %v", split, e, err)
			}
		}
		if _, err := src.BatchAt(src.Len()); err == nil {
			t.Errorf("%s: BatchAt(Len()) did not fail", split)
		}
		// Whole batches only: an evaluation of the split leaves no window out (no warning that
		// a dropped partial batch is missing from its metrics).
		if got, want := src.Samples(), src.Len()*5; got != want {
			t.Errorf("%s: Samples() = %d, want Len()*BatchSize = %d", split, got, want)
		}
	}
}

func TestSplitByFile(t *testing.T) {
	dir, files := randomTree(t, 60)
	data := mustSplit(t, Config{Path: dir, Context: 40, BatchSize: 16, Seed: 2, Val: 0.3})
	train, val := data["train"].(*Source), data["val"].(*Source)
	tf, vf := train.Files(), val.Files()
	if len(tf)+len(vf) != len(files) || len(vf) < 5 || len(tf) < 20 {
		t.Fatalf("%d train and %d val files of %d", len(tf), len(vf), len(files))
	}
	for _, f := range vf {
		if slices.Contains(tf, f) {
			t.Fatalf("%s is in both splits", f)
		}
	}
	pick := func(names []string) map[string][]byte {
		m := map[string][]byte{}
		for _, n := range names {
			m[n] = files[n]
		}
		return m
	}
	for split, own := range map[string]*Source{"train": train, "val": val} {
		mine, theirs := pick(own.Files()), pick(tf)
		if split == "train" {
			theirs = pick(vf)
		}
		for _, w := range allRows(t, own) {
			if findIn(w, mine) == "" || findIn(w, theirs) != "" {
				t.Fatalf("a %s window is not from the %s files alone", split, split)
			}
		}
	}
	// The split is by path alone: the same files under another root split the same way.
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	again := mustSplit(t, Config{Path: moved, Context: 40, BatchSize: 16, Val: 0.3})
	if !slices.Equal(again["val"].(*Source).Files(), vf) {
		t.Fatal("the val files changed with the folder's location")
	}
}

func TestSingleFileTail(t *testing.T) {
	body := randomText(5, 20000)
	dir := writeTree(t, map[string][]byte{"corpus.txt": body})
	data := mustSplit(t, Config{Path: filepath.Join(dir, "corpus.txt"), Context: 100, BatchSize: 8, Seed: 9, Val: 0.25})
	cut := len(body) - len(body)/4
	for split, bounds := range map[string][2]int{"train": {0, cut}, "val": {cut, len(body)}} {
		lo, hi := bounds[0], bounds[1]
		for _, w := range allRows(t, data[split]) {
			at := bytes.Index(body, w)
			if at < lo || at+len(w) > hi {
				t.Fatalf("a %s window at %d..%d is outside [%d, %d)", split, at, at+len(w), lo, hi)
			}
		}
	}
}

func TestExtensions(t *testing.T) {
	dir := writeTree(t, map[string][]byte{
		"a.go": randomText(1, 500), "b.txt": randomText(2, 500), "sub/c.go": randomText(3, 500),
		".hidden/d.go": randomText(4, 500), "sub/.e.go": randomText(5, 500), "f.tar.gz": randomText(6, 500),
	})
	for _, c := range []struct {
		exts []string
		want string
	}{
		{GoSource(), "a.go sub/c.go"},
		{nil, "a.go b.txt f.tar.gz sub/c.go"},
		{[]string{".tar.gz", ".txt"}, "b.txt f.tar.gz"},
	} {
		src, err := Open(Config{Path: dir, Extensions: c.exts, Context: 10, BatchSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(src.Files(), " "); got != c.want {
			t.Errorf("Extensions %q: files %q, want %q", c.exts, got, c.want)
		}
		src.Close()
	}
}

func TestBadConfig(t *testing.T) {
	dir, _ := randomTree(t, 3)
	empty := t.TempDir()
	short := writeTree(t, map[string][]byte{"a.txt": []byte("tiny"), "b.txt": []byte("small file")})
	one := writeTree(t, map[string][]byte{"only.txt": randomText(1, 1000)})
	ok := Config{Path: dir, Context: 16, BatchSize: 4}
	with := func(f func(*Config)) Config {
		c := ok
		f(&c)
		return c
	}
	for _, c := range []struct {
		cfg  Config
		want []string
	}{
		{with(func(c *Config) { c.Path = "" }), []string{"Config.Path", "DefaultCorpus"}},
		{with(func(c *Config) { c.Path = filepath.Join(dir, "nope") }), []string{"Config.Path", "no such file"}},
		{with(func(c *Config) { c.Path = empty }), []string{"Config.Path", "empty"}},
		{with(func(c *Config) { c.Extensions = GoSource() }), []string{"Config.Extensions", ".go", "empty"}},
		{with(func(c *Config) { c.Extensions = []string{"go"} }), []string{"Config.Extensions[0]", `".go"`}},
		{with(func(c *Config) { c.Path = short }), []string{"Config.Context 16", "17 bytes", "b.txt", "lower Context"}},
		{with(func(c *Config) { c.Context = 0 }), []string{"Config.Context 0"}},
		{with(func(c *Config) { c.BatchSize = -1 }), []string{"Config.BatchSize -1"}},
		{with(func(c *Config) { c.BatchSize = 1 << 30 }), []string{"Config.BatchSize", "lower"}},
		{with(func(c *Config) { c.BatchesPerEpoch = -2 }), []string{"Config.BatchesPerEpoch -2"}},
		{with(func(c *Config) { c.ValBatches = -2 }), []string{"Config.ValBatches -2"}},
		{with(func(c *Config) { c.BatchesPerEpoch = 1 << 62 }), []string{"Config.BatchesPerEpoch", "lower"}},
		{with(func(c *Config) { c.Val = 1 }), []string{"Config.Val 1", "[0, 1)"}},
		{with(func(c *Config) { c.Val = -0.5 }), []string{"Config.Val -0.5"}},
		{with(func(c *Config) { c.MaxMapped = -1 }), []string{"Config.MaxMapped -1"}},
		{with(func(c *Config) { c.Path, c.Val = one, 0.1 }), []string{"Config.Val 0.1", "held out", "1 files"}},
		{with(func(c *Config) { c.Path, c.Val = one, 0.999 }), []string{"Config.Val 0.999"}},
		{with(func(c *Config) { c.Path, c.Val = filepath.Join(one, "only.txt"), 0.01 }), []string{"Config.Context 16", "val split", "raise Val"}},
	} {
		splitFails(t, c.cfg, c.want...)
	}
	if _, err := Open(with(func(c *Config) { c.Val = 0.2 })); err == nil || !strings.Contains(err.Error(), "use Split") {
		t.Errorf("Open with Val: %v, want an error pointing to Split", err)
	}
}

func TestConcurrentBatchAt(t *testing.T) {
	dir, _ := randomTree(t, 30)
	src, err := Open(Config{Path: dir, Context: 32, BatchSize: 8, Seed: 4, MaxMapped: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	want := allRows(t, src)
	got := make([][][]byte, src.Len())
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := w; i < src.Len(); i += 6 {
				b, err := src.BatchAt(i)
				if err != nil {
					t.Error(err)
					return
				}
				got[i] = rows(t, b)
				if n := src.c.mapped(); n > 3+6 {
					t.Errorf("%d files mapped, MaxMapped 3 (plus one per reader at most)", n)
				}
			}
		})
	}
	wg.Wait()
	if !slices.EqualFunc(slices.Concat(got...), want, bytes.Equal) {
		t.Fatal("concurrent BatchAt calls served other windows than serial ones")
	}
	if n := src.c.mapped(); n > 3 {
		t.Errorf("%d files mapped after the reads, MaxMapped 3", n)
	}
}

func TestClose(t *testing.T) {
	dir, _ := randomTree(t, 8)
	data := mustSplit(t, Config{Path: dir, Context: 20, BatchSize: 2, Val: 0.4, Seed: 6})
	train := data["train"].(*Source)
	if _, err := train.BatchAt(0); err != nil {
		t.Fatal(err)
	}
	if err := train.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := train.BatchAt(0); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("BatchAt after Close: %v", err)
	}
	if _, err := data["val"].BatchAt(0); err != nil {
		t.Fatalf("val after closing train: %v", err)
	}
	if err := train.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFileChanged(t *testing.T) {
	dir := writeTree(t, map[string][]byte{"a.txt": randomText(1, 1<<16)})
	path := filepath.Join(dir, "a.txt")
	src, err := Open(Config{Path: path, Context: 100, BatchSize: 4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.BatchAt(0); err != nil {
		t.Fatal(err)
	}
	// Shrunk under a live mapping: a read past the new end faults; it must be an error.
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	_, err = src.BatchAt(1)
	if err == nil || !strings.Contains(err.Error(), "a.txt") {
		t.Fatalf("BatchAt on a shrunk mapped file: %v, want an error naming it", err)
	}
	// A file whose size changed before it is mapped is refused, naming it.
	other := writeTree(t, map[string][]byte{"b.txt": randomText(2, 1000)})
	src2, err := Open(Config{Path: other, Context: 10, BatchSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	if err := os.WriteFile(filepath.Join(other, "b.txt"), randomText(2, 2000), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := src2.BatchAt(0); err == nil || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("BatchAt on a grown file: %v, want an error saying it changed", err)
	}
}

func TestDefaultCorpusError(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "nowhere")
	noGo := func() (string, error) { return "", errors.New("exec: \"go\": not found") }
	_, err := findGoSrc([]string{"", nowhere}, noGo)
	for _, w := range []string{"DefaultCorpus", "no folder " + filepath.Join(nowhere, "src"), "`go env GOROOT` failed", "Config.Path"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not say %q", err, w)
		}
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	fromEnv := func() (string, error) { return root, nil }
	if src, err := findGoSrc([]string{nowhere}, fromEnv); err != nil || src != filepath.Join(root, "src") {
		t.Errorf("the `go env` fallback: %q, %v", src, err)
	}
}
