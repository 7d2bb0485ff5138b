package optimizers_test

import (
	"fmt"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

// syntheticModel has `layers` dense layers, each a 2-D weight and a 1-D bias (2*layers arrays);
// the first half is the "backbone" group, the rest the default group.
func syntheticModel(layers int) []optimizers.ParamLeaf {
	var leaves []optimizers.ParamLeaf
	for i := range layers {
		name := fmt.Sprintf("dense_%d", i)
		if i < layers/2 {
			name = "backbone/" + name
		}
		in, out := 8+i%5, 4+i%3
		leaves = append(leaves,
			optimizers.ParamLeaf{Keypath: []string{name, "weights"}, Shape: shapes.Make(dtypes.Float32, in, out)},
			optimizers.ParamLeaf{Keypath: []string{name, "biases"}, Shape: shapes.Make(dtypes.Float32, out)})
	}
	return leaves
}

func backboneGroup(kp []string) string {
	if len(kp[0]) > 9 && kp[0][:9] == "backbone/" {
		return "backbone"
	}
	return optimizers.DefaultGroup
}

// updateGraphNodes builds (does not compile) the optimizer update for the given layouts, one
// chain per layout (RAdam + masked w0 Decay, global clip), and returns the graph's node count.
func updateGraphNodes(t testing.TB, layouts []*optimizers.Layout) int {
	t.Helper()
	var chains []*optimizers.Chain
	for _, l := range layouts {
		c, err := optimizers.BuildRuleChain(nil, optimizers.GroupSetup{
			Name: l.Group, Layout: l, Lambda: 1e-4, Anchor: optimizers.AnchorW0, NoDecay: l.NoDecayMask(nil),
		})
		if err != nil {
			t.Fatal(err)
		}
		chains = append(chains, c)
	}
	prog, err := optimizers.NewProgram(chains, 1.0)
	if err != nil {
		t.Fatal(err)
	}
	g := graph.NewGraph(goBackend(t), "count")
	n := len(chains)
	params, grads := make([]*graph.Node, n), make([]*graph.Node, n)
	states := make([][]*graph.Node, n)
	hyper := make([]optimizers.Hyper, n)
	for i, c := range chains {
		s := layouts[i].FlatShape()
		params[i] = graph.Parameter(g, fmt.Sprintf("p%d", i), s)
		grads[i] = graph.Parameter(g, fmt.Sprintf("g%d", i), s)
		for j := range c.StateNames() {
			states[i] = append(states[i], graph.Parameter(g, fmt.Sprintf("s%d.%d", i, j), s))
		}
		hyper[i] = optimizers.Hyper{}
		for _, f := range c.HyperFields() {
			hyper[i][f] = graph.Parameter(g, fmt.Sprintf("h%d.%s", i, f), shapes.Make(dtypes.Float32))
		}
	}
	prog.Apply(params, grads, states, hyper, graph.Parameter(g, "step", shapes.Make(dtypes.Int32)))
	return len(g.Nodes())
}

// perArrayLayouts gives every array its own one-leaf layout: the unflattened tree.
func perArrayLayouts(t testing.TB, leaves []optimizers.ParamLeaf) []*optimizers.Layout {
	var out []*optimizers.Layout
	for i, p := range leaves {
		l, err := optimizers.NewLayout(fmt.Sprintf("array%d", i), []optimizers.ParamLeaf{p})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// TestFlatGroupsDoNotGrowWithArrayCount is the reason for the flat buffers: with 2 groups, the
// optimizer update graph has the same node count for 48 and 96 parameter arrays, while the
// per-array form grows with the array count.
func TestFlatGroupsDoNotGrowWithArrayCount(t *testing.T) {
	counts := map[int][2]int{}
	for _, layers := range []int{24, 48} {
		leaves := syntheticModel(layers)
		layouts, err := optimizers.GroupLayouts(leaves, backboneGroup)
		if err != nil {
			t.Fatal(err)
		}
		if len(layouts) != 2 || layouts[0].Group != optimizers.DefaultGroup || layouts[1].Group != "backbone" {
			t.Fatalf("want groups [default backbone], got %d layouts", len(layouts))
		}
		flat := updateGraphNodes(t, layouts)
		perArray := updateGraphNodes(t, perArrayLayouts(t, leaves))
		counts[len(leaves)] = [2]int{flat, perArray}
		t.Logf("%3d arrays in 2 groups: flat-per-group update graph %4d nodes, per-array %5d nodes", len(leaves), flat, perArray)
	}
	small, large := counts[48], counts[96]
	if small[0] != large[0] {
		t.Errorf("flat update graph grew with the array count: %d nodes for 48 arrays, %d for 96", small[0], large[0])
	}
	if large[1] <= small[1] {
		t.Errorf("per-array update graph should grow with the array count: %d for 48, %d for 96", small[1], large[1])
	}
	if small[1] < 10*small[0] {
		t.Errorf("per-array graph (%d nodes) should dwarf the flat one (%d) at 48 arrays", small[1], small[0])
	}
}

// BenchmarkOptimizerGraph reports node counts and compile cost, flat-per-group vs per-array, for
// a 96-array model in 2 groups (go test -bench OptimizerGraph -run ^$ ./optimizers/).
func BenchmarkOptimizerGraph(b *testing.B) {
	leaves := syntheticModel(48)
	layouts, err := optimizers.GroupLayouts(leaves, backboneGroup)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		layouts []*optimizers.Layout
	}{{"flat-per-group", layouts}, {"per-array", perArrayLayouts(b, leaves)}} {
		b.Run(bc.name, func(b *testing.B) {
			nodes := 0
			for b.Loop() {
				nodes = updateGraphNodes(b, bc.layouts)
			}
			b.ReportMetric(float64(nodes), "nodes")
			b.ReportMetric(float64(len(leaves)), "arrays")
		})
	}
}
