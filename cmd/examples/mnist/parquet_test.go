package mnist_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

var (
	parquetOnce sync.Once
	parquetDir  string
	parquetErr  error
)

// sharedParquet writes MNIST as Parquet once for the package's tests (TestMain removes it).
func sharedParquet(t *testing.T) string {
	t.Helper()
	parquetOnce.Do(func() {
		parquetDir, parquetErr = os.MkdirTemp("", "mnist-parquet-test")
		if parquetErr == nil {
			parquetErr = mnist.WriteParquet(parquetDir)
		}
	})
	if parquetErr != nil {
		t.Fatalf("WriteParquet: %v", parquetErr)
	}
	return parquetDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if parquetDir != "" {
		os.RemoveAll(parquetDir)
	}
	os.Exit(code)
}

// tiny is the tiny preset with the given overrides.
func tiny(t *testing.T, overrides map[string]any) *mnist.MLP {
	t.Helper()
	e, err := markers.FromPreset[mnist.MLP]("tiny", overrides)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// sameBatch reports whether two batches have the same fields, dtypes, shapes and bytes.
func sameBatch(a, b prefetch.Batch) bool {
	if len(a) != len(b) {
		return false
	}
	for name, x := range a {
		y, ok := b[name]
		if !ok || x.DType() != y.DType() || x.Shape().String() != y.Shape().String() {
			return false
		}
		var bx, by []byte
		x.ConstBytes(func(p []byte) { bx = bytes.Clone(p) })
		y.ConstBytes(func(p []byte) { by = bytes.Clone(p) })
		if !bytes.Equal(bx, by) {
			return false
		}
	}
	return true
}

// TestParquetServesTheIdxBatches: with the same seed, Format parquet builds every split with the
// idx path's batches, bit for bit, in shuffled epochs too, and its BatchAt agrees with its own
// sequential walk. The whole test set is compared (TestLimit 0), and the tiny preset's limits.
func TestParquetServesTheIdxBatches(t *testing.T) {
	dir := sharedParquet(t)
	for _, limits := range []map[string]any{{}, {"TrainLimit": 0, "TestLimit": 0}} {
		idxOver := map[string]any{"Format": "idx"}
		pqOver := map[string]any{"Format": "parquet", "DataDir": dir}
		for k, v := range limits {
			idxOver[k], pqOver[k] = v, v
		}
		idx, err := tiny(t, idxOver).BuildData()
		if err != nil {
			t.Fatal(err)
		}
		pqd, err := tiny(t, pqOver).BuildData()
		if err != nil {
			t.Fatal(err)
		}
		splits := []string{"train", "val", "test"}
		if len(limits) > 0 {
			splits = []string{"test"} // the full train split is 60000 samples: the limited one covers its logic
		}
		for _, split := range splits {
			a, b := idx[split], pqd[split]
			if a.Len() != b.Len() || dropsPartial(a) != dropsPartial(b) {
				t.Fatalf("%s: Len %d/%d, DropsPartial %v/%v", split, a.Len(), b.Len(), dropsPartial(a), dropsPartial(b))
			}
			for ep := range 2 {
				for _, s := range []prefetch.Source{a, b} {
					if es, ok := s.(prefetch.EpochSource); ok {
						if err := es.BeginEpoch(ep); err != nil {
							t.Fatal(err)
						}
					}
				}
				for i := range a.Len() {
					x, err := a.BatchAt(i)
					if err != nil {
						t.Fatal(err)
					}
					y, err := b.BatchAt(i)
					if err != nil {
						t.Fatal(err)
					}
					if !sameBatch(x, y) {
						t.Fatalf("%s epoch %d batch %d: the Parquet batch differs from the idx batch", split, ep, i)
					}
				}
				if err := prefetch.CheckBatchAt(b, true); err != nil {
					t.Fatalf("%s epoch %d: %v", split, ep, err)
				}
			}
		}
	}
}

func dropsPartial(s prefetch.Source) bool {
	d, ok := s.(prefetch.PartialDropper)
	return ok && d.DropsPartial()
}

// TestTrainTinyFromParquet trains the tiny preset from idx and from Parquet with the same seed:
// the batches are identical, so every epoch's train loss and validation metrics, and the test
// accuracy, must match (to 1e-6; in practice bit for bit).
func TestTrainTinyFromParquet(t *testing.T) {
	dir := sharedParquet(t)
	run := func(over map[string]any) ([]core.EpochResult, map[string]float64) {
		t.Helper()
		over["TrainLimit"], over["TestLimit"] = 3000, 1000
		n, err := core.New(tiny(t, over), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints())
		if err != nil {
			t.Fatal(err)
		}
		ranOn(t, n)
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		test, err := n.Evaluate("test")
		if err != nil {
			t.Fatal(err)
		}
		return n.History(), test
	}
	hi, ti := run(map[string]any{"Format": "idx"})
	hp, tp := run(map[string]any{"Format": "parquet", "DataDir": dir})
	if len(hi) != 2 || len(hp) != 2 {
		t.Fatalf("%d and %d epochs, want 2", len(hi), len(hp))
	}
	near := func(what string, a, b float64) {
		t.Helper()
		if math.Abs(a-b) > 1e-6 || math.IsNaN(a) != math.IsNaN(b) {
			t.Fatalf("%s: idx %v, Parquet %v", what, a, b)
		}
		if a != b {
			t.Logf("%s: idx %v, Parquet %v: within 1e-6 but not bitwise", what, a, b)
		}
	}
	for ep := range hi {
		near("train loss", hi[ep].TrainLoss, hp[ep].TrainLoss)
		for k, v := range hi[ep].Val {
			near("val "+k, v, hp[ep].Val[k])
		}
	}
	near("test accuracy", ti["accuracy"], tp["accuracy"])
	if ti["accuracy"] < 0.5 {
		t.Fatalf("test accuracy %v: the model did not learn", ti["accuracy"])
	}
	t.Logf("epoch 1 train loss %v (both), test accuracy %v (both)", hi[0].TrainLoss, ti["accuracy"])
}

func TestParquetDirConvertsOnceIntoTheUserCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	if _, err := os.UserCacheDir(); err != nil {
		t.Skipf("no user cache dir: %v", err)
	}
	d1, err := mnist.ParquetDir("")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d1, cache) {
		t.Fatalf("converted into %s, not under the user cache %s", d1, cache)
	}
	st1, err := os.Stat(filepath.Join(d1, "train.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	d2, err := mnist.ParquetDir("")
	if err != nil {
		t.Fatal(err)
	}
	st2, err := os.Stat(filepath.Join(d2, "train.parquet"))
	if err != nil || d2 != d1 || !st2.ModTime().Equal(st1.ModTime()) {
		t.Fatalf("the second call converted again (or moved): %s %v, %s %v, %v", d1, st1.ModTime(), d2, st2.ModTime(), err)
	}
	// Same files as WriteParquet writes elsewhere.
	want, err := os.ReadFile(filepath.Join(sharedParquet(t), "t10k.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(d1, "t10k.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || !bytes.Equal(got, want) {
		t.Fatalf("the cached conversion (%d bytes) differs from WriteParquet's files (%d bytes)", len(got), len(want))
	}
	// Nothing left behind but the two files.
	entries, err := os.ReadDir(d1)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("the cache folder holds %d entries", len(entries))
	}
}

func TestFormatErrorsNameTheFix(t *testing.T) {
	empty := t.TempDir()
	_, err := tiny(t, map[string]any{"Format": "parquet", "DataDir": empty}).BuildData()
	if err == nil || !strings.Contains(err.Error(), "holds no train.parquet") || !strings.Contains(err.Error(), "WriteParquet") {
		t.Fatalf("got %v", err)
	}
	_, err = tiny(t, map[string]any{"Format": "csv"}).BuildData()
	if err == nil || !strings.Contains(err.Error(), `Format "csv"`) || !strings.Contains(err.Error(), "parquet") {
		t.Fatalf("got %v", err)
	}
	// Parquet files in DataDir with the default Format: the error says which Format to set.
	_, err = tiny(t, map[string]any{"DataDir": sharedParquet(t)}).BuildData()
	if err == nil || !strings.Contains(err.Error(), "Format=parquet") {
		t.Fatalf("got %v", err)
	}
	_, err = tiny(t, map[string]any{"Format": "parquet", "DataDir": sharedParquet(t), "ValSize": 6000, "TrainLimit": 6000}).BuildData()
	if err == nil || !strings.Contains(err.Error(), "cannot carve 6000 validation samples from 6000") {
		t.Fatalf("got %v", err)
	}
}
