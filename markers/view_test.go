package markers_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/markers"
)

// newScaled returns an experiment whose Host fields all hold non-zero values.
func newScaled() *scaled {
	e := must(markers.New[scaled](map[string]any{"Labels": []float32{1, 0}}))
	return e
}

// clean reads only GraphConst (Width, through x's shape) and Device (Bias) fields.
func clean(e *scaled, x *graph.Node) *graph.Node {
	return graph.ReduceSum(graph.Add(x, e.Bias.Node()), 1)
}

func TestZeroHostAndCompileView(t *testing.T) {
	e := newScaled()
	z := must(markers.ZeroHost(e)).(*scaled)
	if z.Scale != 0 || z.MaxEpochs != 0 || z.Labels != nil || z.Width != 3 || z.Bias.Value() != 0.5 {
		t.Errorf("ZeroHost: %+v", z)
	}
	if e.Scale != 2 || e.MaxEpochs != 10 {
		t.Error("ZeroHost changed the experiment")
	}
	g := graph.NewGraph(goBackend(t), "view")
	bias := graph.Parameter(g, "Bias", shapes.Make(dtypes.Float32))
	v := must(markers.CompileView(*e, map[string]*graph.Node{"Bias": bias})).(*scaled)
	if v.Scale != 0 || v.Labels != nil || v.Width != 3 || v.Bias.Node() != bias {
		t.Errorf("CompileView: %+v", v)
	}
}

func TestCleanExperimentPasses(t *testing.T) {
	calls := 0
	build := builder(t, clean)
	err := markers.CheckHostIndependent(newScaled(), func(src any) (string, error) {
		calls++
		return build(src)
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("a clean check should build twice, built %d times", calls)
	}
}

func TestHostFloatReadFromTracedCode(t *testing.T) {
	err := markers.CheckHostIndependent(newScaled(), builder(t, func(e *scaled, x *graph.Node) *graph.Node {
		return graph.MulScalar(clean(e, x), e.Scale) // bakes the Host value as a constant
	}))
	var hre *markers.HostReadError
	if !errors.As(err, &hre) {
		t.Fatalf("want a *HostReadError, got %v", err)
	}
	if !slices.Equal(hre.Fields, []string{"Scale"}) || hre.Failure != "" || hre.Unattributed {
		t.Errorf("got %+v", hre)
	}
	wantErr(t, err, "reading Host field Scale of scaled from traced code",
		"differs from the one built from the experiment",
		"GraphConst (`nitro:\"graphconst\"`: bakes into the program, recompiles per distinct value)",
		"Device (markers.Device[float32]: a traced input, no recompile)",
		"or keep it host-side")
}

func TestZeroedHostSliceIndexedPanics(t *testing.T) {
	err := markers.CheckHostIndependent(newScaled(), builder(t, func(e *scaled, x *graph.Node) *graph.Node {
		return graph.AddScalar(clean(e, x), e.Labels[0])
	}))
	var hre *markers.HostReadError
	if !errors.As(err, &hre) || !slices.Equal(hre.Fields, []string{"Labels"}) {
		t.Fatalf("want Labels blamed, got %v", err)
	}
	wantErr(t, err, "Host field Labels", "failed (panic: runtime error: index out of range", "GraphConst", "Device (markers.Device[[]float32]", "host-side")
}

func TestSeveralHostFieldsAndUnexported(t *testing.T) {
	e := newScaled()
	e.cache = []int{4, 4}
	err := markers.CheckHostIndependent(e, builder(t, func(e *scaled, x *graph.Node) *graph.Node {
		y := graph.MulScalar(clean(e, x), float32(e.MaxEpochs))
		return graph.Reshape(y, len(e.cache), 1) // the unexported Host field decides a shape
	}))
	var hre *markers.HostReadError
	if !errors.As(err, &hre) {
		t.Fatalf("want a *HostReadError, got %v", err)
	}
	if !slices.Equal(hre.Fields, []string{"MaxEpochs", "cache"}) {
		t.Errorf("blamed %v", hre.Fields)
	}
	wantErr(t, err, "reading Host fields MaxEpochs, cache of scaled", "Mark each GraphConst", "or keep each host-side",
		"cache is unexported: export it to mark it")
}

func TestInteractionIsReportedUnattributed(t *testing.T) {
	e := newScaled()
	e.Labels = nil // leave Scale and MaxEpochs as the only non-zero Host fields
	err := markers.CheckHostIndependent(e, builder(t, func(e *scaled, x *graph.Node) *graph.Node {
		if e.Scale == 0 && e.MaxEpochs == 0 {
			return graph.Neg(clean(e, x))
		}
		return clean(e, x)
	}))
	var hre *markers.HostReadError
	if !errors.As(err, &hre) || !hre.Unattributed || !slices.Equal(hre.Fields, []string{"Scale", "MaxEpochs"}) {
		t.Fatalf("got %v", err)
	}
	wantErr(t, err, "no single field explains it")
}

func TestFailingRealBuildIsNotBlamedOnHost(t *testing.T) {
	err := markers.CheckHostIndependent(newScaled(), func(any) (string, error) { panic("boom") })
	var hre *markers.HostReadError
	if errors.As(err, &hre) {
		t.Fatal("a failure of the real build was blamed on a Host field")
	}
	wantErr(t, err, "building from scaled itself failed", "panic: boom")
	sentinel := errors.New("no backend")
	err = markers.CheckHostIndependent(newScaled(), func(any) (string, error) { return "", sentinel })
	if !errors.Is(err, sentinel) {
		t.Errorf("the build's error is not wrapped: %v", err)
	}
}

func TestNondeterministicBuildIsNamed(t *testing.T) {
	n := 0
	err := markers.CheckHostIndependent(scaled{Width: 3}, func(any) (string, error) {
		n++
		return strings.Repeat("x", n), nil
	})
	wantErr(t, err, "not deterministic")
}

func TestFingerprint(t *testing.T) {
	build := func(scale float32) string {
		g := markers.NewTraceGraph(goBackend(t), "any name")
		x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 2, 3))
		y := graph.Add(graph.MulScalar(x, scale), graph.Const(g, [][]float32{{1, 2, 3}}))
		graph.ReduceSum(y, 1)
		return must(markers.Fingerprint(g))
	}
	fp := build(2.5)
	golden(t, "fingerprint.golden", fp)
	if build(2.5) != fp {
		t.Error("two identical builds differ")
	}
	if build(0) == fp {
		t.Error("a different constant value gives the same fingerprint")
	}
	if fp, err := markers.Fingerprint(nil); fp != "" || err != nil {
		t.Error("nil graph")
	}
}

// A constant too large for GoMLX to keep its values is still compared by value: one element of
// 64 (or of a million) that differs changes the fingerprint.
func TestFingerprintLargeConstantsByValue(t *testing.T) {
	for _, size := range []int{graph.MinConstValueSizeToKeep, 64, 1 << 20} {
		build := func(at int, v float32) string {
			vals := make([]float32, size)
			if at >= 0 {
				vals[at] = v
			}
			g := markers.NewTraceGraph(goBackend(t), "large")
			x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, size))
			graph.Mul(x, graph.Const(g, vals))
			return must(markers.Fingerprint(g))
		}
		zero := build(-1, 0)
		if build(-1, 0) != zero {
			t.Fatalf("size %d: two identical builds differ", size)
		}
		for _, at := range []int{0, size / 2, size - 1} {
			if build(at, 1) == zero {
				t.Errorf("size %d: element %d set to 1 gives the zero constant's fingerprint", size, at)
			}
		}
		if build(0, 1) == build(size-1, 1) {
			t.Errorf("size %d: the same value at two positions gives one fingerprint", size)
		}
	}
}

// A graph not built on NewTraceGraph cannot be compared by value above the threshold: refused,
// never a shape-only fingerprint.
func TestFingerprintRefusesUnrecordedLargeConstant(t *testing.T) {
	g := graph.NewGraph(goBackend(t), "plain")
	graph.Const(g, make([]float32, graph.MinConstValueSizeToKeep))
	_, err := markers.Fingerprint(g)
	wantErr(t, err, "NewTraceGraph")
	small := graph.NewGraph(goBackend(t), "plain small")
	graph.Const(small, []float32{1, 2})
	if _, err := markers.Fingerprint(small); err != nil {
		t.Errorf("a small constant keeps its values: %v", err)
	}
}

// A Host array above the constant threshold, read by traced code and non-zero, is caught.
func TestCheckHostIndependentLargeHostArray(t *testing.T) {
	type big struct {
		Weights []float32
	}
	e := &big{Weights: make([]float32, 64)}
	e.Weights[63] = 3
	build := func(src any) (string, error) {
		g := markers.NewTraceGraph(goBackend(t), "big")
		w := src.(*big).Weights
		if w == nil {
			w = make([]float32, 64) // the zeroed view: a reader that tolerates nil
		}
		x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 64))
		graph.Mul(x, graph.Const(g, w))
		return markers.Fingerprint(g)
	}
	err := markers.CheckHostIndependent(e, build)
	var hre *markers.HostReadError
	if !errors.As(err, &hre) || !slices.Equal(hre.Fields, []string{"Weights"}) {
		t.Fatalf("a non-zero [64]float32 Host field read by traced code: got %v, want a HostReadError naming Weights", err)
	}
}
