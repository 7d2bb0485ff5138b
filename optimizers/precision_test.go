package optimizers_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

// radamRho is rho_t in float64 on the host.
func radamRho(b2 float64, step int) float64 {
	b2t := math.Pow(b2, float64(step))
	return 2/(1-b2) - 1 - 2*float64(step)*b2t/(1-b2t)
}

// radamStepUpdate is one RAdam (or Adam) update in float64 on the host, from state mu0, nu0 and
// gradient g at the 1-based step: the formula of the RAdam doc comment, computed directly.
func radamStepUpdate(rectified bool, b1, b2, eps, eta, mu0, nu0, g float64, step int) float64 {
	mu := (1-b1)*g + b1*mu0
	nu := (1-b2)*g*g + b2*nu0
	t := float64(step)
	muHat := mu / (1 - math.Pow(b1, t))
	nuHat := nu / (1 - math.Pow(b2, t))
	adaptive := muHat / (math.Sqrt(nuHat) + eps)
	if !rectified {
		return -eta * adaptive
	}
	rhoInf := 2/(1-b2) - 1
	rho := radamRho(b2, step)
	if rho < optimizers.RAdamThreshold {
		return -eta * muHat
	}
	r := math.Sqrt((rho - 4) * (rho - 2) * rhoInf / ((rhoInf - 4) * (rhoInf - 2) * rho))
	return -eta * r * adaptive
}

// beta2Switching returns the beta2 at which rho_step equals 5 exactly (bisection in float64; rho_t
// decreases as beta2 decreases, for a fixed step).
func beta2Switching(step int) float64 {
	lo, hi := 0.5, 1-1e-9
	for range 200 {
		mid := (lo + hi) / 2
		if radamRho(mid, step) < optimizers.RAdamThreshold {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// oneStep is a compiled single-group, single-array optimizer program with float32 parameters, as
// core builds it (float32 hyperparameters, float32 step).
type oneStep struct {
	sp *stepProgram
}

func newOneStep(t *testing.T, rule optimizers.Rule, n int) *oneStep {
	t.Helper()
	l, err := optimizers.NewLayout(optimizers.DefaultGroup, []optimizers.ParamLeaf{{Keypath: []string{"w"}, Shape: shapes.Make(dtypes.Float32, n)}})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := optimizers.BuildRuleChain(rule, optimizers.GroupSetup{Name: l.Group, Layout: l, Scheduled: []string{optimizers.EtaField}})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := optimizers.NewProgram([]*optimizers.Chain{ch}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &oneStep{sp: compileStep(t, prog, []shapes.Shape{l.FlatShape()}, dtypes.Float32, dtypes.Float32)}
}

// update runs one step from params 0, state (mu0, nu0) and gradient g, and returns the update.
func (o *oneStep) update(t *testing.T, eta float64, mu0, nu0, g []float64, step int) []float64 {
	t.Helper()
	zeros := make([]float64, len(g))
	params, _ := o.sp.run(t, []*tensors.Tensor{tensorOf(dtypes.Float32, zeros)}, []*tensors.Tensor{tensorOf(dtypes.Float32, g)},
		[][]*tensors.Tensor{{tensorOf(dtypes.Float32, mu0), tensorOf(dtypes.Float32, nu0)}},
		[]map[string]float64{{optimizers.EtaField: eta}}, dtypes.Float32, float32(step))
	return asF64(t, params[0])
}

// TestRAdamSwitchIsExactInFloat32 places RAdam's rectification switch where float64 math puts it,
// with float32 parameters and a float32 step, for beta2 values where rho_t passes 5 closer than
// float32 can resolve (|rho_t - 5| = 1e-6 .. 1e-4, while float32 rho_t is off by up to 6e-3 at
// beta2 = 0.999): the step just after each crossing rectifies and the one before does not, and
// every update matches the float64 formula to 1e-6 relative. It also checks the default beta2
// 0.999 switches at step 6 exactly.
func TestRAdamSwitchIsExactInFloat32(t *testing.T) {
	const b1, eps, eta = 0.9, 1e-8, 3e-3
	// mu0, nu0 and g are float32-exact, so the host formula sees the program's inputs.
	mu0 := []float64{0.5, -0.25, 0.125}
	nu0 := []float64{0.25, 0.0625, 1}
	g := []float64{1, -0.5, 2}

	type tc struct {
		b2         float64
		switchStep int // first step with rho_t >= 5 in float64
	}
	cases := []tc{{0.999, 6}}
	for _, step := range []int{6, 7, 9, 13, 20} {
		star := beta2Switching(step)
		for _, drho := range []float64{1e-6, 1e-4} {
			// d rho / d beta2 is positive: nudge beta2 so rho_step is 5 + drho or 5 - drho.
			h := 1e-9
			slope := (radamRho(star+h, step) - radamRho(star-h, step)) / (2 * h)
			above, below := star+drho/slope, star-drho/slope
			if r := radamRho(above, step); !(r >= 5 && r-5 < 2*drho) {
				t.Fatalf("fixture: beta2 %.17g: rho_%d = %.17g, want just above 5", above, step, r)
			}
			if r := radamRho(below, step); !(r < 5 && 5-r < 2*drho) {
				t.Fatalf("fixture: beta2 %.17g: rho_%d = %.17g, want just below 5", below, step, r)
			}
			cases = append(cases, tc{above, step}, tc{below, step + 1})
		}
	}
	for _, c := range cases {
		o := newOneStep(t, optimizers.RAdam{Eta: eta, Beta1: b1, Beta2: c.b2, Eps: eps}, len(g))
		for step := max(1, c.switchStep-2); step <= c.switchStep+2; step++ {
			got := o.update(t, eta, mu0, nu0, g, step)
			for j := range g {
				want := radamStepUpdate(true, b1, c.b2, eps, float64(float32(eta)), mu0[j], nu0[j], g[j], step)
				if e := relErr(got[j], want); e > 1e-6 {
					rectified := radamRho(c.b2, step) >= optimizers.RAdamThreshold
					t.Fatalf("beta2 %.17g step %d (rho_t %.9g, float64 rectifies: %v, switch at %d): element %d: got %.9g, want %.9g (relative error %.3g)",
						c.b2, step, radamRho(c.b2, step), rectified, c.switchStep, j, got[j], want, e)
				}
			}
		}
	}
}

// TestAdamStepScalarsFloat32 checks Adam's and RAdam's update against the float64 formula to 1e-6
// relative with float32 parameters and a float32 step over a wide range of steps, up to 2^24 (the
// largest range over which a float32 step is exact), for betas close to 1 where 1 - beta^t loses
// most digits in float32.
func TestAdamStepScalarsFloat32(t *testing.T) {
	mu0 := []float64{0.5, -0.25, 0.125}
	nu0 := []float64{0.25, 0.0625, 1}
	g := []float64{1, -0.5, 2}
	steps := []int{1, 2, 3, 5, 6, 7, 10, 31, 100, 1000, 12345, 1 << 20, 1 << 24}
	for _, rectified := range []bool{false, true} {
		for _, b := range [][2]float64{{0.9, 0.999}, {0.99, 0.9999}, {0.8, 0.95}, {0.999, 0.99999}} {
			var rule optimizers.Rule = optimizers.Adam{Eta: 1e-3, Beta1: b[0], Beta2: b[1], Eps: 1e-8}
			if rectified {
				rule = optimizers.RAdam{Eta: 1e-3, Beta1: b[0], Beta2: b[1], Eps: 1e-8}
			}
			o := newOneStep(t, rule, len(g))
			for _, step := range steps {
				got := o.update(t, 1e-3, mu0, nu0, g, step)
				for j := range g {
					want := radamStepUpdate(rectified, b[0], b[1], 1e-8, float64(float32(1e-3)), mu0[j], nu0[j], g[j], step)
					if e := relErr(got[j], want); e > 1e-6 {
						t.Errorf("%s betas %v step %d element %d: got %.9g, want %.9g (relative error %.3g)", rule.RuleName(), b, step, j, got[j], want, e)
					}
				}
			}
		}
	}
}

// TestAdamStepScalarsSharedAcrossArrays checks that the step-dependent scalar math is emitted once
// per group, not once per array: applying a chain to k arrays through one optimizers.Shared grows
// the graph by the same number of nodes for every extra array, and fewer than the first array
// costs (which also builds the scalars).
func TestAdamStepScalarsSharedAcrossArrays(t *testing.T) {
	for _, rule := range []optimizers.Rule{optimizers.NewRAdam(), optimizers.NewAdam()} {
		ch := mustChain(t, buildRule(t, rule))
		size := func(k int) int {
			g := graph.NewGraph(goBackend(t), "shared")
			shared := optimizers.NewShared()
			hp := optimizers.Hyper{optimizers.EtaField: graph.Parameter(g, "eta", shapes.Make(dtypes.Float32))}
			step := graph.Parameter(g, "step", shapes.Make(dtypes.Float32))
			before := len(g.Nodes())
			for i := range k {
				s := shapes.Make(dtypes.Float32, 2+i)
				p := graph.Parameter(g, fmt.Sprintf("p%d", i), s)
				var st []*graph.Node
				for _, name := range ch.StateNames() {
					st = append(st, graph.Parameter(g, fmt.Sprintf("%s%d", name, i), s))
				}
				ch.ApplyShared(p, graph.Parameter(g, fmt.Sprintf("g%d", i), s), st, hp, step, shared)
			}
			return len(g.Nodes()) - before
		}
		one, two, three := size(1), size(2), size(3)
		if perArray := two - one; three-two != perArray || perArray >= one {
			t.Errorf("%s: graph nodes for 1, 2, 3 arrays: %d, %d, %d: want a constant per-array cost below the first array's (scalars shared)", rule.RuleName(), one, two, three)
		}
	}
}
