package integration_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
)

// The benchmark's fixed problem: an MNIST-sized MLP 784-512-512-10 on random data, batch 128.
const (
	benchIn      = 784
	benchHidden  = 512
	benchOut     = 10
	benchBatch   = 128
	benchSteps   = 30 // optimizer steps per timed repeat
	benchRepeats = 5  // timed repeats per side, after one warm-up repeat each
)

// benchModel is the model both sides train.
func benchModel(ctx *context.Context, x *graph.Node, hidden int) *graph.Node {
	h := activations.Relu(layers.Dense(ctx.In("hidden_0"), x, true, hidden))
	h = activations.Relu(layers.Dense(ctx.In("hidden_1"), h, true, hidden))
	return layers.Dense(ctx.In("output"), h, true, benchOut)
}

func benchLoss(logits, labels *graph.Node) *graph.Node {
	onehot := graph.OneHot(labels, benchOut, logits.DType())
	return graph.ReduceAllMean(graph.Neg(graph.ReduceSum(graph.Mul(onehot, graph.LogSoftmax(logits, -1)), -1)))
}

// BenchMLP is the nitro side: the four hooks and nothing else (RAdam, the framework's default).
type BenchMLP struct {
	Hidden int `nitro:"graphconst" default:"512"`
}

func (e *BenchMLP) BuildModel(ctx *context.Context) error { return nil }
func (e *BenchMLP) BuildData() (core.Data, error) {
	return nil, fmt.Errorf("BenchMLP's data is supplied with core.WithData")
}
func (e *BenchMLP) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return core.Outputs{"logits": benchModel(ctx, in.X, e.Hidden)}
}
func (e *BenchMLP) Loss(out core.Outputs, in Labels) *graph.Node {
	return benchLoss(out["logits"], in.Y)
}

// BenchmarkStepRatio measures, in one run, the median time of one training step in nitro and in a
// hand-written GoMLX loop doing the same math on the same backend, and reports their ratio. It
// asserts nothing about speed.
//
// nitro: per step, a gradient program and a separate optimizer program (RAdam), a fresh host batch
// copied out of the dataset and uploaded, and the loss read back to check it is finite. Timed by
// wall clock around one more epoch of Train on one handle, over a train-only split of benchSteps
// batches; no validation runs.
//
// GoMLX: one context.Exec per step fusing forward, gradient and GoMLX's own Adam update
// (optimizers.Adam().Done(): Adam, not RAdam, so the rectification term's few scalar ops are
// missing), fed a fresh host batch copied the same way, with the loss read back each step.
//
// Repeats alternate between the two sides so drift in the machine hits both alike.
func BenchmarkStepRatio(b *testing.B) {
	r := requireXLA(b)
	n := benchSteps * benchBatch
	rng := rand.New(rand.NewPCG(7, 7))
	xs := make([]float32, n*benchIn)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	ys := make([]int32, n)
	for i := range ys {
		ys[i] = int32(rng.IntN(benchOut))
	}
	src, err := core.NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(xs, n, benchIn),
		"y": tensors.FromFlatDataAndDimensions(ys, n),
	}, benchBatch, core.ArrayOptions{DropPartial: true})
	if err != nil {
		b.Fatal(err)
	}
	cache := compilecache.New()

	// nitroRepeat trains one more epoch of benchSteps steps on one long-lived handle (as a real run
	// does) and returns seconds per step. RequestStop before Train makes Train run exactly one epoch.
	nt, err := core.New(&BenchMLP{Hidden: benchHidden}, core.WithBackend("xla"), core.Quiet(),
		core.WithCache(cache), core.WithData(core.Data{"train": src}), core.WithMaxEpochs(1000))
	if err != nil {
		b.Fatal(err)
	}
	nitroRepeat := func() float64 {
		before := nt.Step()
		nt.RequestStop()
		start := time.Now()
		if err := nt.Train(); err != nil {
			b.Fatal(err)
		}
		el := time.Since(start).Seconds()
		if got := nt.Step() - before; got != benchSteps {
			b.Fatalf("nitro took %d steps, want %d", got, benchSteps)
		}
		return el / benchSteps
	}

	ctx := context.New()
	ctx.SetRNGStateFromSeed(42)
	opt := optimizers.Adam().Done()
	exec, err := context.NewExec(r.Backend, ctx, func(ctx *context.Context, x, y *graph.Node) *graph.Node {
		ctx.SetTraining(x.Graph(), true)
		loss := benchLoss(benchModel(ctx, x, benchHidden), y)
		opt.UpdateGraph(ctx, x.Graph(), loss)
		return loss
	})
	if err != nil {
		b.Fatal(err)
	}
	// gomlxRepeat runs benchSteps steps of the hand-written loop and returns seconds per step.
	gomlxRepeat := func() float64 {
		start := time.Now()
		for i := range benchSteps {
			lo, hi := i*benchBatch, (i+1)*benchBatch
			x := tensors.FromFlatDataAndDimensions(slices.Clone(xs[lo*benchIn:hi*benchIn]), benchBatch, benchIn)
			y := tensors.FromFlatDataAndDimensions(slices.Clone(ys[lo:hi]), benchBatch)
			out, err := exec.Exec(x, y)
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := out[0].Value().(float32); !ok {
				b.Fatalf("GoMLX loss is %T, want float32", out[0].Value())
			}
		}
		return time.Since(start).Seconds() / benchSteps
	}

	// Warm-up: compiles both sides (nitro's programs land in the private cache).
	nitroRepeat()
	gomlxRepeat()
	b.ResetTimer()
	var nitroT, gomlxT []float64
	for range benchRepeats {
		nitroT = append(nitroT, nitroRepeat())
		gomlxT = append(gomlxT, gomlxRepeat())
	}
	b.StopTimer()
	if s := cache.Stats(); s.Misses != 2 {
		b.Errorf("nitro compiled %d programs, want 2 (gradient, optimizer): the timing includes compiles", s.Misses)
	}
	nm, gm := median(nitroT)*1e3, median(gomlxT)*1e3
	ratio := nm / gm
	fmt.Printf("nitro/gomlx step time ratio: %.2f (nitro %.2f ms, gomlx %.2f ms, median of %d)\n", ratio, nm, gm, benchRepeats)
	fmt.Printf("  MLP %d-%d-%d-%d, batch %d, %d steps per repeat, backend %s\n", benchIn, benchHidden, benchHidden, benchOut, benchBatch, benchSteps, r.Name)
	fmt.Printf("  nitro: RAdam, gradient and optimizer programs per step; gomlx: optimizers.Adam().Done(), one fused program per step\n")
	b.ReportMetric(ratio, "nitro/gomlx")
	b.ReportMetric(nm, "nitro-ms/step")
	b.ReportMetric(gm, "gomlx-ms/step")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
