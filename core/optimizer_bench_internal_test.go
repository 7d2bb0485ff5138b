package core

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
	"github.com/nitro-go/nitro/compilecache"
)

// optBenchMLP is the benchmark's model: MLP 784-512-512-10 (670k parameters in 6 arrays).
type optBenchMLP struct{}

type optBenchIn struct {
	X *graph.Node `batch:"x"`
	Y *graph.Node `batch:"y"`
}

func (e *optBenchMLP) BuildModel(ctx *context.Context) error { return nil }
func (e *optBenchMLP) Forward(ctx *context.Context, in optBenchIn) Outputs {
	h := activations.Relu(layers.Dense(ctx.In("hidden_0"), in.X, true, 512))
	h = activations.Relu(layers.Dense(ctx.In("hidden_1"), h, true, 512))
	return Outputs{"logits": layers.Dense(ctx.In("output"), h, true, 10)}
}
func (e *optBenchMLP) Loss(out Outputs, in optBenchIn) *graph.Node {
	return graph.ReduceAllMean(graph.Square(out["logits"]))
}

// BenchmarkOptimizerProgram times the optimizer program alone (RAdam over 670k float32
// parameters) against a program that reads and writes the same bytes once (params + grads ->
// params; state -> state), on the XLA backend, and prints their ratio. Runs are chained (each
// run's outputs feed the next) and synchronized by reading one value back at the end.
func BenchmarkOptimizerProgram(b *testing.B) {
	const rows = 256
	rng := rand.New(rand.NewPCG(1, 2))
	xs := make([]float32, rows*784)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	src, err := NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(xs, rows, 784),
		"y": tensors.FromFlatDataAndDimensions(make([]float32, rows), rows),
	}, 128, ArrayOptions{DropPartial: true})
	if err != nil {
		b.Fatal(err)
	}
	n, err := New(&optBenchMLP{}, WithBackend("xla"), Quiet(), WithCache(compilecache.New()), WithData(Data{"train": src}), WithoutLogger(), WithoutCheckpoints())
	if err != nil {
		b.Fatal(err)
	}
	p, err := n.optimizerProgram()
	if err != nil {
		b.Fatal(err)
	}
	var grads []*tensors.Tensor
	bytes := 0
	for _, g := range n.groups {
		for _, v := range g.vars {
			t := tensors.FromShape(v.Shape())
			if err := t.MaterializeOnDevice(n.backend.Backend, false, 0); err != nil {
				b.Fatal(err)
			}
			grads = append(grads, t)
			bytes += int(v.Shape().Memory())
		}
	}
	const runs = 50
	sync := func() {
		last := n.st.groups[len(n.st.groups)-1]
		_ = last.params[0].Value()
	}
	optRepeat := func() float64 {
		start := time.Now()
		for k := range runs {
			args, err := n.optimizerArgs(grads, false, k+1)
			if err != nil {
				b.Fatal(err)
			}
			outs, err := n.run(p, args)
			if err != nil {
				b.Fatal(err)
			}
			n.takeOptimizerOutputs(outs)
		}
		sync()
		return time.Since(start).Seconds() / runs
	}

	// The copy program: parameters, gradients and state in, each output one read and one write:
	// p + g -> p, -s -> s. The same bytes the optimizer must move, and no math.
	cg := graph.NewGraph(n.backend.Backend, "copy_baseline")
	var outs, stateOuts []*graph.Node
	k := 0
	for _, g := range n.st.groups {
		for _, t := range g.params {
			p := graph.Parameter(cg, fmt.Sprintf("p%d", k), t.Shape())
			gr := graph.Parameter(cg, fmt.Sprintf("g%d", k), t.Shape())
			outs = append(outs, graph.Add(p, gr))
			k++
		}
		for _, leaves := range g.opt {
			for _, t := range leaves {
				stateOuts = append(stateOuts, graph.Neg(graph.Parameter(cg, fmt.Sprintf("s%d", k), t.Shape())))
				k++
			}
		}
	}
	cg.Compile(append(outs, stateOuts...)...)
	copyRepeat := func() float64 {
		start := time.Now()
		for range runs {
			var in []any
			gi := 0
			for _, g := range n.st.groups {
				for _, t := range g.params {
					d, _ := graph.DonateTensorBuffer(t, n.backend.Backend, 0)
					in = append(in, d, grads[gi])
					gi++
				}
				for _, leaves := range g.opt {
					for _, t := range leaves {
						d, _ := graph.DonateTensorBuffer(t, n.backend.Backend, 0)
						in = append(in, d)
					}
				}
			}
			o := cg.Run(in...)
			for i := range n.st.groups {
				g := &n.st.groups[i]
				g.params = o[:len(g.params)]
				o = o[len(g.params):]
			}
			for i := range n.st.groups {
				g := &n.st.groups[i]
				for s := range g.opt {
					g.opt[s] = o[:len(g.params)]
					o = o[len(g.params):]
				}
			}
		}
		sync()
		return time.Since(start).Seconds() / runs
	}
	optRepeat()
	copyRepeat()
	b.ResetTimer()
	var ot, ct []float64
	for range 5 {
		ot = append(ot, optRepeat())
		ct = append(ct, copyRepeat())
	}
	b.StopTimer()
	om, cm := medianOf(ot)*1e3, medianOf(ct)*1e3
	mib := float64(bytes) / (1 << 20)
	fmt.Printf("optimizer program / one-pass copy: %.2f (optimizer %.3f ms, copy %.3f ms; %.2f MiB of parameters, %d state arrays per group)\n",
		om/cm, om, cm, mib, len(n.st.groups[0].opt))
	b.ReportMetric(om/cm, "opt/copy")
	b.ReportMetric(om, "opt-ms")
	b.ReportMetric(cm, "copy-ms")
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
