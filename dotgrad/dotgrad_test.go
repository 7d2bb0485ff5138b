package dotgrad

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/gomlx/gopjrt/dtypes"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(envChild); spec != "" {
		// Re-executed by measureXLA: compile one gradient program with XLA and exit.
		if err := xlaChild(spec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	Install()
	os.Exit(m.Run())
}

var (
	goBackendOnce sync.Once
	goBackend     backends.Backend
)

// pureGo returns GoMLX's pure-Go backend, shared by the tests.
func pureGo(t testing.TB) backends.Backend {
	goBackendOnce.Do(func() {
		b, err := simplego.New("")
		if err != nil {
			t.Fatalf("simplego.New: %v", err)
		}
		goBackend = b
	})
	return goBackend
}

// withOriginalGradients runs fn with GoMLX's own Dot and DotGeneral gradients registered.
// VJPRegistration is process-wide: tests that call it must not run in parallel.
func withOriginalGradients(t testing.TB, fn func()) {
	t.Helper()
	if !Installed() {
		t.Fatal("Install has not run")
	}
	types := []graph.NodeType{graph.NodeTypeDot, graph.NodeTypeDotGeneral}
	saved := make([]graph.VJP, len(types))
	for i, nt := range types {
		saved[i] = graph.VJPRegistration[nt]
		graph.VJPRegistration[nt] = Original(nt)
	}
	defer func() {
		for i, nt := range types {
			graph.VJPRegistration[nt] = saved[i]
		}
	}()
	fn()
}

// dotCase is a product of lhs and rhs built by op.
type dotCase struct {
	name     string
	lhs, rhs []int
	op       func(lhs, rhs *graph.Node) *graph.Node
}

func dotGeneralOp(lc, lb, rc, rb []int) func(lhs, rhs *graph.Node) *graph.Node {
	return func(lhs, rhs *graph.Node) *graph.Node { return graph.DotGeneral(lhs, lc, lb, rhs, rc, rb) }
}

func randomFlat(rng *rand.Rand, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = rng.NormFloat64()
	}
	return out
}

func size(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

// evalCase holds what the gradient checks need for one dotCase.
type evalCase struct {
	lhs, rhs []float64 // operand values
	weights  []float64 // weights of the loss sum(out * weights)
	outDims  []int
}

func newEvalCase(t *testing.T, b backends.Backend, c dotCase, rng *rand.Rand) *evalCase {
	g := graph.NewGraph(b, "shape_"+c.name)
	out := c.op(graph.Parameter(g, "left", shapes.Make(dtypes.Float64, c.lhs...)),
		graph.Parameter(g, "right", shapes.Make(dtypes.Float64, c.rhs...)))
	outDims := out.Shape().Dimensions
	g.Finalize()
	return &evalCase{
		lhs:     randomFlat(rng, size(c.lhs)),
		rhs:     randomFlat(rng, size(c.rhs)),
		weights: randomFlat(rng, size(outDims)),
		outDims: outDims,
	}
}

// lossGraph builds loss = sum(op(lhs, rhs) * weights) on b, and, if withGrads, its gradients with
// respect to lhs and rhs, with whatever gradients VJPRegistration holds now.
func lossGraph(b backends.Backend, c dotCase, e *evalCase, dtype dtypes.DType, withGrads bool) (g *graph.Graph, fallbacksUsed int64) {
	before := fallbacks.Load()
	g = graph.NewGraph(b, "dot_"+c.name)
	lhs := graph.Parameter(g, "left", shapes.Make(dtype, c.lhs...))
	rhs := graph.Parameter(g, "right", shapes.Make(dtype, c.rhs...))
	out := c.op(lhs, rhs)
	w := graph.ConvertDType(graph.Const(g, tensors.FromFlatDataAndDimensions(e.weights, e.outDims...)), dtype)
	loss := graph.ReduceAllSum(graph.Mul(out, w))
	outputs := []*graph.Node{loss}
	if withGrads {
		outputs = append(outputs, graph.Gradient(loss, lhs, rhs)...)
	}
	g.Compile(outputs...)
	return g, fallbacks.Load() - before
}

func asDType(flat []float64, dtype dtypes.DType, dims []int) *tensors.Tensor {
	if dtype == dtypes.Float32 {
		f32 := make([]float32, len(flat))
		for i, x := range flat {
			f32[i] = float32(x)
		}
		return tensors.FromFlatDataAndDimensions(f32, dims...)
	}
	return tensors.FromFlatDataAndDimensions(slicesClone(flat), dims...)
}

func slicesClone(x []float64) []float64 { return append([]float64(nil), x...) }

func toFloat64(t *tensors.Tensor) []float64 {
	switch t.DType() {
	case dtypes.Float32:
		f32 := tensors.MustCopyFlatData[float32](t)
		out := make([]float64, len(f32))
		for i, x := range f32 {
			out[i] = float64(x)
		}
		return out
	default:
		return tensors.MustCopyFlatData[float64](t)
	}
}

// gradientsOf returns d loss / d lhs and d loss / d rhs.
func gradientsOf(t *testing.T, b backends.Backend, c dotCase, e *evalCase, dtype dtypes.DType) (gl, gr []float64, fallbacksUsed int64) {
	t.Helper()
	g, fb := lossGraph(b, c, e, dtype, true)
	defer g.Finalize()
	res := g.Run(asDType(e.lhs, dtype, c.lhs), asDType(e.rhs, dtype, c.rhs))
	return toFloat64(res[1]), toFloat64(res[2]), fb
}

// finiteDifferences returns the central finite-difference gradients of the loss in float64.
func finiteDifferences(t *testing.T, b backends.Backend, c dotCase, e *evalCase) (gl, gr []float64) {
	t.Helper()
	g, _ := lossGraph(b, c, e, dtypes.Float64, false)
	defer g.Finalize()
	loss := func(lhs, rhs []float64) float64 {
		return toFloat64(g.Run(asDType(lhs, dtypes.Float64, c.lhs), asDType(rhs, dtypes.Float64, c.rhs))[0])[0]
	}
	const eps = 1e-3
	diff := func(x []float64, f func([]float64) float64) []float64 {
		grad := make([]float64, len(x))
		p := slicesClone(x)
		for i := range x {
			p[i] = x[i] + eps
			up := f(p)
			p[i] = x[i] - eps
			down := f(p)
			p[i] = x[i]
			grad[i] = (up - down) / (2 * eps)
		}
		return grad
	}
	gl = diff(e.lhs, func(x []float64) float64 { return loss(x, e.rhs) })
	gr = diff(e.rhs, func(x []float64) float64 { return loss(e.lhs, x) })
	return gl, gr
}

// assertClose fails unless got and want agree elementwise to rel, relative to each element and,
// for elements near zero, to the largest element.
func assertClose(t *testing.T, what string, got, want []float64, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale := 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	for i := range got {
		if d := math.Abs(got[i] - want[i]); !(d <= rel*math.Abs(want[i])+rel*1e-3*scale) {
			t.Fatalf("%s: element %d = %.10g, want %.10g (|diff| %.3g)", what, i, got[i], want[i], d)
		}
	}
}

// fixedCases are hand-picked layouts, each named for what it covers.
func fixedCases() []dotCase {
	return []dotCase{
		{"Dot/vector.vector", []int{5}, []int{5}, graph.Dot},
		{"Dot/matrix.vector", []int{4, 5}, []int{5}, graph.Dot},
		{"Dot/matrix.matrix", []int{4, 5}, []int{5, 3}, graph.Dot},
		{"matmul", []int{4, 5}, []int{5, 3}, dotGeneralOp([]int{1}, nil, []int{0}, nil)},
		{"lhs-contracting-first,rhs-contracting-last", []int{5, 4}, []int{3, 5}, dotGeneralOp([]int{0}, nil, []int{1}, nil)},
		{"one-batch", []int{2, 4, 5}, []int{2, 5, 3}, dotGeneralOp([]int{2}, []int{0}, []int{1}, []int{0})},
		{"two-batch", []int{2, 3, 4, 5}, []int{2, 3, 5, 3}, dotGeneralOp([]int{3}, []int{0, 1}, []int{2}, []int{0, 1})},
		{"two-batch-swapped", []int{2, 3, 4}, []int{3, 2, 4}, dotGeneralOp([]int{2}, []int{0, 1}, []int{2}, []int{1, 0})},
		{"batch-not-leading", []int{4, 2, 5}, []int{5, 3, 2}, dotGeneralOp([]int{2}, []int{1}, []int{0}, []int{2})},
		{"two-contracting-unsorted", []int{3, 4, 5, 2}, []int{2, 3, 4}, dotGeneralOp([]int{1, 3}, nil, []int{2, 0}, nil)},
		{"batch+two-contracting-transposed", []int{5, 2, 3, 4}, []int{4, 2, 5, 3}, dotGeneralOp([]int{3, 0}, []int{1}, []int{0, 2}, []int{1})},
		{"full-contraction", []int{3, 4}, []int{4, 3}, dotGeneralOp([]int{0, 1}, nil, []int{1, 0}, nil)},
		{"outer-product", []int{3}, []int{4}, dotGeneralOp(nil, nil, nil, nil)},
		{"batched-dot", []int{2, 3}, []int{2, 3}, dotGeneralOp([]int{1}, []int{0}, []int{1}, []int{0})},
		{"rhs-no-free", []int{4, 5}, []int{5}, dotGeneralOp([]int{1}, nil, []int{0}, nil)},
		{"lhs-no-free", []int{5}, []int{5, 3}, dotGeneralOp([]int{0}, nil, []int{0}, nil)},
		{"einsum-bij,bjk->bik", []int{2, 3, 4}, []int{2, 4, 5}, func(l, r *graph.Node) *graph.Node { return graph.Einsum("bij,bjk->bik", l, r) }},
		{"einsum-jb,kjb->bk", []int{3, 2}, []int{4, 3, 2}, func(l, r *graph.Node) *graph.Node { return graph.Einsum("jb,kjb->bk", l, r) }},
	}
}

// randomCases returns n DotGeneral layouts with random numbers of batch, contracting and free axes,
// placed at random positions in each operand.
func randomCases(rng *rand.Rand, n int) []dotCase {
	var cases []dotCase
	for len(cases) < n {
		nb, nc, nlf, nrf := rng.IntN(3), rng.IntN(3), rng.IntN(3), rng.IntN(3)
		if nb+nc+nlf == 0 || nb+nc+nrf == 0 {
			continue // rank-0 operands are not a dot product.
		}
		dim := func() int { return 1 + rng.IntN(3) }
		batch, contract := make([]int, nb), make([]int, nc)
		for i := range batch {
			batch[i] = dim()
		}
		for i := range contract {
			contract[i] = dim()
		}
		// place lays out an operand: its batch and contracting axes plus nFree free ones, shuffled.
		place := func(nFree int) (dims, cAxes, bAxes []int) {
			type role struct{ kind, idx int }
			var roles []role
			for i := range nb {
				roles = append(roles, role{0, i})
			}
			for i := range nc {
				roles = append(roles, role{1, i})
			}
			for i := range nFree {
				roles = append(roles, role{2, i})
			}
			rng.Shuffle(len(roles), func(i, j int) { roles[i], roles[j] = roles[j], roles[i] })
			cAxes, bAxes = make([]int, nc), make([]int, nb)
			for axis, r := range roles {
				switch r.kind {
				case 0:
					bAxes[r.idx] = axis
					dims = append(dims, batch[r.idx])
				case 1:
					cAxes[r.idx] = axis
					dims = append(dims, contract[r.idx])
				default:
					dims = append(dims, dim())
				}
			}
			return dims, cAxes, bAxes
		}
		ld, lc, lb := place(nlf)
		rd, rc, rb := place(nrf)
		cases = append(cases, dotCase{
			name: fmt.Sprintf("random%02d/lhs%v-c%v-b%v/rhs%v-c%v-b%v", len(cases), ld, lc, lb, rd, rc, rb),
			lhs:  ld, rhs: rd,
			op: dotGeneralOp(lc, lb, rc, rb),
		})
	}
	return cases
}

// TestGradientsMatchOriginalAndFiniteDifferences checks, on the pure-Go backend in float64, that the
// installed gradients equal GoMLX's own and central finite differences, and that none of the cases
// fell back to GoMLX's gradient.
func TestGradientsMatchOriginalAndFiniteDifferences(t *testing.T) {
	b := pureGo(t)
	rng := rand.New(rand.NewPCG(1, 2))
	cases := append(fixedCases(), randomCases(rng, 40)...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEvalCase(t, b, c, rng)
			gl, gr, fb := gradientsOf(t, b, c, e, dtypes.Float64)
			if fb != 0 {
				t.Fatalf("the installed gradient fell back to GoMLX's %d time(s)", fb)
			}
			var ol, or []float64
			withOriginalGradients(t, func() { ol, or, _ = gradientsOf(t, b, c, e, dtypes.Float64) })
			assertClose(t, "d/dlhs vs GoMLX", gl, ol, 1e-5)
			assertClose(t, "d/drhs vs GoMLX", gr, or, 1e-5)
			fl, fr := finiteDifferences(t, b, c, e)
			assertClose(t, "d/dlhs vs finite differences", gl, fl, 1e-6)
			assertClose(t, "d/drhs vs finite differences", gr, fr, 1e-6)
		})
	}
}

// TestFloat32 checks the gradients keep the operands' dtype and agree with GoMLX's in float32.
func TestFloat32(t *testing.T) {
	b := pureGo(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range fixedCases()[:11] {
		t.Run(c.name, func(t *testing.T) {
			e := newEvalCase(t, b, c, rng)
			gl, gr, fb := gradientsOf(t, b, c, e, dtypes.Float32)
			if fb != 0 {
				t.Fatalf("fell back %d time(s)", fb)
			}
			var ol, or []float64
			withOriginalGradients(t, func() { ol, or, _ = gradientsOf(t, b, c, e, dtypes.Float32) })
			assertClose(t, "d/dlhs vs GoMLX", gl, ol, 1e-4)
			assertClose(t, "d/drhs vs GoMLX", gr, or, 1e-4)
		})
	}
}

// TestDotGeneralDims checks the axes are read back from a DotGeneral node's String(), whatever
// alias or markers the node has, and that anything else is refused.
func TestDotGeneralDims(t *testing.T) {
	b := pureGo(t)
	g := graph.NewGraph(b, "dims")
	defer g.Finalize()
	lhs := graph.Parameter(g, "a", shapes.Make(dtypes.Float32, 5, 2, 3, 4))
	rhs := graph.Parameter(g, "b", shapes.Make(dtypes.Float32, 4, 2, 5, 6))
	want := dims{lhsContracting: []int{3, 0}, lhsBatch: []int{1}, rhsContracting: []int{0, 2}, rhsBatch: []int{1}}
	newNode := func() *graph.Node {
		return graph.DotGeneral(lhs, want.lhsContracting, want.lhsBatch, rhs, want.rhsContracting, want.rhsBatch)
	}
	check := func(name string, n *graph.Node) {
		t.Helper()
		got, ok := dotGeneralDims(n)
		if !ok || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: dotGeneralDims(%s) = %v, %v; want %v, true", name, n, got, ok, want)
		}
	}
	check("plain", newNode())
	tricky := newNode()
	tricky.WithAlias(`a "DotGeneral(lhs=[#0], lhsContractingAxes=[9], lhsBatchAxes=[], rhs=[#1], rhsContractingAxes=[9], rhsBatchAxes=[])" ]`)
	check("alias", tricky)
	logged := newNode()
	logged.SetLogged("look")
	check("logged", logged)
	check("stop-gradient", graph.StopGradient(newNode()).Inputs()[0])
	if _, ok := dotGeneralDims(graph.Dot(graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 2, 3)), graph.Parameter(g, "y", shapes.Make(dtypes.Float32, 3)))); ok {
		t.Error("dotGeneralDims accepted a Dot node")
	}
}

// TestInconsistentDimsFallBack checks that axes that disagree with the shapes are refused.
func TestInconsistentDimsFallBack(t *testing.T) {
	b := pureGo(t)
	g := graph.NewGraph(b, "inconsistent")
	defer g.Finalize()
	lhs := graph.Parameter(g, "a", shapes.Make(dtypes.Float32, 2, 3))
	rhs := graph.Parameter(g, "b", shapes.Make(dtypes.Float32, 3, 4))
	out := graph.DotGeneral(lhs, []int{1}, nil, rhs, []int{0}, nil)
	v := graph.OnesLike(out)
	for name, d := range map[string]dims{
		"wrong axis":          {lhsContracting: []int{0}, rhsContracting: []int{0}},
		"out of range":        {lhsContracting: []int{2}, rhsContracting: []int{0}},
		"repeated":            {lhsContracting: []int{1, 1}, rhsContracting: []int{0, 0}},
		"unpaired":            {lhsContracting: []int{1}, rhsContracting: nil},
		"batch not in output": {lhsContracting: []int{1}, rhsContracting: []int{0}, lhsBatch: []int{0}, rhsBatch: []int{1}},
	} {
		if grads := gradients(out, []*graph.Node{v}, d); grads != nil {
			t.Errorf("%s: gradients accepted %+v for %s", name, d, out)
		}
	}
	if grads := gradients(out, []*graph.Node{v}, dims{lhsContracting: []int{1}, rhsContracting: []int{0}}); len(grads) != 2 {
		t.Errorf("gradients refused the true axes")
	}
	// An adjoint not shaped like the output (a Jacobian) is left to GoMLX.
	if grads := gradients(out, []*graph.Node{graph.OnesLike(lhs)}, dims{lhsContracting: []int{1}, rhsContracting: []int{0}}); grads != nil {
		t.Errorf("gradients accepted an adjoint shaped %s for output %s", lhs.Shape(), out.Shape())
	}
	// Integer dot products are left to GoMLX: the call goes through fallback.
	before := fallbacks.Load()
	li := graph.Parameter(g, "li", shapes.Make(dtypes.Int32, 2, 3))
	ri := graph.Parameter(g, "ri", shapes.Make(dtypes.Int32, 3))
	outI := graph.DotGeneral(li, []int{1}, nil, ri, []int{0}, nil)
	grads := dotGeneralVJP(outI, []*graph.Node{graph.OnesLike(outI)}, shapes.Make(dtypes.Int32))
	if fallbacks.Load() != before+1 || len(grads) != 2 || !grads[0].Shape().Equal(li.Shape()) {
		t.Errorf("int32 DotGeneral: fallbacks %d -> %d, grads %v", before, fallbacks.Load(), grads)
	}
}

func TestInstallIsIdempotent(t *testing.T) {
	dot := graph.VJPRegistration[graph.NodeTypeDot]
	Install()
	Install()
	if !Installed() {
		t.Fatal("Installed() = false after Install")
	}
	if fmt.Sprintf("%p", graph.VJPRegistration[graph.NodeTypeDot]) != fmt.Sprintf("%p", dot) {
		t.Error("a second Install changed the registration")
	}
	for _, nt := range []graph.NodeType{graph.NodeTypeDot, graph.NodeTypeDotGeneral} {
		if Original(nt) == nil {
			t.Errorf("Original(%s) is nil", nt)
		}
		if fmt.Sprintf("%p", Original(nt)) == fmt.Sprintf("%p", graph.VJPRegistration[nt]) {
			t.Errorf("Original(%s) is the installed gradient", nt)
		}
	}
	if fmt.Sprintf("%p", Original(graph.NodeTypeAdd)) != fmt.Sprintf("%p", graph.VJPRegistration[graph.NodeTypeAdd]) {
		t.Error("Original(Add) is not the registered Add gradient")
	}
}

// TestSmallModelMatchesOriginal compares, on a small model using layers.Dense with rank-2 input
// (Dot) and rank-3 input (Einsum -> DotGeneral), the installed gradients of every variable with
// GoMLX's.
func TestSmallModelMatchesOriginal(t *testing.T) {
	b := pureGo(t)
	rng := rand.New(rand.NewPCG(5, 6))
	x := tensors.FromFlatDataAndDimensions(randomFlat(rng, 4*3*6), 4, 3, 6)
	run := func() (grads [][]float64, fb int64) {
		before := fallbacks.Load()
		ctx := context.New()
		g := graph.NewGraph(b, "small")
		defer g.Finalize()
		in := graph.Parameter(g, "x", shapes.Make(dtypes.Float64, 4, 3, 6))
		h := graph.Tanh(layers.Dense(ctx.In("a"), in, true, 5, 2)) // rank-3 input -> Einsum
		h = graph.Reshape(h, 4, 3*5*2)                             // [4, 30]
		h = graph.Tanh(layers.Dense(ctx.In("b"), h, true, 7))      // rank-2 input -> Dot
		out := graph.ReduceAllSum(graph.Mul(h, graph.Sin(h)))
		var vars []*graph.Node
		for v := range ctx.IterVariables() {
			vars = append(vars, v.ValueGraph(g))
		}
		g.Compile(graph.Gradient(out, vars...)...)
		// Parameters: x, then the variables in the order their parameters were made, filled
		// deterministically.
		inputs := []any{x}
		vrng := rand.New(rand.NewPCG(7, 8))
		for h := 1; h < g.NumParameters(); h++ {
			shape := g.GetParameterByHandle(graph.ParameterHandle(h)).Shape()
			inputs = append(inputs, tensors.FromFlatDataAndDimensions(randomFlat(vrng, shape.Size()), shape.Dimensions...))
		}
		for _, r := range g.Run(inputs...) {
			grads = append(grads, toFloat64(r))
		}
		return grads, fallbacks.Load() - before
	}
	got, fb := run()
	if fb != 0 {
		t.Fatalf("fell back %d time(s)", fb)
	}
	var want [][]float64
	withOriginalGradients(t, func() { want, _ = run() })
	if len(got) != 4 || len(want) != len(got) {
		t.Fatalf("got %d gradients and %d from GoMLX, want 4", len(got), len(want))
	}
	for i := range got {
		assertClose(t, fmt.Sprintf("variable %d", i), got[i], want[i], 1e-5)
	}
}
