package sweep

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// runSequential asks s for n trials one at a time, each completed with f's value before the next,
// and returns the history.
func runSequential(t *testing.T, s Sampler, space Space, n int, f func(map[string]float64) float64) []Trial {
	t.Helper()
	var hist []Trial
	for i := range n {
		p, err := s.Sample(space, hist, i)
		if err != nil {
			t.Fatalf("trial %d: %v", i, err)
		}
		if err := space.Contains(p); err != nil {
			t.Fatalf("trial %d proposed outside the space: %v", i, err)
		}
		hist = append(hist, Trial{Number: i, Params: p, State: Complete, Value: f(p), HasValue: true})
	}
	return hist
}

func bestValue(hist []Trial, maximize bool) float64 {
	best := hist[0].Value
	for _, tr := range hist {
		if (!maximize && tr.Value < best) || (maximize && tr.Value > best) {
			best = tr.Value
		}
	}
	return best
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func TestTPEBeatsRandomOnQuadratic(t *testing.T) {
	space := Space{mustParse(t, "X=uniform:0,1")}
	quad := func(p map[string]float64) float64 { return (p["X"] - 0.3) * (p["X"] - 0.3) }
	var tpeBest, randBest float64
	for seed := range int64(10) {
		th := runSequential(t, NewTPE(seed, TPEOptions{}), space, 60, quad)
		rh := runSequential(t, NewRandom(seed), space, 60, quad)
		tpeBest += math.Sqrt(bestValue(th, false)) / 10
		randBest += math.Sqrt(bestValue(rh, false)) / 10
		var last []float64
		for _, tr := range th[40:] {
			last = append(last, tr.Params["X"])
		}
		if m := median(last); math.Abs(m-0.3) > 0.1 {
			t.Errorf("seed %d: median of TPE's last 20 proposals %.3f, not within 0.1 of 0.3", seed, m)
		}
		// Startup is random's: the first 10 trials are identical.
		for i := range 10 {
			if th[i].Params["X"] != rh[i].Params["X"] {
				t.Fatalf("seed %d trial %d: TPE startup %v, random %v", seed, i, th[i].Params["X"], rh[i].Params["X"])
			}
		}
	}
	t.Logf("mean distance of the best to 0.3 after 60 trials: TPE %.5f, random %.5f", tpeBest, randBest)
	if tpeBest >= randBest {
		t.Errorf("TPE's best (mean distance %.5f) is no closer than random's (%.5f)", tpeBest, randBest)
	}
}

func TestTPEMaximize(t *testing.T) {
	space := Space{mustParse(t, "X=uniform:-5,5")}
	f := func(p map[string]float64) float64 { return -math.Abs(p["X"] - 2) }
	h := runSequential(t, NewTPE(1, TPEOptions{Maximize: true}), space, 60, f)
	var last []float64
	for _, tr := range h[40:] {
		last = append(last, tr.Params["X"])
	}
	if m := median(last); math.Abs(m-2) > 0.5 {
		t.Errorf("maximizing: median of the last 20 proposals %.3f, want near 2", m)
	}
	// The same objective told the wrong direction drifts away from 2.
	h = runSequential(t, NewTPE(1, TPEOptions{}), space, 60, f)
	last = last[:0]
	for _, tr := range h[40:] {
		last = append(last, tr.Params["X"])
	}
	if m := median(last); math.Abs(m-2) < 2 {
		t.Errorf("minimizing -|x-2|: median of the last 20 proposals %.3f, want far from 2", m)
	}
}

func TestTPEFavorsGoodCategory(t *testing.T) {
	space := Space{
		mustParse(t, "LearningRate=loguniform:1e-5,1e-1"),
		mustParse(t, "Act=choice:relu,gelu,silu,tanh"),
		mustParse(t, "Layers=int:1,8"),
	}
	f := func(p map[string]float64) float64 {
		v := math.Pow(math.Log10(p["LearningRate"])+3, 2) + math.Abs(p["Layers"]-6)/4
		if p["Act"] != 1 { // gelu
			v += 2
		}
		return v
	}
	for seed := range int64(3) {
		h := runSequential(t, NewTPE(seed, TPEOptions{}), space, 60, f)
		var gelu int
		var lrs []float64
		for _, tr := range h[30:] {
			if tr.Params["Act"] == 1 {
				gelu++
			}
			lrs = append(lrs, math.Log10(tr.Params["LearningRate"]))
			if l := tr.Params["Layers"]; l != math.Trunc(l) {
				t.Fatalf("Layers=%v is not an integer", l)
			}
		}
		if gelu < 20 { // random picks it about 7 times in 30
			t.Errorf("seed %d: TPE chose gelu in %d of its last 30 trials, want most", seed, gelu)
		}
		if m := median(lrs); math.Abs(m+3) > 0.75 {
			t.Errorf("seed %d: median log10 LearningRate of the last 30 trials %.2f, want near -3", seed, m)
		}
	}
}

func TestTPEIsPure(t *testing.T) {
	space := Space{mustParse(t, "X=uniform:0,1"), mustParse(t, "C=choice:a,b,c"), mustParse(t, "N=int:0,10")}
	hist := runSequential(t, NewTPE(5, TPEOptions{}), space, 25, func(p map[string]float64) float64 {
		return p["X"] + p["C"] + p["N"]
	})
	a, _ := NewTPE(5, TPEOptions{}).Sample(space, hist, 25)
	shuffled := slices.Clone(hist)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	// Running and failed trials are not observations.
	shuffled = append(shuffled, Trial{Number: 26, State: Running, Params: map[string]float64{"X": 0.9, "C": 2, "N": 10}},
		Trial{Number: 27, State: Fail, Params: map[string]float64{"X": 0.9, "C": 2, "N": 10}})
	b, _ := NewTPE(5, TPEOptions{}).Sample(space, shuffled, 25)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("same history in another order gave %v, then %v", a, b)
	}
	c, _ := NewTPE(6, TPEOptions{}).Sample(space, hist, 25)
	if reflect.DeepEqual(a, c) {
		t.Errorf("seeds 5 and 6 proposed the same %v", a)
	}
}

func TestTPEStartupCountsObservations(t *testing.T) {
	space := Space{mustParse(t, "X=uniform:0,1")}
	// Nine complete trials and many running ones: still random.
	var hist []Trial
	for i := range 9 {
		hist = append(hist, Trial{Number: i, State: Complete, HasValue: true, Value: float64(i), Params: map[string]float64{"X": float64(i) / 10}})
	}
	for i := 9; i < 30; i++ {
		hist = append(hist, Trial{Number: i, State: Running, Params: map[string]float64{"X": 0.5}})
	}
	got, _ := NewTPE(3, TPEOptions{}).Sample(space, hist, 30)
	want, _ := NewRandom(3).Sample(space, nil, 30)
	if got["X"] != want["X"] {
		t.Errorf("with 9 observations TPE proposed %v, random %v", got["X"], want["X"])
	}
	// A tenth (pruned) one ends the startup.
	hist = append(hist, Trial{Number: 30, State: Pruned, Intermediate: map[int]float64{1: 5}, Params: map[string]float64{"X": 0.95}})
	got, _ = NewTPE(3, TPEOptions{}).Sample(space, hist, 31)
	want, _ = NewRandom(3).Sample(space, nil, 31)
	if got["X"] == want["X"] {
		t.Errorf("with 10 observations TPE still proposed random's %v", got["X"])
	}
	// Startup: 3 takes over after three.
	got, _ = NewTPE(3, TPEOptions{Startup: 3}).Sample(space, hist[:3], 3)
	want, _ = NewRandom(3).Sample(space, nil, 3)
	if got["X"] == want["X"] {
		t.Errorf("Startup 3: TPE proposed random's %v after three trials", got["X"])
	}
}

func TestSplitTrials(t *testing.T) {
	var hist []Trial
	// 15 complete trials valued 15-i (trial 14 best when minimizing), 5 pruned.
	for i := range 15 {
		hist = append(hist, Trial{Number: i, State: Complete, HasValue: true, Value: float64(15 - i)})
	}
	hist = append(hist,
		Trial{Number: 15, State: Pruned, Intermediate: map[int]float64{1: 0.5, 3: 0.1}},
		Trial{Number: 16, State: Pruned, Intermediate: map[int]float64{1: 0.01}},
		Trial{Number: 17, State: Pruned},
		Trial{Number: 18, State: Pruned, Intermediate: map[int]float64{3: math.NaN()}},
		Trial{Number: 19, State: Pruned, Intermediate: map[int]float64{3: 0.2}},
		Trial{Number: 20, State: Complete}, // no value: not an observation
	)
	numbers := func(ts []Trial) []int {
		var n []int
		for _, t := range ts {
			n = append(n, t.Number)
		}
		return n
	}
	below, above := splitTrials(hist, false)
	// n = 20: gamma = 2, the two best complete trials.
	if got := numbers(below); !reflect.DeepEqual(got, []int{13, 14}) {
		t.Errorf("minimize: below %v, want [13 14]", got)
	}
	if len(above) != 18 {
		t.Errorf("minimize: %d above, want 18", len(above))
	}
	below, _ = splitTrials(hist, true)
	if got := numbers(below); !reflect.DeepEqual(got, []int{0, 1}) {
		t.Errorf("maximize: below %v, want [0 1]", got)
	}
	// One complete trial among 20 pruned ones: below takes the complete one, then the pruned
	// that got furthest with the best last value.
	only := []Trial{{Number: 0, State: Complete, HasValue: true, Value: 100}}
	only = append(only, hist[15:20]...)
	for i := 21; i < 35; i++ { // 20 observations: gamma 2
		only = append(only, Trial{Number: i, State: Pruned, Intermediate: map[int]float64{1: 0}})
	}
	below, _ = splitTrials(only, false)
	if got := numbers(below); !reflect.DeepEqual(got, []int{0, 15}) {
		t.Errorf("mostly pruned: below %v, want [0 15]", got)
	}
	below, _ = splitTrials(only, true)
	if got := numbers(below); !reflect.DeepEqual(got, []int{0, 19}) {
		t.Errorf("mostly pruned, maximize: below %v, want [0 19]", got)
	}
}

func TestDefaultWeights(t *testing.T) {
	if w := defaultWeights(3); !reflect.DeepEqual(w, []float64{1, 1, 1}) {
		t.Errorf("defaultWeights(3) = %v", w)
	}
	w := defaultWeights(30)
	if w[0] != 1.0/30 || w[4] != 1 || w[29] != 1 || !(w[1] > w[0] && w[3] > w[2]) {
		t.Errorf("defaultWeights(30) = %v", w)
	}
	if w := defaultWeights(26); w[0] != 1.0/26 || w[1] != 1 {
		t.Errorf("defaultWeights(26) = %v", w)
	}
}

func TestLogGaussMass(t *testing.T) {
	cases := []struct{ a, b, want float64 }{
		{-1, 1, math.Log(0.6826894921370859)},
		{0, math.Inf(1), math.Log(0.5)},
		{2, 3, math.Log(0.021400233916549105)},
		{-3, -2, math.Log(0.021400233916549105)},
	}
	for _, c := range cases {
		if got := logGaussMass(c.a, c.b); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("logGaussMass(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
	// Far in the tail it stays finite and decreasing.
	x, y := logGaussMass(40, 41), logGaussMass(50, 51)
	if math.IsInf(x, 0) || math.IsNaN(x) || !(y < x) || math.Abs(x-(-804.6)) > 1 {
		t.Errorf("tail masses %v, %v", x, y)
	}
}

func TestTruncNormalInBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, ab := range [][2]float64{{-1, 1}, {0, 100}, {-100, 0}, {2, 3}, {-0.01, 0.01}, {-50, 40}} {
		var sum float64
		for range 2000 {
			x := truncNormal(rng, ab[0], ab[1])
			if x < ab[0] || x > ab[1] || math.IsNaN(x) {
				t.Fatalf("truncNormal(%v) = %v", ab, x)
			}
			sum += x
		}
		if ab == [2]float64{0, 100} && math.Abs(sum/2000-0.7979) > 0.05 { // the half-normal's mean
			t.Errorf("half-normal mean %v", sum/2000)
		}
	}
}

// TestTPEStaysInSpace feeds TPE awkward histories (pruned trials with and without reports, NaN
// and infinite values, values from another space, degenerate ranges) and checks every proposal
// fits the space.
func TestTPEStaysInSpace(t *testing.T) {
	space := Space{
		mustParse(t, "A=uniform:-1,1"),
		mustParse(t, "B=loguniform:1e-8,1e8"),
		mustParse(t, "C=int:-2,2"),
		mustParse(t, "D=choice:x,y,z"),
		mustParse(t, "E=uniform:0.5,0.5"),
		mustParse(t, "F=int:7,7"),
		mustParse(t, "G=choice:only"),
	}
	rng := rand.New(rand.NewPCG(4, 4))
	var hist []Trial
	for i := range 80 {
		for _, maximize := range []bool{false, true} {
			p, err := NewTPE(int64(i%3), TPEOptions{Maximize: maximize, Startup: 5, Candidates: 7}).Sample(space, hist, i)
			if err != nil {
				t.Fatal(err)
			}
			if err := space.Contains(p); err != nil {
				t.Fatalf("trial %d: %v", i, err)
			}
		}
		p, _ := NewRandom(int64(i)).Sample(space, nil, i)
		tr := Trial{Number: i, Params: p}
		switch i % 6 {
		case 0, 1, 2:
			tr.State, tr.HasValue, tr.Value = Complete, true, rng.NormFloat64()
		case 3:
			tr.State, tr.Intermediate = Pruned, map[int]float64{1: rng.NormFloat64(), rng.IntN(5) + 1: math.NaN()}
		case 4:
			tr.State, tr.HasValue, tr.Value = Complete, true, math.Inf(1-2*(i%2))
		case 5:
			tr.State, tr.HasValue, tr.Value = Complete, true, 0
			tr.Params = map[string]float64{"A": 7, "C": 0.5, "D": 9} // not this space's
		}
		hist = append(hist, tr)
	}
}
