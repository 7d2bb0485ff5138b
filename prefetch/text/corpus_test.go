package text

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/prefetch"
)

func TestGoroot(t *testing.T) {
	root, err := DefaultCorpus()
	if err != nil {
		if _, serr := os.Stat(filepath.Join(runtime.GOROOT(), "src")); serr != nil { //nolint:staticcheck // the test's own check
			t.Skipf("no Go source tree here: %v", err)
		}
		t.Fatal(err)
	}
	start := time.Now()
	data := mustSplit(t, Config{Path: root, Extensions: GoSource(), Context: 256, BatchSize: 64, Val: 0.1, Seed: 1, BatchesPerEpoch: 20, ValBatches: 5})
	train, val := data["train"].(*Source), data["val"].(*Source)
	t.Logf("%s: opened in %v: train %d files, %.1f MB; val %d files, %.1f MB", root, time.Since(start),
		len(train.Files()), float64(train.Bytes())/1e6, len(val.Files()), float64(val.Bytes())/1e6)
	if train.Bytes() < 10<<20 || val.Bytes() < 1<<20 || train.Len() != 20 || val.Len() != 5 {
		t.Fatalf("train %d bytes, %d batches; val %d bytes, %d batches", train.Bytes(), train.Len(), val.Bytes(), val.Len())
	}
	inVal := map[string]bool{}
	for _, f := range val.Files() {
		inVal[f] = true
	}
	for _, f := range train.Files() {
		if inVal[f] {
			t.Fatalf("%s is in both splits", f)
		}
		if !strings.HasSuffix(f, ".go") {
			t.Fatalf("%s is not Go source", f)
		}
	}
	for _, src := range []*Source{train, val} {
		if err := src.BeginEpoch(1); err != nil {
			t.Fatal(err)
		}
		if err := prefetch.CheckBatchAt(src, true); err != nil {
			t.Fatal(err)
		}
	}
	b, err := train.BatchAt(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a window: %q", rows(t, b)[0][:80])
}

// TestLargeCorpus opens a 32 GiB file, more than this machine's memory, mostly a hole: nothing
// is read at Open, and a batch touches only its windows' pages.
func TestLargeCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const size = 32 << 30
	path := filepath.Join(t.TempDir(), "big.txt")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		t.Skipf("no sparse 32 GiB file here: %v", err)
	}
	marker := randomText(1, 1<<20)
	for _, at := range []int64{0, size / 2, size - int64(len(marker))} {
		if _, err := f.WriteAt(marker, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rssBefore := rss(t)
	start := time.Now()
	data := mustSplit(t, Config{Path: path, Context: 256, BatchSize: 64, Val: 0.01, BatchesPerEpoch: 50, Seed: 3})
	opened := time.Since(start)
	train, val := data["train"].(*Source), data["val"].(*Source)
	if train.Bytes()+val.Bytes() != size {
		t.Fatalf("%d + %d bytes, want %d", train.Bytes(), val.Bytes(), size)
	}
	if val.Len() != int(val.Bytes()/(64*256)) {
		t.Fatalf("val Len %d, want its bytes / (64*256) = %d", val.Len(), val.Bytes()/(64*256))
	}
	start = time.Now()
	for i := range train.Len() {
		if _, err := train.BatchAt(i); err != nil {
			t.Fatal(err)
		}
	}
	read := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew, rssGrew := int64(after.HeapInuse)-int64(before.HeapInuse), rss(t)-rssBefore
	t.Logf("opened in %v; 50 batches in %v; heap grew %d KiB, RSS %d KiB", opened, read, grew>>10, rssGrew>>10)
	if opened > 5*time.Second || grew > 64<<20 || rssGrew > 64<<20 {
		t.Fatalf("a 32 GiB corpus took %v to open, grew the heap by %d MiB and RSS by %d MiB: it is being read, not mapped", opened, grew>>20, rssGrew>>20)
	}
}

// rss is the process's resident set in bytes (0 where /proc is absent).
func rss(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var pages, resident int64
	if _, err := fmt.Sscan(string(b), &pages, &resident); err != nil {
		t.Fatal(err)
	}
	return resident * int64(os.Getpagesize())
}
