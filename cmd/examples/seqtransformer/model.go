// Package seqtransformer is nitro's transformer example: a small encoder (token embedding plus
// learned positions, pre-norm blocks of self-attention and a relu MLP, a final layer norm and a
// per-position softmax) that learns a sequence-to-sequence task on generated digit sequences:
//
//	reverse: target[i] = input[Length-1-i]
//	sort:    target = input sorted ascending
//
// Inputs are Length digits drawn uniformly from 0..Vocab-1 by a PCG generator seeded from Seed
// (train, val and test from distinct streams), so the data are the same on every run with the
// same Seed. Every position is predicted at once: the model is not autoregressive.
//
// The attention is the package's own (attention below), scaling the logits by 1/sqrt(head dim)
// once; GoMLX v0.25's layers.MultiHeadAttention scales them twice (by 1/head dim), which
// TestGoMLXAttentionScalesTwice shows against the same weights.
//
// Measured on 2 shared CPU cores: the default recipe (reverse, Length 10, 20000 sequences)
// reaches 100% per token and per sequence on test after its first epoch (3 epochs in all, about a
// minute); the "sort" preset reaches 99.99% per token and 99.85% per sequence in 6 epochs; the
// tiny preset, the end-to-end test's, is asserted to reach 99% per token and 95% per sequence in
// 3 epochs of 4000 sequences of 6 digits (it reaches 100%).
package seqtransformer

import (
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/cmd/examples/internal/classify"
	"github.com/nitro-go/nitro/cmd/examples/internal/fieldcheck"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/schedules"
)

// Transformer is the experiment: the model's shape is GraphConst, the task and data are Host.
type Transformer struct {
	Vocab  int `nitro:"graphconst" default:"10" doc:"token values 0..Vocab-1 (digits: 10)"`
	Dim    int `nitro:"graphconst" default:"64" doc:"model width (embedding size)"`
	Heads  int `nitro:"graphconst" default:"4" doc:"attention heads; Dim must divide by Heads"`
	Layers int `nitro:"graphconst" default:"2" doc:"transformer blocks"`
	MLPDim int `nitro:"graphconst" default:"128" doc:"hidden width of each block's MLP"`

	Task          string  `default:"reverse" doc:"what the target is: reverse or sort (of the input digits)"`
	Length        int     `default:"10" doc:"sequence length"`
	TrainSize     int     `default:"20000" doc:"generated training sequences"`
	ValSize       int     `default:"2000" doc:"generated validation sequences"`
	TestSize      int     `default:"2000" doc:"generated test sequences"`
	LearningRate  float64 `default:"0.002" doc:"base learning rate (RAdam), the peak of the cosine schedule"`
	Cosine        bool    `default:"true" doc:"decay the learning rate to 0 over the run along a cosine"`
	BatchSize     int     `default:"64" doc:"training batch size"`
	EvalBatchSize int     `default:"500" doc:"evaluation batch size"`
	MaxEpochs     int     `default:"3" doc:"epochs to train"`
	Seed          int     `default:"42" doc:"seed for the data, initialization and shuffling"`
}

// Presets are named partial configurations; tiny is the end-to-end test's.
func (Transformer) Presets() map[string]map[string]any {
	return map[string]map[string]any{
		"tiny": {"Dim": 32, "Heads": 2, "Layers": 1, "MLPDim": 64, "Length": 6, "TrainSize": 4000, "ValSize": 500, "TestSize": 500,
			"LearningRate": 0.005, "BatchSize": 50, "MaxEpochs": 3},
		"sort": {"Task": "sort", "MaxEpochs": 6},
	}
}

// Schedules decays the learning rate along a cosine over the whole run.
func (e *Transformer) Schedules() map[string]any {
	if !e.Cosine {
		return nil
	}
	return map[string]any{"eta": schedules.Cosine(e.LearningRate, 0)}
}

// check refuses every out-of-range field by name, before any data is generated.
func (e *Transformer) check() error {
	var c fieldcheck.Checker
	for _, f := range []struct {
		name   string
		v, min int
	}{
		{"Vocab", e.Vocab, 2}, {"Dim", e.Dim, 1}, {"Heads", e.Heads, 1}, {"Layers", e.Layers, 0}, {"MLPDim", e.MLPDim, 1},
		{"Length", e.Length, 1}, {"TrainSize", e.TrainSize, 1}, {"ValSize", e.ValSize, 1}, {"TestSize", e.TestSize, 1},
		{"BatchSize", e.BatchSize, 1}, {"EvalBatchSize", e.EvalBatchSize, 1}, {"MaxEpochs", e.MaxEpochs, 0}, {"Seed", e.Seed, 0},
	} {
		c.AtLeast(f.name, f.v, f.min)
	}
	if e.Heads >= 1 && e.Dim%e.Heads != 0 {
		c.Add("Dim = %d does not divide by Heads = %d: want a multiple of Heads", e.Dim, e.Heads)
	}
	c.BatchFits(e.BatchSize, e.TrainSize, "TrainSize")
	if _, ok := tasks[e.Task]; !ok {
		c.Add("Task = %q: want one of %s", e.Task, strings.Join(taskNames(), ", "))
	}
	c.Float("LearningRate", e.LearningRate, e.LearningRate > 0, "> 0 (finite)")
	return c.Err()
}

// BuildModel checks the configuration; Forward creates the variables.
func (e *Transformer) BuildModel(ctx *context.Context) error { return e.check() }

// Inputs is what Forward reads; Targets what Loss and Metrics read.
type Inputs struct {
	Tokens *graph.Node `batch:"tokens"`
}
type Targets struct {
	Target *graph.Node `batch:"target"`
}

// Forward maps tokens [B, L] (int32) to logits [B, L, Vocab]. The blocks are pre-norm:
// x += attention(norm(x)); x += mlp(norm(x)).
func (e *Transformer) Forward(ctx *context.Context, in Inputs) core.Outputs {
	length := in.Tokens.Shape().Dimensions[1]
	x := layers.Embedding(ctx.In("token"), in.Tokens, dtypes.Float32, e.Vocab, e.Dim)
	pos := ctx.In("position").VariableWithShape("embedding", shapes.Make(dtypes.Float32, length, e.Dim)).ValueGraph(x.Graph())
	x = graph.Add(x, graph.ExpandAxes(pos, 0))
	for i := 0; i < e.Layers; i++ {
		block := ctx.In(fmt.Sprintf("block_%d", i))
		x = graph.Add(x, attention(block.In("attention"), norm(block.In("norm_1"), x), e.Heads, e.Dim/e.Heads))
		h := activations.Relu(layers.Dense(block.In("mlp_1"), norm(block.In("norm_2"), x), true, e.MLPDim))
		x = graph.Add(x, layers.Dense(block.In("mlp_2"), h, true, e.Dim))
	}
	return core.Outputs{"logits": layers.Dense(ctx.In("output"), norm(ctx.In("norm"), x), true, e.Vocab)}
}

// norm is a layer norm over the feature axis with epsilon 1e-5 (PyTorch's; GoMLX's default is
// 1e-3, large enough to matter for small activations).
func norm(ctx *context.Context, x *graph.Node) *graph.Node {
	return layers.LayerNormalization(ctx, x, -1).Epsilon(1e-5).Done()
}

// attention is multi-head self-attention over x [B, L, D]: softmax(q·kᵀ/sqrt(headDim))·v per
// head, the heads concatenated and projected back to D. Its variables sit where GoMLX's
// MultiHeadAttention puts them (query, key, value, output), so the two can be compared on the
// same weights.
func attention(ctx *context.Context, x *graph.Node, heads, headDim int) *graph.Node {
	return attentionScaled(ctx, x, heads, headDim, 1/math.Sqrt(float64(headDim)))
}

// attentionScaled is attention with the logits multiplied by scale.
func attentionScaled(ctx *context.Context, x *graph.Node, heads, headDim int, scale float64) *graph.Node {
	q := layers.Dense(ctx.In("query"), x, true, heads, headDim) // [B, L, H, Dh]
	k := layers.Dense(ctx.In("key"), x, true, heads, headDim)
	v := layers.Dense(ctx.In("value"), x, true, heads, headDim)
	// The logits stay in the dot's own [B, H, Lq, Lk] order (no transpose before the softmax),
	// and v is the second dot's left operand, so v's gradient is a plain row-major matmul. With
	// the default shape, the gradient program then has 51 transposes instead of 65 and 244
	// fusions instead of 257, for 2 generic batched dots (q·kᵀ's key gradient, as in JAX's
	// program). Training ran 0.5-6% more steps per second.
	logits := graph.MulScalar(graph.Einsum("bqhd,bkhd->bhqk", q, k), scale)
	w := graph.Softmax(logits, -1)
	o := graph.Einsum("bkhd,bhqk->bqhd", v, w)
	dims := o.Shape().Dimensions
	o = graph.Reshape(o, dims[0], dims[1], heads*headDim)
	return layers.Dense(ctx.In("output"), o, true, x.Shape().Dimensions[2])
}

// Loss is the mean cross-entropy over every position of every sequence.
func (e *Transformer) Loss(out core.Outputs, in Targets) *graph.Node {
	return graph.ReduceAllMean(classify.CrossEntropy(out["logits"], in.Target))
}

// Metrics are accuracy (per token), loss (per token) and sequence_accuracy: the share of
// sequences whose every position is right.
func (e *Transformer) Metrics(out core.Outputs, in Targets) map[string]hooks.Metric {
	logits := out["logits"]
	m := classify.Metrics(logits, in.Target)
	whole := graph.ReduceMin(classify.Correct(logits, in.Target), -1) // [B]: 1 when all L are right
	m["sequence_accuracy"] = hooks.Metric{
		Sum:   graph.ReduceAllSum(whole),
		Count: graph.Scalar(logits.Graph(), dtypes.Float32, float64(whole.Shape().Size())),
	}
	return m
}
