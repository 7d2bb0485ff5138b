package optimizers_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

func TestClipZeroEmitsNoOps(t *testing.T) {
	g := graph.NewGraph(goBackend(t), "clip0")
	a := graph.Parameter(g, "a", shapes.Make(dtypes.Float32, 3))
	b := graph.Parameter(g, "b", shapes.Make(dtypes.Float32, 2))
	before := len(g.Nodes())
	out := optimizers.ClipByGlobalNorm([]*graph.Node{a, b}, 0)
	if len(g.Nodes()) != before || out[0] != a || out[1] != b {
		t.Errorf("threshold 0 added %d nodes or replaced the gradients", len(g.Nodes())-before)
	}
}

// TestClipIsGlobalAcrossGroups: g1 = [3], g2 = [4] has global norm 5. A threshold of 1 scales both
// by 1/5 (per-group clipping would give [1] and [1]); a threshold of 10 leaves them alone.
func TestClipIsGlobalAcrossGroups(t *testing.T) {
	for _, tc := range []struct {
		threshold float64
		want      [2]float64
	}{{1, [2]float64{0.6, 0.8}}, {10, [2]float64{3, 4}}, {5, [2]float64{3, 4}}} {
		g := graph.NewGraph(goBackend(t), "clip")
		a := graph.Parameter(g, "a", shapes.Make(dtypes.Float64, 1))
		b := graph.Parameter(g, "b", shapes.Make(dtypes.Float32, 1)) // mixed dtypes across groups
		out := optimizers.ClipByGlobalNorm([]*graph.Node{a, b}, tc.threshold)
		g.Compile(out...)
		res := g.Run([]float64{3}, []float32{4})
		got0 := tensors.MustCopyFlatData[float64](res[0])[0]
		got1 := float64(tensors.MustCopyFlatData[float32](res[1])[0])
		if relErr(got0, tc.want[0]) > 1e-6 || relErr(got1, tc.want[1]) > 1e-6 {
			t.Errorf("threshold %v: got [%v] [%v], want %v", tc.threshold, got0, got1, tc.want)
		}
	}
}

func TestClipThresholdErrors(t *testing.T) {
	mustContain(t, optimizers.CheckClipThreshold(-1), "gradient_clip_norm is -1", "0 to turn clipping off")
	if err := optimizers.CheckClipThreshold(0); err != nil {
		t.Errorf("0 is off: %v", err)
	}
	_, err := optimizers.NewProgram([]*optimizers.Chain{mustChain(t, buildRule(t, optimizers.NewSGD()))}, -2)
	mustContain(t, err, "gradient_clip_norm is -2")
	g := graph.NewGraph(goBackend(t), "clipneg")
	a := graph.Parameter(g, "a", shapes.Make(dtypes.Float32, 1))
	msg := mustPanic(t, func() { optimizers.ClipByGlobalNorm([]*graph.Node{a}, -1) })
	mustContain(t, errString(msg), "gradient_clip_norm")
}
