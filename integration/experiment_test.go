package integration_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

// The synthetic task: Dim-dimensional Gaussian points labelled by the side of a fixed hyperplane
// they fall on (linearly separable, two classes). Deterministic in its seed.
const (
	dim     = 8
	classes = 2
)

// synthetic returns n samples: x [n, dim] float32 and y [n] int32.
func synthetic(n int, seed uint64) (x, y *tensors.Tensor) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	w := []float32{1, -2, 0.5, 1.5, -1, 0.25, 2, -0.75}
	xs := make([]float32, n*dim)
	ys := make([]int32, n)
	for i := range n {
		var dot float32
		for j := range dim {
			v := float32(r.NormFloat64())
			xs[i*dim+j] = v
			dot += v * w[j]
		}
		if dot > 0 {
			ys[i] = 1
		}
	}
	return tensors.FromFlatDataAndDimensions(xs, n, dim), tensors.FromFlatDataAndDimensions(ys, n)
}

// splits builds a train split (dropping its partial batch, as nitro requires) and, when valN > 0,
// a val split (keeping its short final batch) of the synthetic task.
func splits(trainN, valN, batch int) (prefetch.Data, error) {
	d := prefetch.Data{}
	x, y := synthetic(trainN, 1)
	tr, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x, "y": y}, batch, prefetch.ArrayOptions{DropPartial: true})
	if err != nil {
		return nil, err
	}
	d["train"] = tr
	if valN > 0 {
		vx, vy := synthetic(valN, 2)
		va, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": vx, "y": vy}, batch, prefetch.ArrayOptions{})
		if err != nil {
			return nil, err
		}
		d["val"] = va
	}
	return d, nil
}

// Inputs is what Forward declares; Labels what Loss and Metrics declare.
type Inputs struct {
	X *graph.Node `batch:"x"`
}

type Labels struct {
	Y *graph.Node `batch:"y"`
}

// mlp is the shared 2-layer classifier: x -> relu(dense width) -> dense classes.
func mlp(ctx *context.Context, x *graph.Node, width int) *graph.Node {
	h := activations.Relu(layers.Dense(ctx.In("hidden"), x, true, width))
	return layers.Dense(ctx.In("output"), h, true, classes)
}

// xent is the per-example softmax cross-entropy of logits [B, classes] against labels [B].
func xent(logits, labels *graph.Node) *graph.Node {
	onehot := graph.OneHot(labels, classes, logits.DType())
	return graph.Neg(graph.ReduceSum(graph.Mul(onehot, graph.LogSoftmax(logits, -1)), -1))
}

// Clf is the acceptance experiment: exactly the four required hooks, one field of each marker
// kind, and Host fields for the run's configuration.
type Clf struct {
	Width        int                     `nitro:"graphconst" default:"16" doc:"hidden width (bakes)"`
	Temperature  markers.Device[float32] `default:"1" doc:"logits are divided by it (traced input)"`
	Note         string                  `default:"synthetic" doc:"a Host field no program reads"`
	MaxEpochs    int                     `default:"1" doc:"epochs to train"`
	LearningRate float64                 `default:"0.01" doc:"base learning rate (an accessor field: Host, a program input)"`
	TrainN       int                     `default:"256" doc:"training samples"`
	ValN         int                     `default:"128" doc:"validation samples (0: no val split)"`
	Batch        int                     `default:"32" doc:"batch size"`
}

func (e *Clf) BuildModel(ctx *context.Context) error { return nil }

func (e *Clf) BuildData() (prefetch.Data, error) { return splits(e.TrainN, e.ValN, e.Batch) }

func (e *Clf) Forward(ctx *context.Context, in Inputs) core.Outputs {
	logits := mlp(ctx, in.X, e.Width)
	return core.Outputs{"logits": graph.Div(logits, e.Temperature.Node())}
}

func (e *Clf) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.ReduceAllMean(xent(out["logits"], in.Y))
}

// ClfMetrics is Clf plus a Metrics hook: accuracy as (sum, count), and "rows", a sum with no
// count whose value is the number of rows Metrics was shown, i.e. the real sample count.
type ClfMetrics struct {
	Width        int     `nitro:"graphconst" default:"16"`
	MaxEpochs    int     `default:"1"`
	LearningRate float64 `default:"0.01"`
	TrainN       int     `default:"256"`
	ValN         int     `default:"100"`
	Batch        int     `default:"32"`
}

func (e *ClfMetrics) BuildModel(ctx *context.Context) error { return nil }

func (e *ClfMetrics) BuildData() (prefetch.Data, error) { return splits(e.TrainN, e.ValN, e.Batch) }

func (e *ClfMetrics) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return core.Outputs{"logits": mlp(ctx, in.X, e.Width)}
}

func (e *ClfMetrics) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.ReduceAllMean(xent(out["logits"], in.Y))
}

func (e *ClfMetrics) Metrics(out core.Outputs, in Labels) map[string]hooks.Metric {
	logits := out["logits"]
	g := logits.Graph()
	rows := float64(logits.Shape().Dimensions[0])
	if d := in.Y.Shape().Dimensions[0]; float64(d) != rows {
		panic(fmt.Sprintf("Metrics saw %v logit rows but %d label rows", rows, d))
	}
	pred := graph.ArgMax(logits, -1, dtypes.Int32)
	correct := graph.ReduceAllSum(graph.ConvertDType(graph.Equal(pred, in.Y), dtypes.Float32))
	return map[string]hooks.Metric{
		"accuracy": {Sum: correct, Count: graph.Scalar(g, dtypes.Float32, rows)},
		"rows":     {Sum: graph.Scalar(g, dtypes.Float32, rows)},
	}
}

// newClf builds a Clf from its defaults and overrides.
func newClf(t testing.TB, overrides map[string]any) *Clf {
	t.Helper()
	e, err := markers.New[Clf](overrides)
	if err != nil {
		t.Fatalf("markers.New[Clf](%v): %v", overrides, err)
	}
	return e
}

// build sets up a Nitro on the XLA backend, quietly, with no logger and no checkpoints (no runs/
// folder left behind; a later WithLogger or WithCheckpointer wins), with the given extra options.
func build(t testing.TB, e any, opts ...core.Option) *core.Nitro {
	t.Helper()
	n, err := core.New(e, append([]core.Option{core.WithBackend("xla"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints()}, opts...)...)
	if err != nil {
		t.Fatalf("core.New(%T): %v", e, err)
	}
	return n
}

// train builds and trains, failing the test on any error.
func train(t testing.TB, e any, opts ...core.Option) *core.Nitro {
	t.Helper()
	n := build(t, e, opts...)
	if err := n.Train(); err != nil {
		t.Fatalf("Train(%T): %v", e, err)
	}
	return n
}

// healthy asserts the acceptance criterion misses == entries and returns the stats.
func healthy(t testing.TB, c *compilecache.Cache, what string) compilecache.Stats {
	t.Helper()
	s := c.Stats()
	if s.Misses != s.Entries {
		t.Errorf("%s: misses %d != entries %d (a program compiled twice); explanations: %q", what, s.Misses, s.Entries, c.Explanations())
	}
	return s
}

// newExplanations returns the explanations added since the first `before` ones.
func newExplanations(c *compilecache.Cache, before int) []string {
	all := c.Explanations()
	if before > len(all) {
		return all
	}
	return all[before:]
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
