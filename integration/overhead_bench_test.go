package integration_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	nitroopt "github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
	"k8s.io/klog/v2"
)

// BenchmarkStepOverhead splits one training step of the benchmark MLP (784-512-512-10, RAdam on
// nitro's sides, GoMLX's Adam on the hand-written loop) at batch 128 and 32 into:
//
//   - execute: the time GoMLX measures around the backend's Execute call (gopjrt's
//     LoadedExecutable.Execute().Done(): the PJRT execute, which returns once XLA has finished,
//     plus gopjrt's argument arena, its output Buffer wrappers and the Destroy of donated
//     inputs). GoMLX logs it per call at klog verbosity 1 in graph.go (RunWithBuffers); the
//     benchmark turns that on for graph.go alone (-vmodule=graph=1) in separate, alternating
//     repeats, and sums the logged durations.
//   - upload: a host batch's x and y copied to the device (MaterializeOnDevice), timed in a
//     loop of its own in the same run.
//   - rest: everything else in the step, i.e. Go, GoMLX and nitro: argument lists, tensor
//     wrapping, scalar uploads, readback of the loss, frees, the batch stream, the logger.
//
// A "nitro fused, Adam" side runs nitro's fused step on Adam, the loop's rule, so that the
// execute columns compare the same math.
//
// A second table times a program of K float32 scalar inputs and K outputs (x+1, inputs donated)
// through graph.Graph.Run with every input already on the device: what one call costs GoMLX,
// gopjrt and PJRT when XLA has nothing to do, as K grows to the fused step's argument count.
// It prints figures and asserts only that the sides ran (step counts, no compile in the timing).
func BenchmarkStepOverhead(b *testing.B) {
	r := requireXLA(b)
	execLog := captureExecuteLog(b)
	for _, batch := range []int{128, 32} {
		overheadAt(b, r, execLog, batch)
	}
	fixedCallCost(b, r)
}

// overheadAt measures the split at one batch size. Each repeat runs every side twice, plain
// (its step time) and with the execute log on (its execute time), the order rotating.
func overheadAt(b *testing.B, r *backend.Resolved, execLog *executeLog, batch int) {
	const steps, repeats = 30, 5
	xs, ys := mlpBenchData(steps*batch, uint64(batch))
	type side struct {
		name     string
		run      func() float64 // seconds per step over steps 2..steps
		programs int            // executes per step
		t, tk, e []float64      // plain step; step and execute of the logged repeat
		allocs   []float64      // Go heap allocations per step of the plain repeat (its Train's setup included)
	}
	fusedCache, twoCache, adamCache := compilecache.New(), compilecache.New(), compilecache.New()
	sides := []*side{
		{name: "nitro fused", run: ovhNitro(b, fusedCache, &BenchMLP{Hidden: benchHidden}, xs, ys, steps, batch, core.WithFusedStep()), programs: 1},
		{name: "nitro fused, Adam", run: ovhNitro(b, adamCache, &benchMLPAdam{Hidden: benchHidden}, xs, ys, steps, batch, core.WithFusedStep()), programs: 1},
		{name: "nitro two programs", run: ovhNitro(b, twoCache, &BenchMLP{Hidden: benchHidden}, xs, ys, steps, batch), programs: 2},
		{name: "GoMLX loop", run: mlpGoMLXLoop(b, r, xs, ys, steps, batch), programs: 1},
	}
	for _, s := range sides {
		s.run() // warm-up: compiles
	}
	for rep := range repeats {
		for k := range sides {
			s := sides[(rep+k)%len(sides)]
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			s.t = append(s.t, s.run())
			runtime.ReadMemStats(&m1)
			s.allocs = append(s.allocs, float64(m1.Mallocs-m0.Mallocs)/steps)
			runtime.GC()
			execLog.start()
			s.tk = append(s.tk, s.run())
			calls, total := execLog.stop()
			if calls != steps*s.programs {
				b.Fatalf("%s: %d executes logged, want %d", s.name, calls, steps*s.programs)
			}
			s.e = append(s.e, total.Seconds()/steps)
		}
	}
	if s := adamCache.Stats(); s.Misses != 1 {
		b.Errorf("nitro fused Adam compiled %d programs, want 1: the timing includes compiles", s.Misses)
	}
	if s := fusedCache.Stats(); s.Misses != 1 {
		b.Errorf("nitro fused compiled %d programs, want 1: the timing includes compiles", s.Misses)
	}
	if s := twoCache.Stats(); s.Misses != 2 {
		b.Errorf("nitro two programs compiled %d programs, want 2: the timing includes compiles", s.Misses)
	}
	up := uploadTime(b, r, xs, ys, batch)
	fmt.Printf("step split, MLP %d-%d-%d-%d, batch %d, median of %d repeats (order rotating), backend %s:\n",
		benchIn, benchHidden, benchHidden, benchOut, batch, repeats, r.Name)
	fmt.Printf("  %-20s %8s %7s | logged repeats: %8s %16s %16s %16s\n", "side", "ms/step", "allocs", "ms/step", "execute", "batch upload", "rest (Go)")
	for _, s := range sides {
		// The split is of the logged repeats, execute and step from the same repeat.
		t, tk := median(s.t)*1e3, median(s.tk)*1e3
		frac := make([]float64, len(s.e))
		for i := range s.e {
			frac[i] = s.e[i] / s.tk[i]
		}
		ef := median(frac)
		uf := up * 1e3 / tk
		fmt.Printf("  %-20s %8.3f %7.0f | %24.3f %8.3f (%3.0f%%) %8.3f (%3.0f%%) %8.3f (%3.0f%%)\n", s.name, t, median(s.allocs), tk, ef*tk, 100*ef, up*1e3, 100*uf, (1-ef-uf)*tk, 100*(1-ef-uf))
	}
	ratio := func(num, den []float64) float64 {
		q := make([]float64, len(num))
		for i := range num {
			q[i] = num[i] / den[i]
		}
		return median(q)
	}
	fused, adam, two, gm := sides[0], sides[1], sides[2], sides[3]
	fmt.Printf("  ratios (median of per-repeat ratios): step fused/gomlx %.3f, fused Adam/gomlx %.3f, two/gomlx %.3f; execute fused/gomlx %.3f, fused Adam/gomlx %.3f\n",
		ratio(fused.t, gm.t), ratio(adam.t, gm.t), ratio(two.t, gm.t), ratio(fused.e, gm.e), ratio(adam.e, gm.e))
	b.ReportMetric(ratio(fused.t, gm.t), fmt.Sprintf("fused/gomlx@%d", batch))
}

// benchMLPAdam is BenchMLP on Adam (eta: the LearningRate), the GoMLX loop's rule, so that the
// execute times of the two compare programs of the same math but for nitro's finite-loss guard.
type benchMLPAdam struct {
	Hidden int `nitro:"graphconst" default:"512"`
}

func (e *benchMLPAdam) BuildModel(ctx *context.Context) error { return nil }
func (e *benchMLPAdam) BuildData() (prefetch.Data, error) {
	return nil, fmt.Errorf("benchMLPAdam's data is supplied with core.WithData")
}
func (e *benchMLPAdam) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return core.Outputs{"logits": benchModel(ctx, in.X, e.Hidden)}
}
func (e *benchMLPAdam) Loss(out core.Outputs, in Labels) *graph.Node {
	return benchLoss(out["logits"], in.Y)
}
func (*benchMLPAdam) OptimizerRule(string) nitroopt.Rule {
	return nitroopt.Adam{Beta1: 0.9, Beta2: 0.999, Eps: 1e-7}
}

// mlpBenchData is n random rows of the MLP's inputs and labels, drawn from seed.
func mlpBenchData(n int, seed uint64) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(7, seed))
	xs := make([]float32, n*benchIn)
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	ys := make([]int32, n)
	for i := range ys {
		ys[i] = int32(rng.IntN(benchOut))
	}
	return xs, ys
}

// ovhNitro returns a repeat of one epoch of steps batches on one long-lived nitro handle, as
// BenchmarkStepRatio's nitro sides: seconds per step between the first and the last step's end.
func ovhNitro(b *testing.B, cache *compilecache.Cache, e any, xs []float32, ys []int32, steps, batch int, opts ...core.Option) func() float64 {
	n := steps * batch
	src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(slices.Clone(xs), n, benchIn),
		"y": tensors.FromFlatDataAndDimensions(slices.Clone(ys), n),
	}, batch, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		b.Fatal(err)
	}
	clock := &stepClock{}
	opts = append([]core.Option{core.WithBackend("xla"), core.Quiet(), core.WithCache(cache), core.WithLogger(clock),
		core.WithoutCheckpoints(), core.WithData(prefetch.Data{"train": src}), core.WithMaxEpochs(1 << 20)}, opts...)
	nt, err := core.New(e, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return func() float64 {
		before := nt.Step()
		clock.ends = clock.ends[:0]
		nt.RequestStop()
		if err := nt.Train(); err != nil {
			b.Fatal(err)
		}
		if got := nt.Step() - before; got != steps || len(clock.ends) != steps {
			b.Fatalf("nitro took %d steps and logged %d, want %d", got, len(clock.ends), steps)
		}
		return clock.ends[steps-1].Sub(clock.ends[0]).Seconds() / float64(steps-1)
	}
}

// mlpGoMLXLoop is the hand-written GoMLX side: one context.Exec per step fusing forward, gradient
// and GoMLX's Adam, fed a fresh host batch copied out of xs and ys, the loss read back each
// step. A call runs one repeat of steps steps and returns seconds per step from the end of the
// first step to the end of the last.
func mlpGoMLXLoop(b *testing.B, r *backend.Resolved, xs []float32, ys []int32, steps, batch int) func() float64 {
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
	return func() float64 {
		var first time.Time
		for i := range steps {
			lo, hi := i*batch, (i+1)*batch
			x := tensors.FromFlatDataAndDimensions(slices.Clone(xs[lo*benchIn:hi*benchIn]), batch, benchIn)
			y := tensors.FromFlatDataAndDimensions(slices.Clone(ys[lo:hi]), batch)
			out, err := exec.Exec(x, y)
			if err != nil {
				b.Fatal(err)
			}
			if _, ok := out[0].Value().(float32); !ok {
				b.Fatalf("GoMLX loss is %T, want float32", out[0].Value())
			}
			if i == 0 {
				first = time.Now()
			}
		}
		return time.Since(first).Seconds() / float64(steps-1)
	}
}

// uploadTime is the median time to copy one fresh host batch (x and y) to the device.
func uploadTime(b *testing.B, r *backend.Resolved, xs []float32, ys []int32, batch int) float64 {
	var ts []float64
	for i := range 60 {
		k := i % (len(ys) / batch)
		x := tensors.FromFlatDataAndDimensions(slices.Clone(xs[k*batch*benchIn:(k+1)*batch*benchIn]), batch, benchIn)
		y := tensors.FromFlatDataAndDimensions(slices.Clone(ys[k*batch:(k+1)*batch]), batch)
		start := time.Now()
		for _, t := range []*tensors.Tensor{x, y} {
			if err := t.MaterializeOnDevice(r.Backend, false, 0); err != nil {
				b.Fatal(err)
			}
		}
		ts = append(ts, time.Since(start).Seconds())
		for _, t := range []*tensors.Tensor{x, y} {
			if err := t.InvalidateOnDevice(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return median(ts)
}

// fixedCallCost prints the time of one call of a program of k scalar inputs (donated) and k
// outputs, every input on the device: GoMLX's, gopjrt's and PJRT's cost per call and per argument.
func fixedCallCost(b *testing.B, r *backend.Resolved) {
	fmt.Printf("one call of a program of K float32 scalars -> K scalars (x+1), inputs on the device and donated (graph.Graph.Run):\n")
	for _, k := range []int{1, 8, 24} {
		g := graph.NewGraph(r.Backend, fmt.Sprintf("ovh_scalars_%d", k))
		var outs []*graph.Node
		for i := range k {
			p := graph.Parameter(g, fmt.Sprintf("p%d", i), shapes.Make(dtypes.Float32))
			outs = append(outs, graph.OnePlus(p))
		}
		g.Compile(outs...)
		in := make([]*tensors.Tensor, k)
		for i := range in {
			in[i] = tensors.FromScalar(float32(i))
			if err := in[i].MaterializeOnDevice(r.Backend, false, 0); err != nil {
				b.Fatal(err)
			}
		}
		args := make([]any, k)
		call := func() {
			for i, t := range in {
				d, err := graph.DonateTensorBuffer(t, r.Backend, 0)
				if err != nil {
					b.Fatal(err)
				}
				args[i] = d
			}
			in = g.Run(args...)
		}
		for range 20 {
			call()
		}
		const calls = 400
		start := time.Now()
		for range calls {
			call()
		}
		us := time.Since(start).Seconds() / calls * 1e6
		fmt.Printf("  K=%-3d %8.1f µs/call  %6.2f µs/argument\n", k, us, us/float64(k))
		for _, t := range in {
			_ = t.FinalizeAll()
		}
		g.Finalize()
	}
}

// executeLog collects the execute durations GoMLX's graph.go logs at klog verbosity 1.
type executeLog struct {
	mu    sync.Mutex
	fs    *flag.FlagSet
	on    bool
	calls int
	total time.Duration
}

// captureExecuteLog routes klog into an executeLog, off until start.
func captureExecuteLog(b *testing.B) *executeLog {
	l := &executeLog{fs: flag.NewFlagSet("klog", flag.ContinueOnError)}
	klog.InitFlags(l.fs)
	for k, v := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL", "one_output": "true"} {
		if err := l.fs.Set(k, v); err != nil {
			b.Fatal(err)
		}
	}
	klog.SetOutput(l)
	b.Cleanup(func() { l.setV("") })
	return l
}

func (l *executeLog) setV(vmodule string) {
	if err := l.fs.Set("vmodule", vmodule); err != nil {
		panic(err)
	}
}

func (l *executeLog) start() {
	l.mu.Lock()
	l.on, l.calls, l.total = true, 0, 0
	l.mu.Unlock()
	l.setV("graph=1")
}

func (l *executeLog) stop() (int, time.Duration) {
	l.setV("")
	l.mu.Lock()
	defer l.mu.Unlock()
	l.on = false
	return l.calls, l.total
}

// Write takes klog's lines; the one counted is "Graph.RunWithBuffers: <duration> elapsed".
func (l *executeLog) Write(p []byte) (int, error) {
	const mark = "Graph.RunWithBuffers: "
	s := string(p)
	if i := strings.Index(s, mark); i >= 0 {
		f := strings.Fields(s[i+len(mark):])
		if len(f) > 0 {
			if d, err := time.ParseDuration(f[0]); err == nil {
				l.mu.Lock()
				if l.on {
					l.calls++
					l.total += d
				}
				l.mu.Unlock()
			}
		}
	}
	return len(p), nil
}
