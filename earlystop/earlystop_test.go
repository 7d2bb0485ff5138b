package earlystop_test

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/earlystop"
)

// must is v, and a panic (failing the test that called it) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestDefault: val_loss, min, patience 5, min_delta 1e-4, and it passes its own check.
func TestDefault(t *testing.T) {
	d := earlystop.Default()
	if d.Metric != "val_loss" || d.Mode != "min" || d.Patience != 5 || d.MinDelta != 1e-4 {
		t.Errorf("Default() = %+v, want val_loss min 5 1e-4", *d)
	}
	if err := d.Check("Default", "earlystop.Default()"); err != nil {
		t.Errorf("Default() fails its check: %v", err)
	}
}

// TestCheck: each field that cannot decide a stop is refused, naming the origin, the field and
// the fix (the caller's spelling of the defaults for a missing metric).
func TestCheck(t *testing.T) {
	for _, c := range []struct {
		es   earlystop.EarlyStopping
		want []string
	}{
		{earlystop.EarlyStopping{Patience: 3}, []string{"E.EarlyStop: no metric", "start from earlystop.Default()", "val_loss, min, patience 5, min_delta 0.0001"}},
		{earlystop.EarlyStopping{Metric: "val_loss", Mode: "down"}, []string{`E.EarlyStop("val_loss")`, `mode "down"`, `"min"`}},
		{earlystop.EarlyStopping{Metric: "m", Mode: "max", Patience: -1}, []string{"patience -1", ">= 0"}},
		{earlystop.EarlyStopping{Metric: "m", Mode: "min", MinDelta: math.NaN()}, []string{"minDelta NaN", "finite"}},
		{earlystop.EarlyStopping{Metric: "m", Mode: "min", MinDelta: -1}, []string{"minDelta -1"}},
	} {
		err := c.es.Check("E.EarlyStop()", "earlystop.Default()")
		if err == nil {
			t.Errorf("%+v: accepted", c.es)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %q lacks %q", c.es, err, w)
			}
		}
	}
	if _, err := earlystop.New("val_acc", "up", 1, 0); err == nil || !strings.Contains(err.Error(), "earlystop.New(\"val_acc\")") {
		t.Errorf("New with a bad mode: %v, want an error naming earlystop.New", err)
	}
}

// TestEarlyStoppingPolicy: patience counts epochs without improvement, minDelta is absolute,
// max mode, and the state round-trips.
func TestEarlyStoppingPolicy(t *testing.T) {
	es := must(earlystop.New("val_acc", "max", 2, 0.01))
	var stops []bool
	for _, v := range []float64{0.5, 0.505, 0.52, 0.525, 0.529} {
		stop, _ := es.Observe(map[string]float64{"val_acc": v})
		stops = append(stops, stop)
	}
	// 0.5 best; 0.505 no (+0.005); 0.52 yes (+0.02); 0.525 no; 0.529 no -> stop.
	if !slices.Equal(stops, []bool{false, false, false, false, true}) {
		t.Errorf("stops %v", stops)
	}
	if b, ok := es.Best(); !ok || b != 0.52 {
		t.Errorf("best %v %v, want 0.52", b, ok)
	}
	st := must(es.State())
	back := must(earlystop.New("val_acc", "max", 2, 0.01))
	if ok, err := back.Restore(st); !ok || err != nil || !back.Exhausted() {
		t.Errorf("Restore(%s): %v %v, exhausted %v", st, ok, err, back.Exhausted())
	}
	other := must(earlystop.New("val_loss", "min", 2, 0))
	if ok, err := other.Restore(st); ok || err != nil || other.Exhausted() {
		t.Errorf("another metric's state: %v %v", ok, err)
	}
	zero := must(earlystop.New("m", "min", 0, 0))
	if s, _ := zero.Observe(map[string]float64{"m": 1}); s {
		t.Error("patience 0 stopped on the first epoch")
	}
	if s, why := zero.Observe(map[string]float64{"m": 1}); !s || !strings.Contains(why, "has not improved") {
		t.Errorf("patience 0 did not stop at the first epoch without improvement: %v %q", s, why)
	}
}

// TestMinModeAndMissing: in min mode a lower value improves; a missing or NaN metric counts as
// no improvement.
func TestMinModeAndMissing(t *testing.T) {
	es := must(earlystop.New("val_loss", "min", 2, 0.1))
	for i, c := range []struct {
		val  map[string]float64
		stop bool
	}{
		{map[string]float64{"val_loss": 1}, false},
		{map[string]float64{"val_loss": 0.8}, false}, // -0.2: improves
		{map[string]float64{}, false},                // missing: no improvement (1 bad)
		{map[string]float64{"val_loss": math.NaN()}, true},
	} {
		if stop, _ := es.ShouldStop(i+1, c.val); stop != c.stop {
			t.Errorf("epoch %d %v: stop %v, want %v", i+1, c.val, stop, c.stop)
		}
	}
	if b, _ := es.Best(); b != 0.8 {
		t.Errorf("best %v, want 0.8", b)
	}
}

// TestRestoreRefusesForeignState: a state no EarlyStopping writes, or no JSON, is an error.
func TestRestoreRefusesForeignState(t *testing.T) {
	es := earlystop.Default()
	for _, st := range []string{`{"metric":"val_loss","mode":"min","seen":true,"bad_epochs":-1}`, `[`} {
		if ok, err := es.Restore(json.RawMessage(st)); ok || err == nil {
			t.Errorf("Restore(%s) = %v, %v: want an error", st, ok, err)
		}
	}
	if ok, err := es.Restore(json.RawMessage(`{"metric":"val_loss","mode":"min","seen":true,"bad_epochs":-1}`)); err == nil || !strings.Contains(err.Error(), "not a state EarlyStopping writes") || ok {
		t.Errorf("negative count: %v", err)
	}
}

// TestFresh: a copy keeps the configuration and none of the progress.
func TestFresh(t *testing.T) {
	es := must(earlystop.New("val_acc", "max", 1, 0))
	es.Observe(map[string]float64{"val_acc": 1})
	es.Observe(map[string]float64{"val_acc": 1})
	f := es.Fresh()
	if !es.Exhausted() || f.Exhausted() || f == es || f.Metric != "val_acc" || f.Mode != "max" || f.Patience != 1 {
		t.Errorf("Fresh() = %+v (exhausted %v) from %+v (exhausted %v)", *f, f.Exhausted(), *es, es.Exhausted())
	}
	if _, seen := f.Best(); seen {
		t.Error("Fresh() has seen a value")
	}
}

// TestModeOf: the mode an example suggests fits the metric's name: min for losses and errors,
// max for scores, and unknown (min) for a name that says neither.
func TestModeOf(t *testing.T) {
	for name, want := range map[string]string{
		"val_loss": "min", "val_mae": "min", "val_mse": "min", "val_rmse": "min", "val_error": "min",
		"val_top1_error": "min", "valloss": "min", "val_nll": "min", "val_perplexity": "min",
		"val_acc": "max", "val_accuracy": "max", "val_f1": "max", "val_auc": "max", "val_map": "max",
		"val_top5": "max", "val_iou": "max", "testaccuracy": "max", "val_r2": "max",
		"val_sse": "min", "val_rows": "", "val_heatmap": "",
	} {
		mode, known := earlystop.ModeOf(name)
		if want == "" {
			if known || mode != "min" || earlystop.SuggestMode(name) != "min" {
				t.Errorf("ModeOf(%q) = %s, %v; want unknown, min", name, mode, known)
			}
			continue
		}
		if !known || mode != want || earlystop.SuggestMode(name) != want {
			t.Errorf("ModeOf(%q) = %s (known %v), want %s", name, mode, known, want)
		}
	}
	if got := earlystop.PickMetric([]string{"val_rows", "val_f1", "val_mse"}); got != "val_f1" {
		t.Errorf("PickMetric = %q, want the first whose mode is known", got)
	}
	if got := earlystop.PickMetric([]string{"val_rows", "val_heatmap"}); got != "val_rows" {
		t.Errorf("PickMetric = %q, want the first when none says its mode", got)
	}
	if got := earlystop.PickMetric(nil); got != "" {
		t.Errorf("PickMetric(nil) = %q, want \"\"", got)
	}
}
