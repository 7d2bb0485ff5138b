package optimizers_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

// A chain is a Transform: nesting keeps the flat chain's math, constant leaves and decay tail,
// and only renames the state leaves (by position, as checkpoints see them).
func TestChainNestsInAChain(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float64)
	decay := optimizers.Decay(optimizers.AnchorW0, l.NoDecayMask(nil))
	flat := mustChain(t, buildRule(t, optimizers.NewRAdam()), decay)
	nested := mustChain(t, mustChain(t, buildRule(t, optimizers.NewRAdam())), mustChain(t, decay))

	want := []string{"0.chain.0.radam.mu", "0.chain.0.radam.nu", "1.chain.0.decay.anchor", "1.chain.0.decay.mask"}
	if got := nested.StateNames(); !slices.Equal(got, want) {
		t.Errorf("StateNames = %v, want %v", got, want)
	}
	if got, want := nested.ConstantLeaves(), flat.ConstantLeaves(); !slices.Equal(got, want) {
		t.Errorf("ConstantLeaves = %v, want the flat chain's %v", got, want)
	}
	if got, want := nested.HyperFields(), flat.HyperFields(); !slices.Equal(got, want) {
		t.Errorf("HyperFields = %v, want %v", got, want)
	}
	if !nested.HasDecay() {
		t.Error("HasDecay is false for a chain whose nested last chain ends with Decay")
	}
	if d := nested.Describe(); !strings.HasPrefix(d, "[radam(") || !strings.HasSuffix(d, "] > [decay(anchor=w0,mask=leaf)]") {
		t.Errorf("Describe = %q: want each nested chain bracketed, so it differs from the flat %q", d, flat.Describe())
	}

	params := tensor64([]float64{1, -2, 3, -4, 5, -6})
	grads := tensor64([]float64{0.5, 0.1, -0.3, 0.2, -0.4, 0.6})
	hyper := map[string]float64{optimizers.EtaField: 0.1, optimizers.LambdaField: 0.01}
	if got, want := runChainSteps(t, nested, params, grads, hyper, 3), runChainSteps(t, flat, params, grads, hyper, 3); !slices.Equal(got, want) {
		t.Errorf("nested chain after 3 steps = %v, flat chain = %v", got, want)
	}
}

// Members of a nested chain count positions from 0 again; their Shared keys must not meet the
// outer members', or the inner Adam would reuse the outer one's bias corrections (other betas).
func TestNestedChainSharedKeysDoNotCollide(t *testing.T) {
	slow := optimizers.NewAdam()
	slow.Beta1, slow.Beta2 = 0.5, 0.6
	flat := mustChain(t, buildRule(t, optimizers.NewAdam()), buildRule(t, slow))
	nested := mustChain(t, buildRule(t, optimizers.NewAdam()), mustChain(t, buildRule(t, slow)))
	params := tensor64([]float64{1, -2, 3, -4, 5, -6})
	grads := tensor64([]float64{0.5, 0.1, -0.3, 0.2, -0.4, 0.6})
	hyper := map[string]float64{optimizers.EtaField: 0.1}
	if got, want := runChainSteps(t, nested, params, grads, hyper, 2), runChainSteps(t, flat, params, grads, hyper, 2); !slices.Equal(got, want) {
		t.Errorf("nested [adam [adam]] = %v, flat [adam adam] = %v: the nested Adam shared the outer one's scalars", got, want)
	}
}

// Decay's place survives nesting: a chain that ends in Decay must itself be last.
func TestNestedChainEndingInDecayMustBeLast(t *testing.T) {
	radam, sgd := buildRule(t, optimizers.NewRAdam()), buildRule(t, optimizers.NewSGD())
	decay := optimizers.Decay(optimizers.AnchorZero, nil)

	_, err := optimizers.NewChain(mustChain(t, radam, decay), sgd)
	mustContain(t, err, "chain [chain sgd]", "chain ending in Decay is at position 0 of 2 but must be last", "decoupled", "reorder to [sgd chain]")
	_, err = optimizers.NewChain(mustChain(t, decay), radam)
	mustContain(t, err, "chain ending in Decay is at position 0 of 2")
	_, err = optimizers.NewChain(mustChain(t, mustChain(t, radam, decay)), sgd)
	mustContain(t, err, "chain ending in chain ending in Decay")

	c, err := optimizers.NewChain(radam, mustChain(t, decay))
	if err != nil || !c.HasDecay() {
		t.Fatalf("radam > [decay] is valid and ends with Decay, got %v", err)
	}
	// Decay at the end of a chain nested before nothing else is last, however deep.
	if _, err := optimizers.NewChain(sgd, mustChain(t, mustChain(t, radam, decay))); err != nil {
		t.Errorf("sgd > [[radam decay]]: %v", err)
	}
}

// runChainSteps applies c for n steps (float64, one flat array, a fresh Shared as core uses) and
// returns the parameters.
func runChainSteps(t *testing.T, c *optimizers.Chain, params, grads *tensors.Tensor, hyper map[string]float64, n int) []float64 {
	t.Helper()
	init, err := c.Init(params)
	if err != nil {
		t.Fatal(err)
	}
	g := graph.NewGraph(goBackend(t), "nested")
	s := params.Shape()
	p, gr := graph.Parameter(g, "params", s), graph.Parameter(g, "grads", s)
	var st []*graph.Node
	for _, name := range c.StateNames() {
		st = append(st, graph.Parameter(g, name, s))
	}
	hp := optimizers.Hyper{}
	for _, f := range c.HyperFields() {
		hp[f] = graph.Parameter(g, f, shapes.Make(dtypes.Float64))
	}
	step := graph.Parameter(g, "step", shapes.Make(dtypes.Float64))
	np, ns := c.ApplyShared(p, gr, st, hp, step, optimizers.NewShared())
	g.Compile(append([]*graph.Node{np}, ns...)...)

	cur, state := params, init.Leaves()
	for i := 1; i <= n; i++ {
		in := []any{cur, grads}
		for _, x := range state {
			in = append(in, x)
		}
		for _, f := range c.HyperFields() {
			v, ok := hyper[f]
			if !ok {
				t.Fatalf("no value for hyperparameter %q", f)
			}
			in = append(in, v)
		}
		in = append(in, float64(i))
		outs := g.Run(in...)
		cur, state = outs[0], outs[1:]
	}
	return f64(t, cur)
}

func ExampleNewChain_nested() {
	radam, _ := optimizers.NewRAdam().Build()
	tail, _ := optimizers.NewChain(optimizers.Decay(optimizers.AnchorZero, nil))
	c, _ := optimizers.NewChain(radam, tail)
	fmt.Println(c.StateNames(), c.HasDecay())
	_, err := optimizers.NewChain(tail, radam)
	fmt.Println(err)
	// Output:
	// [0.radam.mu 0.radam.nu] true
	// optimizers: chain [chain radam]: chain ending in Decay is at position 0 of 2 but must be last (it is decoupled: applied after the base rule, never fed through its moments); reorder to [radam chain]
}
