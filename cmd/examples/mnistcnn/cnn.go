// Package mnistcnn is nitro's convolutional MNIST example, the shape of Flax's MNIST example:
// conv 32 3x3, relu, average pool 2x2, conv 64 3x3, relu, average pool 2x2, dense 256, relu,
// dense 10. The default recipe (RAdam at 1e-3 decayed along a cosine to 0, batch 128, 10
// epochs) reaches at least 99.0% test accuracy: measured 99.22% test, 99.14% val (98.76% val
// after 4 epochs), 4290 steps in about 36 minutes on 2 heavily shared CPU cores.
//
// The data are the MNIST example's: mnistData reads them through mnist.MLP's BuildData, so both
// examples see the same splits (and a new MNIST reader reaches both through that one call).
package mnistcnn

import (
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gomlx/pkg/ml/layers/activations"
	"github.com/nitro-go/nitro/cmd/examples/internal/classify"
	"github.com/nitro-go/nitro/cmd/examples/internal/fieldcheck"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
	"github.com/nitro-go/nitro/schedules"
)

// CNN classifies 28x28 digits with two convolution blocks and two dense layers.
type CNN struct {
	Conv1  int `nitro:"graphconst" default:"32" doc:"filters of the first 3x3 convolution"`
	Conv2  int `nitro:"graphconst" default:"64" doc:"filters of the second 3x3 convolution"`
	Hidden int `nitro:"graphconst" default:"256" doc:"width of the dense layer before the output"`

	LearningRate  float64 `default:"0.001" doc:"base learning rate (RAdam), the peak of the cosine schedule"`
	Cosine        bool    `default:"true" doc:"decay the learning rate to 0 over the run along a cosine"`
	BatchSize     int     `default:"128" doc:"training batch size"`
	EvalBatchSize int     `default:"500" doc:"evaluation batch size"`
	MaxEpochs     int     `default:"10" doc:"epochs to train"`
	Seed          int     `default:"42" doc:"seed for initialization, shuffling and the validation carve"`
	ValSize       int     `default:"5000" doc:"training samples carved off (fixed seed) for validation"`
	TrainLimit    int     `default:"0" doc:"use only the first N training images (0: all 60000)"`
	TestLimit     int     `default:"0" doc:"use only the first N test images (0: all 10000)"`
	DataDir       string  `doc:"folder of the MNIST files (empty: GoMNIST in the module cache); see mnist-mlp"`
	Format        string  `default:"idx" doc:"what DataDir holds: idx or parquet, as for mnist-mlp"`
}

// Presets are named partial configurations; tiny is the end-to-end test's.
func (CNN) Presets() map[string]map[string]any {
	return map[string]map[string]any{
		"tiny":  {"Conv1": 8, "Conv2": 16, "Hidden": 64, "MaxEpochs": 2, "LearningRate": 0.01, "Cosine": false, "TrainLimit": 2000, "TestLimit": 500, "ValSize": 500, "BatchSize": 50},
		"small": {"MaxEpochs": 2, "TrainLimit": 20000},
	}
}

// Schedules decays the learning rate along a cosine over the whole run.
func (e *CNN) Schedules() map[string]any {
	if !e.Cosine {
		return nil
	}
	return map[string]any{"eta": schedules.Cosine(e.LearningRate, 0)}
}

// check refuses out-of-range model fields by name; the data fields are checked by mnist.MLP's
// BuildData, which names them the same way.
func (e *CNN) check() error {
	var c fieldcheck.Checker
	c.AtLeast("Conv1", e.Conv1, 1)
	c.AtLeast("Conv2", e.Conv2, 1)
	c.AtLeast("Hidden", e.Hidden, 1)
	c.AtLeast("MaxEpochs", e.MaxEpochs, 0)
	c.Float("LearningRate", e.LearningRate, e.LearningRate > 0, "> 0 (finite)")
	return c.Err()
}

// BuildModel checks the configuration; Forward creates the variables.
func (e *CNN) BuildModel(ctx *context.Context) error { return e.check() }

// BuildData reads MNIST as the MLP example does: image [N, 784] in [0, 1], label [N] int32;
// train shuffled each epoch with the partial batch dropped, val carved from train by Seed.
func (e *CNN) BuildData() (prefetch.Data, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return mnistData(e)
}

// mnistData is this example's one dependency on the MNIST example: its BuildData, given this
// experiment's data fields (the MLP's model fields keep their defaults and are not used).
func mnistData(e *CNN) (prefetch.Data, error) {
	m, err := markers.New[mnist.MLP](map[string]any{
		"BatchSize": e.BatchSize, "EvalBatchSize": e.EvalBatchSize, "Seed": e.Seed, "ValSize": e.ValSize,
		"TrainLimit": e.TrainLimit, "TestLimit": e.TestLimit, "DataDir": e.DataDir, "Format": e.Format,
	})
	if err != nil {
		return nil, err
	}
	return m.BuildData()
}

// Inputs is what Forward reads; Labels what Loss and Metrics read.
type Inputs struct {
	Image *graph.Node `batch:"image"`
}
type Labels struct {
	Label *graph.Node `batch:"label"`
}

// Forward maps images [B, 784] to logits [B, 10]; the convolutions are channels-last with SAME
// padding, as in Flax's example.
func (e *CNN) Forward(ctx *context.Context, in Inputs) core.Outputs {
	x := graph.Reshape(in.Image, -1, 28, 28, 1)
	block := func(name string, x *graph.Node, filters int) *graph.Node {
		x = layers.Convolution(ctx.In(name), x).Filters(filters).KernelSize(3).PadSame().Done()
		return graph.MeanPool(activations.Relu(x)).Window(2).Strides(2).Done()
	}
	x = block("conv_1", x, e.Conv1)
	x = block("conv_2", x, e.Conv2)
	x = graph.Reshape(x, x.Shape().Dimensions[0], -1)
	x = activations.Relu(layers.Dense(ctx.In("dense"), x, true, e.Hidden))
	return core.Outputs{"logits": layers.Dense(ctx.In("output"), x, true, 10)}
}

// Loss is the mean cross-entropy.
func (e *CNN) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.ReduceAllMean(classify.CrossEntropy(out["logits"], in.Label))
}

// Metrics reports accuracy and per-sample loss, each as (sum, count).
func (e *CNN) Metrics(out core.Outputs, in Labels) map[string]hooks.Metric {
	return classify.Metrics(out["logits"], in.Label)
}
