package prefetch_test

import (
	"context"
	"errors"
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

// A declaration carries settings only: iterating it by hand is iterating its source, with no
// goroutine. Its settings are checked when it is made.
func ExamplePrefetch() {
	src, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"y": tensors.FromFlatDataAndDimensions([]int32{0, 1, 2, 3, 4, 5}, 6),
	}, 2, prefetch.ArrayOptions{})
	it, err := prefetch.Prefetch(src, prefetch.Options{Workers: 2, DeviceBatches: 1, HostBatches: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(it.Describe())
	for i := range it.Len() {
		b, _ := it.BatchAt(i)
		fmt.Println(i, b["y"].Value())
	}
	_, err = prefetch.Prefetch(src, prefetch.Options{Workers: 2, DeviceBatches: 0, HostBatches: 4})
	fmt.Println(err)
	// Output:
	// prefetch: fan-out, 2 workers, 4 host batches, 1 device batches staged (3 resident), ordered
	// 0 [0 1]
	// 1 [2 3]
	// 2 [4 5]
	// prefetch: DeviceBatches 0: must be positive; a split that must run inline declares it with NoPrefetch(src), not with a zero
}

// NoPrefetch is the one way to decline prefetch: the stream's Next then builds and transfers each
// batch on the consumer's own goroutine.
func ExampleNoPrefetch() {
	src, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"y": tensors.FromFlatDataAndDimensions([]int32{0, 1, 2, 3}, 4),
	}, 2, prefetch.ArrayOptions{})
	inline := prefetch.NoPrefetch(src)
	fmt.Println(inline.Describe())
	s, err := prefetch.Start(context.Background(), inline, 0, prefetch.StreamConfig[string]{
		Transfer: func(b prefetch.Batch) (string, error) { return fmt.Sprint(b["y"].Value()), nil },
		Free:     func(string) error { return nil },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println(s.Path())
	// Output:
	// prefetch: inline (NoPrefetch)
	// inline
}

// Wrap (the automatic prefetch) declares every undeclared split at the framework's settings
// and leaves declarations alone.
func ExampleWrap() {
	train, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"y": tensors.FromFlatDataAndDimensions([]int32{0, 1, 2, 3}, 4),
	}, 2, prefetch.ArrayOptions{Shuffle: true, DropPartial: true})
	defaults := prefetch.Options{Workers: 4, DeviceBatches: 1, HostBatches: 8}
	for _, split := range []prefetch.Source{train, prefetch.NoPrefetch(train)} {
		w, err := prefetch.Wrap(split, defaults)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(w.(interface{ Describe() string }).Describe())
	}
	// Output:
	// prefetch: fan-out, 4 workers, 8 host batches, 1 device batches staged (3 resident), ordered
	// prefetch: inline (NoPrefetch)
}

// An evaluation pass: two workers build host batches, one goroutine "transfers" them (here into
// strings; a real caller returns its device-resident batch), the short final batch is padded to
// the compiled width 2 and reported with its real row count. Close always runs: it frees what
// the stream still holds when the consumer stops early.
func ExampleStart() {
	src, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"y": tensors.FromFlatDataAndDimensions([]int32{0, 1, 2, 3, 4}, 5),
	}, 2, prefetch.ArrayOptions{})
	it, _ := prefetch.Prefetch(src, prefetch.Options{Workers: 2, DeviceBatches: 1, HostBatches: 4})
	s, err := prefetch.Start(context.Background(), it, 0, prefetch.StreamConfig[string]{
		Transfer: func(b prefetch.Batch) (string, error) { return fmt.Sprint(b["y"].Value()), nil },
		Free:     func(string) error { return nil },
		Pad:      2,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	fmt.Println(s.Path())
	for {
		item, ok, err := s.Next()
		if err != nil {
			fmt.Println(err)
			return
		}
		if !ok {
			break
		}
		fmt.Println(item.Index, item.Device, "rows", item.Rows)
	}
	// Output:
	// fan-out
	// 0 [0 1] rows 2
	// 1 [2 3] rows 2
	// 2 [4 4] rows 1
}

// Every failure to build, pad or transfer a batch names its index; the source's own error stays
// reachable with errors.Is and errors.As.
func ExampleBatchError() {
	err := error(&prefetch.BatchError{Index: 7, Op: "BatchAt", Err: fmt.Errorf("disk gone")})
	var be *prefetch.BatchError
	fmt.Println(err, errors.As(err, &be), be.Index)
	// Output: prefetch: batch 7: BatchAt: disk gone true 7
}

// Ten samples dealt into train, val and test by one seeded permutation: val and test serve every
// sample they were dealt, train drops its partial batch and reshuffles at every epoch.
func ExampleSplitArrays() {
	ids := tensors.FromFlatDataAndDimensions([]int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 10)
	data, err := prefetch.SplitArrays(map[string]*tensors.Tensor{"id": ids},
		prefetch.SplitOptions{BatchSize: 3, Val: 0.2, Test: 0.2, Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range []string{"train", "val", "test"} {
		src := data[name].(*prefetch.ArrayBatches)
		fmt.Println(name, src.Samples(), "samples in", src.Len(), "batches")
	}
	_, err = prefetch.SplitArrays(map[string]*tensors.Tensor{"id": ids}, prefetch.SplitOptions{BatchSize: 3, Val: 0.5, Test: 0.3})
	fmt.Println(err)
	// Output:
	// train 6 samples in 2 batches
	// val 2 samples in 1 batches
	// test 2 samples in 1 batches
	// SplitOptions.Val 0.5 and Test 0.3 leave train 2 of 10 samples, less than one batch of BatchSize 3: lower the fractions or the batch size
}
