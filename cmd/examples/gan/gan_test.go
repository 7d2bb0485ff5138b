package gan_test

import (
	"math"
	"testing"

	"github.com/nitro-go/nitro/cmd/examples/gan"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/markers"
)

// samples generates from every batch of a split's noise (BuildData is deterministic in Seed, so
// this is the split the run validates and tests on) and returns the points.
func samples(t *testing.T, n *core.Nitro, e *gan.GAN, split string) [][2]float64 {
	t.Helper()
	d, err := e.BuildData()
	if err != nil {
		t.Fatal(err)
	}
	var pts [][2]float64
	for p, err := range n.PredictAll(d[split]) {
		if err != nil {
			t.Fatal(err)
		}
		x := p["x"].Value().([][]float32)
		for _, row := range x {
			pts = append(pts, [2]float64{float64(row[0]), float64(row[1])})
		}
	}
	return pts
}

// TestGANLearnsTheRing trains the tiny preset in manual mode and measures the generator against
// the target on held-out noise: before training its points sit far from the modes; after, the
// mean distance to the nearest mode is under a third of what it was and under 0.4 (modes on a
// ring of radius 2), most points lie within 3 std of a mode, and at least 6 of the 8 modes hold
// samples. Both losses move, the discriminator tells real from generated, the step compiled once
// (with the eval program: 2 in all), and validation's graph statistics match the host's.
func TestGANLearnsTheRing(t *testing.T) {
	e, err := markers.FromPreset[gan.GAN]("tiny", nil)
	if err != nil {
		t.Fatal(err)
	}
	cache := compilecache.New()
	n, err := core.New(e, core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(cache))
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := gan.Quality(samples(t, n, e, "test"), e.Modes, e.Radius, e.Std)
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	dist, hq, covered := gan.Quality(samples(t, n, e, "test"), e.Modes, e.Radius, e.Std)
	t.Logf("test: mode_dist %.3f -> %.3f, high_quality %.3f, modes covered %d of %d (backend %s)", before, dist, hq, covered, e.Modes, n.Backend().Name)
	if !(dist < 0.4 && dist < before/3) || hq < 0.5 || covered < 6 {
		t.Errorf("generator after %d steps: mode_dist %.3f (before %.3f), high_quality %.3f, modes covered %d: want < 0.4 and < a third, >= 0.5, >= 6",
			n.Step(), dist, before, hq, covered)
	}
	h := n.History()
	for _, name := range []string{"d_loss", "g_loss"} {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, ep := range h {
			v := ep.Train[name]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("epoch %d: %s = %v", ep.Epoch, name, v)
			}
			lo, hi = min(lo, v), max(hi, v)
		}
		t.Logf("%s: epoch means from %.3f to %.3f (first %.3f, last %.3f)", name, lo, hi, h[0].Train[name], h[len(h)-1].Train[name])
		if hi-lo < 0.03 {
			t.Errorf("%s epoch means stay within [%.4f, %.4f]: the loss does not move", name, lo, hi)
		}
	}
	last := h[len(h)-1]
	if last.Train["d_real"] <= last.Train["d_fake"] {
		t.Errorf("last epoch: D(real) %.3f <= D(fake) %.3f: the discriminator does not discriminate", last.Train["d_real"], last.Train["d_fake"])
	}
	if st := cache.Stats(); st.Misses != 2 {
		t.Errorf("compile cache %+v: want 2 misses (the manual step, eval shared with predict)", st)
	}
	vd, vhq, vc := gan.Quality(samples(t, n, e, "val"), e.Modes, e.Radius, e.Std)
	if math.Abs(vd-last.Val["val_mode_dist"]) > 1e-4 || math.Abs(vhq-last.Val["val_high_quality"]) > 1e-9 || float64(vc) != last.Val["val_modes_covered"] {
		t.Errorf("val metrics %v, host Quality of the same points: mode_dist %v, high_quality %v, covered %d", last.Val, vd, vhq, vc)
	}
}
