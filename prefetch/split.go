package prefetch

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// SplitOptions configures SplitArrays.
type SplitOptions struct {
	BatchSize     int     // train's batch size, and val's and test's when EvalBatchSize is 0
	EvalBatchSize int     // val's and test's batch size; 0 means BatchSize
	Val, Test     float64 // the fractions of the samples dealt to "val" and "test"; 0 leaves a split out
	Seed          uint64  // seeds the deal and train's shuffle at every epoch
}

// splitStream is the PCG stream of the deal's permutation. Train's epoch shuffles use streams
// 0, 1, 2, ... (the epoch), so the deal never reuses an epoch's order.
const splitStream = math.MaxUint64

// SplitArrays deals one table of whole-dataset arrays (every field the same number of samples on
// its leading axis) into the splits "train", "val" and "test". One permutation of the samples,
// rand.NewPCG(Seed, MaxUint64).Perm(n), gives val its first round(n·Val) samples, test the next
// round(n·Test), and train the rest; so a seed always deals the same samples to each split. Train
// reshuffles at every epoch and drops its partial final batch; val and test serve every sample,
// in the deal's order. The arrays are copied: the caller may reuse them.
//
// It refuses, naming the option, a fraction outside [0, 1), fractions that leave train no full
// batch, a fraction above 0 too small to deal a single sample, and a batch size below 1.
func SplitArrays(fields map[string]*tensors.Tensor, opts SplitOptions) (Data, error) {
	n, err := sampleCount(fields)
	if err != nil {
		return nil, err
	}
	if opts.BatchSize < 1 {
		return nil, fmt.Errorf("SplitOptions.BatchSize is %d: set it to 1 or more", opts.BatchSize)
	}
	if opts.EvalBatchSize < 0 {
		return nil, fmt.Errorf("SplitOptions.EvalBatchSize is %d: set it to 1 or more, or 0 for BatchSize", opts.EvalBatchSize)
	}
	evalBatch := opts.EvalBatchSize
	if evalBatch == 0 {
		evalBatch = opts.BatchSize
	}
	counts := map[string]int{}
	for _, f := range []struct {
		split, option string
		fraction      float64
	}{{"val", "Val", opts.Val}, {"test", "Test", opts.Test}} {
		if !(f.fraction >= 0 && f.fraction < 1) { // also refuses NaN
			return nil, fmt.Errorf("SplitOptions.%s is %v: a fraction of the samples must be in [0, 1)", f.option, f.fraction)
		}
		if f.fraction == 0 {
			continue
		}
		counts[f.split] = int(math.Round(float64(n) * f.fraction))
		if counts[f.split] == 0 {
			return nil, fmt.Errorf("SplitOptions.%s is %v: of %d samples that deals none to %q; raise it to at least %.2g, or set 0 to leave the split out",
				f.option, f.fraction, n, f.split, 0.5/float64(n))
		}
	}
	train := n - counts["val"] - counts["test"]
	if train < opts.BatchSize {
		return nil, fmt.Errorf("SplitOptions.Val %v and Test %v leave train %d of %d samples, less than one batch of BatchSize %d: lower the fractions or the batch size",
			opts.Val, opts.Test, max(train, 0), n, opts.BatchSize)
	}

	perm := rand.New(rand.NewPCG(opts.Seed, splitStream)).Perm(n)
	data := Data{}
	offset := 0
	for _, s := range []struct {
		name string
		rows int
		opts ArrayOptions
		size int
	}{
		{"val", counts["val"], ArrayOptions{}, evalBatch},
		{"test", counts["test"], ArrayOptions{}, evalBatch},
		{"train", train, ArrayOptions{Shuffle: true, Seed: opts.Seed, DropPartial: true}, opts.BatchSize},
	} {
		if s.rows == 0 {
			continue
		}
		part := make(map[string]*tensors.Tensor, len(fields))
		for name, t := range fields {
			if part[name], err = gatherRows(t, perm, offset, s.rows); err != nil {
				return nil, fmt.Errorf("field %q: %w", name, err)
			}
		}
		if data[s.name], err = NewArrayBatches(part, s.size, s.opts); err != nil {
			return nil, fmt.Errorf("split %q: %w", s.name, err)
		}
		offset += s.rows
	}
	return data, nil
}

// sampleCount is the leading length every field shares, refusing a table with no fields, a nil
// or scalar field, fields that disagree, or no samples.
func sampleCount(fields map[string]*tensors.Tensor) (int, error) {
	if len(fields) == 0 {
		return 0, fmt.Errorf("no fields: an array source needs at least one named array")
	}
	n := -1
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		t := fields[name]
		if t == nil {
			return 0, fmt.Errorf("field %q is nil: every field needs a tensor with the samples on its leading axis", name)
		}
		if t.Rank() < 1 {
			return 0, fmt.Errorf("field %q is a scalar: every field needs the samples on its leading axis", name)
		}
		switch d := t.Shape().Dimensions[0]; {
		case n < 0:
			n = d
		case d != n:
			return 0, fmt.Errorf("field %q has %d samples on its leading axis, others have %d: all fields must agree", name, d, n)
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("the arrays hold no samples")
	}
	return n, nil
}
