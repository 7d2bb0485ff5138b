package core_test

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/prefetch"
)

// MedianLine is Line's task (without its Device field) with a metric no per-batch sum can give:
// the median absolute error of the split, which needs every error at once (sorted). HostMetrics
// collects the errors on the host, and FinalizeMetrics sorts them.
type MedianLine struct{}

func (e *MedianLine) BuildModel(ctx *context.Context) error { return nil }
func (e *MedianLine) BuildData() (prefetch.Data, error)     { return (&Line{}).BuildData() }

func (e *MedianLine) Forward(ctx *context.Context, in LineIn) core.Outputs {
	return core.Outputs{"y": layers.Dense(ctx.In("line"), in.X, true, 1)}
}

func (e *MedianLine) Loss(out core.Outputs, in LineTarget) *graph.Node {
	return graph.ReduceAllMean(graph.Square(graph.Sub(out["y"], in.Y)))
}

func (e *MedianLine) HostMetrics(out core.Prediction, b prefetch.Batch) (map[string]metrics.Metric, error) {
	pred, y := tensors.MustCopyFlatData[float32](out["y"]), tensors.MustCopyFlatData[float32](b["y"])
	errs := make([]float64, len(y))
	for i := range y {
		errs[i] = max(float64(pred[i]-y[i]), float64(y[i]-pred[i]))
	}
	return map[string]metrics.Metric{"abs_err": metrics.Collected(errs), "rows": metrics.Total(float64(len(y)))}, nil
}

func (e *MedianLine) FinalizeMetrics(acc metrics.Result, split string) map[string]float64 {
	errs := slices.Sorted(slices.Values(acc.Collected["abs_err"]))
	return map[string]float64{"median_abs_err": errs[len(errs)/2], "rows": acc.Scalars["rows"]}
}

func (e *MedianLine) FinalizedMetricNames() []string { return []string{"median_abs_err", "rows"} }

// With a HostMetrics hook the metrics run on the host by default; WithMetricsResidency says so
// explicitly (or chooses the device, for an experiment that also has Metrics). The eval program
// is Forward alone, and the hook sees each batch's real rows: 40 in all, no padding.
func ExampleWithMetricsResidency() {
	n, err := core.New(&MedianLine{}, core.WithMetricsResidency(core.MetricsOnHost), core.WithBackend("go"), core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(compilecache.New()))
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := n.Validate()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sortedNames(m), m["rows"], m["median_abs_err"] > 0)
	// Output:
	// [median_abs_err rows] 40 true
}
