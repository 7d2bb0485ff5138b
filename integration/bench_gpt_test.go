package integration_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/cmd/examples/gpt"
	"github.com/nitro-go/nitro/core"
	nopt "github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/roofline"
	"github.com/nitro-go/nitro/schedules"
)

// The GPT families of BenchmarkFamilies: cmd/examples/gpt's model and optimizer (AdamW decaying
// the weight matrices only, the gradients clipped to global norm 1, WarmupCosine), trained on
// byte rows of a constant stride, on every side. They are picked by name only
// ($NITRO_BENCH_FAMILIES=gpt,gpt2@1) or by BenchmarkFamilies' own default; selectFamilies("")
// stays the three families other benchmarks iterate over.
//
//   - gpt: the example's small preset (a CPU-sized shape: 4 layers, 4 heads, width 128,
//     context 64) at its batch, 12.
//   - gpt2: GPT-2 small's shape (12 layers, 12 heads, width 768, context 1024; bytes, so a
//     256-entry embedding) at batch 1: a step takes seconds on two cores, so a repeat is 2 steps (one timed).
type gptFamily struct {
	layers, heads, dim, context int
	beta2, lambda, clip, warmup float64
}

var gptShapes = map[string]gptFamily{
	"gpt":  {layers: 4, heads: 4, dim: 128, context: 64, beta2: 0.99, lambda: 0.1, clip: 1, warmup: 0.05},
	"gpt2": {layers: 12, heads: 12, dim: 768, context: 1024, beta2: 0.95, lambda: 0.1, clip: 1, warmup: 0.05},
}

// gptFamilies lists the two GPT families at their benchmark sizes.
func gptFamilies() []*family {
	return []*family{
		newGPTFamily("gpt", 12, 20, 7, 1e-3),
		newGPTFamily("gpt2", 1, 2, 3, 6e-4),
	}
}

func newGPTFamily(name string, batch, steps, repeats int, lr float64) *family {
	return gptFamilyOf(name, gptShapes[name], batch, steps, repeats, lr)
}

// gptFamilyOf is a GPT family of shape g (its tests build a tiny one).
func gptFamilyOf(name string, g gptFamily, batch, steps, repeats int, lr float64) *family {
	f := &family{name: name, batch: batch, steps: steps, repeats: repeats, lr: lr,
		opt: fmt.Sprintf("AdamW (b2 %g, decay %g on the weight matrices) after clipping to norm %g, WarmupCosine", g.beta2, g.lambda, g.clip)}
	f.model = func(ctx *context.Context, x *graph.Node) *graph.Node {
		return g.model().Forward(ctx, gpt.Inputs{Tokens: x})["logits"]
	}
	f.loss = func(logits, y *graph.Node) *graph.Node {
		return g.model().Loss(core.Outputs{"logits": logits}, gpt.Targets{Targets: y})
	}
	f.newExp = func() any { return newFamGPT(g, f.lr, gptHorizon(f)) }
	f.data = func(rng *rand.Rand, n int) (any, []int, []int32, []int) { return gptData(rng, n, g.context) }
	f.flops = func(b int) float64 { return float64(b) * float64(g.context) * g.flopsPerToken() }
	return f
}

// isGPT reports whether f is one of the GPT families, and its shape.
func isGPT(f *family) (gptFamily, bool) {
	g, ok := gptShapes[f.name]
	return g, ok
}

// gptHorizon is the steps the schedule spans: the ones every Go side trains, the untimed first
// round included (the JAX peer's allocator probe adds a few of its own, which read the last rate).
func gptHorizon(f *family) int { return (f.repeats + 1) * f.steps }

// model is the example's experiment at this shape (only the model's fields matter here).
func (g gptFamily) model() *gpt.GPT {
	return &gpt.GPT{Layers: g.layers, Heads: g.heads, Dim: g.dim, Context: g.context, Beta2: g.beta2, Lambda: g.lambda,
		GradientClipNorm: g.clip, WarmupFrac: g.warmup, BatchSize: 1, BatchesPerEpoch: 1, ValBatches: 1, Val: 0.05, LearningRate: 1e-3}
}

// flopsPerToken is roofline.TransformerFLOPsPerToken of the blocks' 12·L·D² and the tied output's
// 256·D, the count gpt.Throughput reports; the peer computes the same.
func (g gptFamily) flopsPerToken() float64 {
	return roofline.TransformerFLOPsPerToken(12*g.layers*g.dim*g.dim+gpt.Vocab*g.dim, g.layers, g.dim, g.context)
}

// peerArgs are the peer's flags for the family (jax_families.py --family gpt|gpt2).
func (g gptFamily) peerArgs(f *family) []string {
	return []string{"--layers", fmt.Sprint(g.layers), "--heads", fmt.Sprint(g.heads), "--dim", fmt.Sprint(g.dim),
		"--context", fmt.Sprint(g.context), "--beta2", fmt.Sprint(g.beta2), "--wd", fmt.Sprint(g.lambda),
		"--clip", fmt.Sprint(g.clip), "--warmup-frac", fmt.Sprint(g.warmup), "--horizon", fmt.Sprint(gptHorizon(f))}
}

// gptData draws n rows of context+1 bytes, each (s + k·t) mod 256 for s uniform over the bytes and
// a stride k in [1, 8]: tokens are a row's first context bytes, targets its last. Learnable from
// two positions, so the held-out accuracy says whether a side trained.
func gptData(rng *rand.Rand, n, context int) (any, []int, []int32, []int) {
	tok, tgt := make([]int32, n*context), make([]int32, n*context)
	for r := range n {
		s, k := rng.IntN(256), 1+rng.IntN(8)
		for t := range context {
			tok[r*context+t] = int32((s + k*t) % 256)
			tgt[r*context+t] = int32((s + k*(t+1)) % 256)
		}
	}
	return tok, []int{context}, tgt, []int{context}
}

// famGPT is the nitro side of a GPT family: the example's model, loss and optimizer, on the
// bench's "x" and "y" fields, with no training metrics beyond the loss (the peer computes none),
// and the schedule over the bench's horizon rather than the run's (the bench trains epoch by
// epoch with no end set). It has the example's fields, not a *gpt.GPT inside: core reads the
// markers of an experiment's own fields only.
type famGPT struct {
	Layers  int `nitro:"graphconst"`
	Heads   int `nitro:"graphconst"`
	Dim     int `nitro:"graphconst"`
	Context int `nitro:"graphconst"`

	Beta2, Lambda, GradientClipNorm, WarmupFrac, Peak float64
	Horizon                                           int
}

func newFamGPT(g gptFamily, lr float64, horizon int) *famGPT {
	return &famGPT{Layers: g.layers, Heads: g.heads, Dim: g.dim, Context: g.context, Beta2: g.beta2, Lambda: g.lambda,
		GradientClipNorm: g.clip, WarmupFrac: g.warmup, Peak: lr, Horizon: horizon}
}

func (e *famGPT) model() *gpt.GPT {
	return gptFamily{layers: e.Layers, heads: e.Heads, dim: e.Dim, context: e.Context, beta2: e.Beta2, lambda: e.Lambda,
		clip: e.GradientClipNorm, warmup: e.WarmupFrac}.model()
}

func (e *famGPT) BuildModel(ctx *context.Context) error { return e.model().BuildModel(ctx) }
func (e *famGPT) BuildData() (prefetch.Data, error) {
	return nil, fmt.Errorf("famGPT's data is supplied with core.WithData")
}
func (e *famGPT) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return e.model().Forward(ctx, gpt.Inputs{Tokens: in.X})
}
func (e *famGPT) Loss(out core.Outputs, in Labels) *graph.Node {
	return e.model().Loss(out, gpt.Targets{Targets: in.Y})
}
func (e *famGPT) OptimizerRule(name string) nopt.Rule           { return e.model().OptimizerRule(name) }
func (e *famGPT) NoDecay(keypath []string, s shapes.Shape) bool { return e.model().NoDecay(keypath, s) }
func (e *famGPT) Schedules() map[string]any {
	sched := schedules.WarmupCosine(e.WarmupFrac, e.Peak, e.Peak/10)(e.Horizon)
	return map[string]any{"eta": schedules.Factory(func(int) schedules.Schedule { return sched })}
}

// newGPTLoop is the GoMLX loop of a GPT family: forward, gradient and the example's optimizer in
// graph ops (gptApplyRule), one context.Exec per step.
func newGPTLoop(r *backend.Resolved, f *family, g gptFamily, init map[string]*tensors.Tensor) (*famLoop, error) {
	ctx := context.New()
	ctx.SetRNGStateFromSeed(42)
	for kp, t := range init {
		c, name := ctxAt(ctx, kp)
		c.VariableWithValue(name, t)
	}
	exec, err := context.NewExec(r.Backend, ctx.Checked(false), func(ctx *context.Context, x, y *graph.Node) *graph.Node {
		gr := x.Graph()
		ctx.SetTraining(gr, true)
		loss := f.loss(f.model(ctx, x), y)
		var vars []*context.Variable
		var nodes []*graph.Node
		for v := range ctx.IterVariables() {
			if v.Trainable && v.InUseByGraph(gr) {
				vars = append(vars, v)
				nodes = append(nodes, v.ValueGraph(gr))
			}
		}
		gptApplyRule(ctx.In("hand_opt"), g, f.lr, gptHorizon(f), vars, nodes, graph.Gradient(loss, nodes...))
		return loss
	})
	if err != nil {
		return nil, err
	}
	return &famLoop{f: f, ctx: ctx, exec: exec}, nil
}

// gptApplyRule is the example's optimizer as nitro runs it, in graph ops: the gradients scaled by
// clip/max(norm, clip) over their global norm; Adam's moments (0.9, beta2) with bias correction;
// then p -= lr·(mu_hat/(sqrt(nu_hat)+1e-8) + lambda·p), the decay on "weights" variables only; lr
// from WarmupCosine(warmup, lr, lr/10) over horizon steps, computed on the device in float64 from
// the step count (nitro computes the same value on the host).
func gptApplyRule(ctx *context.Context, g gptFamily, lr float64, horizon int, vars []*context.Variable, params, grads []*graph.Node) {
	gr := params[0].Graph()
	stepVar := ctx.VariableWithValue("step", float64(0)).SetTrainable(false)
	t := graph.AddScalar(stepVar.ValueGraph(gr), 1)
	stepVar.SetValueGraph(t)
	f32 := func(n *graph.Node) *graph.Node { return graph.ConvertDType(n, dtypes.Float32) }

	warm := math.Round(g.warmup * float64(horizon))
	first := math.Max(warm, 1)
	floor := lr / 10
	up := graph.MulScalar(graph.Max(t, graph.Const(gr, 1.0)), lr/warm)
	p := graph.Clip(graph.DivScalar(graph.AddScalar(t, -first), float64(horizon)-first), graph.Const(gr, 0.0), graph.Const(gr, 1.0))
	down := graph.AddScalar(graph.MulScalar(graph.OnePlus(graph.Cos(graph.MulScalar(p, math.Pi))), (lr-floor)/2), floor)
	rate := down
	if warm > 0 {
		rate = graph.Where(graph.LessOrEqual(t, graph.Const(gr, warm)), up, down)
	}
	rate = f32(rate)

	var sq []*graph.Node
	for _, gd := range grads {
		sq = append(sq, graph.ReduceAllSum(graph.Square(gd)))
	}
	norm := graph.Sqrt(sumNodes(sq))
	scale := graph.Div(graph.Const(gr, float32(g.clip)), graph.Max(norm, graph.Const(gr, float32(g.clip))))

	const b1, eps = 0.9, 1e-8
	c1 := f32(graph.Inverse(graph.OneMinus(graph.Pow(graph.Const(gr, b1), t))))
	c2 := f32(graph.Inverse(graph.OneMinus(graph.Pow(graph.Const(gr, g.beta2), t))))
	for i, v := range vars {
		pv, gd := params[i], graph.Mul(grads[i], scale)
		zeros := ctx.In(fmt.Sprintf("v%d", i)).WithInitializer(func(g *graph.Graph, s shapes.Shape) *graph.Node { return graph.Zeros(g, s) })
		mu := zeros.VariableWithShape("mu", pv.Shape()).SetTrainable(false)
		nu := zeros.VariableWithShape("nu", pv.Shape()).SetTrainable(false)
		muv := graph.Add(graph.MulScalar(mu.ValueGraph(gr), b1), graph.MulScalar(gd, 1-b1))
		nuv := graph.Add(graph.MulScalar(nu.ValueGraph(gr), g.beta2), graph.MulScalar(graph.Square(gd), 1-g.beta2))
		mu.SetValueGraph(muv)
		nu.SetValueGraph(nuv)
		upd := graph.Div(graph.Mul(muv, c1), graph.AddScalar(graph.Sqrt(graph.Mul(nuv, c2)), eps))
		if v.Name() == "weights" {
			upd = graph.Add(upd, graph.MulScalar(pv, g.lambda))
		}
		v.SetValueGraph(graph.Sub(pv, graph.Mul(upd, rate)))
	}
}

// sumNodes adds scalars pairwise (a balanced tree, as short as the list allows).
func sumNodes(ns []*graph.Node) *graph.Node {
	for len(ns) > 1 {
		var next []*graph.Node
		for i := 0; i+1 < len(ns); i += 2 {
			next = append(next, graph.Add(ns[i], ns[i+1]))
		}
		if len(ns)%2 == 1 {
			next = append(next, ns[len(ns)-1])
		}
		ns = next
	}
	return ns[0]
}

// famTokens is a family's tokens per step (batch times context) for the tokens/s columns; 0 for
// a family that is not a language model.
func famTokens(f *family) int {
	if g, ok := isGPT(f); ok {
		return f.batch * g.context
	}
	return 0
}

// allFamilies is every family selectFamilies can name: the three, then the GPT families.
func allFamilies() []*family { return slices.Concat(families(), gptFamilies()) }
