package prefetch_test

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// Five samples cut into batches of two: the short final batch is served unless DropPartial is set,
// as the train split needs.
func ExampleNewArrayBatches() {
	fields := map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions([]float32{0, 0, 1, 10, 2, 20, 3, 30, 4, 40}, 5, 2),
		"y": tensors.FromFlatDataAndDimensions([]int32{0, 1, 2, 3, 4}, 5),
	}
	src, err := prefetch.NewArrayBatches(fields, 2, prefetch.ArrayOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range src.Len() {
		b, err := src.BatchAt(i)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(i, b["x"].Value(), b["y"].Value())
	}

	train, _ := prefetch.NewArrayBatches(fields, 2, prefetch.ArrayOptions{Shuffle: true, Seed: 1, DropPartial: true})
	fmt.Println("train batches:", train.Len(), "of", train.Samples(), "samples")
	// Output:
	// 0 [[0 0] [1 10]] [0 1]
	// 1 [[2 20] [3 30]] [2 3]
	// 2 [[4 40]] [4]
	// train batches: 2 of 5 samples
}
