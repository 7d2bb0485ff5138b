// Package gan is nitro's manual-mode example: a generator and a discriminator (two MLPs, two
// parameter groups, each with its own Adam) trained adversarially on a 2-D mixture of Gaussians,
// Modes of them evenly spaced on a ring of Radius. TrainStep owns the step: the discriminator
// steps on real against generated points, then the generator steps on the non-saturating loss
// through the updated discriminator, its gradient reaching only its own parameters. The
// framework keeps the loop, validation, checkpoints and logging.
//
// Noise rides in the batch (field "z", read by Forward and TrainStep); the data points ("x") only
// TrainStep declares, so only training transfers them. Validation generates from held-out noise
// and reports how close the samples are to the target: mode_dist (mean distance to the nearest
// mode), high_quality (the fraction within 3 Std of one) and modes_covered (modes holding at
// least 1% of the samples within 3 Std).
package gan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
)

// GAN is the experiment. The target's shape (Modes, Radius, Std) is GraphConst because the
// validation metrics compare samples with it in the graph.
type GAN struct {
	Modes    int     `nitro:"graphconst" default:"8" doc:"Gaussian modes of the target, evenly spaced on a ring"`
	Radius   float64 `nitro:"graphconst" default:"2" doc:"radius of the ring of modes"`
	Std      float64 `nitro:"graphconst" default:"0.05" doc:"standard deviation of each mode"`
	Hidden   int     `nitro:"graphconst" default:"128" doc:"hidden width of both networks (two hidden layers each)"`
	NoiseDim int     `default:"2" doc:"generator input noise dimension"`

	GenRate     float64 `default:"0.001" doc:"generator learning rate (Adam)"`
	DiscRate    float64 `default:"0.003" doc:"discriminator learning rate (Adam)"`
	Beta1       float64 `default:"0.5" doc:"Adam beta1 of both networks"`
	Samples     int     `default:"16384" doc:"training points (and noise vectors) per epoch"`
	BatchSize   int     `default:"256" doc:"training batch size"`
	EvalSamples int     `default:"2000" doc:"noise vectors of the val and test splits"`
	MaxEpochs   int     `default:"30" doc:"epochs to train"`
	Seed        int     `default:"42" doc:"seed for initialization and the generated data"`
}

// Presets are named partial configurations. tiny (wider modes, 1152 steps) covers all 8 modes in
// about 20 s on two CPU cores, a third of that compiling the step; the defaults train 1920 steps
// on modes half as wide.
func (GAN) Presets() map[string]map[string]any {
	return map[string]map[string]any{
		"tiny": {"Std": 0.1, "MaxEpochs": 18, "EvalSamples": 1000},
	}
}

func (e *GAN) check() error {
	var bad []string
	need := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	need(e.Modes >= 1, "Modes = %d: want >= 1", e.Modes)
	need(e.Radius > 0 && finite(e.Radius), "Radius = %g: want > 0", e.Radius)
	need(e.Std > 0 && finite(e.Std), "Std = %g: want > 0", e.Std)
	need(e.Hidden >= 1, "Hidden = %d: want >= 1", e.Hidden)
	need(e.NoiseDim >= 1, "NoiseDim = %d: want >= 1", e.NoiseDim)
	need(e.GenRate > 0 && finite(e.GenRate), "GenRate = %g: want > 0", e.GenRate)
	need(e.DiscRate > 0 && finite(e.DiscRate), "DiscRate = %g: want > 0", e.DiscRate)
	need(e.Beta1 >= 0 && e.Beta1 < 1, "Beta1 = %g: want 0 <= Beta1 < 1", e.Beta1)
	need(e.BatchSize >= 1 && e.Samples >= e.BatchSize, "BatchSize = %d, Samples = %d: want 1 <= BatchSize <= Samples", e.BatchSize, e.Samples)
	need(e.EvalSamples >= 1, "EvalSamples = %d: want >= 1", e.EvalSamples)
	need(e.MaxEpochs >= 0, "MaxEpochs = %d: want >= 0", e.MaxEpochs)
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}

// BuildModel checks the configuration; Forward and TrainStep create the variables.
func (e *GAN) BuildModel(ctx *context.Context) error { return e.check() }

// ModeCenters are the target's modes, evenly spaced on the ring, starting at angle 0.
func ModeCenters(modes int, radius float64) [][2]float64 {
	out := make([][2]float64, modes)
	for k := range out {
		a := 2 * math.Pi * float64(k) / float64(modes)
		out[k] = [2]float64{radius * math.Cos(a), radius * math.Sin(a)}
	}
	return out
}

// BuildData draws the training points and noise, and the val and test noise, from Seed.
func (e *GAN) BuildData() (prefetch.Data, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(uint64(e.Seed), 0x6a4))
	centers := ModeCenters(e.Modes, e.Radius)
	x := make([]float32, 2*e.Samples)
	for i := 0; i < e.Samples; i++ {
		c := centers[r.IntN(e.Modes)]
		x[2*i] = float32(c[0] + e.Std*r.NormFloat64())
		x[2*i+1] = float32(c[1] + e.Std*r.NormFloat64())
	}
	noise := func(n int) *tensors.Tensor {
		z := make([]float32, n*e.NoiseDim)
		for i := range z {
			z[i] = float32(r.NormFloat64())
		}
		return tensors.FromFlatDataAndDimensions(z, n, e.NoiseDim)
	}
	train, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{
		"x": tensors.FromFlatDataAndDimensions(x, e.Samples, 2), "z": noise(e.Samples),
	}, e.BatchSize, prefetch.ArrayOptions{Shuffle: true, Seed: uint64(e.Seed), DropPartial: true})
	if err != nil {
		return nil, err
	}
	d := prefetch.Data{"train": train}
	for _, split := range []string{"val", "test"} {
		if d[split], err = prefetch.NewArrayBatches(map[string]*tensors.Tensor{"z": noise(e.EvalSamples)}, 500, prefetch.ArrayOptions{}); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Noise is what Forward reads; Batch what TrainStep reads.
type Noise struct {
	Z *graph.Node `batch:"z"`
}
type Batch struct {
	X *graph.Node `batch:"x"`
	Z *graph.Node `batch:"z"`
}

// None is the batch of a hook that reads only Forward's outputs.
type None struct{}

// ParamGroup makes each network a group: "gen" and "disc", the first scope of its keypath.
func (*GAN) ParamGroup(keypath []string) string { return keypath[0] }

// SetupOptimizers gives each network its own Adam, at its own rate.
func (e *GAN) SetupOptimizers() (map[string]optimizers.Rule, error) {
	rule := func(eta float64) optimizers.Rule {
		r := optimizers.NewAdam()
		r.Eta, r.Beta1 = eta, e.Beta1
		return r
	}
	return map[string]optimizers.Rule{"gen": rule(e.GenRate), "disc": rule(e.DiscRate)}, nil
}

// Checkpointer keeps the 3 epochs whose samples sit closest to the modes.
func (e *GAN) Checkpointer() checkpoint.Checkpointer {
	c, err := checkpoint.NewTopK(3, "val_mode_dist", "min", "", nil)
	if err != nil {
		panic(err) // constant arguments
	}
	return c
}

func (e *GAN) generate(ctx *context.Context, z *graph.Node) *graph.Node {
	ctx = ctx.In("gen")
	h := activations.Relu(layers.Dense(ctx.In("hidden_0"), z, true, e.Hidden))
	h = activations.Relu(layers.Dense(ctx.In("hidden_1"), h, true, e.Hidden))
	return layers.Dense(ctx.In("output"), h, true, 2)
}

// discriminate returns the discriminator's logit per point, [B].
func (e *GAN) discriminate(ctx *context.Context, x *graph.Node) *graph.Node {
	ctx = ctx.In("disc")
	h := activations.LeakyRelu(layers.Dense(ctx.In("hidden_0"), x, true, e.Hidden))
	h = activations.LeakyRelu(layers.Dense(ctx.In("hidden_1"), h, true, e.Hidden))
	return graph.Reshape(layers.Dense(ctx.In("output"), h, true, 1), -1)
}

// Forward generates one point per noise vector: predict and validation sample through it.
func (e *GAN) Forward(ctx *context.Context, in Noise) core.Outputs {
	return core.Outputs{"x": e.generate(ctx, in.Z)}
}

// TrainStep is one adversarial step. The discriminator learns real -> 1, generated -> 0 (logistic
// loss), then the generator learns to make the updated discriminator say 1 (non-saturating).
func (e *GAN) TrainStep(s hooks.ManualStep, in Batch) hooks.StepResult {
	fake := e.Forward(s.Ctx(), Noise{Z: in.Z})["x"]
	var dReal, dFake *graph.Node
	dLoss, dGrads := s.Backward(func(ctx *context.Context) *graph.Node {
		dReal, dFake = e.discriminate(ctx, in.X), e.discriminate(ctx, fake)
		return graph.Add(graph.ReduceAllMean(graph.Softplus(graph.Neg(dReal))), graph.ReduceAllMean(graph.Softplus(dFake)))
	}, "disc")
	s.StepOptimizer("disc", dGrads)
	gLoss, gGrads := s.Backward(func(ctx *context.Context) *graph.Node {
		return graph.ReduceAllMean(graph.Softplus(graph.Neg(e.discriminate(ctx, e.generate(ctx, in.Z)))))
	}, "gen")
	s.StepOptimizer("gen", gGrads)
	return hooks.StepResult{Loss: graph.Add(dLoss, gLoss), Stats: map[string]*graph.Node{
		"d_loss": dLoss, "g_loss": gLoss,
		"d_real": graph.ReduceAllMean(graph.Sigmoid(dReal)), "d_fake": graph.ReduceAllMean(graph.Sigmoid(dFake)),
	}}
}

// Metrics compares the generated points with the target: each point's distance to its nearest
// mode, whether that is within 3 Std, and per mode how many such points it holds.
func (e *GAN) Metrics(out core.Outputs, _ None) map[string]hooks.Metric {
	x := out["x"]
	g := x.Graph()
	centers := ModeCenters(e.Modes, e.Radius)
	flat := make([]float32, 0, 2*len(centers))
	for _, c := range centers {
		flat = append(flat, float32(c[0]), float32(c[1]))
	}
	mu := graph.Const(g, tensors.FromFlatDataAndDimensions(flat, 1, e.Modes, 2))
	diff := graph.Sub(graph.ExpandAxes(x, 1), mu)                       // [B, K, 2]
	dist := graph.Sqrt(graph.ReduceSum(graph.Mul(diff, diff), -1))      // [B, K]
	nearest := graph.ReduceMin(dist, -1)                                // [B]
	hit := graph.LessThan(nearest, graph.Scalar(g, x.DType(), 3*e.Std)) // [B]
	count := graph.Scalar(g, dtypes.Float32, float64(x.Shape().Dimensions[0]))
	f32 := func(b *graph.Node) *graph.Node { return graph.ConvertDType(b, dtypes.Float32) }
	m := map[string]hooks.Metric{
		"mode_dist":    {Sum: graph.ReduceAllSum(nearest), Count: count},
		"high_quality": {Sum: graph.ReduceAllSum(f32(hit)), Count: count},
	}
	// Per mode, how many points lie within 3 Std of it: one array summed over the split, with no
	// count, which FinalizeMetrics turns into modes_covered.
	which := graph.ArgMin(dist, -1, dtypes.Int32)                                                      // [B]
	modes := graph.Iota(g, shapes.Make(dtypes.Int32, 1, e.Modes), 1)                                   // [1, K]
	at := graph.LogicalAnd(graph.ExpandAxes(hit, -1), graph.Equal(graph.ExpandAxes(which, -1), modes)) // [B, K]
	m["near"] = hooks.Metric{Sum: graph.ReduceSum(f32(at), 0)}
	return m
}

// FinalizeMetrics turns the per-mode counts into modes_covered: the modes holding at least 1% of
// the split's samples within 3 Std.
func (e *GAN) FinalizeMetrics(acc metrics.Result, split string) map[string]float64 {
	covered := 0
	for _, v := range acc.Arrays["near"].Data {
		if v >= math.Max(1, float64(e.EvalSamples)/100) {
			covered++
		}
	}
	return map[string]float64{
		"mode_dist":     acc.Scalars["mode_dist"],
		"high_quality":  acc.Scalars["high_quality"],
		"modes_covered": float64(covered),
	}
}

// FinalizedMetricNames is what FinalizeMetrics returns, so the checkpoint and early-stopping
// metric names are checked at setup.
func (e *GAN) FinalizedMetricNames() []string {
	return []string{"mode_dist", "high_quality", "modes_covered"}
}

// Quality measures generated points against the target on the host: the mean distance to the
// nearest mode, the fraction within 3 std of one, and the modes holding at least 1% of the
// points within 3 std. Validation reports the same statistics from the graph.
func Quality(points [][2]float64, modes int, radius, std float64) (meanDist, highQuality float64, covered int) {
	centers := ModeCenters(modes, radius)
	near := make([]int, modes)
	for _, p := range points {
		best, bk := math.Inf(1), 0
		for k, c := range centers {
			if d := math.Hypot(p[0]-c[0], p[1]-c[1]); d < best {
				best, bk = d, k
			}
		}
		meanDist += best
		if best < 3*std {
			highQuality++
			near[bk]++
		}
	}
	for _, c := range near {
		if float64(c) >= math.Max(1, float64(len(points))/100) {
			covered++
		}
	}
	n := float64(max(len(points), 1))
	return meanDist / n, highQuality / n, covered
}
