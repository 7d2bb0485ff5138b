package parquet_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/prefetch/parquet"
	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// mnistRow is an MNIST-shaped row: 784 pixels as a list of uint8, a label as int64 (the layout
// the MNIST example's WriteParquet writes).
type mnistRow struct {
	Image []int32 `parquet:"image,list" parquet-element:",uint(8)"`
	Label int64   `parquet:"label"`
}

// writeSyntheticMNIST writes n MNIST-shaped rows (80% zero pixels, like digits on a blank
// page) in row groups of 8192 rows with zstd, and returns the same data as whole arrays.
func writeSyntheticMNIST(b *testing.B, path string, n int) (images []uint8, labels []int64) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := pq.NewGenericWriter[mnistRow](f, pq.MaxRowsPerRowGroup(8192), pq.Compression(&zstd.Codec{}))
	r := rand.New(rand.NewPCG(1, 2))
	images, labels = make([]uint8, n*784), make([]int64, n)
	rows := make([]mnistRow, 0, 1000)
	for i := range n {
		img := make([]int32, 784)
		for k := range img {
			if r.IntN(5) == 0 {
				img[k] = int32(r.IntN(256))
				images[i*784+k] = uint8(img[k])
			}
		}
		labels[i] = int64(r.IntN(10))
		rows = append(rows, mnistRow{Image: img, Label: labels[i]})
		if len(rows) == cap(rows) || i == n-1 {
			if _, err := w.Write(rows); err != nil {
				b.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return images, labels
}

// epoch reads every batch of src once with the given number of concurrent callers and returns
// the wall time.
func epoch(b *testing.B, src prefetch.Source, callers int) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= src.Len() {
					return
				}
				if _, err := src.BatchAt(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkBatchAtAgainstArrays measures batches/s of BatchAt (batches of 128, shuffled) with
// 1, 2 and 4 concurrent callers on a synthetic 60000x784 uint8 MNIST-sized Parquet file, against
// the in-memory ArrayBatches over the same data, and prints the ratios. The Parquet cache holds
// every row group, so after the first (cold) epoch both copy rows out of memory; the cold epoch,
// which decodes every group once, is printed too, and so is an in-order epoch through a cache of
// two groups (a dataset bigger than memory, read front to back).
func BenchmarkBatchAtAgainstArrays(b *testing.B) {
	const n, batch = 60000, 128
	path := filepath.Join(b.TempDir(), "mnist.parquet")
	t0 := time.Now()
	images, labels := writeSyntheticMNIST(b, path, n)
	st, _ := os.Stat(path)
	fmt.Printf("synthetic MNIST: %d rows of 784 uint8 + int64 label, %.1f MiB of Parquet (zstd), written in %v\n",
		n, float64(st.Size())/(1<<20), time.Since(t0).Round(time.Millisecond))

	arrays, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"image": tensors.FromFlatDataAndDimensions(images, n, 784),
		"label": tensors.FromFlatDataAndDimensions(labels, n),
	}, batch, prefetch.ArrayOptions{Shuffle: true, Seed: 1, DropPartial: true})
	if err != nil {
		b.Fatal(err)
	}
	fieldsMNIST := map[string]parquet.Field{"image": {DType: "Uint8", Shape: []int{784}}, "label": {DType: "Int64"}}
	src, err := parquet.Open(path, parquet.Config{Fields: fieldsMNIST, BatchSize: batch, Shuffle: true, Seed: 1, DropPartial: true, CacheRowGroups: 16})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	streaming, err := parquet.Open(path, parquet.Config{Fields: fieldsMNIST, BatchSize: batch, DropPartial: true, CacheRowGroups: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer streaming.Close()
	arrays.BeginEpoch(0)
	src.BeginEpoch(0)
	cold := epoch(b, src, 1)
	arrayCold := epoch(b, arrays, 1)
	fmt.Printf("cold shuffled epoch, 1 caller (decodes all %d row groups): Parquet %v, ArrayBatches %v, ratio %.3f\n",
		src.RowGroups(), cold.Round(time.Millisecond), arrayCold.Round(time.Millisecond), arrayCold.Seconds()/cold.Seconds())

	callers := []int{1, 2, 4}
	pqWall := make([]time.Duration, len(callers))
	arWall := make([]time.Duration, len(callers))
	var streamWall, streamArrays time.Duration
	runs := 0
	for b.Loop() {
		for k, c := range callers {
			pqWall[k] += epoch(b, src, c)
			arWall[k] += epoch(b, arrays, c)
		}
		streamWall += epoch(b, streaming, 1)
		runs++
	}
	arrays.BeginEpoch(0) // ArrayBatches in order, for the streaming comparison
	arraysInOrder, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"image": tensors.FromFlatDataAndDimensions(images, n, 784),
		"label": tensors.FromFlatDataAndDimensions(labels, n),
	}, batch, prefetch.ArrayOptions{DropPartial: true})
	for range runs {
		streamArrays += epoch(b, arraysInOrder, 1)
	}
	perSec := func(d time.Duration) float64 { return float64(src.Len()*runs) / d.Seconds() }
	for k, c := range callers {
		p, a := perSec(pqWall[k]), perSec(arWall[k])
		b.ReportMetric(p/a, fmt.Sprintf("parquet/arrays@%d", c))
		fmt.Printf("warm shuffled, %d caller(s): Parquet %.0f batches/s, ArrayBatches %.0f batches/s, ratio Parquet/ArrayBatches %.3f\n", c, p, a, p/a)
	}
	_, decodes, _ := streaming.CacheStats()
	fmt.Printf("in order through a cache of 2 groups, 1 caller (every group decoded each epoch; %d decodes in %d epochs): Parquet %.0f batches/s, ArrayBatches %.0f batches/s, ratio %.3f\n",
		decodes, runs, perSec(streamWall), perSec(streamArrays), perSec(streamWall)/perSec(streamArrays))
}
