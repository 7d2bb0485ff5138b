package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// Counter has layer state: a non-trainable scalar that counts the training-mode forward passes,
// returned as a per-row output so Predict can read it.
type Counter struct{ coretest.Base }

func (*Counter) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	g := in.X.Graph()
	v := ctx.In("counter").VariableWithValue("count", float32(0)).SetTrainable(false)
	c := v.ValueGraph(g)
	if ctx.IsTraining(g) {
		c = graph.AddScalar(c, 1)
		v.SetValueGraph(c)
	}
	rows := in.X.Shape().Dimensions[0]
	return core.Outputs{
		"pred":  layers.Dense(ctx.In("dense_0"), in.X, true, 1),
		"count": graph.BroadcastToDims(graph.Reshape(c, 1, 1), rows, 1),
	}
}

// TestLayerStateAdvancesInTrainingOnly: the gradient program carries layer state from step to step
// on the device; evaluation and prediction run in eval mode and discard what they compute.
func TestLayerStateAdvancesInTrainingOnly(t *testing.T) {
	n := coretest.MustNew(t, &Counter{}, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithAccum(2))
	setup := n.Uploads()
	x, _ := coretest.Synthetic(4, 3)
	count := func() float32 {
		t.Helper()
		p, err := n.Predict(prefetch.Batch{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		return p["count"].Value().([][]float32)[0][0]
	}
	if c := count(); c != 0 {
		t.Fatalf("untrained count = %v, want 0", c)
	}
	for i := 0; i < 2; i++ {
		if _, err := n.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	if c := count(); c != 0 {
		t.Errorf("count = %v after two Validates, want 0: eval mode must not keep state", c)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	// 2 epochs x 4 micro-batches, whatever accum groups them into.
	if c := count(); c != 8 {
		t.Errorf("count = %v after training, want 8 (one per micro-batch; the epochs' validations add nothing)", c)
	}
	// Layer state (the counter, and the context's RNG state) is uploaded at setup and never again.
	if u := n.Uploads(); u.LayerState != setup.LayerState || u.Params != setup.Params || setup.LayerState < 1 {
		t.Errorf("Uploads %+v after setup's %+v: layer state or parameters uploaded again", u, setup)
	}
	wantContains(t, "config report", n.ConfigReport(), "default (2 arrays, 5 values)")
}

// TestStatesReadsTheLayerStateAndRNG: States is the layer state on the host by variable name,
// the counter as training left it and the context's RNG state beside it.
func TestStatesReadsTheLayerStateAndRNG(t *testing.T) {
	n := coretest.MustNew(t, &Counter{}, coretest.Data(t, 0), core.WithMaxEpochs(1))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	st, err := n.States()
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st["/#rngState"] == nil {
		t.Fatalf("States() has %v, want the counter and /#rngState", keys(st))
	}
	if c := st["/counter/count"].Value().(float32); c != 4 {
		t.Errorf("counter after one epoch of 4 batches = %v, want 4", c)
	}
	if n.RunDir() == "" {
		t.Error("RunDir is empty")
	}
}
