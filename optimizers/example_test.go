package optimizers_test

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

// exampleLeaves is a small model: one dense layer (2x2 weight, 2-vector bias) per group.
func exampleLeaves() []optimizers.ParamLeaf {
	return []optimizers.ParamLeaf{
		{Keypath: []string{"backbone", "weights"}, Shape: shapes.Make(dtypes.Float32, 2, 2)},
		{Keypath: []string{"backbone", "biases"}, Shape: shapes.Make(dtypes.Float32, 2)},
		{Keypath: []string{"head", "weights"}, Shape: shapes.Make(dtypes.Float32, 2, 2)},
		{Keypath: []string{"head", "biases"}, Shape: shapes.Make(dtypes.Float32, 2)},
	}
}

func ExampleNewChain() {
	radam, _ := optimizers.NewRAdam().Build()
	decay := optimizers.Decay(optimizers.AnchorZero, nil)
	if _, err := optimizers.NewChain(decay, radam); err != nil {
		fmt.Println(err)
	}
	c, _ := optimizers.NewChain(radam, decay)
	fmt.Println(c.StateNames(), c.HyperFields())
	// Output:
	// optimizers: chain [decay radam]: Decay is at position 0 of 2 but must be last (it is decoupled: applied after the base rule, never fed through its moments); reorder to [radam decay]
	// [0.radam.mu 0.radam.nu] [eta lambda]
}

func ExampleChain_Describe() {
	adam, _ := optimizers.Adam{Beta1: 0.9, Beta2: 0.99, Eps: 1e-6}.Build()
	c, _ := optimizers.NewChain(adam, optimizers.Decay(optimizers.AnchorW0, nil))
	fmt.Println(c.Describe())
	// Output: adam(beta1=0.9,beta2=0.99,eps=1e-06) > decay(anchor=w0,mask=none)
}

func ExampleChain_Init() {
	layout, _ := optimizers.NewLayout("default", exampleLeaves()[:2])
	momentum, _ := optimizers.NewMomentum().Build()
	c, _ := optimizers.NewChain(momentum, optimizers.Decay(optimizers.AnchorW0, layout.NoDecayMask(nil)))
	params := tensors.FromFlatDataAndDimensions([]float32{1, 2, 3, 4, 5, 6}, 6)
	state, _ := c.Init(params) // host side: no program is compiled
	for i, name := range c.StateNames() {
		fmt.Println(name, tensors.MustCopyFlatData[float32](state.Leaves()[i]), c.ConstantLeaves()[i])
	}
	// Output:
	// 0.momentum.velocity [0 0 0 0 0 0] false
	// 1.decay.anchor [1 2 3 4 5 6] true
	// 1.decay.mask [1 1 1 1 0 0] true
}

func ExampleChain_Apply() {
	backend, _ := simplego.New("")
	sgd, _ := optimizers.NewSGD().Build()
	c, _ := optimizers.NewChain(sgd)
	g := graph.NewGraph(backend, "optimizer")
	s := shapes.Make(dtypes.Float64, 2)
	params, grads := graph.Parameter(g, "params", s), graph.Parameter(g, "grads", s)
	eta := graph.Parameter(g, "eta", shapes.Make(dtypes.Float64)) // a device input: no recompile per value
	step := graph.Parameter(g, "step", shapes.Make(dtypes.Int32))
	newParams, _ := c.Apply(params, grads, nil, optimizers.Hyper{"eta": eta}, step)
	g.Compile(newParams)
	for _, lr := range []float64{0.1, 0.5} {
		out := g.Run([]float64{1, 1}, []float64{1, -2}, lr, int32(1))
		fmt.Println(tensors.MustCopyFlatData[float64](out[0]))
	}
	// Output:
	// [0.9 1.2]
	// [0.5 2]
}

func ExampleChain_Bind() {
	radam, _ := optimizers.NewRAdam().Build()
	c, _ := optimizers.NewChain(radam)
	b := c.Bind("backbone", []string{"eta", "lambda"})
	fmt.Printf("%s: used %v, not used %v\n", b.Group, b.Used, b.Unused)
	// Output: backbone: used [eta], not used [lambda]
}

func ExampleChain_CheckScheduleKey() {
	radam, _ := optimizers.NewRAdam().Build()
	c, _ := optimizers.NewChain(radam)
	fmt.Println(c.CheckScheduleKey("eps") != nil, c.CheckScheduleKey("eta"))
	// Output: true <nil>
}

func ExampleClipByGlobalNorm() {
	backend, _ := simplego.New("")
	g := graph.NewGraph(backend, "clip")
	a := graph.Parameter(g, "group0", shapes.Make(dtypes.Float64, 1))
	b := graph.Parameter(g, "group1", shapes.Make(dtypes.Float64, 1))
	clipped := optimizers.ClipByGlobalNorm([]*graph.Node{a, b}, 1) // global norm over both groups
	g.Compile(clipped...)
	out := g.Run([]float64{3}, []float64{4})
	fmt.Println(out[0], out[1])
	// Output: [1]float64{0.6} [1]float64{0.8}
}

func ExampleCheckClipThreshold() {
	fmt.Println(optimizers.CheckClipThreshold(0))
	fmt.Println(optimizers.CheckClipThreshold(-1))
	// Output:
	// <nil>
	// optimizers: gradient_clip_norm is -1: use 0 to turn clipping off or a positive finite global-norm threshold (it is baked, so changing it recompiles the optimizer program)
}

func ExampleDecay() {
	anchor := tensors.FromFlatDataAndDimensions([]float32{0, 0, 0, 0, 1, 1}, 6)
	for _, a := range []optimizers.Anchor{optimizers.AnchorZero, optimizers.AnchorW0, optimizers.AnchorArray(anchor)} {
		d := optimizers.Decay(a, nil)
		fmt.Println(d.Describe(), d.HyperFields(), d.StateNames())
	}
	// Output:
	// decay(anchor=zero,mask=none) [lambda] []
	// decay(anchor=w0,mask=none) [lambda] [anchor]
	// decay(anchor=array,mask=none) [lambda] [anchor]
}

func ExampleNewLayout() {
	l, _ := optimizers.NewLayout("default", exampleLeaves()[:2])
	for _, leaf := range l.Leaves {
		fmt.Println(leaf.Keypath, leaf.Shape, leaf.Offset, leaf.Size)
	}
	fmt.Println(l.FlatShape())
	// Output:
	// [backbone weights] (Float32)[2 2] 0 4
	// [backbone biases] (Float32)[2] 4 2
	// (Float32)[6]
}

func ExampleGroupLayouts() {
	layouts, _ := optimizers.GroupLayouts(exampleLeaves(), func(kp []string) string {
		if kp[0] == "backbone" {
			return "backbone"
		}
		return optimizers.DefaultGroup
	})
	for _, l := range layouts {
		fmt.Println(l.Group, l.Size)
	}
	// Output:
	// default 6
	// backbone 6
}

func ExampleLayout_NoDecayMask() {
	l, _ := optimizers.NewLayout("default", exampleLeaves()[:2])
	m := l.NoDecayMask(nil) // DefaultNoDecay: every 1-D leaf
	mask, _ := m.Tensor(l.FlatShape())
	fmt.Println(m.Excluded(), tensors.MustCopyFlatData[float32](mask))
	// Output: [[backbone biases]] [1 1 1 1 0 0]
}

func ExampleDefaultNoDecay() {
	fmt.Println(optimizers.DefaultNoDecay([]string{"norm", "scale"}, shapes.Make(dtypes.Float32, 8)))
	fmt.Println(optimizers.DefaultNoDecay([]string{"dense", "weights"}, shapes.Make(dtypes.Float32, 8, 4)))
	// Output:
	// true
	// false
}

func ExampleLayout_Flatten() {
	l, _ := optimizers.NewLayout("default", exampleLeaves()[:2])
	w := tensors.FromFlatDataAndDimensions([]float32{1, 2, 3, 4}, 2, 2)
	b := tensors.FromFlatDataAndDimensions([]float32{5, 6}, 2)
	flat, _ := l.Flatten([]*tensors.Tensor{w, b})
	back, _ := l.Unflatten(flat)
	fmt.Println(tensors.MustCopyFlatData[float32](flat), back[0].Shape(), back[1].Shape())
	// Output: [1 2 3 4 5 6] (Float32)[2 2] (Float32)[2]
}

func ExampleLRRatios() {
	ratios, _ := optimizers.LRRatios(1e-3, []optimizers.GroupLR{{Group: "backbone", LR: 1e-4}})
	fmt.Printf("%.2f %.2f\n", ratios["default"], ratios["backbone"])
	_, err := optimizers.LRRatios(0, nil)
	fmt.Println(err != nil)
	// Output:
	// 1.00 0.10
	// true
}

func ExampleEffectiveHyper() {
	// At some step the eta schedule says 0.01 and lambda is 0.5; the backbone's ratio is 0.1.
	v, _ := optimizers.EffectiveHyper(map[string]float64{"eta": 0.01, "lambda": 0.5}, 0.1)
	fmt.Printf("eta %.4g lambda %.4g\n", v["eta"], v["lambda"])
	// Output: eta 0.001 lambda 0.0005
}

func ExampleHyperTensors() {
	ts, _ := optimizers.HyperTensors(map[string]float64{"eta": 0.5, "lambda": 0.25}, []string{"eta", "lambda"}, dtypes.Float32)
	fmt.Println(ts[0], ts[1])
	// Output: float32(0.5) float32(0.25)
}

func ExampleNewProgram() {
	layouts, _ := optimizers.GroupLayouts(exampleLeaves(), func(kp []string) string {
		if kp[0] == "backbone" {
			return "backbone"
		}
		return optimizers.DefaultGroup
	})
	var chains []*optimizers.Chain
	for _, l := range layouts {
		anchor := optimizers.AnchorZero
		if l.Group == "backbone" {
			anchor = optimizers.AnchorW0 // pretrained: decay toward the initial weights
		}
		c, _ := optimizers.BuildRuleChain(nil, optimizers.GroupSetup{Name: l.Group, Layout: l, Lambda: 1e-4, Anchor: anchor, NoDecay: l.NoDecayMask(nil)})
		chains = append(chains, c)
	}
	prog, _ := optimizers.NewProgram(chains, 1.0)
	fmt.Println(prog.Describe())
	// Output: clip=1; [0] radam(beta1=0.9,beta2=0.999,eps=1e-08,threshold=5) > decay(anchor=zero,mask=leaf); [1] radam(beta1=0.9,beta2=0.999,eps=1e-08,threshold=5) > decay(anchor=w0,mask=leaf)
}

func ExampleProgram_Init() {
	sgd, _ := optimizers.NewAdam().Build()
	c, _ := optimizers.NewChain(sgd)
	prog, _ := optimizers.NewProgram([]*optimizers.Chain{c, c}, 0)
	states, _ := prog.Init([]*tensors.Tensor{
		tensors.FromFlatDataAndDimensions([]float32{1, 2}, 2),
		tensors.FromFlatDataAndDimensions([]float32{3}, 1),
	})
	fmt.Println(len(states[0]), states[0][0].Shape(), states[1][1].Shape())
	// Output: 2 (Float32)[2] (Float32)[1]
}

func ExampleProgram_Apply() {
	backend, _ := simplego.New("")
	sgd, _ := optimizers.NewSGD().Build()
	c, _ := optimizers.NewChain(sgd)
	prog, _ := optimizers.NewProgram([]*optimizers.Chain{c, c}, 1) // clip the global norm to 1
	g := graph.NewGraph(backend, "optimizer")
	s := shapes.Make(dtypes.Float64, 1)
	p0, p1 := graph.Parameter(g, "p0", s), graph.Parameter(g, "p1", s)
	g0, g1 := graph.Parameter(g, "g0", s), graph.Parameter(g, "g1", s)
	eta := graph.Parameter(g, "eta", shapes.Make(dtypes.Float64))
	step := graph.Parameter(g, "step", shapes.Make(dtypes.Int32))
	hp := optimizers.Hyper{"eta": eta}
	newParams, _ := prog.Apply([]*graph.Node{p0, p1}, []*graph.Node{g0, g1}, [][]*graph.Node{nil, nil}, []optimizers.Hyper{hp, hp}, step)
	g.Compile(newParams...)
	out := g.Run([]float64{0}, []float64{0}, []float64{3}, []float64{4}, 1.0, int32(1))
	fmt.Println(out[0], out[1])
	// Output: [1]float64{-0.6} [1]float64{-0.8}
}

func ExampleBuildRuleChain() {
	l, _ := optimizers.NewLayout("default", exampleLeaves()[:2])
	// Level 1: the experiment names Momentum; a scheduled rho is a device input like eta.
	c, _ := optimizers.BuildRuleChain(optimizers.NewMomentum(), optimizers.GroupSetup{
		Name: "default", Layout: l, Lambda: 1e-4, NoDecay: l.NoDecayMask(nil), Scheduled: []string{"eta", "rho"},
	})
	fmt.Println(c.Describe(), c.HyperFields())
	// Output: momentum() > decay(anchor=zero,mask=leaf) [eta rho lambda]
}

func ExampleBuildFactoryChain() {
	l, _ := optimizers.NewLayout("default", exampleLeaves()[:2])
	factory := func(g optimizers.GroupSetup) (*optimizers.Chain, error) { // Level 2
		adam, err := optimizers.Adam{Beta1: 0.5, Beta2: 0.9, Eps: 1e-8}.Build()
		if err != nil {
			return nil, err
		}
		return optimizers.NewChain(adam, optimizers.Decay(g.Anchor, g.NoDecay))
	}
	_, b, _ := optimizers.BuildFactoryChain(factory, optimizers.GroupSetup{
		Name: "default", Layout: l, Lambda: 1e-4, Scheduled: []string{"eta", "rho"},
	})
	fmt.Println("reads", b.Used, "ignores", b.Unused)
	// Output: reads [eta] ignores [rho]
}

func ExampleRuleFields() {
	fields, _ := optimizers.RuleFields(optimizers.NewRAdam())
	for _, f := range fields {
		fmt.Println(f.Key, f.Value, f.Schedulable)
	}
	// Output:
	// eta 0.001 true
	// beta1 0.9 false
	// beta2 0.999 false
	// eps 1e-08 false
}

func ExampleRuleHyperValues() {
	v, _ := optimizers.RuleHyperValues(optimizers.NewMomentum())
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range v {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		fmt.Println(k, v[k])
	}
	// Output:
	// eta 0.001
	// rho 0.9
}

func ExampleCheckScheduleKey() {
	fmt.Println(optimizers.CheckScheduleKey(optimizers.NewAdam(), "eta"))
	fmt.Println(optimizers.CheckScheduleKey(optimizers.NewAdam(), "beta2") != nil)
	// Output:
	// <nil>
	// true
}

func ExampleDefaultRule() {
	fmt.Println(optimizers.DefaultRule().RuleName())
	// Output: radam
}
