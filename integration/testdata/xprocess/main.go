// Command xprocess is one rank of a small data-parallel training run, for scripts/gpu-check.sh:
// start it as every process of a run (NITRO_RANK, NITRO_WORLD_SIZE, NITRO_COORDINATOR, one GPU
// each); it trains a two-layer MLP on synthetic data one optimizer step at a time and prints, per
// step, a SHA-256 of its parameters, then the train and val losses of each stretch TrainSteps
// trained (one step each: the per-step losses) and the final parameters' SHA-256, after
// total_steps, the run's optimizer steps. Ranks that sum over a collective train on shards of the
// data (16 steps an epoch each, 32 in all) and print the same lines; ranks with no collective are
// refused by core.New (each would train a model of its own that merely looks alike), so a check
// wants both the same lines and total_steps 32.
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/mpi"
	"github.com/nitro-go/nitro/prefetch"
)

// In and Tgt are the batch fields.
type In struct {
	X *graph.Node `batch:"x"`
}

type Tgt struct {
	Y *graph.Node `batch:"y"`
}

// MLP regresses y on x through one hidden layer.
type MLP struct{}

func (*MLP) BuildModel(*context.Context) error { return nil }

func (*MLP) Forward(ctx *context.Context, in In) core.Outputs {
	h := graph.Tanh(layers.Dense(ctx.In("dense_0"), in.X, true, 32))
	return core.Outputs{"pred": layers.Dense(ctx.In("dense_1"), h, true, 1)}
}

func (*MLP) Loss(out core.Outputs, in Tgt) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(out["pred"], in.Y)))
}

const features = 8

// samples is n synthetic samples of seed: y = sin(w.x).
func samples(n int, seed uint64, batch int) *prefetch.ArrayBatches {
	r := rand.New(rand.NewPCG(seed, 7))
	x, y := make([]float32, n*features), make([]float32, n)
	for i := range n {
		dot := 0.0
		for j := range features {
			v := r.NormFloat64()
			x[i*features+j] = float32(v)
			dot += v * float64(j+1) / features
		}
		y[i] = float32(math.Sin(dot))
	}
	a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(x, n, features), "y": tensors.FromFlatDataAndDimensions(y, n, 1),
	}, batch, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		fail(err)
	}
	return a
}

func (*MLP) BuildData() (prefetch.Data, error) {
	// Batches of 16 per process; core shards train and val over the processes.
	return prefetch.Data{"train": samples(512, 1, 16), "val": samples(128, 2, 16)}, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "xprocess:", err)
	os.Exit(1)
}

// paramsSum is a SHA-256 over the parameters, by name, as float32 bytes.
func paramsSum(n *core.Nitro) string {
	p, err := n.Parameters()
	if err != nil {
		fail(err)
	}
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(p)) {
		h.Write([]byte(k))
		for _, v := range tensors.MustCopyFlatData[float32](p[k]) {
			h.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func main() {
	d, err := dist.FromEnv(os.LookupEnv)
	if err != nil {
		fail(err)
	}
	opts := []core.Option{core.WithDist(d), core.WithMaxEpochs(2), core.WithoutLogger(), core.WithoutCheckpoints(), core.Quiet()}
	if d.Source == dist.SourceOpenMPI { // under mpirun on CPU hosts: the same check over MPI's sum
		comm, err := mpi.Open("")
		if err != nil {
			fail(err)
		}
		defer comm.Close()
		opts = append(opts, core.WithCollective(comm))
	}
	n, err := core.New(&MLP{}, opts...)
	if err != nil {
		fail(err)
	}
	fmt.Printf("rank %d of %d\n", d.Rank, d.WorldSize)
	fmt.Printf("total_steps %d\n", n.TotalSteps())
	for line := range strings.SplitSeq(n.ConfigReport(), "\n") {
		if strings.Contains(line, "processes") || strings.Contains(line, "  backend") {
			fmt.Println("report:", strings.TrimSpace(line))
		}
	}
	for step := 1; step <= n.TotalSteps(); step++ {
		if err := n.TrainSteps(step); err != nil {
			fail(err)
		}
		fmt.Printf("step %d params %s\n", step, paramsSum(n))
	}
	for e, h := range n.History() {
		fmt.Printf("stretch %d train_loss %.9g val_loss %.9g\n", e+1, h.TrainLoss, h.Val["val_loss"])
	}
	fmt.Printf("final params %s\n", paramsSum(n))
	if err := n.EndRun(); err != nil {
		fail(err)
	}
}
