package engine

import (
	"fmt"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/prefetch"
)

// deepLinear stacks Layers dense layers (2 arrays each), split into two groups.
type deepLinear struct {
	Layers int `nitro:"graphconst"`
}

func (e *deepLinear) Forward(ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
	x := in["x"]
	for i := 0; i < e.Layers; i++ {
		x = layers.Dense(ctx.In(fmt.Sprintf("l%02d", i)), x, true, 4)
	}
	return map[string]*graph.Node{"y": x}
}

func (e *deepLinear) ParamGroup(kp []string) string {
	if kp[0] < "l10" {
		return "backbone"
	}
	return "head"
}

// TestOptimizerProgramUpdateMathIsPerGroup measures the real optimizer program at two array counts.
// The chain is emitted one array at a time (so XLA fuses each array's update in one pass, with no
// packing copies), but its scalar math (the step-dependent RAdam scalars, the constants, the clip)
// is built once per group: no scalar node may grow with the array count. What grows is each
// array's inputs (parameter, gradient, mu, nu) and its elementwise update.
func TestOptimizerProgramUpdateMathIsPerGroup(t *testing.T) {
	count := func(layers int) (nodes, scalars, arrays int) {
		x := tensors.FromFlatDataAndDimensions(make([]float32, 8*4), 8, 4)
		src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x}, 4, prefetch.ArrayOptions{DropPartial: true})
		if err != nil {
			t.Fatal(err)
		}
		exp := &deepLinear{Layers: layers}
		n := newTestEngine(t, testRun{exp: exp, data: src, backend: "go", cache: compilecache.New(), grouper: exp.ParamGroup,
			forward: func(view any, ctx *context.Context, b map[string]*graph.Node) map[string]*graph.Node {
				return view.(*deepLinear).Forward(ctx, b)
			},
			loss: func(_ any, out, _ map[string]*graph.Node) *graph.Node {
				return graph.ReduceAllMean(graph.Square(out["y"]))
			},
		})
		p, err := n.optimizerProgram()
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range n.groups {
			arrays += len(g.vars)
		}
		for _, nd := range p.g.Nodes() {
			if nd.NumOutputs() == 1 && nd.Shape().IsScalar() {
				scalars++
			}
		}
		return len(p.g.Nodes()), scalars, arrays
	}
	n24, s24, a24 := count(24)
	n48, s48, a48 := count(48)
	t.Logf("optimizer program: %d arrays in 2 groups -> %d nodes (%d scalar); %d arrays -> %d nodes (%d scalar)", a24, n24, s24, a48, n48, s48)
	if s48 != s24 {
		t.Errorf("scalar nodes grow with the array count (%d -> %d): step-dependent scalars or constants are built per array instead of once per group (optimizers.Shared)", s24, s48)
	}
	// RAdam per array (19 today): 4 inputs, then elementwise only: the moments, the adaptive
	// direction, the rectification switch, the new parameters.
	perArray := float64(n48-n24) / float64(a48-a24)
	if perArray > 20 {
		t.Fatalf("the optimizer program grows by %.1f nodes per parameter array, want <= 20 (its inputs and its elementwise RAdam update)", perArray)
	}
}
