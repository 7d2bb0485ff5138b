package integration_test

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestFlagOffSides: a side whose held-out accuracy is off the median by more than the tolerance
// is flagged, one within it is not, and the tolerance widens to 3 binomial sd on few predictions.
func TestFlagOffSides(t *testing.T) {
	side := func(name string, acc float64) *famSide {
		return &famSide{name: name, score: &famScore{loss: 1, acc: acc}}
	}
	res := &famResult{heldOutN: 1024, sides: []*famSide{side("a", 0.90), side("b", 0.92), side("c", 0.80), {name: "grad only"}, side("d", 0.91)}}
	flagOffSides(res)
	if res.accMedian != 0.905 || res.accTol != famAccTolAbs {
		t.Errorf("median %v, tolerance %v; want 0.905 and %v", res.accMedian, res.accTol, famAccTolAbs)
	}
	if !slices.Equal(res.accOff, []string{"c"}) || !res.sides[2].score.off || res.sides[0].score.off {
		t.Errorf("flagged %v, want [c] only", res.accOff)
	}
	if got, want := famAccTol(0.5, 100), 3*math.Sqrt(0.25/100); math.Abs(got-want) > 1e-12 {
		t.Errorf("tolerance at 0.5 over 100 predictions %v, want %v", got, want)
	}
}

// TestFamHeldOutRefusesOtherParameters: the held-out scorer scores a family's parameters, gives
// the same score twice, and refuses a set that misses one of them or names another.
func TestFamHeldOutRefusesOtherParameters(t *testing.T) {
	r := requireXLA(t)
	f := families()[0] // the mlp
	f.batch = 16
	loop, err := newFamLoop(r, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	x, y := newFamBatches(f, 3, f.batch).batch(0, f.batch)
	if _, err := loop.step(x, y); err != nil {
		t.Fatal(err)
	}
	ps, err := ctxParams(loop.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, err := newFamHeldOut(r, f)
	if err != nil {
		t.Fatal(err)
	}
	first, err := h.score(ps)
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.score(ps)
	if err != nil || again != first {
		t.Fatalf("second score %+v (%v), first %+v", again, err, first)
	}
	if first.acc < 0 || first.acc > 1 || !(first.loss > 0) {
		t.Errorf("score %+v: want an accuracy in [0,1] and a positive loss", first)
	}
	var one string
	for kp := range ps {
		one = kp
		break
	}
	fewer := map[string]*tensors.Tensor{}
	for kp, v := range ps {
		if kp != one {
			fewer[kp] = v
		}
	}
	if _, err := h.score(fewer); err == nil {
		t.Errorf("scoring without %q: no error", one)
	}
	fewer["other/weights"] = ps[one]
	if _, err := h.score(fewer); err == nil {
		t.Errorf("scoring with other/weights in place of %q: no error", one)
	}
}
