package integration_test

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/pjrthook"
	"github.com/nitro-go/nitro/pjrthook/diskcache"
	"github.com/nitro-go/nitro/prefetch"
)

// Arrays600 is the many-array model: 300 dense layers of width 8, so 600 parameter arrays, the
// size at which the optimizer program's compile dominates a start.
type Arrays600 struct{}

const arraysLayers = 300

func (e *Arrays600) BuildModel(ctx *context.Context) error { return nil }
func (e *Arrays600) BuildData() (prefetch.Data, error) {
	return nil, fmt.Errorf("Arrays600's data is supplied with core.WithData")
}
func (e *Arrays600) Forward(ctx *context.Context, in Inputs) core.Outputs {
	h := layers.Dense(ctx.In("in"), in.X, true, 8)
	for i := 1; i < arraysLayers-1; i++ {
		h = graph.Tanh(layers.Dense(ctx.In(fmt.Sprintf("l%03d", i)), h, true, 8))
	}
	return core.Outputs{"logits": layers.Dense(ctx.In("out"), h, true, benchOut)}
}
func (e *Arrays600) Loss(out core.Outputs, in Labels) *graph.Node {
	return benchLoss(out["logits"], in.Y)
}

// startModels are the families (the MLP, the CNN, the transformer) and the 600-array model.
func startModels() []*family {
	fs := families()
	return append(fs, &family{name: "arrays600", batch: 32, lr: 1e-3, newExp: func() any { return &Arrays600{} }, data: mlpData})
}

const startChildEnv = "NITRO_BENCH_START_CHILD"

// startChild is one measured start (TestDiskCacheAcrossProcesses runs it in a child process): build the model's Nitro and train one optimizer step, then
// print when the step ended (Unix ns), the compile counts and seconds, and the disk cache's own
// costs (plugin hash, serialization, writes, miss explanations; a hit's key, reads and loads;
// seconds), after one LOAD line per executable loaded from disk and one COMPILE line per program
// compiled (program, bytes, seconds).
func startChild(name string) {
	for _, f := range startModels() {
		if f.name != name {
			continue
		}
		d := newFamBatches(f, 1, 2*f.batch)
		nt, _, err := newFamNitro(f, d, f.batch, compilecache.New())
		if err == nil {
			err = nt.TrainSteps(1)
		}
		end := time.Now().UnixNano()
		if err != nil {
			fmt.Println("START-ERROR:", err)
			return
		}
		// The entries are serialized in the background and the run is left open: write them
		// before the process exits (after the step's end, so the start does not wait for them,
		// but inside the process's CPU seconds), so the second start finds them.
		backend.FlushCompileCache()
		c, l := backend.CompileCounts()
		var k diskcache.Costs
		if dc := pjrthook.Disk(); dc != nil {
			k = dc.Costs()
		}
		for kind, xs := range map[string][]diskcache.ProgramTime{"LOAD": k.Loads, "COMPILE": k.Compiles} {
			for _, x := range xs {
				fmt.Printf("%s %s %d %.6f\n", kind, cmp.Or(x.Program, "-"), x.Bytes, x.Took.Seconds())
			}
		}
		fmt.Printf("START %d %d %d %.6f %.6f %.6f %.6f %.6f %.6f %.6f %.6f\n", end, c, l, backend.CompileSeconds(),
			k.Hash.Seconds(), k.Serialize.Seconds(), k.Write.Seconds(), k.Explain.Seconds(), k.Key.Seconds(), k.Read.Seconds(), k.Load.Seconds())
		return
	}
	fmt.Println("START-ERROR: unknown model", name)
}

// startRun is one start as the parent saw it.
type startRun struct {
	toStep, compile  float64 // seconds: process start to the first step's end; in compiles
	cpu              float64 // user and system seconds of the whole process, to its exit
	compiled, loaded int64
	costs            [7]float64 // nitro only: the disk cache's hash, serialize, write, explain, key, read and load seconds
	// nitro only, by program name: seconds loading it from disk, or compiling it (with the cache
	// on); the executable's bytes
	loads, compiles map[string]float64
	loadBytes       map[string]int64
}

// starter runs one fresh process of a model with the given cache setting ("off" or a folder).
type starter struct {
	name   string
	rounds int
	peer   bool // another framework's start: its counts are reported, not required
	// command is the process to run; its last "START ..." line on stdout is the measurement.
	command func(cache string) *exec.Cmd
	// why, when not empty, is why the row is not measured.
	why string
}

func nitroStarter(f *family, rounds int) *starter {
	return &starter{name: f.name, rounds: rounds, command: func(cache string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestDiskCacheAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), startChildEnv+"="+f.name, backend.EnvCompileCache+"="+cache)
		return cmd
	}}
}

// jaxStarter is JAX + optax on one of nitro's start models (scripts/bench/jax_start.py; model
// names the flags that pick it beyond the MLP's sizes), its persistent compilation cache off or in
// the folder, when $NITRO_BENCH_PYTHON names a python that runs.
func jaxStarter(name string, rounds int, model ...string) *starter {
	s := &starter{name: name, rounds: rounds, peer: true}
	py := os.Getenv("NITRO_BENCH_PYTHON")
	script, err := filepath.Abs(filepath.Join("..", "scripts", "bench", "jax_start.py"))
	switch {
	case py == "":
		s.why = "$NITRO_BENCH_PYTHON unset (`make bench` sets it to .nitro/bench-venv, which `make bench-venv` builds)"
		return s
	case err != nil:
		s.why = err.Error()
		return s
	}
	if _, err := os.Stat(py); err != nil {
		s.why = fmt.Sprintf("no python at $NITRO_BENCH_PYTHON=%s (`make bench-venv` builds it): %v", py, err)
		return s
	}
	s.command = func(cache string) *exec.Cmd {
		args := []string{script, "--cache", cache, "--in", fmt.Sprint(benchIn), "--hidden", fmt.Sprint(benchHidden),
			"--out", fmt.Sprint(benchOut), "--batch", fmt.Sprint(benchBatch), "--lr", "1e-3"}
		return exec.Command(py, append(args, model...)...) // the later flag of a pair wins
	}
	return s
}

func runStart(b *testing.B, s *starter, cache string) startRun {
	b.Helper()
	cmd := s.command(cache)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var r startRun
	var line string
	r.loads, r.compiles, r.loadBytes = map[string]float64{}, map[string]float64{}, map[string]int64{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "START") {
			line = sc.Text()
		}
		if f := strings.Fields(sc.Text()); len(f) == 4 && (f[0] == "LOAD" || f[0] == "COMPILE") {
			n, _ := strconv.ParseInt(f[2], 10, 64)
			took, _ := strconv.ParseFloat(f[3], 64)
			if f[0] == "COMPILE" {
				r.compiles[f[1]] += took
				continue
			}
			r.loads[f[1]] += took
			r.loadBytes[f[1]] += n
		}
	}
	if err := cmd.Wait(); err != nil || !strings.HasPrefix(line, "START ") {
		b.Fatalf("%s start (cache %s): %v %s", s.name, cache, err, line)
	}
	r.cpu = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	f := strings.Fields(line)
	if len(f) < 5 {
		b.Fatalf("%s start: %q: want START end compiled loaded seconds", s.name, line)
	}
	end, _ := strconv.ParseInt(f[1], 10, 64)
	r.toStep = float64(end-begin.UnixNano()) / 1e9
	r.compiled, _ = strconv.ParseInt(f[2], 10, 64)
	r.loaded, _ = strconv.ParseInt(f[3], 10, 64)
	r.compile, _ = strconv.ParseFloat(f[4], 64)
	for i := range r.costs {
		if 5+i < len(f) {
			r.costs[i], _ = strconv.ParseFloat(f[5+i], 64)
		}
	}
	return r
}

// startRows are the rows BenchmarkDiskCacheStart measures: nitro's families at
// $NITRO_BENCH_START_ROUNDS rounds (default 7), the 600-array model at 3, and JAX's MLP and
// 600-array model (at 3 too); $NITRO_BENCH_START_MODELS (comma-separated names) picks some.
func startRows(b *testing.B) []*starter {
	rounds := 7
	if v := os.Getenv("NITRO_BENCH_START_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("$NITRO_BENCH_START_ROUNDS=%q: want a count >= 1", v)
		}
		rounds = n
	}
	var rows []*starter
	for _, f := range startModels() {
		r := rounds
		if f.name == "arrays600" {
			r = min(rounds, 3) // 80 s a round; its ratio moves by less than the families' (compiles dominate)
		}
		rows = append(rows, nitroStarter(f, r))
	}
	// JAX's persistent cache on the 600-array model tells what loading a program of that size
	// costs the XLA CPU runtime when another framework drives it.
	rows = append(rows, jaxStarter("jax-mlp", rounds),
		jaxStarter("jax-arrays600", min(rounds, 3), "--deep", fmt.Sprint(arraysLayers), "--hidden", "8", "--batch", "32"))
	pick := os.Getenv("NITRO_BENCH_START_MODELS")
	if pick == "" {
		return rows
	}
	var out []*starter
	for _, r := range rows {
		if slices.Contains(strings.Split(pick, ","), r.name) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		b.Fatalf("$NITRO_BENCH_START_MODELS=%q names no row", pick)
	}
	return out
}

// BenchmarkDiskCacheStart measures, per model, fresh processes from exec to the end of their
// first optimizer step, and the seconds they spent compiling: with the disk cache off, on a cold
// cache (an empty folder), and on the second start over that folder; and JAX's persistent cache
// on the same MLP, the same way. It prints the medians and the ratios the goals are stated in:
// second start's compile seconds against the cold start's (goal <= 5%), and a cold start with
// the cache on against one with it off (goal <= 3% more), as the ratio of the medians and as
// the median and range of each round's own cold/off ratio. It fails only if a nitro start
// misbehaves (the second start compiled something, the cold one loaded).
func BenchmarkDiskCacheStart(b *testing.B) {
	requireXLA(b)
	type row struct {
		off, cold, warm []startRun
		ratios, cpu     []float64 // each round's cold/off start, and CPU seconds
	}
	starters := startRows(b)
	rows := map[string]*row{}
	for range b.N {
		for _, s := range starters {
			if s.why != "" {
				continue
			}
			r := &row{}
			rows[s.name] = r
			for i := range s.rounds {
				// Off and cold alternate which runs first, so neither side always meets the
				// machine's next slow moment, and a round's two are close in time.
				dir := b.TempDir()
				var off, cold startRun
				if i%2 == 0 {
					off = runStart(b, s, "off")
					cold = runStart(b, s, dir)
				} else {
					cold = runStart(b, s, dir)
					off = runStart(b, s, "off")
				}
				warm := runStart(b, s, dir)
				if !s.peer && (cold.loaded != 0 || cold.compiled == 0 || warm.compiled != 0 || warm.loaded != cold.compiled) {
					b.Fatalf("%s: cold start %+v, second start %+v: want every program compiled, then every one loaded", s.name, cold, warm)
				}
				r.off, r.cold, r.warm = append(r.off, off), append(r.cold, cold), append(r.warm, warm)
				r.ratios = append(r.ratios, cold.toStep/off.toStep)
				r.cpu = append(r.cpu, cold.cpu/off.cpu)
			}
		}
	}
	pick := func(rs []startRun, get func(startRun) float64) float64 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, get(r))
		}
		return median(xs)
	}
	toStep := func(r startRun) float64 { return r.toStep }
	compile := func(r startRun) float64 { return r.compile }
	fmt.Printf("disk compile cache, medians of fresh processes per cell (exec to the end of the first optimizer step; seconds in compiles; off and cold alternate):\n")
	fmt.Printf("  %-12s %6s %8s %8s %8s | %8s %8s %8s | %12s | %-28s\n", "model", "rounds", "off", "cold", "second", "cmp off", "cmp cold", "cmp 2nd", "2nd/cold cmp", "cold/off: medians; rounds")
	for _, s := range starters {
		if s.why != "" {
			fmt.Printf("  %-12s not measured: %s\n", s.name, s.why)
			continue
		}
		r := rows[s.name]
		cmpCold, cmpWarm := pick(r.cold, compile), pick(r.warm, compile)
		off, cold := pick(r.off, toStep), pick(r.cold, toStep)
		fmt.Printf("  %-12s %6d %7.2fs %7.2fs %7.2fs | %7.3fs %7.3fs %7.3fs | %11.1f%% | %.3fx; %.3fx [%.3f, %.3f]\n", s.name, len(r.ratios), off, cold, pick(r.warm, toStep),
			pick(r.off, compile), cmpCold, cmpWarm, 100*cmpWarm/cmpCold, cold/off, median(r.ratios), slices.Min(r.ratios), slices.Max(r.ratios))
	}
	fmt.Println("  goals: second start's compile seconds <= 5% of the cold start's; cold start with the cache <= 1.03x without it")
	fmt.Println("  cold/off rounds: the median and [min, max] of each round's own ratio")
	fmt.Println("CPU seconds per process (user and system, exec to exit: what the cache adds, less moved than the wall clock by other work on the machine), medians:")
	cpu := func(r startRun) float64 { return r.cpu }
	for _, s := range starters {
		if r := rows[s.name]; r != nil {
			fmt.Printf("  %-12s off %6.2fs  cold %6.2fs  second %6.2fs | cold/off %.3fx; rounds %.3fx [%.3f, %.3f]\n", s.name, pick(r.off, cpu), pick(r.cold, cpu), pick(r.warm, cpu),
				pick(r.cold, cpu)/pick(r.off, cpu), median(r.cpu), slices.Min(r.cpu), slices.Max(r.cpu))
		}
	}
	fmt.Println("nitro's cold starts: the disk cache's own seconds, medians (plugin hash in the background; serialize; write with fsync; miss explanations):")
	for _, s := range starters {
		if r := rows[s.name]; r != nil && !s.peer {
			var k [4]float64
			for i := range k {
				k[i] = pick(r.cold, func(x startRun) float64 { return x.costs[i] })
			}
			fmt.Printf("  %-12s hash %.3fs  serialize %.3fs  write %.3fs  explain %.3fs  (cold - off start: %+.3fs)\n", s.name, k[0], k[1], k[2], k[3],
				pick(r.cold, toStep)-pick(r.off, toStep))
		}
	}
	fmt.Println("nitro's second starts, medians: where the compile seconds go (the cache's key and reads, the plugin's loads by program) and the rest of the start:")
	for _, s := range starters {
		r := rows[s.name]
		if r == nil || s.peer {
			continue
		}
		cost := func(i int) float64 { return pick(r.warm, func(x startRun) float64 { return x.costs[i] }) }
		fmt.Printf("  %-12s to step %.3fs = compiles %.3fs (key %.3fs, read %.3fs, loads %.3fs) + the rest %.3fs\n", s.name, pick(r.warm, toStep), pick(r.warm, compile),
			cost(4), cost(5), cost(6), pick(r.warm, func(x startRun) float64 { return x.toStep - x.compile }))
		var names []string
		for n := range r.warm[0].loads {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			took := pick(r.warm, func(x startRun) float64 { return x.loads[n] })
			built := pick(r.cold, func(x startRun) float64 { return x.compiles[n] })
			fmt.Printf("  %-12s   %-24s load %7.3fs (%9s) = %5.1f%% of its cold compile (%7.3fs); %5.1f%% of the cold start's compile seconds\n", "", n, took,
				diskcache.FormatSize(r.warm[0].loadBytes[n]), 100*took/built, built, 100*took/pick(r.cold, compile))
		}
	}
	for _, s := range starters {
		if r := rows[s.name]; r != nil && s.peer {
			counts := func(rs []startRun) string {
				return fmt.Sprintf("%.0f compiled, %.0f from disk", pick(rs, func(x startRun) float64 { return float64(x.compiled) }),
					pick(rs, func(x startRun) float64 { return float64(x.loaded) }))
			}
			fmt.Printf("  %s programs, medians: cold %s; second %s\n", s.name, counts(r.cold), counts(r.warm))
		}
	}
}
