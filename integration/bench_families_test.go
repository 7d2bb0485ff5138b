package integration_test

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/hostalloc"
)

// The goals BenchmarkFamilies sets each family against.
const (
	famRoofSize = 1024 // the roofline matmul: [1024,1024] @ [1024,1024]
	famSettle   = 30 * time.Millisecond
	// every family, the transformer at batch 32 too (it had 1.2 until the CPU plugin's pool
	// stopped outnumbering the cores: docs/profiling.md, the plugin's thread pool)
	goalFusedJAX     = 1.0
	goalNitroGoMLX   = 1.05
	famGoMLXGradOnly = "GoMLX gradient only"
)

// famSide is one way of running a family's training step, timed per repeat.
type famSide struct {
	name string
	isGo bool                    // a Go side (false: the JAX peer)
	run  func() (float64, error) // one repeat; seconds per step over steps 2..n
	t    []float64
	// otherCPU is the CPU time the idle process (the peer for a Go side, this process for the
	// peer) used while this side ran, summed over repeats, with the wall time it ran for.
	otherCPU, wall time.Duration
	// cpu is the CPU time the running side's own process used over its timed repeats (all its
	// threads, the first step of each repeat included), steps the steps they ran: on a machine
	// shared with other work, CPU per step moves far less than wall time per step.
	cpu   time.Duration
	steps int
	// workerCPU is the part of cpu spent on XLA's intra-op pool threads (named tf_XLAEigen in
	// both processes): the rest is the calling thread's dispatch and the host's own work.
	workerCPU time.Duration
	// faults is the running side's process's minor page faults over its timed repeats: a buffer
	// the allocator returned to the kernel faults in again, page by page, when it is reused.
	faults int64
	// params is a Go side's trained parameters by keypath, for the held-out score (nil: the side
	// trains nothing, or it is the peer, which scores itself); score is what they reached.
	params func() (map[string]*tensors.Tensor, error)
	score  *famScore
}

// famResult is what one family's run measured, for the summary table.
type famResult struct {
	f                               *family
	two, fused, gomlx, gradOnly, jx *famSide
	sides                           []*famSide // in the first round's order
	goRoof, jaxRoof                 float64
	flops                           float64 // per step
	arrays                          int     // trainable parameter arrays
	backend, peer, compile          string  // the backend's name, the peer's versions, compile times
	peerAlloc, peerProbes           string  // the JAX peer's malloc and its probe's figures
	// The held-out accuracy every training side's median, the tolerance around it and the
	// sides outside it (bench_families_heldout_test.go).
	accMedian, accTol float64
	accOff            []string
	heldOutN          int // predictions the accuracy averages over
}

// BenchmarkFamilies measures, in one run and per model family (families_test.go: the MLP, the
// CNN, the transformer), the time of one training step on five sides doing the same math, and
// prints ms/step, GFLOP/s against a matmul roofline measured in the same run, the ratios against
// the goals, and the compile times. It asserts nothing about speed; it fails only if a side
// misbehaves (a wrong step count, a compile during timing, a non-finite loss, a flop count the
// peer disagrees with).
//
//   - nitro two-program: per step a gradient program and an optimizer program, a fresh host batch
//     copied out of the dataset and uploaded, the loss read back. One epoch of Train per repeat on
//     one long-lived handle; its step ends are stamped by the logger's "train" lines.
//   - nitro fused: the same under core.WithFusedStep(): one program per step.
//   - GoMLX loop: one context.Exec per step doing forward, gradient and the same optimizer rule
//     written in graph ops (applyRule), a fresh host batch, the loss read back.
//   - GoMLX gradient only: the GoMLX loop without the optimizer (the gradients stay on the
//     device): what the two-program step's gradient program costs, so two-program minus this is
//     its optimizer program and the second dispatch.
//   - JAX + optax (scripts/bench/jax_families.py, when $NITRO_BENCH_PYTHON names the bench venv's
//     python): one jitted step, params and state donated, a fresh host batch, the loss read back.
//
// Every side times the span from the end of a repeat's first step to the end of its last. Each
// repeat runs every side once, the order rotating; before each side a GC and a short sleep, so no
// side pays for the previous one's garbage or its thread pool still spinning. Only one side runs
// at a time: the JAX peer waits on its stdin while the Go sides run and this process waits on the
// peer's answer while it runs; the CPU the idle process used meanwhile is printed, so the table
// shows the peers did not share the cores. Ratios are medians of per-repeat ratios. The roofline
// is a [1024,1024]@[1024,1024] matmul looped on device-resident inputs, through GoMLX on the same
// plugin for the Go sides and through JAX for the peer. Beside wall time, each side's own CPU time
// per step is printed (all its threads, then the part on XLA's intra-op pool), which other work on
// a shared machine moves far less, and each ratio with its per-repeat spread; a missed goal that
// the best repeat and the CPU ratio both meet is marked as this run's noise. The goals: fused/JAX
// (goalFusedJAX), and fused/GoMLX and two-program/GoMLX
// (goalNitroGoMLX), each printed met or MISSED in the summary.
//
// After the timed rounds every side that trains (all but the gradient-only loop) is scored on one
// held-out batch drawn from another seed, sent to the peer too: the loss and accuracy each side
// reached print beside its times and in the summary, and a side whose accuracy is off the sides'
// median by more than the stated tolerance is flagged OFF (bench_families_heldout_test.go), so a
// ratio is never read without seeing that both sides did the same training.
//
// $NITRO_BENCH_FAMILIES narrows the run: a comma list of family names, each optionally at another
// batch (name@batch), e.g. "transformer@32,transformer@128,gpt@64"; unset runs every family at its
// own, the GPT families (bench_gpt_test.go) included. For those the table also gives tokens/s,
// and the summary each side's tokens/s, GFLOP/s and share of its roofline.
//
// The summary names the malloc each process ran under: this one's is module hostalloc's (jemalloc,
// freed step buffers kept mapped); the peer's is the fastest, for each family, of glibc's defaults,
// tcmalloc and jemalloc, each preloaded into the peer's process only (startFamilyPeer), so nitro
// is set against JAX as a CPU tuning guide would run it. $NITRO_BENCH_PEER_ALLOC narrows the
// candidates; an allocator not installed is skipped with a note.
//
// $NITRO_BENCH_BACKEND=cuda runs every side on the GPU (default xla, the CPU plugin): nitro's and
// GoMLX's on the CUDA plugin, the peer with JAX_PLATFORMS=cuda. The peer reports the platform it
// ran on, and one that differs from the Go sides' fails the run rather than print a ratio of a GPU
// against a CPU.
func BenchmarkFamilies(b *testing.B) {
	fams, err := selectFamilies(os.Getenv(famSelectEnv))
	if err != nil {
		b.Fatal(err)
	}
	if strings.TrimSpace(os.Getenv(famSelectEnv)) == "" {
		// The GPT families run here by default; selectFamilies("") stays the three that other
		// benchmarks (the MPI families) iterate over.
		fams = append(fams, gptFamilies()...)
	}
	r := requireBenchBackend(b)
	famRunPick.family = ""
	var results []*famResult
	for _, f := range fams {
		results = append(results, benchFamily(b, r, f))
	}
	printFamilySummary(results)
}

const (
	famSelectEnv  = "NITRO_BENCH_FAMILIES"
	famBackendEnv = "NITRO_BENCH_BACKEND"
)

// requireBenchBackend resolves $NITRO_BENCH_BACKEND: unset or xla, the CPU plugin; cuda, the CUDA
// plugin, which must start (a bench forced onto the GPU never runs on the CPU instead).
func requireBenchBackend(b *testing.B) *backend.Resolved {
	switch v := strings.TrimSpace(os.Getenv(famBackendEnv)); v {
	case "", backend.XLA:
		return requireXLA(b)
	case backend.CUDA:
		r, err := backend.Resolve(backend.CUDA)
		if err != nil {
			b.Fatalf("$%s=cuda: %v", famBackendEnv, err)
		}
		return r
	default:
		b.Fatalf("$%s=%q: want %q (the CPU plugin, the default) or %q", famBackendEnv, v, backend.XLA, backend.CUDA)
		return nil
	}
}

// jaxPlatform is the platform JAX names the devices of a nitro backend with.
func jaxPlatform(name string) string {
	if name == backend.CUDA {
		return "gpu"
	}
	return "cpu"
}

// selectFamilies parses $NITRO_BENCH_FAMILIES (see BenchmarkFamilies), any family by name; empty:
// the three of families() (BenchmarkFamilies adds the GPT families to its own default).
func selectFamilies(spec string) ([]*family, error) {
	if strings.TrimSpace(spec) == "" {
		return families(), nil
	}
	all := allFamilies()
	var out []*family
	for _, item := range strings.Split(spec, ",") {
		name, batch, hasBatch := strings.Cut(strings.TrimSpace(item), "@")
		i := slices.IndexFunc(all, func(f *family) bool { return f.name == name })
		if i < 0 {
			return nil, fmt.Errorf("$%s: unknown family %q in %q (want mlp, cnn, transformer, gpt or gpt2, optionally @batch)", famSelectEnv, name, spec)
		}
		f := *all[i]
		if hasBatch {
			n, err := strconv.Atoi(batch)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("$%s: batch %q of %q is not a positive integer", famSelectEnv, batch, item)
			}
			f.batch = n
		}
		out = append(out, &f)
	}
	return out, nil
}

// benchFamily runs one family's sides and prints its table.
func benchFamily(b *testing.B, r *backend.Resolved, f *family) *famResult {
	d := newFamBatches(f, 7, f.steps*f.batch)
	twoCache, fusedCache := compilecache.New(), compilecache.New()
	res := &famResult{f: f, flops: f.flops(f.batch), backend: r.Name,
		two:   famNitroSide(b, f, d, twoCache, "nitro two-program", core.WithBackend(r.Name)),
		fused: famNitroSide(b, f, d, fusedCache, "nitro fused", core.WithBackend(r.Name), core.WithFusedStep())}
	loop, err := newBenchLoop(r, f)
	if err != nil {
		b.Fatal(err)
	}
	grad, err := newFamGradLoop(r, f)
	if err != nil {
		b.Fatal(err)
	}
	loopCompile, gradCompile := firstCall(b, d, loop.exec), firstCall(b, d, grad)
	res.gomlx = &famSide{name: "GoMLX loop", isGo: true, run: func() (float64, error) { return famExecRepeat(d, loop.exec) },
		params: func() (map[string]*tensors.Tensor, error) { return ctxParams(loop.ctx) }}
	res.gradOnly = &famSide{name: famGoMLXGradOnly, isGo: true, run: func() (float64, error) { return famExecRepeat(d, grad) }}
	res.sides = []*famSide{res.two, res.fused, res.gomlx, res.gradOnly}
	peer := startFamilyPeer(b, f, r.Name)
	if peer != nil {
		res.jx = &famSide{name: "JAX + optax", run: func() (float64, error) { return peer.ask("step", "step_ms") / 1e3, nil }}
		res.peerAlloc, res.peerProbes = peer.alloc, peer.probes
		res.sides = append(res.sides, res.jx)
	}
	runRounds(b, f, res.sides, peer)
	scoreSides(b, r, res, peer)
	if s := twoCache.Stats(); s.Misses != 2 {
		b.Errorf("%s: nitro compiled %d programs, want 2 (gradient, optimizer): the timing includes compiles", f.name, s.Misses)
	}
	if s := fusedCache.Stats(); s.Misses != 1 {
		b.Errorf("%s: nitro fused compiled %d programs, want 1 (train_step): the timing includes compiles", f.name, s.Misses)
	}
	res.goRoof = matmulRoofline(b, r, famRoofSize, famRoofSize, famRoofSize, 300*time.Millisecond)
	for v := range loop.ctx.IterVariables() {
		if v.Trainable {
			res.arrays++
		}
	}
	ct := func(c *compilecache.Cache, kind string) float64 { return ms(c.CompileTimes()[kind]) }
	res.compile = fmt.Sprintf("nitro gradient %.0f ms + optimizer %.0f ms; nitro fused train step %.0f ms; GoMLX loop first call %.0f ms, gradient only %.0f ms",
		ct(twoCache, compilecache.KindGradient), ct(twoCache, compilecache.KindOptimizer), ct(fusedCache, compilecache.KindTrainStep),
		ms(loopCompile), ms(gradCompile))
	if peer != nil {
		res.jaxRoof = peer.ask("matmul", "matmul_gflops")
		if jf := peer.ask("flops", "step_flops"); jf != res.flops {
			b.Errorf("%s: JAX counts %.0f flops per step, Go %.0f: the two sides do not train the same model", f.name, jf, res.flops)
		}
		res.compile += fmt.Sprintf("; JAX train step %s ms", peer.compileMS)
		res.peer = peer.versions
		peer.quit() // so the next family's sides run with no peer process alive
	}
	printFamily(res)
	label := fmt.Sprintf("%s@%d", f.name, f.batch)
	b.ReportMetric(median(res.fused.t)*1e3, label+"-fused-ms/step")
	b.ReportMetric(famPair(res.fused, res.gomlx), label+"-fused/gomlx")
	if res.jx != nil {
		b.ReportMetric(famPair(res.fused, res.jx), label+"-fused/jax")
	}
	return res
}

// runRounds warms every side up once (first executions, thread start-up), then runs
// f.repeats rounds of all sides, the order rotating. Before each side: a GC and a settle
// sleep; while it runs, the idle process's CPU time is recorded.
func runRounds(b *testing.B, f *family, sides []*famSide, peer *famPeer) {
	runSide := func(s *famSide) float64 {
		runtime.GC()
		time.Sleep(famSettle)
		own, other := selfCPU, selfCPU
		if peer != nil {
			if s.isGo {
				other = peer.cpu
			} else {
				own = peer.cpu
			}
		}
		ownPID := os.Getpid()
		if peer != nil && !s.isGo {
			ownPID = peer.cmd.Process.Pid
		}
		workersBefore, faultsBefore := xlaWorkerCPU(ownPID), minorFaults(ownPID)
		ownBefore, before, start := own(), other(), time.Now()
		sec, err := s.run()
		if err != nil {
			b.Fatalf("%s, %s: %v", f.name, s.name, err)
		}
		s.cpu += own() - ownBefore
		s.workerCPU += xlaWorkerCPU(ownPID) - workersBefore
		s.faults += minorFaults(ownPID) - faultsBefore
		s.steps += f.steps
		if peer != nil {
			s.otherCPU += other() - before
			s.wall += time.Since(start)
		}
		return sec
	}
	for _, s := range sides {
		runSide(s)
		s.otherCPU, s.wall, s.cpu, s.steps, s.workerCPU, s.faults = 0, 0, 0, 0, 0, 0
	}
	for rep := range f.repeats {
		for k := range sides {
			s := sides[(rep+k)%len(sides)]
			s.t = append(s.t, runSide(s))
		}
	}
}

// printFamily prints one family's table, roofline, compile times and goals.
func printFamily(res *famResult) {
	f := res.f
	gf := func(s *famSide) float64 { return res.flops / median(s.t) / 1e9 }
	fmt.Printf("\n%s (batch %d, %s), steps 2..%d of each repeat, median of %d repeats (order rotating), %.2f GFLOP per step, backend %s:\n",
		f.name, f.batch, f.opt, f.steps, f.repeats, res.flops/1e9, res.backend)
	fmt.Printf("  %-22s %8s %8s %10s %12s %14s %12s %16s   %s\n", "side", "ms/step", "GFLOP/s", "/roofline", "CPU ms/step", "XLA pool ms", "faults/step", "idle side's CPU", "held-out loss, accuracy")
	for _, s := range res.sides {
		roof := res.goRoof
		if !s.isGo {
			roof = res.jaxRoof
		}
		idle := "-"
		if s.wall > 0 {
			idle = fmt.Sprintf("%.1f%% of wall", 100*s.otherCPU.Seconds()/s.wall.Seconds())
		}
		fmt.Printf("  %-22s %8.2f %8.1f %10.2f %12.2f %14.2f %12.1f %16s   %s\n", s.name, median(s.t)*1e3, gf(s), gf(s)/roof, s.cpuPerStep(), ms(s.workerCPU)/float64(s.steps),
			float64(s.faults)/float64(s.steps), idle, s.score.String())
	}
	fmt.Printf("  matmul roofline [%d,%d]@[%d,%d]: GoMLX %.1f GFLOP/s", famRoofSize, famRoofSize, famRoofSize, famRoofSize, res.goRoof)
	if res.jx != nil {
		fmt.Printf(", JAX %.1f GFLOP/s (%s)", res.jaxRoof, res.peer)
	}
	fmt.Printf("\n  compile: %s\n", res.compile)
	if res.jx != nil {
		fmt.Printf("  JAX peer's malloc: %s; %s\n", res.peerAlloc, res.peerProbes)
	}
	if n := famTokens(f); n > 0 {
		var parts []string
		for _, s := range res.sides {
			parts = append(parts, fmt.Sprintf("%s %.0f", s.name, float64(n)/median(s.t)))
		}
		fmt.Printf("  tokens/s (%d a step): %s\n", n, strings.Join(parts, ", "))
	}
	explainFamily(res)
}

// famNitroSide builds a nitro handle for the family and the side that trains one more epoch of
// f.steps steps on it per repeat.
func famNitroSide(b *testing.B, f *family, d *famBatches, cache *compilecache.Cache, name string, opts ...core.Option) *famSide {
	nt, clock, err := newFamNitro(f, d, f.batch, cache, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return &famSide{name: name, isGo: true, params: nt.Parameters, run: func() (float64, error) {
		before := nt.Step()
		clock.ends = clock.ends[:0]
		if err := epoch(nt); err != nil {
			return 0, err
		}
		if got := nt.Step() - before; got != f.steps || len(clock.ends) != f.steps {
			return 0, fmt.Errorf("nitro took %d steps and logged %d, want %d", got, len(clock.ends), f.steps)
		}
		return clock.ends[f.steps-1].Sub(clock.ends[0]).Seconds() / float64(f.steps-1), nil
	}}
}

// newBenchLoop is the family's GoMLX loop: the GPT families' runs their own optimizer
// (gptApplyRule), the others applyRule's.
func newBenchLoop(r *backend.Resolved, f *family) (*famLoop, error) {
	if g, ok := isGPT(f); ok {
		return newGPTLoop(r, f, g, nil)
	}
	return newFamLoop(r, f, nil)
}

// newFamGradLoop is the GoMLX loop less its optimizer: forward, loss and the gradients of every
// trainable variable, returned (left on the device) with the loss.
func newFamGradLoop(r *backend.Resolved, f *family) (*context.Exec, error) {
	ctx := context.New()
	ctx.SetRNGStateFromSeed(42)
	return context.NewExec(r.Backend, ctx, func(ctx *context.Context, x, y *graph.Node) []*graph.Node {
		g := x.Graph()
		ctx.SetTraining(g, true)
		loss := f.loss(f.model(ctx, x), y)
		var nodes []*graph.Node
		for v := range ctx.IterVariables() {
			if v.Trainable && v.InUseByGraph(g) {
				nodes = append(nodes, v.ValueGraph(g))
			}
		}
		return append([]*graph.Node{loss}, graph.Gradient(loss, nodes...)...)
	})
}

// famExecRepeat runs f.steps steps of a GoMLX exec on fresh host batches, the loss (output 0) read
// back each step, the other outputs released on the device; seconds per step over steps 2..n.
func famExecRepeat(d *famBatches, e *context.Exec) (float64, error) {
	f := d.f
	var first time.Time
	for i := range f.steps {
		x, y := d.batch(i, f.batch)
		out, err := e.Exec(x, y)
		if err != nil {
			return 0, err
		}
		v, ok := out[0].Value().(float32)
		if !ok || math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return 0, fmt.Errorf("GoMLX loss %v (%T), want a finite float32", out[0].Value(), out[0].Value())
		}
		for _, t := range out[1:] {
			_ = t.FinalizeAll()
		}
		if i == 0 {
			first = time.Now()
		}
	}
	return time.Since(first).Seconds() / float64(f.steps-1), nil
}

// firstCall times an exec's first call (its compile and one step).
func firstCall(b *testing.B, d *famBatches, e *context.Exec) time.Duration {
	x, y := d.batch(0, d.f.batch)
	start := time.Now()
	out, err := e.Exec(x, y)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range out {
		_ = t.FinalizeAll()
	}
	return time.Since(start)
}

// matmulRoofline times one [m,k]@[k,n] matmul program on the backend for at least minDur: the
// same two device-resident inputs each call, each call waited on (gopjrt's execute returns when
// the device is done, as the peers' block_until_ready) and its result left on the device.
func matmulRoofline(b *testing.B, r *backend.Resolved, m, k, n int, minDur time.Duration) float64 {
	e, err := graph.NewExec(r.Backend, func(x, w *graph.Node) *graph.Node { return graph.Dot(x, w) })
	if err != nil {
		b.Fatal(err)
	}
	x := tensors.FromShape(shapes.Make(dtypes.Float32, m, k))
	w := tensors.FromShape(shapes.Make(dtypes.Float32, k, n))
	for _, t := range []*tensors.Tensor{x, w} {
		if err := t.MaterializeOnDevice(r.Backend, false, 0); err != nil {
			b.Fatal(err)
		}
	}
	call := func() {
		out, err := e.Exec(x, w)
		if err != nil {
			b.Fatal(err)
		}
		_ = out[0].FinalizeAll()
	}
	call()
	calls, start := 0, time.Now()
	for calls < 3 || time.Since(start) < minDur {
		call()
		calls++
	}
	return 2 * float64(m*k*n) * float64(calls) / time.Since(start).Seconds() / 1e9
}

// famPeer is the JAX peer of one family: jaxPeer's line protocol, plus the process's CPU time,
// the allocator it runs on and what the probe that chose it measured.
type famPeer struct {
	*jaxPeer
	done   bool
	alloc  string // the candidate's name and setting (famPeerAlloc.String)
	probes string // each candidate's probe, ms per step, or why it was skipped
}

// famPeerAllocEnv narrows the JAX peer's allocator candidates: a comma list of glibc, tcmalloc
// and jemalloc (default all three); one name skips the probe.
const famPeerAllocEnv = "NITRO_BENCH_PEER_ALLOC"

// famPeerAlloc is one malloc the JAX peer may run on, preloaded into its process only. tcmalloc
// and jemalloc keep freed memory mapped (TCMALLOC_RELEASE_RATE=0; jemalloc with its decay off,
// as module hostalloc runs nitro's programs), which is what CPU tuning guides for deep-learning
// frameworks set them up for; glibc's defaults are JAX as it ships.
type famPeerAlloc struct {
	name, lib string   // lib: the file preloaded ("" for glibc)
	env       []string // added to the peer's environment
	maps      string   // what the peer's "maps" answer must say
}

func (a famPeerAlloc) String() string {
	if a.lib == "" {
		return a.name + " (no preload)"
	}
	return a.name + " (" + strings.Join(a.env, " ") + ")"
}

// famPeerAllocs is the candidates $NITRO_BENCH_PEER_ALLOC names that this machine has; a library
// not installed is left out with a note (make allocators installs Debian's).
func famPeerAllocs(b *testing.B) (cands []famPeerAlloc, notes []string) {
	spec := os.Getenv(famPeerAllocEnv)
	if strings.TrimSpace(spec) == "" {
		spec = "glibc,tcmalloc,jemalloc"
	}
	find := func(file string) string {
		for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"} {
			if st, err := os.Stat(d + "/" + file); err == nil && st.Mode().IsRegular() {
				return d + "/" + file
			}
		}
		return ""
	}
	for _, name := range strings.Split(spec, ",") {
		var c famPeerAlloc
		switch name = strings.TrimSpace(name); name {
		case "glibc":
			// An LD_PRELOAD this process inherited must not reach the glibc candidate.
			c = famPeerAlloc{name: name, env: []string{"LD_PRELOAD="}, maps: "glibc"}
		case "tcmalloc":
			c = famPeerAlloc{name: name, lib: find("libtcmalloc_minimal.so.4"), maps: "libtcmalloc"}
			c.env = []string{"LD_PRELOAD=" + c.lib, "TCMALLOC_RELEASE_RATE=0"}
		case "jemalloc":
			c = famPeerAlloc{name: name, lib: find("libjemalloc.so.2"), maps: "libjemalloc"}
			c.env = []string{"LD_PRELOAD=" + c.lib, "MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1"}
		default:
			b.Fatalf("$%s=%q: %q is none of glibc, tcmalloc, jemalloc", famPeerAllocEnv, spec, name)
		}
		if c.name != "glibc" && c.lib == "" {
			notes = append(notes, c.name+" skipped: not installed (make allocators)")
			continue
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		b.Fatalf("$%s=%q: none of its allocators is installed (%s)", famPeerAllocEnv, spec, strings.Join(notes, "; "))
	}
	return cands, notes
}

// famProbeBudget bounds the allocator probe: rounds of one repeat of the family's step loop on
// every candidate, until this much time has passed, at least one round and at most three.
const famProbeBudget = 6 * time.Second

// famRunPick is the allocator the run's last probe picked, and for which family: a family too
// large to probe (famProbeOneAtATime) takes it when there is one.
var famRunPick struct {
	family string
	alloc  famPeerAlloc
}

// famProbeOneAtATime is the flops a step above which the candidates are probed one after the
// other, one peer alive at a time, rather than all alive and in rounds: such a step takes seconds
// on a CPU, and a peer of that size (GPT-2's shape: 639 GFLOP a step at batch 1) holds gigabytes.
const famProbeOneAtATime = 1e11

// startFamilyPeer starts scripts/bench/jax_families.py for the family when $NITRO_BENCH_PYTHON
// names a python; nil otherwise. The peer runs on the platform of the Go sides' backend
// (JAX_PLATFORMS); one that fails to start, or reports running elsewhere, is a benchmark failure.
//
// The peer's malloc is the fastest of famPeerAllocs for this family, by measurement: every
// candidate is started (its preload checked in /proc/self/maps) and runs one repeat of the
// family's step loop per round, the order rotating, for up to three rounds (famProbeBudget); the
// lowest median ms per step wins. The others are ended before the Go sides run, and the winner is
// reset to its starting state, so it trains as many steps as they do. A family too large to probe
// quickly (famProbeOneAtATime) takes the pick of the run's last probe (famRunPick), or when it is
// the first, has its candidates probed one at a time, each ended after its probe and the winner
// started again.
func startFamilyPeer(b *testing.B, f *family, backendName string) *famPeer {
	py := os.Getenv("NITRO_BENCH_PYTHON")
	if py == "" {
		return nil
	}
	cands, notes := famPeerAllocs(b)
	large := f.flops(f.batch) > famProbeOneAtATime
	if large && famRunPick.family != "" && len(cands) > 1 {
		// Probing a GPT-2 sized peer on each candidate takes minutes (a compile and a few
		// seconds-long steps each); the run's last probe picked among the same candidates.
		cands = []famPeerAlloc{famRunPick.alloc}
		notes = append(notes, "the pick of "+famRunPick.family+"'s probe, this family being too slow to probe")
	}
	type probed struct {
		p  *famPeer
		c  famPeerAlloc
		ms []float64
	}
	var alive []*probed
	launch := func(c famPeerAlloc) *probed {
		p := launchFamilyPeer(b, f, backendName, py, c)
		if got := p.ask1("maps", "malloc"); got != c.maps {
			notes = append(notes, fmt.Sprintf("%s skipped: its preload did not take (the peer runs on %s)", c.name, got))
			p.quit()
			return nil
		}
		return &probed{p: p, c: c}
	}
	probe := func(q *probed) { q.ms = append(q.ms, q.p.ask("step", "step_ms")) }
	if len(cands) == 1 {
		if q := launch(cands[0]); q != nil {
			if len(notes) == 0 {
				notes = append(notes, "no probe (one candidate)")
			}
			q.p.probes = strings.Join(notes, ", ")
			return q.p
		}
		b.Fatalf("%s: the JAX peer could not start on %s (%s)", f.name, cands[0].name, strings.Join(notes, "; "))
	}
	var best *probed
	if large {
		for _, c := range cands {
			q := launch(c)
			if q == nil {
				continue
			}
			probe(q)
			notes = append(notes, fmt.Sprintf("%s %.2f", c.name, median(q.ms)))
			q.p.quit() // one such peer alive at a time: each holds gigabytes
			if best == nil || median(q.ms) < median(best.ms) {
				best = q
			}
		}
		if best != nil {
			ms, c := best.ms, best.c
			if best = launch(c); best == nil {
				b.Fatalf("%s: the JAX peer on %s, the probe's pick, did not start again (%s)", f.name, c.name, strings.Join(notes, "; "))
			}
			best.ms = ms
		}
	} else {
		for _, c := range cands {
			if q := launch(c); q != nil {
				alive = append(alive, q)
			}
		}
		start := time.Now()
		for round := 0; len(alive) > 0 && (round == 0 || (round < 3 && time.Since(start) < famProbeBudget)); round++ {
			for k := range alive {
				probe(alive[(round+k)%len(alive)])
			}
		}
		for _, q := range alive {
			notes = append(notes, fmt.Sprintf("%s %.2f", strings.Fields(q.p.alloc)[0], median(q.ms)))
			if best == nil || median(q.ms) < median(best.ms) {
				best = q
			}
		}
		for _, q := range alive {
			if q != best {
				q.p.quit()
			}
		}
	}
	if best == nil {
		b.Fatalf("%s: no JAX peer could start on any allocator (%s)", f.name, strings.Join(notes, "; "))
	}
	famRunPick.family, famRunPick.alloc = fmt.Sprintf("%s@%d", f.name, f.batch), best.c
	best.p.ask1("reset", "reset")
	best.p.probes = fmt.Sprintf("probe ms/step (median of %d repeats of %d steps each): %s", len(best.ms), f.steps, strings.Join(notes, ", "))
	return best.p
}

// launchFamilyPeer starts one peer on allocator c and waits for its ready line.
func launchFamilyPeer(b *testing.B, f *family, backendName, py string, c famPeerAlloc) *famPeer {
	want := jaxPlatform(backendName)
	env := []string{"JAX_PLATFORMS=cpu"}
	if want == "gpu" {
		// This process's client already holds the GPU's memory pool (XLA's CUDA client takes most
		// of the memory up front); the peer allocates as it goes, beside it.
		env = []string{"JAX_PLATFORMS=cuda", "XLA_PYTHON_CLIENT_PREALLOCATE=false"}
	}
	args := []string{"--family", f.name, "--batch", fmt.Sprint(f.batch),
		"--steps", fmt.Sprint(f.steps), "--lr", fmt.Sprint(f.lr), "--matmul", fmt.Sprint(famRoofSize)}
	if g, ok := isGPT(f); ok {
		args = append(args, g.peerArgs(f)...)
	}
	p := &famPeer{jaxPeer: startPeerEnv(b, append(env, c.env...), py, "jax_families.py", args...), alloc: c.String()}
	b.Cleanup(p.quit)
	ready := p.read("ready")
	if got := ready["platform"]; got != want {
		b.Fatalf("%s: the JAX peer runs on platform %q, the Go sides on %s (JAX platform %q): the ratio would compare different machines", f.name, got, backendName, want)
	}
	p.compileMS = ready["compile_ms"]
	p.versions = fmt.Sprintf("jax %s, optax %s, %s threads, %s", ready["jax"], ready["optax"], ready["threads"], ready["device"])
	return p
}

// ask1 sends cmd and returns the string value of key in the answer.
func (p *famPeer) ask1(cmd, key string) string {
	if _, err := io.WriteString(p.in, cmd+"\n"); err != nil {
		p.b.Fatalf("JAX peer: %v", err)
	}
	return p.read(cmd)[key]
}

// quit ends the peer; benchFamily calls it when its family is done, Cleanup after a failure.
func (p *famPeer) quit() {
	if p.done {
		return
	}
	p.done = true
	_, _ = p.in.Write([]byte("quit\n"))
	_ = p.in.Close()
	_ = p.cmd.Wait()
}

// cpu is the peer process's user+system CPU time so far, all its threads (/proc/<pid>/stat,
// fields 14 and 15, in clock ticks of 1/100 s).
func (p *famPeer) cpu() time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		p.b.Fatalf("reading the JAX peer's CPU time: %v", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields count after it.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var ticks int64
	for _, f := range fields[11:13] { // utime, stime: fields 14 and 15 of the whole line
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			p.b.Fatalf("parsing the JAX peer's /proc stat %q: %v", f, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// xlaWorkerCPU is the user+system CPU time so far of a process's threads named tf_XLAEigen (XLA's
// CPU intra-op pool), from /proc/<pid>/task/*/stat; 0 where that cannot be read. A pool thread that
// exited in between is not counted, so a repeat's difference may fall short, never exceed.
func xlaWorkerCPU(pid int) time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var ticks int64
	for _, t := range tasks {
		raw, err := os.ReadFile(dir + "/" + t.Name() + "/stat")
		if err != nil {
			continue
		}
		st := string(raw)
		open, end := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || end < open || !strings.HasPrefix(st[open+1:end], "tf_XLAEigen") {
			continue
		}
		fields := strings.Fields(st[end+1:])
		if len(fields) < 13 {
			continue
		}
		for _, f := range fields[11:13] { // utime, stime
			if v, err := strconv.ParseInt(f, 10, 64); err == nil {
				ticks += v
			}
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// minorFaults is a process's minor page faults so far (all its threads), from /proc/<pid>/stat;
// 0 where that cannot be read.
func minorFaults(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	st := string(raw)
	fields := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	if len(fields) < 8 {
		return 0
	}
	n, _ := strconv.ParseInt(fields[7], 10, 64) // minflt, the stat file's tenth field
	return n
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// famPair is the median of the per-repeat ratios a/b.
func famPair(a, b *famSide) float64 {
	q := make([]float64, len(a.t))
	for i := range a.t {
		q[i] = a.t[i] / b.t[i]
	}
	return median(q)
}

// explainFamily prints the family's ratios against the goals and, for a missed goal, where the
// remaining time is (medians of per-repeat differences) and what would close it.
func explainFamily(res *famResult) {
	two, fused, gm, gr := res.two, res.fused, res.gomlx, res.gradOnly
	fmt.Printf("  ratios (per-repeat min-max): fused/GoMLX %s (goal <= %.2f), two-program/GoMLX %s", famSpread(fused, gm), goalNitroGoMLX, famSpread(two, gm))
	if res.jx != nil {
		fmt.Printf(", fused/JAX %s (goal <= %.2f), two-program/JAX %s, GoMLX/JAX %s",
			famSpread(fused, res.jx), goalFusedJAX, famSpread(two, res.jx), famSpread(gm, res.jx))
	}
	fmt.Printf("\n  %s", res.heldOutLine())
	fmt.Printf("\n  by CPU time per step: fused/GoMLX %.2f, two-program/GoMLX %.2f", fused.cpuPerStep()/gm.cpuPerStep(), two.cpuPerStep()/gm.cpuPerStep())
	if res.jx != nil {
		fmt.Printf(", fused/JAX %.2f, GoMLX/JAX %.2f", fused.cpuPerStep()/res.jx.cpuPerStep(), gm.cpuPerStep()/res.jx.cpuPerStep())
	}
	fmt.Println()
	if d := famDiff(two, gr); d >= 0 {
		fmt.Printf("  two-program by program: gradient %.2f ms (the GoMLX gradient-only loop), optimizer program and its dispatch %.2f ms (two-program - gradient only; %d parameter arrays); by CPU time %.2f + %.2f ms\n",
			median(gr.t)*1e3, d, res.arrays, gr.cpuPerStep(), two.cpuPerStep()-gr.cpuPerStep())
	} else {
		// On a GPU the GoMLX loop's host work per step outweighs the device's: the difference
		// says nothing of the optimizer program there.
		fmt.Printf("  two-program by program: not split: nitro's two programs (%.2f ms) run faster than the GoMLX gradient-only loop (%.2f ms), whose per-step host work dominates here\n",
			median(two.t)*1e3, median(gr.t)*1e3)
	}
	if q := famPair(fused, gm); q > goalNitroGoMLX {
		fmt.Printf("  MISSED fused/GoMLX: nitro fused runs %.2f ms/step over a bare GoMLX loop running the same step: nitro's per-step host work around the program (the batch stream, an argument and an output per array: %d parameter arrays and their optimizer state here, the logger); docs/profiling.md (Where a step's time goes) splits it%s\n",
			famDiff(fused, gm), res.arrays, noiseNote(fused, gm, goalNitroGoMLX))
	}
	if q := famPair(two, gm); q > goalNitroGoMLX {
		fmt.Printf("  MISSED two-program/GoMLX: %.2f; the second program costs %.2f ms/step (its gradients are outputs allocated and freed each step, and a second pass over parameter-sized arrays: docs/profiling.md); WithFusedStep removes it (the fused row)%s\n",
			q, famDiff(two, gr), noiseNote(two, gm, goalNitroGoMLX))
	}
	if res.jx == nil {
		return
	}
	if q := famPair(fused, res.jx); q > goalFusedJAX {
		fmt.Printf("  MISSED fused/JAX: %.2f ms/step over JAX; %.2f ms of it is the bare GoMLX loop's own gap to JAX (the same step compiled from GoMLX's graph and run through gopjrt: the plugin's kernels for this graph and GoMLX's per-call path, not nitro), %.2f ms nitro's over that loop%s\n",
			famDiff(fused, res.jx), famDiff(gm, res.jx), famDiff(fused, gm), noiseNote(fused, res.jx, goalFusedJAX))
	}
}

// famSpread formats the median of the per-repeat ratios a/b with their least and greatest.
func famSpread(a, b *famSide) string {
	lo, hi := famRatioRange(a, b)
	return fmt.Sprintf("%.2f [%.2f-%.2f]", famPair(a, b), lo, hi)
}

func famRatioRange(a, b *famSide) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i := range a.t {
		q := a.t[i] / b.t[i]
		lo, hi = math.Min(lo, q), math.Max(hi, q)
	}
	return lo, hi
}

// noiseNote qualifies a missed goal when some repeat met it and CPU time per step meets it too:
// then the miss is the shared machine's noise in this run, not a measured gap.
func noiseNote(a, b *famSide, goal float64) string {
	lo, _ := famRatioRange(a, b)
	if c := a.cpuPerStep() / b.cpuPerStep(); lo <= goal && c <= goal {
		return fmt.Sprintf(" (but %.2f in the best repeat and %.2f by CPU time per step: within this run's noise; rerun on a quiet machine)", lo, c)
	}
	return ""
}

// cpuPerStep is the side's own CPU time per step over its timed repeats, in ms.
func (s *famSide) cpuPerStep() float64 {
	if s.steps == 0 {
		return math.NaN()
	}
	return ms(s.cpu) / float64(s.steps)
}

// famDiff is the median of the per-repeat differences a-b, in ms.
func famDiff(a, b *famSide) float64 {
	q := make([]float64, len(a.t))
	for i := range a.t {
		q[i] = (a.t[i] - b.t[i]) * 1e3
	}
	return median(q)
}

// printFamilySummary prints one line per family against the goals: the wall-time ratios the goals
// are set on, then the same ratios by CPU time per step, and the malloc the JAX peer ran on; then,
// for the GPT families, each side's step time, tokens/s, GFLOP/s and share of its roofline.
func printFamilySummary(results []*famResult) {
	fmt.Printf("\nthe families, nitro against a GoMLX loop and JAX (medians of per-repeat ratios; cpu: by CPU time per step; held-out accuracy of two-program, fused, GoMLX loop, JAX):\n")
	fmt.Printf("  %s\n", famAllocatorLine())
	fmt.Printf("  %-16s %8s %8s %8s %8s %8s   %-20s %-9s %-20s %-20s %7s %7s %7s   %-10s %s\n", "family", "two ms", "fused ms", "GoMLX ms", "JAX ms", "two/fus",
		"fused/JAX", "two/JAX", "fused/GoMLX", "two/GoMLX", "cpu f/J", "cpu f/G", "cpu t/G", "JAX malloc", "held-out accuracy")
	var gpts []*famResult
	for _, r := range results {
		jm, fj, tj, cj, alloc := "-", "-", "-", "-", "-"
		if r.jx != nil {
			q := famPair(r.fused, r.jx)
			jm, fj = fmt.Sprintf("%.2f", median(r.jx.t)*1e3), fmt.Sprintf("%.2f %s", q, verdict(q <= goalFusedJAX, goalFusedJAX))
			tj = fmt.Sprintf("%.2f", famPair(r.two, r.jx))
			cj = fmt.Sprintf("%.2f", r.fused.cpuPerStep()/r.jx.cpuPerStep())
			alloc, _, _ = strings.Cut(r.peerAlloc, " ")
		}
		q, qt := famPair(r.fused, r.gomlx), famPair(r.two, r.gomlx)
		fmt.Printf("  %-16s %8.2f %8.2f %8.2f %8s %8.2f   %-20s %-9s %-20s %-20s %7s %7.2f %7.2f   %-10s %s\n", fmt.Sprintf("%s@%d", r.f.name, r.f.batch), median(r.two.t)*1e3, median(r.fused.t)*1e3, median(r.gomlx.t)*1e3,
			jm, famPair(r.two, r.fused), fj, tj, fmt.Sprintf("%.2f %s", q, verdict(q <= goalNitroGoMLX, goalNitroGoMLX)),
			fmt.Sprintf("%.2f %s", qt, verdict(qt <= goalNitroGoMLX, goalNitroGoMLX)), cj, r.fused.cpuPerStep()/r.gomlx.cpuPerStep(), r.two.cpuPerStep()/r.gomlx.cpuPerStep(), alloc, r.accSummary())
		if famTokens(r.f) > 0 {
			gpts = append(gpts, r)
		}
	}
	for _, r := range results {
		if r.jx != nil && r.peerProbes != "" {
			fmt.Printf("  %s@%d: JAX peer on %s; %s\n", r.f.name, r.f.batch, r.peerAlloc, r.peerProbes)
		}
	}
	if len(gpts) == 0 {
		return
	}
	fmt.Printf("\nthe GPT families, per side (median ms/step; tokens/s and GFLOP/s at that median; GFLOP/s counts roofline.TransformerFLOPsPerToken; /roofline: against this run's [%d,%d]@[%d,%d] matmul on the side's own runtime):\n",
		famRoofSize, famRoofSize, famRoofSize, famRoofSize)
	fmt.Printf("  %-12s %-22s %10s %10s %9s %10s\n", "family", "side", "ms/step", "tokens/s", "GFLOP/s", "/roofline")
	for _, r := range gpts {
		for _, s := range r.sides {
			if s.name == famGoMLXGradOnly {
				continue
			}
			roof := r.goRoof
			if !s.isGo {
				roof = r.jaxRoof
			}
			sec := median(s.t)
			gf := r.flops / sec / 1e9
			fmt.Printf("  %-12s %-22s %10.2f %10.0f %9.1f %10.3f\n", fmt.Sprintf("%s@%d", r.f.name, r.f.batch), s.name, sec*1e3, float64(famTokens(r.f))/sec, gf, gf/roof)
		}
	}
}

// famAllocatorLine says which malloc each process ran under: this one's is module hostalloc's
// choice (the test binary imports it, so it re-executes under jemalloc as the CLI does), the JAX
// peer's the probe's pick per family.
func famAllocatorLine() string {
	ours, err := hostalloc.Policy()
	if err != nil {
		ours = err.Error()
	}
	return fmt.Sprintf("host allocator: this process (nitro and the GoMLX loops) %s; the JAX peer: per family the fastest of $%s's candidates (default glibc, tcmalloc, jemalloc) in a probe, preloaded into its process only (the JAX malloc column)", ours, famPeerAllocEnv)
}

func verdict(ok bool, goal float64) string {
	if ok {
		return fmt.Sprintf("(met, <=%.2f)", goal)
	}
	return fmt.Sprintf("(MISSED, <=%.2f)", goal)
}
