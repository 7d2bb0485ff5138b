package plot

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gplot "gonum.org/v1/plot"
)

// lossRun writes a metrics.jsonl of 5 epochs of 40 steps whose train loss (and val_loss) falls
// as from*exp(-k*step) to to, beside an accuracy that spans as many decades, and reads it.
func lossRun(t *testing.T, from, to float64) *Run {
	t.Helper()
	var b strings.Builder
	const steps, epochs = 200, 5
	k := math.Log(from/to) / steps
	for s := 1; s <= steps; s++ {
		loss := from * math.Exp(-k*float64(s))
		fmt.Fprintf(&b, `{"type":"metrics","context":"train","epoch":%d,"step":%d,"loss":%g,"accuracy":%g}`+"\n", (s-1)/40+1, s, loss, 0.001*math.Exp(k*float64(s)))
		if s%40 == 0 {
			fmt.Fprintf(&b, `{"type":"metrics","context":"validate","epoch":%d,"step":%d,"val_loss":%g}`+"\n", s/40, s, loss*1.1)
		}
	}
	path := filepath.Join(t.TempDir(), "metrics.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// yAxis reports whether fig's y axis is logarithmic, and its labelled ticks.
func yAxis(f figure) (log bool, labels []string) {
	_, log = f.plot.Y.Scale.(gplot.LogScale)
	for _, tk := range f.plot.Y.Tick.Marker.Ticks(f.plot.Y.Min, f.plot.Y.Max) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	return log, labels
}

// TestLossSpanningDecadesIsDrawnOnALogAxis: a train loss and a val_loss falling from 5 to 5e-4
// (four decades) get a log y axis labelled at the powers of ten, said so in the index; the same
// run's accuracy, spanning as much, stays linear (it is no loss), and a loss spanning less than
// two decades (2 to 0.05) stays linear.
func TestLossSpanningDecadesIsDrawnOnALogAxis(t *testing.T) {
	run := lossRun(t, 5, 5e-4)
	figs, _ := Options{}.figures(run)
	byFile := map[string]figure{}
	for _, f := range figs {
		byFile[f.file] = f
	}
	for file, span := range map[string]string{"train_loss.png": "4.0", "val_loss.png": "3.2"} { // val: epochs 1..5
		f, ok := byFile[file]
		if !ok {
			t.Fatalf("no %s among %d figures", file, len(figs))
		}
		log, labels := yAxis(f)
		if !log || !strings.Contains(f.about, "logarithmic (the values span "+span+" decades)") {
			t.Errorf("%s: log axis %v, about %q; want a log axis said so", file, log, f.about)
		}
		for _, w := range []string{"0.001", "0.01", "0.1", "1"} {
			if !slices.Contains(labels, w) {
				t.Errorf("%s: tick labels %v lack %s", file, labels, w)
			}
		}
	}
	if log, _ := yAxis(byFile["train_accuracy.png"]); log {
		t.Errorf("train_accuracy.png is on a log axis: only losses are")
	}
	out := t.TempDir()
	if _, err := Write(run, out); err != nil {
		t.Fatal(err)
	}
	index, _ := os.ReadFile(filepath.Join(out, IndexFile))
	if strings.Count(string(index), "the y axis is logarithmic") != 2 {
		t.Errorf("the index should say twice that a y axis is logarithmic:\n%s", index)
	}
	if dir := os.Getenv("NITRO_PLOT_KEEP"); dir != "" { // to look at the figures
		Write(run, dir)
	}

	figs, _ = Options{}.figures(lossRun(t, 2, 0.05))
	for _, f := range figs {
		if log, _ := yAxis(f); log {
			t.Errorf("%s spans 1.6 decades and is on a log axis", f.file)
		}
	}
}

// TestLogTicksStayBounded: extreme ranges give few labelled ticks and never loop long.
func TestLogTicksStayBounded(t *testing.T) {
	for _, r := range [][2]float64{{1e-300, 1e300}, {math.SmallestNonzeroFloat64, math.MaxFloat64}, {0.5, 0.6}, {1e-3, 10}} {
		ticks := logTicks{}.Ticks(r[0], r[1])
		labelled := 0
		for _, tk := range ticks {
			if tk.Label != "" {
				labelled++
			}
			if tk.Value < r[0] || tk.Value > r[1] {
				t.Errorf("%v: tick %v outside the range", r, tk.Value)
			}
		}
		if labelled > 11 || len(ticks) > 100 {
			t.Errorf("%v: %d ticks, %d labelled", r, len(ticks), labelled)
		}
	}
	if got := (logTicks{}).Ticks(0, 1); got != nil {
		t.Errorf("a range from 0 has no log ticks, got %v", got)
	}
}
