package mnist_test

import (
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/nitro-go/nitro/markers"
)

// TestFieldRangesAreChecked: every numeric field out of its range is refused by BuildData and by
// BuildModel (export with input specs runs BuildModel alone) before any data is read, naming the
// field, its value and the range; no value is quietly read as another (TrainLimit = -1 as "all").
func TestFieldRangesAreChecked(t *testing.T) {
	cases := []struct {
		set  map[string]any
		want []string
	}{
		{map[string]any{"TrainLimit": -1}, []string{"TrainLimit = -1: want 0 (all 60000) or 1..60000"}},
		{map[string]any{"TrainLimit": 60001}, []string{"TrainLimit = 60001", "1..60000"}},
		{map[string]any{"TestLimit": -3}, []string{"TestLimit = -3: want 0 (all 10000) or 1..10000"}},
		{map[string]any{"TestLimit": 10001}, []string{"TestLimit = 10001", "1..10000"}},
		{map[string]any{"ValSize": -5}, []string{"ValSize = -5: want 1..59999"}},
		{map[string]any{"ValSize": 0}, []string{"ValSize = 0: want 1..59999"}},
		{map[string]any{"TrainLimit": 3000, "ValSize": 3000}, []string{"ValSize = 3000: want 1..2999", "TrainLimit's 3000"}},
		{map[string]any{"BatchSize": 0}, []string{"BatchSize = 0: want >= 1"}},
		{map[string]any{"BatchSize": 100000}, []string{"BatchSize = 100000: want 1..55000", "exceeds the train split's 55000 samples"}},
		{map[string]any{"TrainLimit": 3000, "ValSize": 1000, "BatchSize": 2001}, []string{"BatchSize = 2001: want 1..2000", "2000 samples"}},
		{map[string]any{"EvalBatchSize": 0}, []string{"EvalBatchSize = 0: want >= 1"}},
		{map[string]any{"EvalBatchSize": -2}, []string{"EvalBatchSize = -2: want >= 1"}},
		{map[string]any{"Hidden": 0}, []string{"Hidden = 0: want >= 1"}},
		{map[string]any{"Depth": -1}, []string{"Depth = -1: want >= 0"}},
		{map[string]any{"MaxEpochs": -1}, []string{"MaxEpochs = -1: want >= 0"}},
		{map[string]any{"Seed": -7}, []string{"Seed = -7: want >= 0"}},
		{map[string]any{"LearningRate": 0.0}, []string{"LearningRate = 0: want > 0"}},
		{map[string]any{"LearningRate": math.NaN()}, []string{"LearningRate = NaN: want > 0"}},
		{map[string]any{"BackboneRate": -0.1}, []string{"BackboneRate = -0.1: want > 0"}},
		{map[string]any{"Decay": math.Inf(1)}, []string{"Decay = +Inf: want >= 0"}},
		// Two fields out of range: both named.
		{map[string]any{"BatchSize": 0, "EvalBatchSize": 0}, []string{"BatchSize = 0", "EvalBatchSize = 0"}},
	}
	for _, c := range cases {
		e, err := markers.New[mnist.MLP](c.set)
		if err != nil {
			t.Fatalf("%v: %v", c.set, err)
		}
		// A DataDir that does not exist: the check must come before any data is looked for.
		e.DataDir = t.TempDir() + "/nowhere"
		_, derr := e.BuildData()
		merr := e.BuildModel(context.New())
		for what, err := range map[string]error{"BuildData": derr, "BuildModel": merr} {
			if err == nil {
				t.Errorf("%v: %s accepted it", c.set, what)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: %s: %q lacks %q", c.set, what, err, w)
				}
			}
		}
	}
	// The defaults and the presets are in range (BuildModel: no data needed).
	e, err := markers.New[mnist.MLP](nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.BuildModel(context.New()); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for name := range e.Presets() {
		p, err := markers.FromPreset[mnist.MLP](name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.BuildModel(context.New()); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
	// The largest values in range pass: TrainLimit 60000, ValSize 59999, a BatchSize of one split.
	edge, err := markers.New[mnist.MLP](map[string]any{"TrainLimit": 60000, "TestLimit": 10000, "ValSize": 59999, "BatchSize": 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := edge.BuildModel(context.New()); err != nil {
		t.Errorf("edge values: %v", err)
	}
	exact, err := markers.New[mnist.MLP](map[string]any{"BatchSize": 55000})
	if err != nil {
		t.Fatal(err)
	}
	if err := exact.BuildModel(context.New()); err != nil {
		t.Errorf("BatchSize = the train split's size: %v", err)
	}
}
