package core

import (
	"fmt"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
)

// deepLinear stacks Layers dense layers (2 arrays each), split into two groups.
type deepLinear struct {
	Layers int `nitro:"graphconst"`
}

type deepIn struct {
	X *graph.Node `batch:"x"`
}

func (e *deepLinear) BuildModel(ctx *context.Context) error { return nil }
func (e *deepLinear) Forward(ctx *context.Context, in deepIn) Outputs {
	x := in.X
	for i := 0; i < e.Layers; i++ {
		x = layers.Dense(ctx.In(fmt.Sprintf("l%02d", i)), x, true, 4)
	}
	return Outputs{"y": x}
}
func (e *deepLinear) Loss(out Outputs, in deepIn) *graph.Node {
	return graph.ReduceAllMean(graph.Square(out["y"]))
}
func (e *deepLinear) ParamGroup(kp []string) string {
	if kp[0] < "l10" {
		return "backbone"
	}
	return "head"
}

// TestOptimizerProgramUpdateMathIsPerGroup measures the real optimizer program's node count at two
// array counts. The update math (clip, RAdam, per group) is emitted once per group; what grows with
// the array count is each array's input parameter and its packing into the group layout and back
// (reshape; slice and reshape): four nodes per array, none of them arithmetic.
func TestOptimizerProgramUpdateMathIsPerGroup(t *testing.T) {
	count := func(layers int) (nodes, arrays int) {
		x := tensors.FromFlatDataAndDimensions(make([]float32, 8*4), 8, 4)
		src, err := NewArrayBatches(map[string]*tensors.Tensor{"x": x}, 4, ArrayOptions{DropPartial: true})
		if err != nil {
			t.Fatal(err)
		}
		n, err := New(&deepLinear{Layers: layers}, WithBackend("go"), Quiet(), WithCache(compilecache.New()), WithData(Data{"train": src}))
		if err != nil {
			t.Fatal(err)
		}
		p, err := n.optimizerProgram()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range n.groups {
			arrays += len(g.vars)
		}
		return len(p.g.Nodes()), arrays
	}
	n24, a24 := count(24)
	n48, a48 := count(48)
	t.Logf("optimizer program: %d arrays in 2 groups -> %d nodes; %d arrays -> %d nodes", a24, n24, a48, n48)
	perArray := float64(n48-n24) / float64(a48-a24)
	if perArray > 4 {
		t.Fatalf("the optimizer program grows by %.1f nodes per parameter array: only the input and its 3 packing nodes may grow with the array count", perArray)
	}
}
