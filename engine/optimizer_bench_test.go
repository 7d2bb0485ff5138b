package engine

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
)

// BenchmarkOptimizerProgram times the optimizer program alone (RAdam over 670k float32
// parameters) against a program that reads and writes the same bytes once (params + grads ->
// params; state -> state), on the XLA backend, and prints their ratio. Both sides take the same
// inputs and run through the same host path (optimizerArgs, run, takeOptimizerOutputs: the
// hyperparameters and the step built and uploaded each run), so only the program differs. Runs
// are chained (each run's outputs feed the next) and synchronized by reading one value back at
// the end; which side goes first alternates every repeat, with a GC between sides, and the ratio
// is the median of the per-repeat ratios.
func BenchmarkOptimizerProgram(b *testing.B) {
	src := benchMLPData(b)
	n := newHostCheckEngine(b, &hostCheckMLP{Depth: 2, Width: 512}, src, compilecache.New())
	p, err := n.optimizerProgram()
	if err != nil {
		b.Fatal(err)
	}
	var grads []*tensors.Tensor
	bytes := 0
	for _, g := range n.groups {
		for s := range g.segs {
			t := tensors.FromShape(g.segShape(s))
			if err := t.MaterializeOnDevice(n.backend.Backend, false, 0); err != nil {
				b.Fatal(err)
			}
			grads = append(grads, t)
			bytes += int(g.segShape(s).Memory())
		}
	}

	// The copy program: the optimizer program's inputs, in its order, and its outputs (every
	// group's parameters, then every group's non-constant state), each one read and one write:
	// p + g -> p, -s -> s. The same bytes the optimizer must move, and no math; the
	// hyperparameters and the step are inputs it ignores.
	cg := graph.NewGraph(n.backend.Backend, "copy_baseline")
	nodes := map[string]*graph.Node{}
	for _, in := range p.inputs {
		nodes[in.Name] = graph.Parameter(cg, in.Name, shapes.Make(dtypeOf(in.DType), in.Shape...))
	}
	var outs []*graph.Node
	for _, g := range n.groups {
		for s := range g.segs {
			outs = append(outs, graph.Add(nodes[paramsInput(g, s)], nodes[gradsInput(g, s)]))
		}
	}
	for i, g := range n.groups {
		for l := range n.st.groups[i].opt {
			if g.constLeaf(l) {
				continue
			}
			for s := range g.segs {
				outs = append(outs, graph.Neg(nodes[stateInput(l)(g, s)]))
			}
		}
	}
	cg.Compile(outs...)
	cp := &program{kind: "copy", g: cg, inputs: p.inputs}
	if err := cp.declare(p.outputs); err != nil { // the same outputs, in the same order
		b.Fatal(err)
	}

	const runs = 50
	step := 0
	repeat := func(prog *program) float64 {
		start := time.Now()
		for range runs {
			step++
			args, err := n.optimizerArgs(grads, false, step)
			if err != nil {
				b.Fatal(err)
			}
			outs, err := n.execute(prog, args)
			if err != nil {
				b.Fatal(err)
			}
			if err := n.takeOptimizerOutputs(prog, outs); err != nil {
				b.Fatal(err)
			}
		}
		last := n.st.groups[len(n.st.groups)-1]
		_ = last.params[0].Value()
		return time.Since(start).Seconds() / runs
	}
	repeat(p) // warm-up
	repeat(cp)
	b.ResetTimer()
	var ot, ct []float64
	sides := []func(){
		func() { ot = append(ot, repeat(p)) },
		func() { ct = append(ct, repeat(cp)) },
	}
	for r := range 6 {
		for k := range sides {
			runtime.GC() // one side's garbage is not collected in the other's time
			sides[(r+k)%len(sides)]()
		}
	}
	b.StopTimer()
	om, cm := medianOf(ot)*1e3, medianOf(ct)*1e3
	ratio := pairedRatio(ot, ct)
	mib := float64(bytes) / (1 << 20)
	fmt.Printf("optimizer program / one-pass copy: %.2f paired (optimizer %.3f ms, copy %.3f ms, medians of %d repeats; %.2f MiB of parameters, %d state arrays per group)\n",
		ratio, om, cm, len(ot), mib, len(n.st.groups[0].opt))
	b.ReportMetric(ratio, "opt/copy")
	b.ReportMetric(om, "opt-ms")
	b.ReportMetric(cm, "copy-ms")
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// narrowMLP stacks Layers dense layers of width 32 with a tanh between (2 arrays per layer): the
// layout benchmark's model, whose array count grows while its size stays small.
type narrowMLP struct {
	Layers int `nitro:"graphconst"`
}

func newNarrowEngine(b *testing.B, layers int, src *prefetch.ArrayBatches) *Engine {
	return newTestEngine(b, testRun{exp: &narrowMLP{Layers: layers}, data: src, backend: "xla", cache: compilecache.New(),
		forward: func(view any, ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
			return view.(*narrowMLP).Forward(ctx, in)
		},
		loss: func(_ any, out, _ map[string]*graph.Node) *graph.Node {
			return graph.ReduceAllMean(graph.Square(out["y"]))
		},
	})
}

func (e *narrowMLP) Forward(ctx *context.Context, in map[string]*graph.Node) map[string]*graph.Node {
	x := in["x"]
	for i := range e.Layers {
		x = graph.Tanh(layers.Dense(ctx.In(fmt.Sprintf("l%03d", i)), x, true, narrowWidth))
	}
	return map[string]*graph.Node{"y": x}
}

const narrowWidth = 32

// optLayout is one way to lay out the optimizer program: how its inputs are declared, and how
// the update is emitted on them.
type optLayout struct {
	name string
	// flatIO: the program's parameter, gradient and state inputs and outputs are one flat buffer
	// per group, as the engine's are (flat.go); otherwise they are per array, as the engine's
	// were before its parameters went flat.
	flatIO bool
	// pack: per-array inputs concatenated into one flat buffer per group inside the program, the
	// chain applied once per group, the results sliced back into arrays.
	pack bool
	// copyOnly: per-array inputs and outputs with no optimizer math (p + g -> p, -s -> s): the
	// floor the per-array layout's buffer count sets, whatever the update does.
	copyOnly bool
}

var optLayouts = []optLayout{
	{name: "per array (engine before)"},
	{name: "flat, packed in program", pack: true},
	{name: "flat at the boundary", flatIO: true},
	{name: "per array, copy only", copyOnly: true},
}

// layoutSide is one layout's compiled optimizer program and its device-resident state.
type layoutSide struct {
	exec          *graph.Graph
	nodes, inputs int
	compile       time.Duration
	params, grads []*tensors.Tensor // per array, or one per group (flatIO)
	state         [][]*tensors.Tensor
	hyper         []float64
}

// buildLayout emits the real chain (n's groups, RAdam by default) in layout l and compiles it.
// All of n's arrays are in one group (narrowMLP has no ParamGroup).
func buildLayout(b *testing.B, n *Engine, l optLayout) *layoutSide {
	grp := n.groups[0]
	chain := grp.opt
	prog, err := optimizers.NewProgram([]*optimizers.Chain{chain}, 0)
	if err != nil {
		b.Fatal(err)
	}
	S := len(n.st.groups[0].opt)
	shapesOf := make([]shapes.Shape, len(grp.vars))
	total := 0
	for j, v := range grp.vars {
		shapesOf[j] = v.Shape()
		total += v.Shape().Size()
	}
	dt := shapesOf[0].DType
	g := graph.NewGraph(n.backend.Backend, "layout")
	side := &layoutSide{exec: g}
	param := func(name string, s shapes.Shape) *graph.Node { return graph.Parameter(g, name, s) }
	flat := func(xs []*graph.Node) *graph.Node {
		parts := make([]*graph.Node, len(xs))
		for j, x := range xs {
			parts[j] = graph.Reshape(x, -1)
		}
		return graph.Concatenate(parts, 0)
	}
	unflat := func(x *graph.Node) []*graph.Node {
		out := make([]*graph.Node, len(shapesOf))
		off := 0
		for j, s := range shapesOf {
			out[j] = graph.Reshape(graph.SliceAxis(x, 0, graph.AxisRange(off, off+s.Size())), s.Dimensions...)
			off += s.Size()
		}
		return out
	}
	var ps, gs []*graph.Node
	st := make([][]*graph.Node, S)
	if l.flatIO {
		fs := shapes.Make(dt, total)
		ps, gs = []*graph.Node{param("p", fs)}, []*graph.Node{param("g", fs)}
		for s := range S {
			st[s] = []*graph.Node{param(fmt.Sprintf("s%d", s), fs)}
		}
	} else {
		for j, s := range shapesOf {
			ps = append(ps, param(fmt.Sprintf("p%d", j), s))
		}
		for j, s := range shapesOf {
			gs = append(gs, param(fmt.Sprintf("g%d", j), s))
		}
		for s := range S {
			for j, sh := range shapesOf {
				st[s] = append(st[s], param(fmt.Sprintf("s%d_%d", s, j), sh))
			}
		}
	}
	hyper := optimizers.Hyper{}
	hv, err := n.hyper(grp.name, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range chain.HyperFields() {
		hyper[f] = param("hyper/"+f, shapes.Make(dtypes.Float32))
		side.hyper = append(side.hyper, hv[f])
	}
	step := param("step", shapes.Make(dtypes.Float32))
	var outP []*graph.Node
	outS := make([][]*graph.Node, S)
	switch {
	case l.copyOnly:
		for j := range ps {
			outP = append(outP, graph.Add(ps[j], gs[j]))
		}
		for s := range S {
			for j := range st[s] {
				outS[s] = append(outS[s], graph.Neg(st[s][j]))
			}
		}
	case l.flatIO:
		np, ns := prog.Apply(ps, gs, [][]*graph.Node{flatState(st)}, []optimizers.Hyper{hyper}, step)
		outP = np
		for s := range S {
			outS[s] = []*graph.Node{ns[0][s]}
		}
	case l.pack:
		fst := make([]*graph.Node, S)
		for s := range S {
			fst[s] = flat(st[s])
		}
		np, ns := prog.Apply([]*graph.Node{flat(ps)}, []*graph.Node{flat(gs)}, [][]*graph.Node{fst}, []optimizers.Hyper{hyper}, step)
		outP = unflat(np[0])
		for s := range S {
			outS[s] = unflat(ns[0][s])
		}
	default:
		np, ns := prog.ApplyArrays([][]*graph.Node{ps}, [][]*graph.Node{gs}, [][][]*graph.Node{st}, []optimizers.Hyper{hyper}, step)
		outP, outS = np[0], ns[0]
	}
	outs := slices.Clone(outP)
	for s := range S {
		outs = append(outs, outS[s]...)
	}
	side.nodes, side.inputs = len(g.Nodes()), g.NumParameters()
	start := time.Now()
	g.Compile(outs...)
	side.compile = time.Since(start)
	// Device-resident starting values, a function of each element's place in the group (so every
	// layout starts from the same numbers and must end at the same ones): parameters and small
	// gradients, zero state.
	dev := func(s shapes.Shape, from int, fill func(i int) float32) *tensors.Tensor {
		v := make([]float32, s.Size())
		for i := range v {
			v[i] = fill(from + i)
		}
		t := tensors.FromFlatDataAndDimensions(v, s.Dimensions...)
		if err := t.MaterializeOnDevice(n.backend.Backend, false, 0); err != nil {
			b.Fatal(err)
		}
		return t
	}
	sizes := shapesOf
	if l.flatIO {
		sizes = []shapes.Shape{shapes.Make(dt, total)}
	}
	side.state = make([][]*tensors.Tensor, S)
	off := 0
	for _, sh := range sizes {
		side.params = append(side.params, dev(sh, off, func(i int) float32 { return 0.1 * float32(math.Sin(0.37*float64(i))) }))
		side.grads = append(side.grads, dev(sh, off, func(i int) float32 { return 0.01 * float32(math.Cos(0.11*float64(i))) }))
		for s := range S {
			side.state[s] = append(side.state[s], dev(sh, off, func(int) float32 { return 0 }))
		}
		off += sh.Size()
	}
	return side
}

// flatParams reads the side's parameters back, end to end in array order.
func (l *layoutSide) flatParams() []float32 {
	var out []float32
	for _, t := range l.params {
		tensors.ConstFlatData(t, func(f []float32) { out = append(out, f...) })
	}
	return out
}

// flatState is one group's state leaves as the flat Apply takes them (leaf order).
func flatState(st [][]*graph.Node) []*graph.Node {
	out := make([]*graph.Node, len(st))
	for s := range st {
		out[s] = st[s][0]
	}
	return out
}

// repeat runs the program runs times, each run's parameters and state donated into the next
// (gradients fixed; the step and hyperparameters uploaded per run, as core does), and returns
// seconds per run, synchronized by reading one parameter back.
func (l *layoutSide) repeat(b *testing.B, n *Engine, runs, from int) float64 {
	start := time.Now()
	for k := range runs {
		var in []any
		donate := func(t *tensors.Tensor) any {
			d, err := graph.DonateTensorBuffer(t, n.backend.Backend, 0)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
		for _, t := range l.params {
			in = append(in, donate(t))
		}
		for _, t := range l.grads {
			in = append(in, t)
		}
		for _, leaves := range l.state {
			for _, t := range leaves {
				in = append(in, donate(t))
			}
		}
		for _, h := range l.hyper {
			in = append(in, tensors.FromScalar(float32(h)))
		}
		in = append(in, tensors.FromScalar(float32(from+k+1)))
		outs := l.exec.Run(in...)
		l.params, outs = outs[:len(l.params)], outs[len(l.params):]
		for s := range l.state {
			l.state[s], outs = outs[:len(l.state[s])], outs[len(l.state[s]):]
		}
	}
	_ = l.params[len(l.params)-1].Value()
	return time.Since(start).Seconds() / float64(runs)
}

// BenchmarkOptimizerLayout measures the optimizer program (RAdam, the default chain, no clip) in
// three layouts at 6, 60 and 600 parameter arrays (narrowMLP: 3, 30 and 300 dense layers of width
// 32) on XLA, and prints per layout its node count, input count, compile time and step time, with
// the step-time ratios to the per-array layout as the median of per-repeat ratios (the layouts'
// order rotates every repeat, a GC between sides). "Flat at the boundary" is the optimizer
// program alone, as the engine compiles it: the packing the gradient program then does is left
// out (BenchmarkArrayCount times the whole step).
// "Per array, copy only" moves the per-array layout's bytes through as many buffers with no math:
// how much of the per-array step is the buffer count rather than the update.
func BenchmarkOptimizerLayout(b *testing.B) {
	const runs, repeats = 20, 7
	type row struct {
		arrays int
		sides  []*layoutSide
		times  [][]float64 // [layout][repeat] seconds per run
	}
	var rows []row
	for _, nl := range []int{3, 30, 300} {
		x := tensors.FromFlatDataAndDimensions(make([]float32, 8*narrowWidth), 8, narrowWidth)
		src, err := prefetch.NewArrayBatches(map[string]*tensors.Tensor{"x": x}, 8, prefetch.ArrayOptions{DropPartial: true})
		if err != nil {
			b.Fatal(err)
		}
		n := newNarrowEngine(b, nl, src)
		r := row{arrays: len(n.groups[0].vars), times: make([][]float64, len(optLayouts))}
		for _, l := range optLayouts {
			s := buildLayout(b, n, l)
			s.repeat(b, n, runs, 0) // warm-up
			r.sides = append(r.sides, s)
		}
		for rep := range repeats {
			for k := range optLayouts {
				i := (rep + k) % len(optLayouts)
				runtime.GC()
				r.times[i] = append(r.times[i], r.sides[i].repeat(b, n, runs, (rep+1)*runs))
			}
		}
		// The layouts are one update laid out three ways: after the same steps from the same
		// start, their parameters agree (to rounding: XLA may fuse each layout's math differently).
		want := r.sides[0].flatParams()
		for i, l := range optLayouts {
			if l.copyOnly || i == 0 {
				continue
			}
			got := r.sides[i].flatParams()
			for k := range want {
				if d := math.Abs(float64(got[k] - want[k])); d > 1e-6+1e-5*math.Abs(float64(want[k])) {
					b.Fatalf("%d arrays: layout %q ends with parameter element %d = %v, per array %v: the layouts do not compute the same update", r.arrays, l.name, k, got[k], want[k])
				}
			}
		}
		rows = append(rows, r)
	}
	fmt.Printf("optimizer program layouts (RAdam, float32, XLA; step: median of %d repeats of %d runs, order rotating; ratio: median of per-repeat ratios to per array):\n", repeats, runs)
	fmt.Printf("  %6s  %-24s %7s %7s %11s %10s %14s\n", "arrays", "layout", "nodes", "inputs", "compile ms", "step µs", "step/per-array")
	for _, r := range rows {
		for i, l := range optLayouts {
			s := r.sides[i]
			ratio := pairedRatio(r.times[i], r.times[0])
			fmt.Printf("  %6d  %-24s %7d %7d %11.1f %10.1f %14.2f\n", r.arrays, l.name, s.nodes, s.inputs,
				float64(s.compile.Microseconds())/1e3, medianOf(r.times[i])*1e6, ratio)
			if i > 0 {
				b.ReportMetric(ratio, fmt.Sprintf("%s/per-array@%d", layoutTag(l), r.arrays))
			}
		}
	}
}

func layoutTag(l optLayout) string {
	switch {
	case l.flatIO:
		return "flatio"
	case l.copyOnly:
		return "copy"
	}
	return "packed"
}

// pairedRatio is the median of a[i]/b[i]: each repeat's sides ran back to back, so pairing them
// cancels the drift of a shared machine better than a ratio of medians.
func pairedRatio(a, b []float64) float64 {
	r := make([]float64, len(a))
	for i := range a {
		r[i] = a[i] / b[i]
	}
	return medianOf(r)
}
