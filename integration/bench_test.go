package integration_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/hostalloc"
	"github.com/nitro-go/nitro/prefetch"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/logjson"
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
func (e *BenchMLP) BuildData() (prefetch.Data, error) {
	return nil, fmt.Errorf("BenchMLP's data is supplied with core.WithData")
}
func (e *BenchMLP) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return core.Outputs{"logits": benchModel(ctx, in.X, e.Hidden)}
}
func (e *BenchMLP) Loss(out core.Outputs, in Labels) *graph.Node {
	return benchLoss(out["logits"], in.Y)
}

// BenchmarkStepRatio measures, in one run, the time of one training step on four sides doing the
// same math on the same machine, and prints their ratios. It asserts nothing about speed; it
// fails only if a side misbehaves (wrong step count, a compile during timing).
//
//   - nitro (two programs): per step a gradient program and a separate optimizer program (RAdam),
//     a fresh host batch copied out of the dataset and uploaded, and the loss read back to check it
//     is finite. One more epoch of Train per repeat on one long-lived handle, over a train-only
//     split of benchSteps batches; no validation runs.
//   - nitro (fused): the same with core.WithFusedStep(): one program per step.
//   - GoMLX: a hand-written loop, one context.Exec per step fusing forward, gradient and GoMLX's
//     Adam (optimizers.Adam().Done(): Adam, not RAdam, so the rectification's few scalar ops are
//     missing), fed a fresh host batch copied the same way, with the loss read back each step.
//     It runs after core.New, so it has nitro's matrix-product gradients (dotgrad) too.
//   - JAX + optax (scripts/bench/jax_step.py, when $NITRO_BENCH_PYTHON names the venv's python;
//     `make bench` sets it up): a jitted step with params and state donated, radam at optax's
//     defaults, a fresh host batch uploaded and the loss read back per step.
//
// Every side times the same span: from the end of a repeat's first step (its loss read back) to
// the end of its last, over benchSteps-1 steps. So no side is charged its per-repeat overhead
// (nitro's per-Train setup and the epoch's stream start; the peer's command round trip); nitro's
// is printed apart. Nitro's step ends are stamped by a logger that records the time of each
// "train" line, which Train writes right after the step's loss is read back. Each repeat runs
// every side once, the order rotating from repeat to repeat, with a GC before each side so one
// side's garbage is not collected in another's time; ratios are the median of the per-repeat
// ratios (the sides of one repeat ran back to back, so pairing cancels the drift of a shared
// machine). Each side's GFLOP/s (matmul flops of one step: forward, weight and input gradients)
// is set against the roofline of one [batch,in]@[in,hidden] matmul looped on its own backend,
// measured alike on both (each call waited on, nothing copied back). The compile times are
// those of nitro's programs (gradient, optimizer, fused train step, eval). With the peer on, it
// also prints the CPU the idle process used while the other was timed (from /proc/<pid>/stat):
// the sides take turns, and an idle side whose threads spun would slow the timed one.
func BenchmarkStepRatio(b *testing.B) {
	r := requireXLA(b)
	n := benchSteps * benchBatch
	xs, ys := mlpBenchData(n, 7)
	newSource := func() *prefetch.ArrayBatches {
		src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
			"x": tensors.FromFlatDataAndDimensions(slices.Clone(xs), n, benchIn),
			"y": tensors.FromFlatDataAndDimensions(slices.Clone(ys), n),
		}, benchBatch, prefetch.ArrayOptions{DropPartial: true})
		if err != nil {
			b.Fatal(err)
		}
		return src
	}

	// nitroSide trains one more epoch of benchSteps steps on one long-lived handle (as a real run
	// does) per repeat and returns seconds per step over the span every side times, and the
	// Train's wall time outside that span. RequestStop before Train makes Train run exactly one
	// epoch. A "test" split (never touched by Train) lets the eval program compile.
	nitroSide := func(cache *compilecache.Cache, opts ...core.Option) (*core.Nitro, func() (float64, float64)) {
		clock := &stepClock{}
		opts = append([]core.Option{core.WithBackend("xla"), core.Quiet(), core.WithCache(cache), core.WithLogger(clock), core.WithoutCheckpoints(),
			core.WithData(prefetch.Data{"train": newSource(), "test": newSource()}), core.WithMaxEpochs(1000)}, opts...)
		nt, err := core.New(&BenchMLP{Hidden: benchHidden}, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return nt, func() (float64, float64) {
			before := nt.Step()
			clock.ends = clock.ends[:0]
			nt.RequestStop()
			start := time.Now()
			if err := nt.Train(); err != nil {
				b.Fatal(err)
			}
			wall := time.Since(start).Seconds()
			if got := nt.Step() - before; got != benchSteps || len(clock.ends) != benchSteps {
				b.Fatalf("nitro took %d steps and logged %d, want %d", got, len(clock.ends), benchSteps)
			}
			span := clock.ends[benchSteps-1].Sub(clock.ends[0]).Seconds()
			perStep := span / (benchSteps - 1)
			return perStep, wall - perStep*benchSteps
		}
	}
	twoCache, fusedCache := compilecache.New(), compilecache.New()
	twoN, twoRepeat := nitroSide(twoCache)
	fusedN, fusedRepeat := nitroSide(fusedCache, core.WithFusedStep())

	gomlxRepeat := mlpGoMLXLoop(b, r, xs, ys, benchSteps, benchBatch)
	jax := startJAX(b)

	// The sides, in the order of the first repeat; each records its seconds per step.
	type side struct {
		name string
		run  func() float64
		t    []float64
	}
	var twoOver, fusedOver []float64
	sides := []*side{
		{name: "nitro (two programs)", run: func() float64 { s, o := twoRepeat(); twoOver = append(twoOver, o); return s }},
		{name: "nitro (fused)", run: func() float64 { s, o := fusedRepeat(); fusedOver = append(fusedOver, o); return s }},
		{name: "GoMLX loop", run: gomlxRepeat},
	}
	if jax != nil {
		sides = append(sides, &side{name: "JAX + optax", run: jax.step})
	}
	// Warm-up: compiles every side (nitro's programs land in their private caches).
	for _, s := range sides {
		s.run()
	}
	twoOver, fusedOver = nil, nil
	// idle[i] is the CPU the sides' other process used while side i was timed: the Go process's
	// (its XLA pool included) during the JAX peer's repeats, the peer's during the Go sides'. A
	// process that spins while idle steals a core from the one being timed on a small machine.
	idle, busy := make([]time.Duration, len(sides)), make([]time.Duration, len(sides))
	b.ResetTimer()
	for rep := range benchRepeats {
		for k := range sides {
			i := (rep + k) % len(sides)
			s := sides[i]
			runtime.GC()
			self, other := os.Getpid(), os.Getpid()
			if jax != nil {
				if s.name == "JAX + optax" {
					self = jax.cmd.Process.Pid
				} else {
					other = jax.cmd.Process.Pid
				}
			}
			before, selfBefore := processCPU(b, other), processCPU(b, self)
			s.t = append(s.t, s.run())
			if jax != nil {
				idle[i] += processCPU(b, other) - before
				busy[i] += processCPU(b, self) - selfBefore
			}
		}
	}
	b.StopTimer()
	if s := twoCache.Stats(); s.Misses != 2 {
		b.Errorf("nitro compiled %d programs, want 2 (gradient, optimizer): the timing includes compiles", s.Misses)
	}
	if s := fusedCache.Stats(); s.Misses != 1 {
		b.Errorf("nitro fused compiled %d programs, want 1 (train_step): the timing includes compiles", s.Misses)
	}
	for _, nt := range []*core.Nitro{twoN, fusedN} {
		if _, err := nt.Evaluate("test"); err != nil { // compiles the eval program, for its compile time
			b.Fatal(err)
		}
	}
	roof := matmulGFLOPS(b, r)
	flops := stepFlops()
	gf := func(ms float64) float64 { return flops / (ms * 1e-3) / 1e9 }
	// pair is the median of the per-repeat ratios a/b.
	pair := func(num, den *side) float64 {
		q := make([]float64, len(num.t))
		for i := range num.t {
			q[i] = num.t[i] / den.t[i]
		}
		return median(q)
	}
	two, fused, gm := sides[0], sides[1], sides[2]
	fmt.Printf("step time, MLP %d-%d-%d-%d, batch %d, steps 2..%d of each repeat, median of %d repeats (order rotating), backend %s:\n", benchIn, benchHidden, benchHidden, benchOut, benchBatch, benchSteps, benchRepeats, r.Name)
	fmt.Printf("  %-22s %8s %8s %10s\n", "side", "ms/step", "GFLOP/s", "/roofline")
	for _, s := range sides[:3] {
		ms := median(s.t) * 1e3
		fmt.Printf("  %-22s %8.2f %8.1f %10.2f\n", s.name, ms, gf(ms), gf(ms)/roof)
	}
	fmt.Printf("  matmul roofline (GoMLX, [%d,%d]@[%d,%d] looped): %.1f GFLOP/s; step = %.0f matmul flops\n", benchBatch, benchIn, benchIn, benchHidden, roof, flops)
	fmt.Printf("  nitro per-Train overhead outside the span (setup, stream start, first step's excess): two programs %.2f ms, fused %.2f ms\n", median(twoOver)*1e3, median(fusedOver)*1e3)
	fmt.Printf("ratios (median of per-repeat ratios): fused/gomlx %.2f (goal <= 1.05), two/fused %.2f\n", pair(fused, gm), pair(two, fused))
	b.ReportMetric(median(two.t)*1e3, "nitro-ms/step")
	b.ReportMetric(median(fused.t)*1e3, "fused-ms/step")
	b.ReportMetric(median(gm.t)*1e3, "gomlx-ms/step")
	b.ReportMetric(pair(fused, gm), "fused/gomlx")
	if jax != nil {
		js := sides[3]
		jm := median(js.t) * 1e3
		jroof := jax.matmul()
		if jf := jax.flops(); jf != flops {
			b.Errorf("JAX counts %.0f matmul flops per step, Go %.0f: the two sides do not train the same model", jf, flops)
		}
		fmt.Printf("  %-22s %8.2f %8.1f %10.2f   (%s; its matmul roofline %.1f GFLOP/s)\n", js.name, jm, gf(jm), gf(jm)/jroof, jax.versions, jroof)
		fmt.Printf("ratios (median of per-repeat ratios): fused/jax %.2f (goal <= 1.10), two/jax %.2f (goal <= 1.5)\n", pair(fused, js), pair(two, js))
		for i, s := range sides {
			who := "the JAX peer"
			if i == 3 {
				who = "the Go process"
			}
			wall := time.Duration(float64(time.Second) * median(s.t) * benchSteps * benchRepeats)
			fmt.Printf("  while %s was timed (~%v of repeats; it used %v of CPU): %s used %v (%.1f%% of one core)\n",
				s.name, wall.Round(time.Millisecond), busy[i].Round(time.Millisecond), who, idle[i].Round(time.Millisecond), 100*idle[i].Seconds()/wall.Seconds())
		}
		b.ReportMetric(jm, "jax-ms/step")
		b.ReportMetric(pair(fused, js), "fused/jax")
		b.ReportMetric(pair(two, js), "two/jax")
	} else {
		fmt.Println("  JAX + optax: not measured ($NITRO_BENCH_PYTHON unset; `make bench` sets it up)")
	}
	ct := func(c *compilecache.Cache, kind string) string {
		return fmt.Sprintf("%s %.0f ms", kind, float64(c.CompileTimes()[kind].Microseconds())/1e3)
	}
	fmt.Printf("compile: %s, %s, %s; fused: %s, %s\n",
		ct(twoCache, compilecache.KindGradient), ct(twoCache, compilecache.KindOptimizer), ct(twoCache, compilecache.KindEval),
		ct(fusedCache, compilecache.KindTrainStep), ct(fusedCache, compilecache.KindEval))
	if jax != nil {
		fmt.Printf("  JAX train step: %s ms\n", jax.compileMS)
	}
}

// stepClock is a logger that records when each "train" line arrives: Train writes one per
// optimizer step, right after the step's loss is read back, so these are the steps' ends. Its
// Finish does nothing, so one clock serves every Train of a long-lived handle.
type stepClock struct{ ends []time.Time }

func (c *stepClock) LogParams(map[string]any) error { return nil }
func (c *stepClock) LogMetrics(m logjson.Metrics) error {
	if m.Context == logjson.ContextTrain {
		c.ends = append(c.ends, time.Now())
	}
	return nil
}
func (c *stepClock) LogOther(string, any) error  { return nil }
func (c *stepClock) Finish(logjson.Status) error { return nil }

// stepFlops counts the matmul flops of one training step of the benchmark's MLP, 2*M*N*K per
// matmul: per layer the forward, the weight-gradient and the input-gradient matmuls, except the
// first layer's input gradient (its input is data). The JAX side counts the same way.
func stepFlops() float64 {
	dims := []int{benchIn, benchHidden, benchHidden, benchOut}
	total := 0.0
	for i := 0; i+1 < len(dims); i++ {
		mm := 2 * float64(benchBatch) * float64(dims[i]) * float64(dims[i+1])
		total += 2 * mm // forward, weight gradient
		if i > 0 {
			total += mm // input gradient
		}
	}
	return total
}

// matmulGFLOPS times one [batch,in]@[in,hidden] matmul program on the backend (matmulRoofline,
// for at least 200 ms): the roofline the step is set against, measured as the JAX peer measures
// its own.
func matmulGFLOPS(b *testing.B, r *backend.Resolved) float64 {
	return matmulRoofline(b, r, benchBatch, benchIn, benchHidden, 200*time.Millisecond)
}

// jaxPeer drives scripts/bench/jax_step.py, one command per line.
type jaxPeer struct {
	b         *testing.B
	cmd       *exec.Cmd
	in        io.WriteCloser
	out       *bufio.Scanner
	versions  string
	compileMS string
}

// startJAX starts the JAX peer when $NITRO_BENCH_PYTHON names a python (the venv `make bench`
// builds); nil otherwise. A peer that fails to start is a benchmark failure, not a silent skip.
func startJAX(b *testing.B) *jaxPeer {
	py := os.Getenv("NITRO_BENCH_PYTHON")
	if py == "" {
		return nil
	}
	p := startPeer(b, py, "jax_step.py", "--in", fmt.Sprint(benchIn), "--hidden", fmt.Sprint(benchHidden), "--out", fmt.Sprint(benchOut),
		"--batch", fmt.Sprint(benchBatch), "--steps", fmt.Sprint(benchSteps), "--lr", "1e-3")
	b.Cleanup(func() {
		_, _ = io.WriteString(p.in, "quit\n")
		_ = p.in.Close()
		_ = p.cmd.Wait()
	})
	ready := p.read("ready")
	p.compileMS = ready["compile_ms"]
	p.versions = fmt.Sprintf("jax %s, optax %s", ready["jax"], ready["optax"])
	return p
}

// read reads one answer line, which must start with want, and returns its key=value fields.
func (p *jaxPeer) read(want string) map[string]string {
	if !p.out.Scan() {
		p.b.Fatalf("JAX peer: no answer (want %q): %v", want, p.out.Err())
	}
	line := p.out.Text()
	fields := strings.Fields(line)
	if len(fields) == 0 || (!strings.HasPrefix(fields[0], want) && fields[0] != want) || fields[0] == "error" {
		p.b.Fatalf("JAX peer: answered %q, want %q", line, want)
	}
	kv := map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = v
		}
	}
	return kv
}

func (p *jaxPeer) ask(cmd, key string) float64 {
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		p.b.Fatalf("JAX peer: %v", err)
	}
	v, err := strconv.ParseFloat(p.read(key)[key], 64)
	if err != nil {
		p.b.Fatalf("JAX peer: %s: %v", cmd, err)
	}
	return v
}

// step runs one repeat of benchSteps steps and returns seconds per step.
func (p *jaxPeer) step() float64   { return p.ask("step", "step_ms") / 1e3 }
func (p *jaxPeer) matmul() float64 { return p.ask("matmul", "matmul_gflops") }
func (p *jaxPeer) flops() float64  { return p.ask("flops", "step_flops") }

// processCPU is the user and system CPU time of process pid, all its threads together, from
// /proc/<pid>/stat (clock ticks: 10 ms resolution, enough over a whole benchmark).
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatalf("reading the CPU time of process %d: %v", pid, err)
	}
	// The fields after the command name (which may hold spaces, so it is cut at its last ')'):
	// state is field 3, utime 14 and stime 15.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("parsing /proc/%d/stat: %q", pid, raw)
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticksPerSecond
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// startPeer starts python on scripts/bench/<script> with args, its stdin and stdout the command
// line protocol jaxPeer speaks; a peer that fails to start is a benchmark failure.
func startPeer(b *testing.B, py, script string, args ...string) *jaxPeer {
	return startPeerEnv(b, nil, py, script, args...)
}

// startPeerEnv is startPeer with env (NAME=value entries) added to the peer's environment.
func startPeerEnv(b *testing.B, env []string, py, script string, args ...string) *jaxPeer {
	path, err := filepath.Abs(filepath.Join("..", "scripts", "bench", script))
	if err != nil {
		b.Fatal(err)
	}
	c := exec.Command(py, append([]string{path}, args...)...)
	c.Stderr = os.Stderr
	c.Env = append(os.Environ(), env...)
	if t := peerTunables(b); t != "" {
		c.Env = append(c.Env, "GLIBC_TUNABLES="+t)
	}
	in, err := c.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Start(); err != nil {
		b.Fatalf("starting the JAX peer (%s %s): %v", py, path, err)
	}
	return &jaxPeer{b: b, cmd: c, in: in, out: bufio.NewScanner(out)}
}

// peerMallocEnv gives the JAX peer module hostalloc's steady policy when set to "steady", as glibc
// tunables (nitro's own default, jemalloc preloaded, is the peer's to choose by LD_PRELOAD); unset,
// the peer runs as JAX ships, with glibc's defaults (or the GLIBC_TUNABLES this process has).
const peerMallocEnv = "NITRO_BENCH_PEER_MALLOC"

// steadyTunables is hostalloc's steady policy ($NITRO_HOST_MALLOC=steady) as glibc tunables: one
// arena, no mmap, and a trim threshold (1 TiB) no step reaches.
const steadyTunables = "glibc.malloc.arena_max=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1099511627776"

// peerTunables is the GLIBC_TUNABLES to start the peer with ("": inherit the environment).
func peerTunables(b *testing.B) string {
	switch v := os.Getenv(peerMallocEnv); v {
	case "", "system":
		return ""
	case "steady":
		if t := os.Getenv("GLIBC_TUNABLES"); t != "" {
			b.Fatalf("$%s=steady with GLIBC_TUNABLES=%q already set: unset one of them", peerMallocEnv, t)
		}
		return steadyTunables
	default:
		b.Fatalf("$%s=%q: want steady (the peer gets nitro's allocator policy) or system (glibc's defaults)", peerMallocEnv, v)
	}
	return ""
}

// allocatorLine says which malloc policy each side of a peer comparison ran under.
func allocatorLine() string {
	ours, err := hostalloc.Policy()
	if err != nil {
		ours = err.Error()
	}
	peer := "glibc's defaults, as JAX ships ($" + peerMallocEnv + "=steady gives it nitro's steady policy)"
	if t := os.Getenv("GLIBC_TUNABLES"); t != "" {
		peer = "GLIBC_TUNABLES=" + t + " (inherited)"
	}
	if os.Getenv(peerMallocEnv) == "steady" {
		peer = "nitro's steady policy, as GLIBC_TUNABLES=" + steadyTunables
	}
	return fmt.Sprintf("host allocator: this process (nitro and the GoMLX loops) %s; the JAX peer %s", ours, peer)
}
