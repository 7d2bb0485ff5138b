package seqtransformer

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/cmd/examples/internal/gendata"
)

// TestGoMLXAttentionScalesTwice builds GoMLX's MultiHeadAttention and this package's attention on
// the same weights: GoMLX's output equals ours with the logits scaled by 1/headDim, not by
// 1/sqrt(headDim), which is why the example does not use it. Ours at 1/sqrt(headDim) differs.
func TestGoMLXAttentionScalesTwice(t *testing.T) {
	be, err := backend.Resolve("go")
	if err != nil {
		t.Fatal(err)
	}
	const heads, headDim = 2, 16
	x := make([]float32, 2*5*8)
	for i := range x {
		x[i] = float32(math.Sin(float64(i) * 0.7))
	}
	ctx := context.New()
	outs, err := context.ExecOnceN(be.Backend, ctx, func(ctx *context.Context, x *graph.Node) []*graph.Node {
		theirs := layers.MultiHeadAttention(ctx, x, x, x, heads, headDim).Done()
		same := ctx.In("MultiHeadAttention").Reuse()
		return []*graph.Node{theirs,
			attentionScaled(same, x, heads, headDim, 1/float64(headDim)),
			attention(same, x, heads, headDim)}
	}, tensors.FromFlatDataAndDimensions(x, 2, 5, 8))
	if err != nil {
		t.Fatal(err)
	}
	theirs, twice, once := tensors.MustCopyFlatData[float32](outs[0]), tensors.MustCopyFlatData[float32](outs[1]), tensors.MustCopyFlatData[float32](outs[2])
	maxDiff := func(a, b []float32) float64 {
		d := 0.0
		for i := range a {
			d = math.Max(d, math.Abs(float64(a[i]-b[i])))
		}
		return d
	}
	if d := maxDiff(theirs, twice); d > 1e-5 {
		t.Errorf("GoMLX's attention differs from ours scaled by 1/headDim by %g: it no longer scales twice (revisit the package comment)", d)
	}
	if d := maxDiff(theirs, once); d < 1e-4 {
		t.Errorf("GoMLX's attention matches ours scaled once by 1/sqrt(headDim) (diff %g): the scaling test is not telling them apart", d)
	}
}

// TestGenerateIsDeterministic: the same seed and stream give the same sequences, another seed or
// stream others; the targets are the task applied to the inputs.
func TestGenerateIsDeterministic(t *testing.T) {
	flat := func(task string, seed, stream uint64) ([]int32, []int32) {
		x, y, err := Generate(task, 50, 7, 10, seed, stream)
		if err != nil {
			t.Fatal(err)
		}
		return tensors.MustCopyFlatData[int32](x), tensors.MustCopyFlatData[int32](y)
	}
	a, ya := flat("reverse", 1, gendata.StreamTrain)
	b, _ := flat("reverse", 1, gendata.StreamTrain)
	c, _ := flat("reverse", 2, gendata.StreamTrain)
	d, _ := flat("reverse", 1, gendata.StreamVal)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed and stream gave different sequences")
	}
	if slices.Equal(a, c) || slices.Equal(a, d) {
		t.Fatal("another seed or stream gave the same sequences")
	}
	for i := 0; i < 7; i++ {
		if ya[i] != a[6-i] {
			t.Fatalf("reverse: target %v for input %v", ya[:7], a[:7])
		}
	}
	if _, _, err := Generate("rotate", 5, 7, 10, 1, 1); err == nil {
		t.Error("Generate accepted the unknown task rotate")
	}
	if _, _, err := Generate("sort", 5, 0, 10, 1, 1); err == nil {
		t.Error("Generate accepted length 0")
	}
	s, ys := flat("sort", 3, gendata.StreamTest)
	for i := 1; i < 7; i++ {
		if ys[i-1] > ys[i] {
			t.Fatalf("sort: target %v for input %v", ys[:7], s[:7])
		}
	}
}
