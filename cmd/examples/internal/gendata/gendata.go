// Package gendata turns a generator of samples into the train, val and test splits of the
// examples whose data are generated. Each split draws from its own PCG stream of the random seed (train 1,
// val 2, test 3), so the data are the same on every run with the same seed and changing one
// split's size never changes another's samples. Safe for concurrent use; errors are the
// generator's and prefetch.NewArrayBatches'.
package gendata

import (
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// The split streams.
const (
	StreamTrain = 1
	StreamVal   = 2
	StreamTest  = 3
)

// Generator returns n samples drawn from one stream, by field ("x", "y", ...), the batch axis
// leading every array.
type Generator func(n int, stream uint64) (map[string]*tensors.Tensor, error)

// Splits generates train (trainN samples, shuffled each epoch by the random seed, batches of batch, the
// partial one dropped), val and test (valN and testN, in order, batches of evalBatch).
func Splits(gen Generator, trainN, valN, testN, batch, evalBatch int, seed uint64) (prefetch.Data, error) {
	split := func(n int, stream uint64, batch int, opts prefetch.ArrayOptions) (*prefetch.ArrayBatches, error) {
		fields, err := gen(n, stream)
		if err != nil {
			return nil, err
		}
		return prefetch.NewArrayBatches(fields, batch, opts)
	}
	train, err := split(trainN, StreamTrain, batch, prefetch.ArrayOptions{Shuffle: true, Seed: seed, DropPartial: true})
	if err != nil {
		return nil, err
	}
	val, err := split(valN, StreamVal, evalBatch, prefetch.ArrayOptions{})
	if err != nil {
		return nil, err
	}
	test, err := split(testN, StreamTest, evalBatch, prefetch.ArrayOptions{})
	if err != nil {
		return nil, err
	}
	return prefetch.Data{"train": train, "val": val, "test": test}, nil
}
