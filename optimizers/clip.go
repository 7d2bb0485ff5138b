package optimizers

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// ClipByGlobalNorm scales every gradient it is given (one flat buffer per group, or every array
// of every group) by threshold/norm when the global norm (the L2 norm over ALL groups' gradients
// together) is at least threshold, optax's clip_by_global_norm: g -> norm < threshold ? g : (g / norm) * threshold. It runs at the top of
// the optimizer program over the fully accumulated gradient and is never a chain member (a member
// would clip per group, a different algorithm).
//
// threshold is a baked constant, not a device input: 0 returns grads unchanged and emits no ops
// (a traced 0 could not: it would scale every gradient to zero norm, and 0/0 on an all-zero
// gradient is NaN). Changing it recompiles the optimizer program only. Graph side: a negative or
// non-finite threshold panics; check it at setup with CheckClipThreshold.
func ClipByGlobalNorm(grads []*graph.Node, threshold float64) []*graph.Node {
	if threshold == 0 || len(grads) == 0 {
		return grads
	}
	if err := CheckClipThreshold(threshold); err != nil {
		panic(err)
	}
	dt := grads[0].DType()
	g := grads[0].Graph()
	var sumSq *graph.Node
	for _, gr := range grads {
		s := graph.ConvertDType(graph.ReduceAllSum(graph.Square(gr)), dt)
		if sumSq == nil {
			sumSq = s
		} else {
			sumSq = graph.Add(sumSq, s)
		}
	}
	norm := graph.Sqrt(sumSq)
	keep := graph.LessThan(norm, graph.Scalar(g, dt, threshold))
	out := make([]*graph.Node, len(grads))
	for i, gr := range grads {
		n := graph.ConvertDType(norm, gr.DType())
		clipped := graph.Mul(graph.Div(gr, n), graph.Scalar(g, gr.DType(), threshold))
		out[i] = graph.Where(keep, gr, clipped)
	}
	return out
}

// CheckClipThreshold validates gradient_clip_norm at setup: 0 (off) or a positive finite number.
func CheckClipThreshold(threshold float64) error {
	if threshold < 0 || math.IsNaN(threshold) || math.IsInf(threshold, 0) {
		return fmt.Errorf("optimizers: gradient_clip_norm is %v: use 0 to turn clipping off or a positive finite global-norm threshold (it is baked, so changing it recompiles the optimizer program)", threshold)
	}
	return nil
}
