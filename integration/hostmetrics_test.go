package integration_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/hooks"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/prefetch"
)

// ClfHost is ClfMetrics plus HostMetrics, the same accuracy and rows computed in Go from the
// logits and labels; its residency picks which of the two runs.
type ClfHost struct {
	Width        int     `nitro:"graphconst" default:"16"`
	MaxEpochs    int     `default:"1"`
	LearningRate float64 `default:"0.01"`
	TrainN       int     `default:"256"`
	ValN         int     `default:"100"`
	Batch        int     `default:"32"`
}

func (e *ClfHost) clf() *ClfMetrics {
	return &ClfMetrics{Width: e.Width, MaxEpochs: e.MaxEpochs, LearningRate: e.LearningRate, TrainN: e.TrainN, ValN: e.ValN, Batch: e.Batch}
}

func (e *ClfHost) BuildModel(ctx *context.Context) error { return nil }
func (e *ClfHost) BuildData() (prefetch.Data, error)     { return e.clf().BuildData() }
func (e *ClfHost) Forward(ctx *context.Context, in Inputs) core.Outputs {
	return e.clf().Forward(ctx, in)
}
func (e *ClfHost) Loss(out core.Outputs, in Labels) *graph.Node { return e.clf().Loss(out, in) }
func (e *ClfHost) Metrics(out core.Outputs, in Labels) map[string]hooks.Metric {
	return e.clf().Metrics(out, in)
}

func (e *ClfHost) HostMetrics(out core.Prediction, b prefetch.Batch) (map[string]metrics.Metric, error) {
	logits := out["logits"]
	pred, err := metrics.ArgMaxRows(tensors.MustCopyFlatData[float32](logits), logits.Shape().Dimensions[1])
	if err != nil {
		return nil, err
	}
	correct := 0.0
	for i, y := range tensors.MustCopyFlatData[int32](b["y"]) {
		if pred[i] == int(y) {
			correct++
		}
	}
	rows := float64(len(pred))
	return map[string]metrics.Metric{"accuracy": metrics.Mean(correct, rows), "rows": metrics.Total(rows)}, nil
}

// The acceptance counts with the metrics on the host: train + val compile 3 programs, and the
// val split's short final batch (100 = 3x32 + 4) adds none, where the device residency's sliced
// program makes 4; Predict still shares validation's eval program; and both residencies report
// the same accuracy over the same 100 rows.
func TestAcceptanceCountsHostMetrics(t *testing.T) {
	requireXLA(t)
	val := map[core.Residency]map[string]float64{}
	for _, tc := range []struct {
		r    core.Residency
		want int
	}{{core.MetricsOnHost, 3}, {core.MetricsOnDevice, 4}} {
		c := compilecache.New()
		n := train(t, &ClfHost{Width: 16, MaxEpochs: 1, LearningRate: 0.01, TrainN: 256, ValN: 100, Batch: 32},
			core.WithCache(c), core.WithMetricsResidency(tc.r))
		s := healthy(t, c, string(tc.r))
		if s.Misses != tc.want {
			t.Errorf("%s residency: %d programs, want %d; explanations %q", tc.r, s.Misses, tc.want, c.Explanations())
		}
		predictAddsNothing(t, n, c, s)
		val[tc.r] = n.History()[0].Val
	}
	h, d := val[core.MetricsOnHost], val[core.MetricsOnDevice]
	if h["val_rows"] != 100 || d["val_rows"] != 100 || h["val_accuracy"] != d["val_accuracy"] {
		t.Errorf("host metrics %v, device metrics %v: want the same accuracy over 100 rows", h, d)
	}
}
