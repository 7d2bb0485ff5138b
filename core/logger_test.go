package core_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
)

// loggerExp is a linear regression: the smallest experiment that trains.
type loggerExp struct {
	MaxEpochs int
}

type loggerIn struct {
	X *graph.Node `batch:"x"`
}
type loggerTarget struct {
	Y *graph.Node `batch:"y"`
}

func (e *loggerExp) BuildModel(ctx *context.Context) error { return nil }
func (e *loggerExp) BuildData() (core.Data, error) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 64
	x, y := make([]float32, n*3), make([]float32, n)
	for i := 0; i < n; i++ {
		for j := 0; j < 3; j++ {
			x[i*3+j] = float32(r.NormFloat64())
		}
		y[i] = 2*x[i*3] - x[i*3+1] + 0.5
	}
	fields := map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(x, n, 3),
		"y": tensors.FromFlatDataAndDimensions(y, n, 1),
	}
	train, err := core.NewArrayBatches(fields, 16, core.ArrayOptions{DropPartial: true})
	if err != nil {
		return nil, err
	}
	val, err := core.NewArrayBatches(fields, 16, core.ArrayOptions{})
	return core.Data{"train": train, "val": val}, err
}
func (e *loggerExp) Forward(ctx *context.Context, in loggerIn) core.Outputs {
	return core.Outputs{"y": layers.Dense(ctx.In("out"), in.X, true, 1)}
}
func (e *loggerExp) Loss(out core.Outputs, t loggerTarget) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(out["y"], t.Y)))
}

func TestLoggerReceivesReportsAndEpochMetrics(t *testing.T) {
	lg := &core.MemoryLogger{}
	n, err := core.New(&loggerExp{MaxEpochs: 2}, core.WithBackend("go"), core.Quiet(), core.WithCache(compilecache.New()), core.WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	br, ok := lg.Other["binding_report"].(string)
	if !ok || !strings.Contains(br, "group default") || br != n.BindingReport() {
		t.Fatalf("binding_report not handed to the logger as the Nitro's report: %q", br)
	}
	if _, ok := lg.Other["config_report"]; !ok {
		t.Fatal("config_report not logged")
	}
	if len(lg.Metrics) != 2 {
		t.Fatalf("want one metrics record per epoch, got %d", len(lg.Metrics))
	}
	last := lg.Metrics[1]
	if last.Epoch != 2 || last.Step != 8 {
		t.Fatalf("last record at epoch %d step %d, want epoch 2 step 8", last.Epoch, last.Step)
	}
	if _, ok := last.Metrics["val_loss"]; !ok {
		t.Fatalf("val_loss missing from %v", last.Metrics)
	}
	if lg.Metrics[1].Metrics["train_loss"] >= lg.Metrics[0].Metrics["train_loss"] {
		t.Fatalf("train loss did not fall: %v", lg.Metrics)
	}
}
