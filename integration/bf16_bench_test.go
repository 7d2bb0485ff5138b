package integration_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/prefetch"
)

// BenchCNN is the Flax MNIST example's CNN: conv 32 3x3 (same padding) relu, 2x2 mean pool,
// conv 64 3x3 relu, 2x2 mean pool, dense 256 relu, dense 10; x is a flat [batch, 784] image.
type BenchCNN struct{}

func (*BenchCNN) BuildModel(*context.Context) error { return nil }
func (*BenchCNN) BuildData() (prefetch.Data, error) {
	return nil, fmt.Errorf("BenchCNN's data is supplied with core.WithData")
}

func (*BenchCNN) Forward(ctx *context.Context, in Inputs) core.Outputs {
	b := in.X.Shape().Dimensions[0]
	h := graph.Reshape(in.X, b, 28, 28, 1)
	h = activations.Relu(layers.Convolution(ctx.In("conv_0"), h).Filters(32).KernelSize(3).PadSame().Done())
	h = graph.MeanPool(h).Window(2).Done()
	h = activations.Relu(layers.Convolution(ctx.In("conv_1"), h).Filters(64).KernelSize(3).PadSame().Done())
	h = graph.MeanPool(h).Window(2).Done()
	h = activations.Relu(layers.Dense(ctx.In("dense_0"), graph.Reshape(h, b, -1), true, 256))
	return core.Outputs{"logits": layers.Dense(ctx.In("dense_1"), h, true, benchOut)}
}

func (*BenchCNN) Loss(out core.Outputs, in Labels) *graph.Node { return benchLoss(out["logits"], in.Y) }

func (*BenchCNN) Metrics(out core.Outputs, in Labels) map[string]hooks.Metric {
	logits := out["logits"]
	hit := graph.ConvertDType(graph.Equal(graph.ArgMax(logits, -1, dtypes.Int32), in.Y), dtypes.Float32)
	rows := graph.Scalar(logits.Graph(), dtypes.Float32, float64(logits.Shape().Dimensions[0]))
	return map[string]hooks.Metric{"accuracy": {Sum: graph.ReduceAllSum(hit), Count: rows}}
}

// bf16Repeats is the timed repeats per mode: more than benchRepeats, since the ratio of two
// close times on a shared machine wants more pairs.
const bf16Repeats = 9

// BenchmarkMixedPrecisionStepRatio times one training step (the default two programs, RAdam,
// batch 128, random MNIST-shaped data) of the benchmark's MLP 784-512-512-10, of the mnist-mlp
// example's shape 784-256-256-10 and of BenchCNN,
// float32 against WithMixedPrecision("bf16"), and prints the ratio bf16/f32. Each repeat trains
// one epoch of benchSteps steps on each mode's long-lived handle, the order alternating from
// repeat to repeat with a GC before each; a step's time is the span from the first step's end
// to the last's over benchSteps-1 steps (as BenchmarkStepRatio times it), and the ratio is the
// median of the per-repeat ratios. It asserts only that nothing compiles during the timing.
func BenchmarkMixedPrecisionStepRatio(b *testing.B) {
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
	source := func() *prefetch.ArrayBatches {
		src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
			"x": tensors.FromFlatDataAndDimensions(slices.Clone(xs), n, benchIn),
			"y": tensors.FromFlatDataAndDimensions(slices.Clone(ys), n),
		}, benchBatch, prefetch.ArrayOptions{DropPartial: true})
		if err != nil {
			b.Fatal(err)
		}
		return src
	}
	side := func(e any, mode string) (func() float64, *compilecache.Cache) {
		clock, cache := &stepClock{}, compilecache.New()
		nt, err := core.New(e, core.WithBackend("xla"), core.Quiet(), core.WithCache(cache), core.WithLogger(clock), core.WithoutCheckpoints(),
			core.WithData(prefetch.Data{"train": source()}), core.WithMaxEpochs(1000), core.WithMixedPrecision(mode))
		if err != nil {
			b.Fatal(err)
		}
		return func() float64 {
			clock.ends = clock.ends[:0]
			nt.RequestStop()
			if err := nt.Train(); err != nil {
				b.Fatal(err)
			}
			if len(clock.ends) != benchSteps {
				b.Fatalf("%T %s logged %d steps, want %d", e, mode, len(clock.ends), benchSteps)
			}
			return clock.ends[benchSteps-1].Sub(clock.ends[0]).Seconds() / (benchSteps - 1)
		}, cache
	}
	fmt.Printf("step time, f32 vs bf16 (WithMixedPrecision), batch %d, two programs, RAdam, steps 2..%d of each repeat, median of %d repeats (order alternating), backend %s (%s):\n",
		benchBatch, benchSteps, bf16Repeats, r.Name, r.Plugin)
	for _, m := range []struct {
		name string
		mk   func() any
	}{
		{fmt.Sprintf("MLP %d-%d-%d-%d", benchIn, benchHidden, benchHidden, benchOut), func() any { return &BenchMLP{Hidden: benchHidden} }},
		{fmt.Sprintf("MLP %d-256-256-%d (mnist-mlp)", benchIn, benchOut), func() any { return &BenchMLP{Hidden: 256} }},
		{"CNN conv32-pool-conv64-pool-256-10", func() any { return &BenchCNN{} }},
	} {
		f32, c32 := side(m.mk(), "f32")
		bf16, c16 := side(m.mk(), "bf16")
		f32()
		bf16() // warm-up: compiles both
		var t32, t16, ratio []float64
		for rep := range bf16Repeats {
			runs := []func(){func() { runtime.GC(); t32 = append(t32, f32()) }, func() { runtime.GC(); t16 = append(t16, bf16()) }}
			if rep%2 == 1 {
				slices.Reverse(runs)
			}
			for _, run := range runs {
				run()
			}
			ratio = append(ratio, t16[rep]/t32[rep])
		}
		for _, c := range []*compilecache.Cache{c32, c16} {
			if s := c.Stats(); s.Misses != 2 {
				b.Errorf("%s: %d programs compiled, want 2 (gradient, optimizer): the timing includes compiles", m.name, s.Misses)
			}
		}
		fmt.Printf("  %-36s f32 %7.2f ms/step  bf16 %7.2f ms/step  bf16/f32 %.2f  (per repeat: %s)\n",
			m.name, median(t32)*1e3, median(t16)*1e3, median(ratio), fmtRatios(ratio))
		b.ReportMetric(median(ratio), "bf16/f32-"+strings.Fields(m.name)[1])
	}
}

func fmtRatios(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += strconv.FormatFloat(x, 'f', 2, 64)
	}
	return s
}

// BenchmarkMixedPrecisionMNISTCNN trains BenchCNN on MNIST (the GoMNIST module's files, 55000
// train and 5000 validation images, the 10000 test images) under f32 and then bf16, with the same
// seed and data order, and prints the test accuracy of each and their difference.
// $NITRO_BF16_EPOCHS sets the epochs (default 1; the accuracy comparison in the docs used 5).
func BenchmarkMixedPrecisionMNISTCNN(b *testing.B) {
	requireXLA(b)
	epochs := 1
	if s := os.Getenv("NITRO_BF16_EPOCHS"); s != "" {
		var err error
		if epochs, err = strconv.Atoi(s); err != nil || epochs < 1 {
			b.Fatalf("NITRO_BF16_EPOCHS=%q: want an integer >= 1", s)
		}
	}
	dir, err := mnist.DataDir("")
	if err != nil {
		b.Fatal(err)
	}
	train, err := mnist.Load(dir, "train", 0)
	if err != nil {
		b.Fatal(err)
	}
	test, err := mnist.Load(dir, "t10k", 0)
	if err != nil {
		b.Fatal(err)
	}
	rest, val, err := train.Split(5000, 1)
	if err != nil {
		b.Fatal(err)
	}
	split := func(s *mnist.Set, shuffle bool) *prefetch.ArrayBatches {
		a, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": s.Images, "y": s.Labels}, benchBatch, prefetch.ArrayOptions{Shuffle: shuffle, Seed: 3, DropPartial: shuffle})
		if err != nil {
			b.Fatal(err)
		}
		return a
	}
	acc := map[string]float64{}
	for _, mode := range []string{"f32", "bf16"} {
		nt, err := core.New(&BenchCNN{}, core.WithBackend("xla"), core.Quiet(), core.WithCache(compilecache.New()), core.WithoutLogger(), core.WithoutCheckpoints(),
			core.WithData(prefetch.Data{"train": split(rest, true), "val": split(val, false), "test": split(test, false)}), core.WithMaxEpochs(epochs), core.WithMixedPrecision(mode))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := nt.Train(); err != nil {
			b.Fatal(err)
		}
		m, err := nt.Evaluate("test")
		if err != nil {
			b.Fatal(err)
		}
		acc[mode] = m["accuracy"]
		fmt.Printf("MNIST CNN %s: %d epochs in %.0f s, test accuracy %.4f\n", mode, epochs, time.Since(start).Seconds(), acc[mode])
	}
	fmt.Printf("MNIST CNN test accuracy bf16 - f32: %+.2f points (goal: within 0.3)\n", 100*(acc["bf16"]-acc["f32"]))
	b.ReportMetric(100*(acc["bf16"]-acc["f32"]), "bf16-f32-points")
}
