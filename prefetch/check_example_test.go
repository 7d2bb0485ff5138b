package prefetch_test

import (
	"fmt"
	"iter"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// offsetBug serves 10 samples in batches of 4, but its BatchAt takes the batch index for a
// sample offset: batch i is samples i..i+4 instead of 4i..4i+4. Its Sequential walk is right.
type offsetBug struct{}

func (offsetBug) Len() int { return 3 }

func (offsetBug) BatchAt(i int) (prefetch.Batch, error) { return samplesBatch(i, min(i+4, 10)), nil }

func (offsetBug) Sequential() iter.Seq2[prefetch.Batch, error] {
	return func(yield func(prefetch.Batch, error) bool) {
		for off := 0; off < 10; off += 4 {
			if !yield(samplesBatch(off, min(off+4, 10)), nil) {
				return
			}
		}
	}
}

func samplesBatch(lo, hi int) prefetch.Batch {
	ids := make([]int32, hi-lo)
	for k := range ids {
		ids[k] = int32(lo + k)
	}
	return prefetch.Batch{"id": tensors.FromFlatDataAndDimensions(ids, len(ids))}
}

// ExampleCheckBatchAt holds BatchAt to the source's own sequential walk: an ArrayBatches
// agrees in every epoch, and the sample-offset bug is caught at its first wrong batch.
func ExampleCheckBatchAt() {
	ids := make([]int32, 10)
	for i := range ids {
		ids[i] = int32(i)
	}
	a, _ := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"id": tensors.FromFlatDataAndDimensions(ids, 10)}, 4,
		prefetch.ArrayOptions{Shuffle: true, Seed: 1})
	a.BeginEpoch(3)
	fmt.Println(prefetch.CheckBatchAt(a, true))
	fmt.Println(prefetch.CheckBatchAt(offsetBug{}, true))
	// Output:
	// <nil>
	// prefetch: CheckBatchAt: batch 1: field "id": row 0 differs between BatchAt and the sequential walk (a sample-offset bug reads rows i..i+b instead of i*b..(i+1)*b)
}
