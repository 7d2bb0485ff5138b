package parquet_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/prefetch/parquet"
	pq "github.com/parquet-go/parquet-go"
)

// ExampleOpen maps a fixed-size list column of bytes and an int64 column to two batch fields,
// shuffles per epoch, and checks BatchAt against the source's own sequential walk.
func ExampleOpen() {
	type digit struct {
		Image []int32 `parquet:"image,list" parquet-element:",uint(8)"` // 2x2 pixels
		Label int64   `parquet:"label"`
	}
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "digits.parquet")
	f, _ := os.Create(path)
	w := pq.NewGenericWriter[digit](f, pq.MaxRowsPerRowGroup(4))
	for i := range 10 {
		p := int32(i * 10)
		w.Write([]digit{{Image: []int32{p, p + 1, p + 2, p + 3}, Label: int64(i)}})
	}
	w.Close()
	f.Close()

	src, err := parquet.Open(path, parquet.Config{
		Fields: map[string]parquet.Field{
			"image": {DType: "Uint8", Shape: []int{2, 2}},
			"label": {DType: "Int32"}, // int64 in the file, range-checked into int32
		},
		BatchSize:      4,
		DropPartial:    true,
		Shuffle:        true,
		Seed:           7,
		CacheRowGroups: 3, // every row group: a shuffled epoch reads them all
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	fmt.Println("batches:", src.Len(), "samples:", src.Samples(), "row groups:", src.RowGroups())

	b, _ := src.BatchAt(1) // before any BeginEpoch: the stored order
	fmt.Println(b["image"].Shape(), tensors.MustCopyFlatData[int32](b["label"]))
	src.BeginEpoch(0)
	fmt.Println("epoch 0 agrees with its sequential walk:", prefetch.CheckBatchAt(src, true) == nil)

	_, err = parquet.Open(path, parquet.Config{Fields: map[string]parquet.Field{"pixels": {DType: "Float32", Shape: []int{4}}}, BatchSize: 4})
	fmt.Println(err != nil)
	// Output:
	// batches: 2 samples: 10 row groups: 3
	// (Uint8)[4 2 2] [4 5 6 7]
	// epoch 0 agrees with its sequential walk: true
	// true
}
