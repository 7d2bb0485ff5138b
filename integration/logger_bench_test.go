package integration_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/prefetch"
)

// unfinished is a JSONLogger whose Finish waits for the benchmark's end: each timed repeat is
// one Train, which finishes its record, and a finished logger writes nothing more.
type unfinished struct{ *logjson.JSONLogger }

func (unfinished) Finish(logjson.Status) error { return nil }

// BenchmarkStepLogger measures the two-program step of BenchmarkStepRatio's MLP with the default
// JSON Lines logger on (one "train" line per optimizer step, written to a file) and off, in one
// run, repeats alternating, and prints the ratio (goal: within 2%). The loss the line carries is
// the one the step already reads back to check it is finite, so the logger adds host work (a map,
// a line encoded and written), never a device sync. It fails only if the record is incomplete.
func BenchmarkStepLogger(b *testing.B) {
	const n = benchSteps * benchBatch
	xs, ys := mlpBenchData(n, 8)
	side := func(opts ...core.Option) (*core.Nitro, func() float64) {
		src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
			"x": tensors.FromFlatDataAndDimensions(slices.Clone(xs), n, benchIn),
			"y": tensors.FromFlatDataAndDimensions(slices.Clone(ys), n),
		}, benchBatch, prefetch.ArrayOptions{DropPartial: true})
		if err != nil {
			b.Fatal(err)
		}
		opts = append([]core.Option{core.WithBackend("xla"), core.Quiet(), core.WithCache(compilecache.New()), core.WithoutCheckpoints(),
			core.WithData(prefetch.Data{"train": src}), core.WithMaxEpochs(1000)}, opts...)
		nt, err := core.New(&BenchMLP{Hidden: benchHidden}, opts...)
		if err != nil {
			b.Fatal(err)
		}
		return nt, func() float64 {
			nt.RequestStop() // one epoch of benchSteps steps
			start := time.Now()
			if err := nt.Train(); err != nil {
				b.Fatal(err)
			}
			return time.Since(start).Seconds() / benchSteps
		}
	}
	path := filepath.Join(b.TempDir(), core.MetricsFile)
	jl := logjson.NewJSONLogger(path)
	var warnings []string
	on, onRepeat := side(core.WithLogger(unfinished{jl}), core.WithWarn(func(m string) { warnings = append(warnings, m) }))
	_, offRepeat := side(core.WithoutLogger())
	// A second logger-less side is the control: off2/off is this machine's noise floor, printed
	// beside on/off, since a 2% goal is finer than the noise of one shared CPU.
	_, off2Repeat := side(core.WithoutLogger())
	onRepeat() // warm-up: compiles
	offRepeat()
	off2Repeat()
	b.ResetTimer()
	// More repeats than the step benchmark: the goal (2%) is finer than this machine's noise.
	const repeats = 3 * benchRepeats
	var onT, offT, off2T []float64
	sides := []func(){
		func() { onT = append(onT, onRepeat()) },
		func() { offT = append(offT, offRepeat()) },
		func() { off2T = append(off2T, off2Repeat()) },
	}
	for r := range repeats {
		// Which side goes first rotates too: the first run after a switch is a little slower.
		for k := range sides {
			sides[(r+k)%len(sides)]()
		}
	}
	b.StopTimer()
	if err := jl.Finish(logjson.StatusCompleted); err != nil {
		b.Fatal(err)
	}
	if len(warnings) > 0 {
		b.Fatalf("the logger failed: %v", warnings)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if strings.Contains(sc.Text(), `"context":"train"`) {
			lines++
		}
	}
	if lines != on.Step() {
		b.Fatalf("%d train lines for %d steps", lines, on.Step())
	}
	onMS, offMS, off2MS := median(onT)*1e3, median(offT)*1e3, median(off2T)*1e3
	// Paired: each repeat's sides ran back to back, so the median of the per-repeat ratios
	// cancels the drift of a shared machine better than a ratio of medians.
	pair := func(a, b []float64) float64 {
		r := make([]float64, len(a))
		for i := range a {
			r[i] = a[i] / b[i]
		}
		return median(r)
	}
	onOff, floor := pair(onT, offT), pair(off2T, offT)
	fmt.Printf("step time with the JSON logger on %.3f ms, off %.3f ms (median of %d repeats of %d steps): on/off %.3f, paired %.3f (goal <= 1.02); noise floor, a second logger-less side: %.3f, paired %.3f\n",
		onMS, offMS, repeats, benchSteps, onMS/offMS, onOff, off2MS/offMS, floor)
	b.ReportMetric(onMS, "on-ms/step")
	b.ReportMetric(offMS, "off-ms/step")
	b.ReportMetric(onOff, "on/off")
	b.ReportMetric(floor, "off2/off")
}
