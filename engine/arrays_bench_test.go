package engine

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/prefetch"
)

// arraysSide is one engine's figures at one array count: the compile times of its gradient and
// optimizer programs (each a cache miss through the engine's own path: trace, host-independence
// check, compile), and per repeat the optimizer program's run and the whole two-program step.
type arraysSide struct {
	arrays                   int
	gradCompile, optCompile  time.Duration
	optTimes, stepTimes      []float64 // seconds per run, one per repeat
	perArrayOpt              *layoutSide
	perArrayCompile          time.Duration
	perArrayTimes, flatTimes []float64 // the per-array optimizer program and the engine's, paired
}

// BenchmarkArrayCount measures what the parameter array count costs the engine's training path
// at 6, 60 and 600 arrays (narrowMLP: 3, 30, 300 dense layers of width 32, RAdam, float32, XLA):
// the gradient and optimizer programs' compile times, the optimizer program's run (gradients
// held fixed, parameters and state donated run to run) and the whole step (the batch placed, the
// gradient program, the optimizer program). Beside the engine's optimizer program it builds the
// per-array one (buildLayout's "per array" side: one input per parameter, gradient and state
// array, the layout the engine used before its parameters went flat) and times the two paired in
// one run. Printed: the figures, compile(600)/compile(6) per program, and the ratios.
func BenchmarkArrayCount(b *testing.B) {
	const runs, repeats = 20, 5
	var rows []*arraysSide
	for _, nl := range []int{3, 30, 300} {
		x := tensors.FromFlatDataAndDimensions(make([]float32, 8*8*narrowWidth), 8*8, narrowWidth)
		src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x}, 8, prefetch.ArrayOptions{DropPartial: true})
		if err != nil {
			b.Fatal(err)
		}
		n := newNarrowEngine(b, nl, src)
		keys := []string{"x"}
		r := &arraysSide{arrays: n.ParamArrays()}
		start := time.Now()
		if _, err := n.gradientProgram(8, keys); err != nil {
			b.Fatal(err)
		}
		r.gradCompile = time.Since(start)
		start = time.Now()
		if _, err := n.optimizerProgram(); err != nil {
			b.Fatal(err)
		}
		r.optCompile = time.Since(start)
		batch := 0
		next := func() (map[string]*tensors.Tensor, error) {
			bt, err := src.BatchAt(batch % src.Len())
			batch++
			if err != nil {
				return nil, err
			}
			return n.Place(bt, keys)
		}
		// One gradient run gives the optimizer's fixed gradients, in the layout the engine keeps.
		placed, err := next()
		if err != nil {
			b.Fatal(err)
		}
		_, grads, err := n.gradientStep(placed, keys, nil, false)
		if err != nil {
			b.Fatal(err)
		}
		step := 0
		optRuns := func() float64 {
			start := time.Now()
			for range runs {
				step++
				args, err := n.optimizerArgs(grads, false, step)
				if err != nil {
					b.Fatal(err)
				}
				p, _ := n.optimizerProgram()
				outs, err := n.execute(p, args)
				if err != nil {
					b.Fatal(err)
				}
				if err := n.takeOptimizerOutputs(p, outs); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := n.Parameters(); err != nil { // synchronizes
				b.Fatal(err)
			}
			return time.Since(start).Seconds() / runs
		}
		stepRuns := func() float64 {
			start := time.Now()
			for range runs {
				step++
				if _, err := n.Step(step, keys, next, false); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := n.Parameters(); err != nil {
				b.Fatal(err)
			}
			return time.Since(start).Seconds() / runs
		}
		r.perArrayOpt = buildLayout(b, n, optLayouts[0])
		r.perArrayCompile = r.perArrayOpt.compile
		optRuns()
		stepRuns()
		r.perArrayOpt.repeat(b, n, runs, 0) // warm-up
		for rep := range repeats {
			sides := []func(){
				func() { r.optTimes = append(r.optTimes, optRuns()) },
				func() { r.stepTimes = append(r.stepTimes, stepRuns()) },
				func() { r.perArrayTimes = append(r.perArrayTimes, r.perArrayOpt.repeat(b, n, runs, (rep+1)*runs)) },
			}
			for k := range sides {
				runtime.GC()
				sides[(rep+k)%len(sides)]()
			}
		}
		rows = append(rows, r)
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	fmt.Printf("array count (narrow MLP, RAdam, float32, XLA; runs: median of %d repeats of %d, order rotating):\n", repeats, runs)
	fmt.Printf("  %6s %12s %12s %14s %12s %12s %16s %14s\n", "arrays", "grad comp ms", "opt comp ms", "per-array comp", "opt step µs", "step µs", "per-array opt µs", "opt/per-array")
	for _, r := range rows {
		ratio := pairedRatio(r.optTimes, r.perArrayTimes)
		fmt.Printf("  %6d %12.1f %12.1f %14.1f %12.1f %12.1f %16.1f %14.2f\n", r.arrays, ms(r.gradCompile), ms(r.optCompile), ms(r.perArrayCompile),
			medianOf(r.optTimes)*1e6, medianOf(r.stepTimes)*1e6, medianOf(r.perArrayTimes)*1e6, ratio)
		b.ReportMetric(ratio, fmt.Sprintf("opt/per-array@%d", r.arrays))
		b.ReportMetric(medianOf(r.stepTimes)*1e6, fmt.Sprintf("step-µs@%d", r.arrays))
	}
	first, last := rows[0], rows[len(rows)-1]
	fmt.Printf("  compile(%d)/compile(%d): optimizer %.2f, gradient %.2f, per-array optimizer %.2f; optimizer/gradient compile at %d: %.2f\n",
		last.arrays, first.arrays, ms(last.optCompile)/ms(first.optCompile), ms(last.gradCompile)/ms(first.gradCompile),
		ms(last.perArrayCompile)/ms(first.perArrayCompile), last.arrays, ms(last.optCompile)/ms(last.gradCompile))
	b.ReportMetric(ms(last.optCompile)/ms(first.optCompile), "opt-compile-600/6")
}
