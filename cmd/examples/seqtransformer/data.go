package seqtransformer

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/cmd/examples/internal/gendata"
	"github.com/nitro-go/nitro/prefetch"
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

func taskNames() []string { return slices.Sorted(maps.Keys(tasks)) }

// Generate draws n sequences of length digits in 0..vocab-1 from PCG stream `stream` of the random seed `seed` and their targets
// under task: tokens and target, both [n, length] int32. It is deterministic in its arguments.
func Generate(task string, n, length, vocab int, seed, stream uint64) (tokens, target *tensors.Tensor, err error) {
	f, ok := tasks[task]
	switch {
	case !ok:
		return nil, nil, fmt.Errorf("seqtransformer.Generate: task %q: want one of %s", task, strings.Join(taskNames(), ", "))
	case n < 1 || length < 1 || vocab < 1:
		return nil, nil, fmt.Errorf("seqtransformer.Generate: n = %d, length = %d, vocab = %d: want each >= 1", n, length, vocab)
	}
	r := rand.New(rand.NewPCG(seed, stream))
	in := make([]int32, n*length)
	out := make([]int32, n*length)
	for i := 0; i < n; i++ {
		row := in[i*length : (i+1)*length]
		for j := range row {
			row[j] = int32(r.IntN(vocab))
		}
		f(row, out[i*length:(i+1)*length])
	}
	return tensors.FromFlatDataAndDimensions(in, n, length), tensors.FromFlatDataAndDimensions(out, n, length), nil
}

// BuildData generates the three splits (gendata.Splits): train shuffled each epoch with its
// partial batch dropped, val and test in order.
func (e *Transformer) BuildData() (prefetch.Data, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	gen := func(n int, stream uint64) (map[string]*tensors.Tensor, error) {
		x, y, err := Generate(e.Task, n, e.Length, e.Vocab, uint64(e.Seed), stream)
		return map[string]*tensors.Tensor{"tokens": x, "target": y}, err
	}
	return gendata.Splits(gen, e.TrainSize, e.ValSize, e.TestSize, e.BatchSize, e.EvalBatchSize, uint64(e.Seed))
}
