package core_test

import (
	"fmt"
	"os"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/dist"
	"github.com/nitro-go/nitro/prefetch"
)

// ShardedLine is Line without its Device field, whose BuildData takes the run's Dist and keeps
// its rank's share of Line's splits (dist.ShardData: batches rank, rank+W, …).
type ShardedLine struct{ MaxEpochs int }

func (e *ShardedLine) BuildData(d dist.Dist) (prefetch.Data, error) {
	whole, err := (&Line{}).BuildData()
	if err != nil {
		return nil, err
	}
	return dist.ShardData(whole, d)
}

func (e *ShardedLine) BuildModel(ctx *context.Context) error { return nil }

func (e *ShardedLine) Forward(ctx *context.Context, in LineIn) core.Outputs {
	return core.Outputs{"y": layers.Dense(ctx.In("line"), in.X, true, 1)}
}

func (e *ShardedLine) Loss(out core.Outputs, in LineTarget) *graph.Node {
	return (&Line{}).Loss(out, in)
}

// Rank 1 of a world of 2 trains on its half of the batches and writes nothing into its run
// directory: the logger and the checkpoints are rank 0's.
func ExampleWithDist() {
	dir, _ := os.MkdirTemp("", "nitro-dist-")
	defer os.RemoveAll(dir)
	n, err := core.New(&ShardedLine{MaxEpochs: 2}, core.WithBackend("go"), core.Quiet(), core.WithRunDir(dir),
		core.WithDist(dist.Dist{Rank: 1, WorldSize: 2}), core.WithIndependentRanks())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := n.Train(); err != nil {
		fmt.Println(err)
		return
	}
	files, _ := os.ReadDir(dir)
	fmt.Println(n.Dist(), "steps:", n.Step(), "logger:", n.Logger() != nil, "files:", len(files))
	// Output: rank 1 of 2 steps: 4 logger: false files: 0
}

func ExampleNitro_Dist() {
	n, err := core.New(newLine(), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(n.Dist(), n.Dist().IsRank0())
	// Output: rank 0 of 1 true
}
