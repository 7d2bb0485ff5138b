package metrics_test

import (
	"fmt"

	"github.com/nitro-go/nitro/metrics"
)

// A split's confusion matrix, summed over two batches, and what derives from it.
func ExampleAccumulator() {
	var a metrics.Accumulator
	for _, b := range [][2][]int{{{0, 1, 1}, {0, 1, 0}}, {{1, 0}, {1, 1}}} {
		cm, _ := metrics.ConfusionCounts(b[0], b[1], 2)
		_ = a.Add(map[string]metrics.Metric{"confusion": metrics.Summed(cm), "n": metrics.Total(float64(len(b[0])))})
	}
	r := a.Result()
	m, _ := metrics.Confusion(r.Arrays["confusion"])
	fmt.Println(m, r.Scalars["n"], metrics.PerClassAccuracy(m))
	// Output: [[1 1] [1 2]] 5 [0.5 0.6666666666666666]
}

// AUC ranks every score of the split at once, so it runs on Collected values.
func ExampleAUC() {
	auc, _ := metrics.AUC([]float64{0.1, 0.4, 0.35, 0.8}, []bool{false, false, true, true})
	fmt.Println(auc)
	// Output: 0.75
}

func ExampleNormalize() {
	fmt.Println(metrics.Normalize([][]int{{3, 1}, {0, 2}}))
	// Output: [[0.75 0.25] [0 1]]
}

func ExampleArgMaxRows() {
	p, _ := metrics.ArgMaxRows([]float32{0.1, 0.7, 0.2, 0.9, 0.05, 0.05}, 3)
	fmt.Println(p)
	// Output: [1 0]
}
