// Package classify holds the softmax classification head the examples share: the cross-entropy
// of logits [..., K] against integer labels [...], and the accuracy and loss metrics summed over
// every labelled element (an image, or a token of a sequence). It builds graph nodes only: like
// GoMLX, it panics on shapes that do not fit, inside the hooks that trace it.
package classify

import (
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/hooks"
)

// CrossEntropy is the per-element softmax cross-entropy of logits [..., K] against labels [...].
func CrossEntropy(logits, labels *graph.Node) *graph.Node {
	k := logits.Shape().Dimensions[logits.Rank()-1]
	onehot := graph.OneHot(labels, k, logits.DType())
	return graph.Neg(graph.ReduceSum(graph.Mul(onehot, graph.LogSoftmax(logits, -1)), -1))
}

// Correct is 1 where the arg-max of logits [..., K] equals labels [...], else 0 (float32).
func Correct(logits, labels *graph.Node) *graph.Node {
	pred := graph.ArgMax(logits, -1, labels.DType())
	return graph.ConvertDType(graph.Equal(pred, labels), dtypes.Float32)
}

// Metrics are "accuracy" and "loss" (mean cross-entropy), each a (sum, count) over every element
// of labels, so that a split's value is the mean over its elements, whatever its batch sizes.
func Metrics(logits, labels *graph.Node) map[string]hooks.Metric {
	n := graph.Scalar(logits.Graph(), dtypes.Float32, float64(labels.Shape().Size()))
	return map[string]hooks.Metric{
		"accuracy": {Sum: graph.ReduceAllSum(Correct(logits, labels)), Count: n},
		"loss":     {Sum: graph.ReduceAllSum(graph.ConvertDType(CrossEntropy(logits, labels), dtypes.Float32)), Count: n},
	}
}
