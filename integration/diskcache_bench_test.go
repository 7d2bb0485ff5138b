package integration_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
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
// print when the step ended (Unix ns) and the compile counts and seconds.
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
		c, l := backend.CompileCounts()
		fmt.Printf("START %d %d %d %.6f\n", end, c, l, backend.CompileSeconds())
		return
	}
	fmt.Println("START-ERROR: unknown model", name)
}

// startRun is one start as the parent saw it.
type startRun struct {
	toStep, compile  float64 // seconds: process start to the first step's end; in compiles
	compiled, loaded int64
}

func runStart(b *testing.B, model, cache string) startRun {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskCacheAcrossProcesses$", "-test.count=1")
	cmd.Env = append(os.Environ(), startChildEnv+"="+model, backend.EnvCompileCache+"="+cache)
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
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "START") {
			line = sc.Text()
		}
	}
	if err := cmd.Wait(); err != nil || !strings.HasPrefix(line, "START ") {
		b.Fatalf("%s start (cache %s): %v %s", model, cache, err, line)
	}
	f := strings.Fields(line)
	end, _ := strconv.ParseInt(f[1], 10, 64)
	r.toStep = float64(end-begin.UnixNano()) / 1e9
	r.compiled, _ = strconv.ParseInt(f[2], 10, 64)
	r.loaded, _ = strconv.ParseInt(f[3], 10, 64)
	r.compile, _ = strconv.ParseFloat(f[4], 64)
	return r
}

// BenchmarkDiskCacheStart measures, per model, fresh processes from exec to the end of their
// first optimizer step, and the seconds they spent compiling: with the disk cache off, on a cold
// cache (an empty folder), and on the second start over that folder. It prints the medians and
// the ratios the goals are stated in: second start's compile seconds against the cold start's
// (goal <= 5%), and a cold start with the cache on against one with it off (goal <= 3% more).
// It fails only if a start misbehaves (the second start compiled something, the cold one loaded).
func BenchmarkDiskCacheStart(b *testing.B) {
	requireXLA(b)
	const rounds = 3
	type row struct {
		off, cold, warm []startRun
	}
	rows := map[string]*row{}
	for range b.N {
		for _, f := range startModels() {
			r := &row{}
			rows[f.name] = r
			for range rounds {
				// Interleaved, so a slow moment of a shared machine hits every side alike.
				dir := b.TempDir()
				r.off = append(r.off, runStart(b, f.name, "off"))
				cold := runStart(b, f.name, dir)
				warm := runStart(b, f.name, dir)
				if cold.loaded != 0 || cold.compiled == 0 || warm.compiled != 0 || warm.loaded != cold.compiled {
					b.Fatalf("%s: cold start %+v, second start %+v: want every program compiled, then every one loaded", f.name, cold, warm)
				}
				r.cold, r.warm = append(r.cold, cold), append(r.warm, warm)
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
	fmt.Printf("disk compile cache, medians of %d fresh processes per cell (exec to the end of the first optimizer step; seconds in compiles):\n", rounds)
	fmt.Printf("  %-12s %9s %9s %9s | %9s %9s %9s | %12s %12s\n", "model", "off", "cold", "second", "cmp off", "cmp cold", "cmp 2nd", "2nd/cold cmp", "cold/off")
	for _, f := range startModels() {
		r := rows[f.name]
		cmpCold, cmpWarm := pick(r.cold, compile), pick(r.warm, compile)
		off, cold := pick(r.off, toStep), pick(r.cold, toStep)
		fmt.Printf("  %-12s %8.2fs %8.2fs %8.2fs | %8.3fs %8.3fs %8.3fs | %11.1f%% %11.3fx\n", f.name, off, cold, pick(r.warm, toStep),
			pick(r.off, compile), cmpCold, cmpWarm, 100*cmpWarm/cmpCold, cold/off)
	}
	fmt.Println("  goals: second start's compile seconds <= 5% of the cold start's; cold start with the cache <= 1.03x without it")
}
