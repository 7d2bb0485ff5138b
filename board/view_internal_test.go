package board

import (
	"math"
	"slices"
	"testing"
)

// TestAxes: a point's x on each axis, train and validate; the time axis has no point of a run
// that logged no step_seconds.
func TestAxes(t *testing.T) {
	r := Run{StepsPerEpoch: 4, Timed: true}
	p := Point{X: 6, Y: 1, Step: 6, Epoch: 2, Secs: 1.5} // X as logged: a train point's step
	for _, c := range []struct {
		axis  string
		train bool
		want  float64
	}{{"auto", true, 6}, {"step", false, 6}, {"step", true, 6}, {"epoch", true, 1.5}, {"epoch", false, 2}, {"time", true, 1.5}, {"time", false, 1.5}} {
		if x, ok := (view{x: c.axis}).xOf(r, p, c.train); !ok || x != c.want {
			t.Errorf("%s axis, train %v: x %v (ok %v), want %v", c.axis, c.train, x, ok, c.want)
		}
	}
	if x, _ := (view{x: "auto"}).xOf(r, Point{X: 2, Step: 6, Epoch: 2}, false); x != 2 {
		t.Errorf("as logged, a validation point sits at its epoch: %v", x)
	}
	if x, _ := (view{x: "epoch"}).xOf(Run{}, p, true); x != 2 {
		t.Errorf("before an epoch ended, a train point sits at its epoch: %v", x)
	}
	if _, ok := (view{x: "time"}).xOf(Run{}, p, true); ok {
		t.Errorf("a run without step_seconds has no point on the time axis")
	}
}

// TestEMA: the debiased average starts at the first value and follows a step toward the new level
// by 1-w per point.
func TestEMA(t *testing.T) {
	got := ema([]Point{{Y: 2}, {Y: 2}, {Y: 4}}, 0.5)
	want := []float64{2, 2, 2 + 2*0.5/(1-0.125)}
	for i := range want {
		if math.Abs(got[i].Y-want[i]) > 1e-12 {
			t.Errorf("point %d: %v, want %v", i, got[i].Y, want[i])
		}
	}
}

// TestMixedRunsAxes: an epoch-based run (epochs of 4 steps) and a step-based one (validated
// every 20 steps, epochs of 30) on one board: as logged, the validation charts take the step
// axis, where both runs' points are right (the epoch-based one's at its epochs' last steps); on
// the epoch axis the step-based run's validations sit at their step over its steps per epoch,
// and are left out while that is unknown. Without a step-based run shown, as logged stays the
// epoch.
func TestMixedRunsAxes(t *testing.T) {
	ep := Run{Name: "ep", StepsPerEpoch: 4}
	st := Run{Name: "st", ValEvery: 20, StepsPerEpoch: 30}
	epPts := []Point{{X: 1, Step: 4, Epoch: 1}, {X: 2, Step: 8, Epoch: 2}}
	stPts := []Point{{X: 20, Step: 20, Epoch: 1}, {X: 40, Step: 40, Epoch: 2}, {X: 60, Step: 60, Epoch: 2}}
	xs := func(pts []Point) []float64 {
		var out []float64
		for _, p := range pts {
			out = append(out, math.Round(p.X*1000)/1000)
		}
		return out
	}
	auto := view{x: "auto", hidden: map[string]bool{}}
	v := auto.along(false, []Run{ep, st})
	if v.x != "step" || v.label(false) != "step" {
		t.Fatalf("as logged with a step-based run: axis %q, want step", v.x)
	}
	if got := xs(v.onAxis(ep, epPts, false)); !slices.Equal(got, []float64{4, 8}) {
		t.Errorf("the epoch-based run's validations on the step axis at %v, want 4, 8", got)
	}
	if got := xs(v.onAxis(st, stPts, false)); !slices.Equal(got, []float64{20, 40, 60}) {
		t.Errorf("the step-based run's validations on the step axis at %v, want 20, 40, 60", got)
	}
	if v := auto.along(true, []Run{ep, st}); v.x != "step" {
		t.Errorf("train as logged: %q, want step", v.x)
	}
	for _, runs := range [][]Run{{ep}, {ep, st}} {
		hidden := view{x: "auto", hidden: map[string]bool{"st": true}}
		if v := hidden.along(false, runs); v.x != "epoch" || v.label(false) != "epoch" {
			t.Errorf("as logged with no step-based run shown (%d runs): axis %q, want epoch", len(runs), v.x)
		}
	}
	e := view{x: "epoch"}.along(false, []Run{ep, st})
	if got := xs(e.onAxis(ep, epPts, false)); !slices.Equal(got, []float64{1, 2}) {
		t.Errorf("the epoch-based run's validations on the epoch axis at %v, want 1, 2", got)
	}
	if got := xs(e.onAxis(st, stPts, false)); !slices.Equal(got, []float64{0.667, 1.333, 2}) {
		t.Errorf("the step-based run's validations on the epoch axis at %v, want 2/3, 4/3, 2", got)
	}
	if got := e.onAxis(Run{ValEvery: 20}, stPts, false); len(got) != 0 {
		t.Errorf("before its first epoch ended, a step-based run's validations on the epoch axis: %v, want none", got)
	}
}
