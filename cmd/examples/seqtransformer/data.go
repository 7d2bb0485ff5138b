package seqtransformer

import (
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/core"
)

// tasks map a task's name to its target: out is filled from in (both of one sequence's length).
var tasks = map[string]func(in, out []int32){
	"reverse": func(in, out []int32) {
		for i, t := range in {
			out[len(in)-1-i] = t
		}
	},
	"sort": func(in, out []int32) {
		copy(out, in)
		slices.Sort(out)
	},
}

func taskNames() []string {
	var names []string
	for n := range tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Split stream ids: each split draws from its own PCG stream of the seed, so changing one split's
// size never changes another's sequences.
const (
	streamTrain = 1
	streamVal   = 2
	streamTest  = 3
)

// Generate draws n sequences of length digits in 0..vocab-1 from stream of seed and their targets
// under task: tokens and target, both [n, length] int32. It is deterministic in its arguments.
func Generate(task string, n, length, vocab int, seed, stream uint64) (tokens, target *tensors.Tensor) {
	r := rand.New(rand.NewPCG(seed, stream))
	in := make([]int32, n*length)
	out := make([]int32, n*length)
	f := tasks[task]
	for i := 0; i < n; i++ {
		row := in[i*length : (i+1)*length]
		for j := range row {
			row[j] = int32(r.IntN(vocab))
		}
		f(row, out[i*length:(i+1)*length])
	}
	return tensors.FromFlatDataAndDimensions(in, n, length), tensors.FromFlatDataAndDimensions(out, n, length)
}

// BuildData generates the three splits: train shuffled each epoch with its partial batch
// dropped, val and test in order.
func (e *Transformer) BuildData() (core.Data, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	split := func(n int, stream uint64, batch int, opts core.ArrayOptions) (*core.ArrayBatches, error) {
		x, y := Generate(e.Task, n, e.Length, e.Vocab, uint64(e.Seed), stream)
		return core.NewArrayBatches(map[string]*tensors.Tensor{"tokens": x, "target": y}, batch, opts)
	}
	train, err := split(e.TrainSize, streamTrain, e.BatchSize, core.ArrayOptions{Shuffle: true, Seed: uint64(e.Seed), DropPartial: true})
	if err != nil {
		return nil, err
	}
	val, err := split(e.ValSize, streamVal, e.EvalBatchSize, core.ArrayOptions{})
	if err != nil {
		return nil, err
	}
	test, err := split(e.TestSize, streamTest, e.EvalBatchSize, core.ArrayOptions{})
	if err != nil {
		return nil, err
	}
	return core.Data{"train": train, "val": val, "test": test}, nil
}
