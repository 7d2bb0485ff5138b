// Command ctrlc is the README's first experiment with an epoch budget no test waits out:
// TestCtrlCStopsAProgramGracefully interrupts it with a real SIGINT while it trains.
package main

import (
	stdcontext "context"
	"log"
	"os"
	"os/signal"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers/fnn"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
)

type Curve struct {
	Hidden       int `nitro:"graphconst"`
	LearningRate float64
	MaxEpochs    int
}

type Batch struct{ X, Y *graph.Node }

func (e *Curve) BuildModel(ctx *context.Context) error { return nil }

func (e *Curve) BuildData() (prefetch.Data, error) {
	x, y := make([]float32, 3000), make([]float32, 3000)
	for i := range x {
		x[i] = float32(i)/1500 - 1
		y[i] = x[i] * x[i]
	}
	X, Y := tensors.FromFlatDataAndDimensions(x, 3000, 1), tensors.FromFlatDataAndDimensions(y, 3000, 1)
	return prefetch.SplitArrays(map[string]*tensors.Tensor{"X": X, "Y": Y}, prefetch.SplitOptions{BatchSize: 50, Val: 0.2, Test: 0.2})
}

func (e *Curve) Forward(ctx *context.Context, in Batch) core.Outputs {
	return core.Outputs{"y": fnn.New(ctx, in.X, 1).NumHiddenLayers(1, e.Hidden).Done()}
}

func (e *Curve) Loss(out core.Outputs, in Batch) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(out["y"], in.Y)))
}

func main() {
	ctx, stop := signal.NotifyContext(stdcontext.Background(), os.Interrupt)
	defer stop()
	n, err := core.New(&Curve{Hidden: 32, LearningRate: 0.01, MaxEpochs: 1_000_000})
	if err == nil {
		err = n.TrainContext(ctx)
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Println("stopped:", n.StopReason())
}
