package sweep

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// reported builds a history of trials from their intermediate values, numbered from 0.
func reported(curves ...map[int]float64) []Trial {
	var h []Trial
	for i, c := range curves {
		h = append(h, Trial{Number: i, State: Running, Intermediate: c})
	}
	return h
}

func TestASHARungs(t *testing.T) {
	if got := (ASHA{}).Rungs(100); !reflect.DeepEqual(got, []int{1, 3, 9, 27, 81}) {
		t.Errorf("default rungs %v", got)
	}
	if got := (ASHA{MinResource: 2, Reduction: 2, MinEarlyStoppingRate: 1}).Rungs(40); !reflect.DeepEqual(got, []int{4, 8, 16, 32}) {
		t.Errorf("rungs %v", got)
	}
	if got := (ASHA{MinResource: 1000}).Rungs(999); len(got) != 0 {
		t.Errorf("rungs below the first %v", got)
	}
	if got := (ASHA{MinResource: 1 << 60, MinEarlyStoppingRate: 5}).Rungs(math.MaxInt); len(got) != 0 {
		t.Errorf("overflowing rungs %v", got)
	}
}

func TestASHACheck(t *testing.T) {
	if err := (ASHA{}).Check(); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		a    ASHA
		want string
	}{
		{ASHA{Reduction: 1}, "Reduction 1"},
		{ASHA{Reduction: -2}, "Reduction -2"},
		{ASHA{MinResource: -1}, "MinResource -1"},
		{ASHA{MinEarlyStoppingRate: -1}, "MinEarlyStoppingRate -1"},
	} {
		if err := c.a.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.a, err)
		}
		// Invalid settings never prune a finite value (and never loop).
		h := reported(map[int]float64{1: 0, 3: 0, 9: 0})
		if c.a.Prune(h, 1, 9, 100, false) {
			t.Errorf("%+v pruned", c.a)
		}
	}
}

func TestASHAPromotionAtRung(t *testing.T) {
	a := ASHA{} // rungs 1, 3, 9
	// Three others at rung 1: n = 4, floor(4/3) = 1, only the best goes on.
	h := reported(map[int]float64{1: 0.1}, map[int]float64{1: 0.2}, map[int]float64{1: 0.3})
	cases := []struct {
		value    float64
		maximize bool
		prune    bool
	}{
		{0.05, false, false},
		{0.1, false, false}, // tie with the best passes
		{0.15, false, true},
		{0.35, true, false},
		{0.3, true, false}, // tie, maximizing
		{0.25, true, true},
	}
	for _, c := range cases {
		if got := a.Prune(h, 3, 1, c.value, c.maximize); got != c.prune {
			t.Errorf("value %v maximize %v: prune %v, want %v", c.value, c.maximize, got, c.prune)
		}
	}
	// Six at rung 3 (five others): floor(6/3) = 2 go on.
	h = reported(
		map[int]float64{1: 0, 3: 0.1}, map[int]float64{1: 0, 3: 0.2}, map[int]float64{1: 0, 3: 0.3},
		map[int]float64{1: 0, 3: 0.4}, map[int]float64{1: 0, 3: 0.5},
		map[int]float64{1: 0, 2: 9}, // the trial judged: it crossed rung 1 earlier
	)
	for _, c := range []struct {
		value    float64
		maximize bool
		prune    bool
	}{
		{0.15, false, false}, {0.2, false, false}, {0.25, false, true},
		{0.45, true, false}, {0.4, true, false}, {0.35, true, true},
	} {
		if got := a.Prune(h, 5, 3, c.value, c.maximize); got != c.prune {
			t.Errorf("rung 3: value %v maximize %v: prune %v, want %v", c.value, c.maximize, got, c.prune)
		}
	}
	// Ties: three equal values at a rung of 3 all pass (within floor(3/3) = 1 counting ties).
	h = reported(map[int]float64{1: 0.5}, map[int]float64{1: 0.5})
	if a.Prune(h, 2, 1, 0.5, false) || a.Prune(h, 2, 1, 0.5, true) {
		t.Error("a tie with the best was pruned")
	}
}

func TestASHAAloneAndPairs(t *testing.T) {
	a := ASHA{}
	if a.Prune(nil, 0, 1, 1e9, false) {
		t.Error("a trial alone at a rung was pruned")
	}
	h := reported(map[int]float64{1: 1})
	if !a.Prune(h, 1, 1, 2, false) {
		t.Error("the worse of two at a rung went on (only the best may while n < Reduction)")
	}
	if a.Prune(h, 1, 1, 0.5, false) {
		t.Error("the better of two was pruned")
	}
	// A competitor that has not reached the rung does not count.
	h = reported(map[int]float64{1: 0.1, 2: 0.1}, map[int]float64{1: 0.1})
	if a.Prune(h, 1, 3, 5, false) {
		t.Error("pruned at rung 3 though no other trial reached it")
	}
}

func TestASHAOnlyAtRungs(t *testing.T) {
	a := ASHA{}
	h := reported(map[int]float64{1: 0, 2: 0, 3: 0, 4: 0}, map[int]float64{1: 0})
	// Trial 1 reports a terrible value at step 2: between rungs 1 and 3, it goes on.
	if a.Prune(h, 1, 2, 100, false) {
		t.Error("pruned between rungs")
	}
	// Step 1 again after a resume: rung 1 is judged anew with the new value.
	if !a.Prune(h, 1, 1, 100, false) {
		t.Error("a re-report at rung 1 was not judged")
	}
	// Trial 1 has crossed rung 1; a later report that does not reach rung 3 is not judged.
	h[1].Intermediate = map[int]float64{1: 0, 2: 100}
	if a.Prune(h, 1, 2, 100, false) {
		t.Error("pruned between rungs after crossing one")
	}
	// Step 3 reaches rung 3: trial 0 has 0 there, so 100 is pruned.
	if !a.Prune(h, 1, 3, 100, false) {
		t.Error("not pruned at rung 3")
	}
	// NaN is pruned anywhere, and is no competitor.
	if !a.Prune(h, 1, 2, math.NaN(), false) {
		t.Error("NaN between rungs went on")
	}
	h = reported(map[int]float64{1: math.NaN()}, map[int]float64{1: math.NaN()})
	if a.Prune(h, 2, 1, 7, false) {
		t.Error("a finite value lost to NaN competitors")
	}
}

func TestASHARungValueIsFirstStepAtOrPast(t *testing.T) {
	a := ASHA{}
	// Trial 0 validates at steps 2, 4, 10: its rung-1 value is its step-2 value (0.5), its
	// rung-3 value its step-4 value (0.1), not the step-2 one, its rung-9 value the step-10 one.
	h := reported(map[int]float64{2: 0.5, 4: 0.1, 10: 0.0}, map[int]float64{})
	if a.Prune(h, 1, 1, 0.4, false) {
		t.Error("0.4 lost at rung 1 to trial 0's step-2 value 0.5")
	}
	if !a.Prune(h, 1, 1, 0.6, false) {
		t.Error("0.6 beat trial 0's step-2 value 0.5")
	}
	h[1].Intermediate = map[int]float64{1: 0.4}
	if !a.Prune(h, 1, 3, 0.2, false) {
		t.Error("0.2 at rung 3 beat trial 0's step-4 value 0.1")
	}
	// A first report at step 10 is judged at rungs 1, 3 and 9 with one value: trial 0 has 0.5,
	// 0.1 and 0.0 there, so 0.05 passes rungs 1 and 3 but not 9.
	h[1].Intermediate = nil
	if !a.Prune(h, 1, 10, 0.05, false) {
		t.Error("0.05 passed rung 9 against 0.0")
	}
	if a.Prune(h, 1, 10, -1, false) {
		t.Error("-1 was pruned crossing three rungs")
	}
}

func TestASHAMinEarlyStoppingRate(t *testing.T) {
	a := ASHA{MinResource: 2, Reduction: 2, MinEarlyStoppingRate: 1} // rungs 4, 8, ...
	h := reported(map[int]float64{2: 0, 4: 0, 8: 0}, map[int]float64{})
	if a.Prune(h, 1, 2, 5, false) || a.Prune(h, 1, 3, 5, false) {
		t.Error("pruned before the first rung (4)")
	}
	if !a.Prune(h, 1, 4, 5, false) {
		t.Error("not pruned at rung 4")
	}
}

// TestASHASimulated runs 27 trials three at a time, each reporting one epoch per tick for up to
// 27 epochs, over curves q + c/epoch, and checks who ASHA stops where.
func TestASHASimulated(t *testing.T) {
	const trials, epochs, workers = 27, 27, 3
	rng := rand.New(rand.NewPCG(9, 9))
	q := rng.Perm(trials)
	c := make([]float64, trials)
	for i := range c {
		c[i] = 0.5 + rng.Float64()
	}
	best, worst := -1, -1
	for i := range q {
		if q[i] == 0 {
			best = i
		}
		if q[i] == trials-1 {
			worst = i
		}
	}
	// The best is best at every epoch, the worst worst; put the worst after the first three, so
	// it meets competitors at rung 1.
	c[best], c[worst] = 0.5, 1.5
	if worst < workers {
		q[worst], q[workers+5] = q[workers+5], q[worst]
		c[worst], c[workers+5] = c[workers+5], c[worst]
		worst = workers + 5
	}
	curve := func(i, e int) float64 { return float64(q[i])/trials + c[i]/float64(e) }

	for _, maximize := range []bool{false, true} {
		sign := 1.0
		if maximize {
			sign = -1
		}
		var a ASHA
		hist := make([]Trial, 0, trials)
		running := map[int]int{} // trial → last epoch
		next, spent := 0, 0
		for len(running) > 0 || next < trials {
			for len(running) < workers && next < trials {
				hist = append(hist, Trial{Number: next, State: Running, Intermediate: map[int]float64{}})
				running[next] = 0
				next++
			}
			for _, i := range sortedKeys(running) {
				e := running[i] + 1
				v := sign * curve(i, e)
				prune := a.Prune(hist, i, e, v, maximize)
				hist[i].Intermediate[e] = v
				spent++
				switch {
				case prune:
					hist[i].State = Pruned
					delete(running, i)
				case e == epochs:
					hist[i].State = Complete
					delete(running, i)
				default:
					running[i] = e
				}
			}
		}
		last := func(i int) int { return len(hist[i].Intermediate) }
		if last(worst) != 1 {
			t.Errorf("maximize %v: the worst trial (%d) ran %d epochs, want pruned at rung 1", maximize, worst, last(worst))
		}
		if hist[best].State != Complete || last(best) != epochs {
			t.Errorf("maximize %v: the best trial (%d) stopped after %d epochs (%s)", maximize, best, last(best), hist[best].State)
		}
		var complete int
		for i := range hist {
			if hist[i].State == Complete {
				complete++
			}
		}
		if complete > trials/3 || spent > trials*epochs/3 {
			t.Errorf("maximize %v: %d trials completed, %d of %d epochs spent: ASHA hardly pruned", maximize, complete, spent, trials*epochs)
		}
		t.Logf("maximize %v: %d completed, %d of %d epochs", maximize, complete, spent, trials*epochs)
	}
}

func sortedKeys(m map[int]int) []int {
	var k []int
	for i := range m {
		k = append(k, i)
	}
	for i := 1; i < len(k); i++ {
		for j := i; j > 0 && k[j] < k[j-1]; j-- {
			k[j], k[j-1] = k[j-1], k[j]
		}
	}
	return k
}
