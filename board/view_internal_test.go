package board

import (
	"math"
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
