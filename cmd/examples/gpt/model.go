package gpt

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/context/initializers"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/cmd/examples/internal/classify"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/prefetch/text"
	"github.com/nitro-go/nitro/roofline"
	"github.com/nitro-go/nitro/schedules"
)

// Vocab is the vocabulary: the 256 byte values.
const Vocab = text.Vocab

// initStd is GPT-2's initial standard deviation of every weight matrix and embedding.
const initStd = 0.02

// GPT is the experiment: the model's shape and dropout are GraphConst, the data and the
// optimizer Host.
type GPT struct {
	Layers  int     `nitro:"graphconst" default:"4" doc:"transformer blocks"`
	Heads   int     `nitro:"graphconst" default:"4" doc:"attention heads; Dim must divide by Heads"`
	Dim     int     `nitro:"graphconst" default:"128" doc:"model width (embedding size); the MLP is 4*Dim wide"`
	Context int     `nitro:"graphconst" default:"64" doc:"tokens (bytes) per window: the position embedding's length"`
	Dropout float64 `nitro:"graphconst" default:"0" doc:"dropout rate in training (embeddings, attention weights, residual branches); 0: none"`

	Corpus          string  `default:"" doc:"the text: a file, a folder, or with Column a Parquet file; empty: the Go source tree (GOROOT/src, its .go files)"`
	Column          string  `default:"" doc:"with Corpus a Parquet file or folder: its string column holding the text"`
	Val             float64 `default:"0.05" doc:"fraction of the corpus held out for val (by file of a folder, by row of Parquet, a single file's tail), in (0, 1)"`
	BatchSize       int     `default:"12" doc:"windows per batch"`
	BatchesPerEpoch int     `default:"250" doc:"training batches per epoch: how many windows are drawn before they are drawn afresh"`
	ValBatches      int     `default:"20" doc:"val batches per validation (the same every epoch)"`
	MaxSteps        int     `default:"2000" doc:"optimizer steps to train (the run's horizon: the learning rate's schedule spans it)"`
	ValEvery        int     `default:"250" doc:"validate, report and checkpoint every this many steps"`
	Seed            int     `default:"42" doc:"seed for the window positions and the initialization"`

	LearningRate     float64 `default:"0.001" doc:"peak learning rate (Adam), reached after the warmup, decayed along a cosine to a tenth"`
	WarmupFrac       float64 `default:"0.05" doc:"share of the run's steps warming the learning rate up linearly, in [0, 1)"`
	Beta2            float64 `default:"0.99" doc:"Adam's second-moment decay"`
	Lambda           float64 `default:"0.1" doc:"decoupled weight decay of the weight matrices (not biases, norms, embeddings)"`
	GradientClipNorm float64 `default:"1" doc:"clip the gradients to this global norm; 0: off"`

	data []prefetch.Data // what BuildData opened, for Close
}

// Presets are named partial configurations over the defaults (which are small's).
func (GPT) Presets() map[string]map[string]any {
	return map[string]map[string]any{
		"tiny": {"Layers": 2, "Heads": 2, "Dim": 32, "Context": 32, "BatchSize": 8, "BatchesPerEpoch": 30, "ValBatches": 4,
			"MaxSteps": 60, "ValEvery": 20, "LearningRate": 0.01, "WarmupFrac": 0.1},
		"small": {"Layers": 4, "Heads": 4, "Dim": 128, "Context": 64, "BatchSize": 12, "BatchesPerEpoch": 250, "MaxSteps": 2000,
			"ValEvery": 250, "LearningRate": 0.001, "Beta2": 0.99},
		"gpt2": {"Layers": 12, "Heads": 12, "Dim": 768, "Context": 1024, "BatchSize": 8, "BatchesPerEpoch": 500, "ValBatches": 10,
			"MaxSteps": 500, "ValEvery": 100, "LearningRate": 0.0006, "Beta2": 0.95},
	}
}

// ParamCount is the model's number of parameters, from its shape alone: per block 12·Dim²
// (attention 4·Dim², MLP 8·Dim²) and 13·Dim of biases and LayerNorm gains and offsets; then the
// token and position embeddings and the final LayerNorm. The output layer adds nothing: it is
// the token embedding.
func (e *GPT) ParamCount() int {
	d := e.Dim
	return e.Layers*(12*d*d+13*d) + (Vocab+e.Context)*d + 2*d
}

// Throughput is what a window costs, for the tokens per second and the model FLOPs utilization
// nitro reports: Context tokens, each taking 6 FLOPs per weight of a matrix product it passes
// through in training (the blocks' 12·Dim² per layer and the tied output projection's 256·Dim;
// the embedding lookups are gathers) plus the attention term.
func (e *GPT) Throughput() core.Throughput {
	weights := 12*e.Layers*e.Dim*e.Dim + Vocab*e.Dim
	return core.Throughput{TokensPerSample: e.Context, TrainFLOPsPerToken: roofline.TransformerFLOPsPerToken(weights, e.Layers, e.Dim, e.Context)}
}

// BuildModel checks the configuration; Forward creates the variables.
func (e *GPT) BuildModel(ctx *context.Context) error { return e.check() }

// Inputs is what Forward reads; Targets what Loss and Metrics read.
type Inputs struct {
	Tokens *graph.Node `batch:"tokens"`
}
type Targets struct {
	Targets *graph.Node `batch:"targets"`
}

// Forward maps tokens [B, T] (int32 bytes, T <= Context) to next-byte logits [B, T, 256].
func (e *GPT) Forward(ctx *context.Context, in Inputs) core.Outputs {
	ctx = ctx.WithInitializer(initializers.RandomNormalFn(ctx, initStd))
	g := in.Tokens.Graph()
	t := in.Tokens.Shape().Dimensions[1]
	if t > e.Context {
		panic(fmt.Errorf("gpt: tokens [%d, %d]: more than Context = %d positions", in.Tokens.Shape().Dimensions[0], t, e.Context))
	}
	wte := ctx.In("token").VariableWithShape("embeddings", shapes.Make(dtypes.Float32, Vocab, e.Dim)).ValueGraph(g)
	wpe := ctx.In("position").VariableWithShape("embeddings", shapes.Make(dtypes.Float32, e.Context, e.Dim)).ValueGraph(g)
	x := graph.Gather(wte, graph.ExpandAxes(in.Tokens, -1))                        // [B, T, Dim]
	x = graph.Add(x, graph.ExpandAxes(graph.Slice(wpe, graph.AxisRange(0, t)), 0)) // positions 0..T-1
	x = e.dropout(ctx, x)
	x = e.blocks(ctx, x, func(att *context.Context, _ int, h *graph.Node) *graph.Node { return e.attention(att, h) })
	return core.Outputs{"logits": graph.Einsum("btd,vd->btv", x, wte)} // tied: the embedding, transposed
}

// blocks runs the Layers pre-LayerNorm blocks over x [B, T, Dim] and the final LayerNorm;
// attend is block i's attention over its normalized input, given the attention's scope (the
// training and the cached decode step differ only there).
func (e *GPT) blocks(ctx *context.Context, x *graph.Node, attend func(att *context.Context, i int, h *graph.Node) *graph.Node) *graph.Node {
	projStd := initStd / math.Sqrt(2*float64(e.Layers))
	for i := range e.Layers {
		block := ctx.In(fmt.Sprintf("block_%d", i))
		a := attend(block.In("attention"), i, norm(block.In("ln_1"), x))
		x = graph.Add(x, e.dropout(ctx, linear(block.In("attention").In("proj"), a, e.Dim, projStd)))
		h := activations.GeluApproximate(linear(block.In("mlp").In("fc_1"), norm(block.In("ln_2"), x), 4*e.Dim, initStd))
		x = graph.Add(x, e.dropout(ctx, linear(block.In("mlp").In("fc_2"), h, e.Dim, projStd)))
	}
	return norm(ctx.In("ln_f"), x)
}

// attention is causal multi-head self-attention over x [B, T, Dim], before its output
// projection: the heads' outputs concatenated, [B, T, Dim]. Position q attends to positions
// k <= q only.
func (e *GPT) attention(ctx *context.Context, x *graph.Node) *graph.Node {
	dims := x.Shape().Dimensions
	b, t, dh := dims[0], dims[1], e.Dim/e.Heads
	qkv := graph.Reshape(linear(ctx.In("qkv"), x, 3*e.Dim, initStd), b, t, 3, e.Heads, dh)
	parts := graph.Split(qkv, 2, 3)
	q, k, v := graph.Reshape(parts[0], b, t, e.Heads, dh), graph.Reshape(parts[1], b, t, e.Heads, dh), graph.Reshape(parts[2], b, t, e.Heads, dh)
	logits := graph.MulScalar(graph.Einsum("bqhd,bkhd->bhqk", q, k), 1/math.Sqrt(float64(dh)))
	g := x.Graph()
	future := graph.Where(graph.LowerTriangular(g, t), graph.Scalar(g, logits.DType(), 0), graph.Scalar(g, logits.DType(), -1e9))
	w := e.dropout(ctx, graph.Softmax(graph.Add(logits, graph.Reshape(future, 1, 1, t, t)), -1))
	o := graph.Einsum("bkhd,bhqk->bqhd", v, w)
	return graph.Reshape(o, b, t, e.Dim)
}

// linear is x [..., in] times weights [in, out] drawn from N(0, std²), plus biases [out] that
// start at 0: as one plain matrix product over the flattened leading axes.
func linear(ctx *context.Context, x *graph.Node, out int, std float64) *graph.Node {
	dims := x.Shape().Dimensions
	in := dims[len(dims)-1]
	w := ctx.WithInitializer(initializers.RandomNormalFn(ctx, std)).VariableWithShape("weights", shapes.Make(x.DType(), in, out))
	bias := ctx.WithInitializer(initializers.Zero).VariableWithShape("biases", shapes.Make(x.DType(), out))
	g := x.Graph()
	y := graph.Add(graph.Dot(graph.Reshape(x, -1, in), w.ValueGraph(g)), graph.ExpandAxes(bias.ValueGraph(g), 0))
	return graph.Reshape(y, append(dims[:len(dims)-1:len(dims)-1], out)...)
}

// norm is a LayerNorm over the feature axis, gain and offset learned, epsilon 1e-5 (GPT-2's;
// GoMLX's default is 1e-3).
func norm(ctx *context.Context, x *graph.Node) *graph.Node {
	return layers.LayerNormalization(ctx, x, -1).Epsilon(1e-5).Done()
}

// dropout zeroes a Dropout share of x in training (scaling the rest up); a no-op otherwise.
func (e *GPT) dropout(ctx *context.Context, x *graph.Node) *graph.Node {
	return layers.DropoutStatic(ctx, x, e.Dropout)
}

// Loss is the mean cross-entropy (nats) over every position of every window.
func (e *GPT) Loss(out core.Outputs, in Targets) *graph.Node {
	return graph.ReduceAllMean(classify.CrossEntropy(out["logits"], in.Targets))
}

// TrainMetrics adds the training loss in bits per byte to every "train" line.
func (e *GPT) TrainMetrics(out core.Outputs, in Targets) map[string]*graph.Node {
	return map[string]*graph.Node{"bpb": graph.DivScalar(e.Loss(out, in), math.Ln2)}
}

// Metrics are loss (nats per byte), accuracy (the next byte's arg-max) and bpb, bits per byte:
// the loss's sum over positions divided by ln 2, so a split's bpb is its loss / ln 2.
func (e *GPT) Metrics(out core.Outputs, in Targets) map[string]hooks.Metric {
	m := classify.Metrics(out["logits"], in.Targets)
	m["bpb"] = hooks.Metric{Sum: graph.DivScalar(m["loss"].Sum, math.Ln2), Count: m["loss"].Count}
	return m
}

// OptimizerRule is Adam with betas 0.9 and Beta2; nitro feeds it the learning rate and appends
// the decoupled decay (Lambda) last, so the pair is AdamW.
func (e *GPT) OptimizerRule(string) optimizers.Rule {
	return optimizers.Adam{Beta1: 0.9, Beta2: e.Beta2, Eps: 1e-8}
}

// NoDecay exempts all but the weight matrices from weight decay: biases, LayerNorm gains and
// offsets, and the token and position embeddings.
func (e *GPT) NoDecay(keypath []string, _ shapes.Shape) bool {
	return len(keypath) == 0 || keypath[len(keypath)-1] != "weights"
}

// Schedules warms the learning rate up linearly over WarmupFrac of the run, then decays it
// along a cosine to a tenth of LearningRate.
func (e *GPT) Schedules() map[string]any {
	return map[string]any{"eta": schedules.WarmupCosine(e.WarmupFrac, e.LearningRate, e.LearningRate/10)}
}
