package optimizers_test

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func TestNewChainRefusesDecayNotLast(t *testing.T) {
	radam := buildRule(t, optimizers.NewRAdam())
	sgd := buildRule(t, optimizers.NewSGD())
	decay := optimizers.Decay(optimizers.AnchorZero, nil)

	_, err := optimizers.NewChain(decay, radam)
	mustContain(t, err, "position 0 of 2", "must be last", "coupled", "reorder to [radam decay]")

	_, err = optimizers.NewChain(radam, decay, sgd)
	mustContain(t, err, "chain [radam decay sgd]", "position 1 of 3", "reorder to [radam sgd decay]")

	// Two Decays: the first is not last.
	_, err = optimizers.NewChain(radam, decay, decay)
	mustContain(t, err, "position 1 of 3")

	c, err := optimizers.NewChain(radam, decay)
	if err != nil || !c.HasDecay() {
		t.Fatalf("radam > decay is valid, got %v", err)
	}
}

func TestNewChainRefusesEmptyAndNil(t *testing.T) {
	_, err := optimizers.NewChain()
	mustContain(t, err, "empty chain", "NewRAdam().Build()")
	_, err = optimizers.NewChain(buildRule(t, optimizers.NewSGD()), nil)
	mustContain(t, err, "position 1 of 2 is nil", "Rule.Build")
}

func TestChainStateNamesAndConstantLeaves(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float64)
	c := mustChain(t, buildRule(t, optimizers.NewRAdam()), optimizers.Decay(optimizers.AnchorW0, l.NoDecayMask(nil)))
	want := []string{"0.radam.mu", "0.radam.nu", "1.decay.anchor", "1.decay.mask"}
	if got := c.StateNames(); !slices.Equal(got, want) {
		t.Errorf("StateNames = %v, want %v", got, want)
	}
	if got := c.ConstantLeaves(); !slices.Equal(got, []bool{false, false, true, true}) {
		t.Errorf("ConstantLeaves = %v", got)
	}
	if got := c.HyperFields(); !slices.Equal(got, []string{"eta", "lambda"}) {
		t.Errorf("HyperFields = %v, want [eta lambda]", got)
	}
	m := mustChain(t, buildRule(t, optimizers.NewMomentum()))
	if got := m.HyperFields(); !slices.Equal(got, []string{"eta", "rho"}) {
		t.Errorf("Momentum HyperFields = %v, want [eta rho]", got)
	}
}

func TestChainInitHostSide(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float64)
	c := mustChain(t, buildRule(t, optimizers.NewAdam()), optimizers.Decay(optimizers.AnchorW0, l.NoDecayMask(nil)))
	params := tensor64([]float64{1, 2, 3, 4, 5, 6})
	init, err := c.Init(params)
	if err != nil {
		t.Fatal(err)
	}
	st := init.Leaves()
	if len(st) != 4 {
		t.Fatalf("got %d leaves, want 4", len(st))
	}
	for i, want := range [][]float64{{0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0}, {1, 2, 3, 4, 5, 6}, {1, 1, 1, 1, 0, 0}} {
		if got := f64(t, st[i]); !slices.Equal(got, want) {
			t.Errorf("leaf %s = %v, want %v", c.StateNames()[i], got, want)
		}
	}
	// The w0 anchor is a copy: later writes to the parameters do not move it.
	tensors.MustMutableFlatData(params, func(flat []float64) { flat[0] = 100 })
	if got := f64(t, st[2])[0]; got != 1 {
		t.Errorf("anchor aliases the parameters: anchor[0] = %v after params[0] = 100", got)
	}
	// Integer parameters are refused with the reason.
	_, err = c.Init(tensors.FromFlatDataAndDimensions([]int32{1, 2, 3, 4, 5, 6}, 6))
	mustContain(t, err, "chain position 0 (adam)", "dtype Int32", "must be a float")
}

func TestChainApplyGraphErrors(t *testing.T) {
	c := mustChain(t, buildRule(t, optimizers.NewRAdam()))
	g := graph.NewGraph(goBackend(t), "errors")
	p := graph.Parameter(g, "p", shapes.Make(dtypes.Float32, 4))
	step := graph.Parameter(g, "step", shapes.Make(dtypes.Int32))
	eta := graph.Parameter(g, "eta", shapes.Make(dtypes.Float32))

	msg := mustPanic(t, func() { c.Apply(p, p, []*graph.Node{p}, optimizers.Hyper{"eta": eta}, step) })
	if !strings.Contains(msg, "got 1 state leaves, the chain has 2") || !strings.Contains(msg, "Chain.Init") {
		t.Errorf("wrong-state panic: %s", msg)
	}
	msg = mustPanic(t, func() { c.Apply(p, p, []*graph.Node{p, p}, optimizers.Hyper{}, step) })
	if !strings.Contains(msg, `hyperparameter "eta"`) || !strings.Contains(msg, "Chain.HyperFields") {
		t.Errorf("missing-hyper panic: %s", msg)
	}
	vec := graph.Parameter(g, "vec", shapes.Make(dtypes.Float32, 2))
	msg = mustPanic(t, func() { c.Apply(p, p, []*graph.Node{p, p}, optimizers.Hyper{"eta": vec}, step) })
	if !strings.Contains(msg, "must be a scalar node") {
		t.Errorf("non-scalar hyper panic: %s", msg)
	}
}

// TestHyperIsADeviceInput: one compiled program serves every eta (and rho) value, and Hyper
// nodes of another float dtype are converted to the parameters'.
func TestHyperIsADeviceInput(t *testing.T) {
	c := mustChain(t, buildRule(t, optimizers.NewMomentum()))
	g := graph.NewGraph(goBackend(t), "hyper")
	s := shapes.Make(dtypes.Float64, 3)
	p, gr, v := graph.Parameter(g, "p", s), graph.Parameter(g, "g", s), graph.Parameter(g, "v", s)
	eta := graph.Parameter(g, "eta", shapes.Make(dtypes.Float32))
	rho := graph.Parameter(g, "rho", shapes.Make(dtypes.Float32))
	step := graph.Parameter(g, "step", shapes.Make(dtypes.Int64))
	np, ns := c.Apply(p, gr, []*graph.Node{v}, optimizers.Hyper{"eta": eta, "rho": rho}, step)
	g.Compile(append([]*graph.Node{np}, ns...)...)
	for _, tc := range []struct{ eta, rho float32 }{{0.5, 0.5}, {0.25, 0.75}} {
		out := g.Run(tensor64([]float64{1, 1, 1}), tensor64([]float64{1, 2, 3}), tensor64([]float64{2, 2, 2}), tc.eta, tc.rho, int64(1))
		// v' = g + rho v; p' = p - eta v'
		for i, gi := range []float64{1, 2, 3} {
			vNew := gi + float64(tc.rho)*2
			if got, want := f64(t, out[1])[i], vNew; relErr(got, want) > 1e-12 {
				t.Errorf("eta=%v rho=%v: v[%d] = %v, want %v", tc.eta, tc.rho, i, got, want)
			}
			if got, want := f64(t, out[0])[i], 1-float64(tc.eta)*vNew; relErr(got, want) > 1e-12 {
				t.Errorf("eta=%v rho=%v: p[%d] = %v, want %v", tc.eta, tc.rho, i, got, want)
			}
		}
	}
}

func TestChainBindAndScheduleCheck(t *testing.T) {
	c := mustChain(t, buildRule(t, optimizers.NewRAdam()))
	b := c.Bind("backbone", []string{"eta", "lambda"})
	if !slices.Equal(b.Used, []string{"eta"}) || !slices.Equal(b.Unused, []string{"lambda"}) || b.Group != "backbone" {
		t.Errorf("Bind = %+v, want used [eta] unused [lambda]", b)
	}
	if !strings.HasPrefix(b.Chain, "radam(") {
		t.Errorf("Binding.Chain = %q, want the chain's Describe", b.Chain)
	}
	mustContain(t, c.CheckScheduleKey("eps"), `"eps" is nonschedulable`, "numerical-stability", "make it a constant")
	if err := c.CheckScheduleKey("eta"); err != nil {
		t.Errorf("eta is schedulable: %v", err)
	}
	if err := c.CheckScheduleKey("lambda"); err != nil {
		t.Errorf("an unread key is reported by Bind, not refused: %v", err)
	}
	d := mustChain(t, buildRule(t, optimizers.NewSGD()), optimizers.Decay(optimizers.AnchorW0, nil))
	mustContain(t, d.CheckScheduleKey("anchor"), "parameter-sized", "(decay)")
}

// TestDescribeGolden pins the structural description format (part of the compile cache key).
func TestDescribeGolden(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	radam := mustChain(t, buildRule(t, optimizers.NewRAdam()), optimizers.Decay(optimizers.AnchorW0, l.NoDecayMask(nil)))
	adam := mustChain(t, buildRule(t, optimizers.Adam{Beta1: 0, Beta2: 0.9, Eps: 1e-6}), optimizers.Decay(optimizers.AnchorZero, nil))
	sgd := mustChain(t, buildRule(t, optimizers.NewSGD()), optimizers.Decay(optimizers.AnchorArray(nil), l.NoDecayMask(func([]string, shapes.Shape) bool { return false })))
	mom := mustChain(t, buildRule(t, optimizers.Momentum{Eta: 5, Rho: 0.5}))
	prog, err := optimizers.NewProgram([]*optimizers.Chain{radam, mom}, 1.5)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join([]string{radam.Describe(), adam.Describe(), sgd.Describe(), mom.Describe(), prog.Describe()}, "\n") + "\n"
	const path = "testdata/describe.golden"
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update once to create it)", err)
	}
	if got != string(want) {
		t.Errorf("Describe changed (a compile-key format change; rerun with -update if intended):\ngot:\n%s\nwant:\n%s", got, want)
	}
	// Schedulable values never reach the description: Eta differs, the graph does not.
	a, b := mustChain(t, buildRule(t, optimizers.Momentum{Eta: 1, Rho: 0.5})), mom
	if a.Describe() != b.Describe() {
		t.Errorf("eta reached Describe: %q vs %q", a.Describe(), b.Describe())
	}
}

// twoLeafLayout is one group of a 2x2 weight and a 2-vector bias.
func twoLeafLayout(t testing.TB, dt dtypes.DType) *optimizers.Layout {
	t.Helper()
	l, err := optimizers.NewLayout("default", []optimizers.ParamLeaf{
		{Keypath: []string{"dense", "weights"}, Shape: shapes.Make(dt, 2, 2)},
		{Keypath: []string{"dense", "biases"}, Shape: shapes.Make(dt, 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
