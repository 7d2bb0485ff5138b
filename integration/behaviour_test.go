package integration_test

import (
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
)

// HostReader's Forward reads a Host field: the value would bake into the program without keying it.
type HostReader struct {
	Width int     `nitro:"graphconst" default:"8"`
	Scale float64 `default:"1.5" doc:"a Host field Forward wrongly reads"`
}

func (e *HostReader) BuildModel(ctx *context.Context) error { return nil }
func (e *HostReader) BuildData() (prefetch.Data, error)     { return splits(64, 0, 32) }
func (e *HostReader) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return core.Outputs{"logits": graph.MulScalar(mlp(ctx, in.X, e.Width), e.Scale)}
}
func (e *HostReader) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.ReduceAllMean(xent(out["logits"], in.Y))
}

func TestHostReadInForwardRefusedAtSetup(t *testing.T) {
	requireXLA(t)
	e := &HostReader{Width: 8, Scale: 1.5}
	n, err := core.New(e, core.WithBackend("xla"), core.Quiet(), core.WithCache(compilecache.New()), core.WithoutLogger(), core.WithoutCheckpoints())
	if err == nil {
		t.Fatalf("core.New accepted a Forward that reads the Host field Scale (got %v)", n)
	}
	msg := err.Error()
	for _, want := range []string{"Scale", "Host", "GraphConst", "Device"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %q: %v", want, msg)
		}
	}
	if strings.Contains(msg, "Width") {
		t.Errorf("error blames the GraphConst field Width, which is legal to read: %v", msg)
	}
}

// The "four hooks only" claim: BuildModel, BuildData, Forward and Loss, nothing else (the epoch
// count is a field, not an option), train and validate with no options beyond the backend.
func TestFourHooksOnly(t *testing.T) {
	requireXLA(t)
	e := newClf(t, map[string]any{"MaxEpochs": 3})
	n, err := core.New(e, core.WithBackend("xla"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	h := n.History()
	if len(h) != 3 || n.StopReason() != core.StopCompleted {
		t.Fatalf("History has %d epochs, stop reason %q; want 3, %q", len(h), n.StopReason(), core.StopCompleted)
	}
	if n.Step() != 3*256/32 {
		t.Errorf("Step() = %d, want %d", n.Step(), 3*256/32)
	}
	var losses []float64
	for _, r := range h {
		v, ok := r.Val[core.ValLoss]
		if !ok || !finite(v) {
			t.Fatalf("epoch %d: val_loss %v (present %v); want a finite value: %v", r.Epoch, v, ok, r.Val)
		}
		if !finite(r.TrainLoss) || r.Steps != 8 {
			t.Errorf("epoch %d: train loss %v over %d steps; want finite over 8", r.Epoch, r.TrainLoss, r.Steps)
		}
		losses = append(losses, v)
	}
	if !(losses[2] < losses[0]) {
		t.Errorf("val_loss did not decrease from epoch 1 to 3: %v", losses)
	}
}

// Residency: evaluation reuses the resident parameter buffers; no parameter is uploaded per eval batch.
func TestEvalUploadsNoParameters(t *testing.T) {
	requireXLA(t)
	n := train(t, newClf(t, nil), core.WithCache(compilecache.New()))
	before := n.Uploads()
	for range 2 {
		if _, err := n.Validate(); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Evaluate("val"); err != nil {
			t.Fatal(err)
		}
	}
	after := n.Uploads()
	if after.Params != before.Params || after.OptState != before.OptState || after.Device != before.Device {
		t.Errorf("eval uploaded resident state: before %+v, after %+v", before, after)
	}
	// 4 runs of 4 val batches with 2 routed fields each: the batch counter does move.
	if got := after.Batch - before.Batch; got != 4*4*2 {
		t.Errorf("eval uploaded %d batch arrays, want %d (4 runs x 4 batches x fields x, y)", got, 4*4*2)
	}
}

// A val split whose length (100) is not a multiple of the batch (32): Metrics sees only the real
// rows of the short final batch, so "rows" sums to 100 (not 128) and accuracy is the exact mean
// over the 100 real samples, which the host recomputes from PredictAll's outputs.
func TestShortFinalBatchMetrics(t *testing.T) {
	requireXLA(t)
	c := compilecache.New()
	e := &ClfMetrics{Width: 16, MaxEpochs: 1, LearningRate: 0.01, TrainN: 256, ValN: 100, Batch: 32}
	n := train(t, e, core.WithCache(c))
	// gradient + optimizer + eval at the full width + eval for the remainder.
	if s := healthy(t, c, "short final batch"); s.Misses != 4 {
		t.Errorf("misses %d, want 4 (2 train programs, eval twice: padded width and remainder); explanations %q", s.Misses, c.Explanations())
	}
	m := n.History()[0].Val
	if m["val_rows"] != 100 {
		t.Errorf("rows = %v, want 100 real samples (a padded count would be 128)", m["val_rows"])
	}

	_, vy := synthetic(100, 2)
	labels := vy.Value().([]int32)
	var correct, seen int
	for p, err := range n.PredictAll(mustSplit(t, e, "val")) {
		if err != nil {
			t.Fatal(err)
		}
		logits := p["logits"].Value().([][]float32)
		for _, row := range logits {
			pred := int32(0)
			if row[1] > row[0] {
				pred = 1
			}
			if pred == labels[seen] {
				correct++
			}
			seen++
		}
	}
	if seen != 100 {
		t.Fatalf("PredictAll yielded %d rows, want 100", seen)
	}
	want := float64(correct) / 100
	if math.Abs(m["val_accuracy"]-want) > 1e-9 {
		t.Errorf("accuracy = %v, want %v (%d/100 from the predictions)", m["val_accuracy"], want, correct)
	}
}

// mustSplit rebuilds one of the experiment's splits (deterministic, so equal to the Nitro's own).
func mustSplit(t testing.TB, e *ClfMetrics, split string) prefetch.Source {
	t.Helper()
	d, err := e.BuildData()
	if err != nil {
		t.Fatal(err)
	}
	return d[split]
}

// NaNLoss's Loss takes the log of a negative number.
type NaNLoss struct {
	Width int `nitro:"graphconst" default:"8"`
}

func (e *NaNLoss) BuildModel(ctx *context.Context) error { return nil }
func (e *NaNLoss) BuildData() (prefetch.Data, error)     { return splits(64, 0, 32) }
func (e *NaNLoss) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return core.Outputs{"logits": mlp(ctx, in.X, e.Width)}
}
func (e *NaNLoss) Loss(out core.Outputs, in Labels) *graph.Node {
	l := out["logits"]
	return graph.ReduceAllMean(graph.Log(graph.AddScalar(graph.Neg(graph.Square(l)), -1))) // log(-x²-1)
}

func TestNonFiniteLossStopsTraining(t *testing.T) {
	requireXLA(t)
	n := build(t, &NaNLoss{Width: 8}, core.WithCache(compilecache.New()), core.WithMaxEpochs(2))
	err := n.Train()
	if err == nil {
		t.Fatalf("Train returned nil on a NaN loss")
	}
	for _, want := range []string{"non-finite", "epoch 1", "step 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
	if n.Step() != 0 {
		t.Errorf("Step() = %d after a NaN in the first micro-batch: the optimizer must not have stepped", n.Step())
	}
}

// stopAt is a train source that asks its Nitro to stop when batch `at` is fetched.
type stopAt struct {
	*prefetch.ArrayBatches
	at int
	n  *core.Nitro
}

func (s *stopAt) BatchAt(i int) (prefetch.Batch, error) {
	if s.n != nil && i == s.at {
		s.n.RequestStop()
	}
	return s.ArrayBatches.BatchAt(i)
}

func TestRequestStopFinishesTheEpochAndValidates(t *testing.T) {
	requireXLA(t)
	d, err := splits(256, 128, 32)
	if err != nil {
		t.Fatal(err)
	}
	src := &stopAt{ArrayBatches: d["train"].(*prefetch.ArrayBatches), at: 2}
	d["train"] = src
	n := build(t, newClf(t, nil), core.WithCache(compilecache.New()), core.WithData(d), core.WithMaxEpochs(3))
	src.n = n
	if err := n.Train(); err != nil {
		t.Fatalf("Train after RequestStop: %v", err)
	}
	if n.StopReason() != core.StopRequested {
		t.Errorf("StopReason() = %q, want %q", n.StopReason(), core.StopRequested)
	}
	h := n.History()
	if len(h) != 1 {
		t.Fatalf("History has %d epochs, want 1", len(h))
	}
	// request_stop! is "checked once per epoch after validation" (api-reference.txt): the epoch in
	// which it was requested runs to its end, and no step of a later epoch runs.
	if h[0].Steps != 8 || n.Step() != 8 {
		t.Errorf("stopped after %d steps in the epoch (Step %d); RequestStop finishes the epoch: want all 8 steps of epoch 1", h[0].Steps, n.Step())
	}
	if v, ok := h[0].Val[core.ValLoss]; !ok || !finite(v) {
		t.Errorf("the stopped epoch was not validated: Val = %v", h[0].Val)
	}
}

func TestPredict(t *testing.T) {
	requireXLA(t)
	e := &ClfMetrics{Width: 16, MaxEpochs: 1, LearningRate: 0.01, TrainN: 256, ValN: 100, Batch: 32}
	n := train(t, e, core.WithCache(compilecache.New()))
	val := mustSplit(t, e, "val")

	var got []core.Prediction
	for p, err := range n.PredictAll(val) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if len(got) != 4 {
		t.Fatalf("PredictAll yielded %d batches, want 4", len(got))
	}
	for i, p := range got {
		want := 32
		if i == 3 {
			want = 4
		}
		if d := p["logits"].Shape().Dimensions; len(d) != 2 || d[0] != want || d[1] != classes {
			t.Errorf("batch %d: logits shape %v, want [%d %d]", i, d, want, classes)
		}
	}

	// The short batch predicted alone (its own width, no padding) agrees with the padded-and-sliced one.
	last, err := val.BatchAt(3)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := n.Predict(last)
	if err != nil {
		t.Fatal(err)
	}
	a, b := alone["logits"].Value().([][]float32), got[3]["logits"].Value().([][]float32)
	for i := range a {
		for j := range a[i] {
			if math.Abs(float64(a[i][j]-b[i][j])) > 1e-5 {
				t.Fatalf("row %d: Predict gives %v, PredictAll's padded batch %v", i, a[i], b[i])
			}
		}
	}

	// A bare tensor is refused, naming the field Forward declares.
	x, _ := synthetic(4, 3)
	if _, err := n.Predict(x); err == nil {
		t.Errorf("Predict accepted a bare *tensors.Tensor")
	} else if !strings.Contains(err.Error(), `"x"`) && !strings.Contains(err.Error(), "[x]") {
		t.Errorf("Predict's refusal does not name Forward's declared field x: %v", err)
	}
	// Wrapped, it is accepted.
	if p, err := n.Predict(prefetch.Batch{"x": x}); err != nil || p["logits"].Shape().Dimensions[0] != 4 {
		t.Errorf("Predict(prefetch.Batch{x}) = %v, %v; want 4 rows of logits", p, err)
	}
}
