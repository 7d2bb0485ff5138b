package tabular_test

import (
	"bytes"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/cmd/cli"
	"github.com/nitro-go/nitro/cmd/examples/tabular"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/markers"
)

func init() {
	cli.Register[tabular.Regression]("tabular", "MLP regression on generated tabular data")
}

// newNitro builds the tiny preset with overrides on cache, recording nothing.
func newNitro(t *testing.T, cache *compilecache.Cache, set map[string]any) *core.Nitro {
	t.Helper()
	e, err := markers.FromPreset[tabular.Regression]("tiny", set)
	if err != nil {
		t.Fatal(err)
	}
	n, err := core.New(e, core.WithCache(cache), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithRunDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSweepCompilesNothing sweeps LRScale over 1, 0, 0.5, 2 by SetDevice on one Nitro (plain
// SGD, one epoch each): the programs the first point compiled serve every later one (the cache's
// misses do not grow), and each multiplier acts: at 0 the weights stand still (val_mse exactly
// as before), at 0.5 and 2 they move, each epoch's train loss differing from the others'.
func TestSweepCompilesNothing(t *testing.T) {
	cache := compilecache.New()
	n := newNitro(t, cache, map[string]any{"Momentum": 0.0, "MaxEpochs": 4, "LearningRate": 0.02})
	first, err := tabular.Sweep(n, []float32{1})
	if err != nil {
		t.Fatal(err)
	}
	compiled := cache.Stats().Misses
	if compiled != 3 {
		t.Fatalf("the first point compiled %d programs, want 3 (gradient, optimizer, eval)", compiled)
	}
	rest, err := tabular.Sweep(n, []float32{0, 0.5, 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := cache.Stats().Misses; got != compiled {
		t.Fatalf("the sweep compiled %d more programs after the first point: a Device value moved a cache key", got-compiled)
	}
	pts := append(first, rest...)
	for i, p := range pts {
		t.Logf("LRScale %-4g epoch %d  train_loss %.5f  val_mse %.5f", p.Multiplier, p.Epoch, p.TrainLoss, p.ValMSE)
		if p.Epoch != i+1 {
			t.Fatalf("point %d trained epoch %d, want %d", i, p.Epoch, i+1)
		}
	}
	if pts[1].ValMSE != pts[0].ValMSE {
		t.Errorf("LRScale 0: val_mse %v after an epoch, %v before: the multiplier did not stop the weights", pts[1].ValMSE, pts[0].ValMSE)
	}
	for _, i := range []int{2, 3} {
		if pts[i].ValMSE == pts[i-1].ValMSE {
			t.Errorf("LRScale %g: val_mse unchanged at %v: the weights did not move", pts[i].Multiplier, pts[i].ValMSE)
		}
	}
	seen := map[float64]float32{}
	for _, p := range pts {
		if m, ok := seen[p.TrainLoss]; ok {
			t.Errorf("LRScale %g and %g trained to the same loss %v", m, p.Multiplier, p.TrainLoss)
		}
		seen[p.TrainLoss] = p.Multiplier
	}
	if v, _ := n.DeviceValue("LRScale"); v != float32(2) {
		t.Errorf("LRScale reads %v after the sweep, want 2", v)
	}
}

// TestMultiplierIsTheLearningRate: an epoch of momentum SGD at LRScale 2 and LearningRate 0.01
// ends at the weights of LRScale 1 at 0.02 (to float32 rounding), and far from LRScale 1 at
// 0.01. The three Nitros share one cache: neither the multiplier nor the rate is in a key.
func TestMultiplierIsTheLearningRate(t *testing.T) {
	cache := compilecache.New()
	train := func(scale float32, lr float64) map[string][]float32 {
		n := newNitro(t, cache, map[string]any{"LRScale": scale, "LearningRate": lr, "MaxEpochs": 1})
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		ps, err := n.Parameters()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]float32{}
		for k, v := range ps {
			out[k] = tensors.MustCopyFlatData[float32](v)
		}
		return out
	}
	maxDiff := func(a, b map[string][]float32) float64 {
		d := 0.0
		for k, av := range a {
			for i := range av {
				d = math.Max(d, math.Abs(float64(av[i]-b[k][i])))
			}
		}
		return d
	}
	scaled, faster, base := train(2, 0.01), train(1, 0.02), train(1, 0.01)
	if d := maxDiff(scaled, faster); d > 1e-4 {
		t.Errorf("LRScale 2 at 0.01 and LRScale 1 at 0.02 end %g apart: the multiplier is not a learning-rate multiplier", d)
	}
	if d := maxDiff(scaled, base); d < 1e-2 {
		t.Errorf("LRScale 2 and LRScale 1 at 0.01 end only %g apart: the multiplier did nothing", d)
	}
	if got := cache.Stats().Misses; got != 3 {
		t.Errorf("three trainings compiled %d programs, want 3 (gradient, optimizer, eval): one training's", got)
	}
}

// TestGenerateIsDeterministic: the same seed and stream give the same samples, another seed
// others; the residual y - Target(x) has the standard deviation Noise.
func TestGenerateIsDeterministic(t *testing.T) {
	flat := func(seed, stream uint64) ([]float32, []float32) {
		x, y, err := tabular.Generate(4000, 0.1, seed, stream)
		if err != nil {
			t.Fatal(err)
		}
		return tensors.MustCopyFlatData[float32](x), tensors.MustCopyFlatData[float32](y)
	}
	x1, y1 := flat(7, 1)
	x2, y2 := flat(7, 1)
	x3, _ := flat(8, 1)
	for i := range x1 {
		if x1[i] != x2[i] {
			t.Fatalf("seed 7 gave two different x at %d", i)
		}
	}
	for i := range y1 {
		if y1[i] != y2[i] {
			t.Fatalf("seed 7 gave two different y at %d", i)
		}
	}
	if x1[0] == x3[0] && x1[1] == x3[1] {
		t.Fatal("seeds 7 and 8 gave the same first sample")
	}
	if _, _, err := tabular.Generate(0, 0.1, 1, 1); err == nil {
		t.Error("Generate accepted n = 0")
	}
	var ss float64
	row := make([]float64, tabular.Features)
	for i := range y1 {
		for j := range row {
			row[j] = float64(x1[i*tabular.Features+j])
		}
		r := float64(y1[i]) - tabular.Target(row)
		ss += r * r
	}
	if sd := math.Sqrt(ss / float64(len(y1))); math.Abs(sd-0.1) > 0.01 {
		t.Errorf("residual standard deviation %v, want Noise 0.1", sd)
	}
}

// TestTrainTinyRegression trains the tiny preset end to end through the CLI: the test MSE ends
// far below the 2.45 of predicting the mean, with 3 programs compiled.
func TestTrainTinyRegression(t *testing.T) {
	var out, errs bytes.Buffer
	code := cli.Main([]string{"train", "tabular", "--preset", "tiny", "--run-dir", t.TempDir(), "--no-progress"}, &out, &errs)
	o := out.String()
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs.String(), o)
	}
	for _, w := range []string{"stopped: completed after 3 epochs", "compile cache: 3 misses", "momentum"} {
		if !strings.Contains(o, w) {
			t.Fatalf("output lacks %q:\n%s", w, o)
		}
	}
	m := regexp.MustCompile(`test: test_mae [0-9.]+ test_mse ([0-9.]+)`).FindStringSubmatch(o)
	if m == nil {
		t.Fatalf("no test_mse in:\n%s", o)
	}
	if mse, _ := strconv.ParseFloat(m[1], 64); mse > 0.8 {
		t.Fatalf("tiny preset: test_mse %v, want <= 0.8 (the mean predicts at about 2.45)\n%s", mse, o)
	}
	t.Logf("tiny preset: test_mse %s", m[1])
}

// TestFieldsAreChecked: every out-of-range field is refused at once, by name, before any data is
// generated.
func TestFieldsAreChecked(t *testing.T) {
	var out, errs bytes.Buffer
	code := cli.Main([]string{"train", "tabular", "--no-log", "--no-progress", "--set", "Momentum=1", "--set", "BatchSize=9000", "--set", "Noise=-1", "--set", "Depth=-1"}, &out, &errs)
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for _, w := range []string{"Momentum = 1: want in [0, 1)", "BatchSize = 9000 exceeds TrainSize = 8000", "Noise = -1: want >= 0", "Depth = -1: want >= 0"} {
		if !strings.Contains(errs.String(), w) {
			t.Errorf("stderr %q lacks %q", errs.String(), w)
		}
	}
}
