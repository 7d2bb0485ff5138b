package optimizers_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

// reference is testdata/reference.json, written by testdata/make_reference.py with optax.
type reference struct {
	OptaxVersion string `json:"optax_version"`
	Steps        int
	Leaves       []struct {
		Keypath []string
		Dims    []int
	}
	Params0 []float64
	Grads   [][]float64
	Eta     []float64
	Rho     []float64
	Anchor  []float64
	Cases   []refCase
}

type refCase struct {
	Name         string
	Rule         string
	Beta1        float64
	Beta2        float64
	Eps          float64
	RhoScheduled bool    `json:"rho_scheduled"`
	Rho          float64 `json:"rho"`
	Decay        *struct {
		WD     float64
		Anchor string
		Masked bool
	}
	Clip         float64
	ClippedSteps int `json:"clipped_steps"`
	Trajectory   [][]float64
}

func loadReference(t *testing.T) *reference {
	t.Helper()
	data, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if ref.Steps != 100 || len(ref.Cases) < 9 || len(ref.Grads) != ref.Steps {
		t.Fatalf("reference.json looks truncated: %d steps, %d cases", ref.Steps, len(ref.Cases))
	}
	return &ref
}

func (c refCase) rule(t *testing.T) optimizers.Rule {
	switch c.Rule {
	case "radam":
		return optimizers.RAdam{Eta: 1e-3, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps}
	case "adam":
		return optimizers.Adam{Eta: 1e-3, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps}
	case "sgd":
		return optimizers.NewSGD()
	case "momentum":
		m := optimizers.NewMomentum()
		if c.Rho != 0 {
			m.Rho = c.Rho
		}
		return m
	}
	t.Fatalf("unknown rule %q", c.Rule)
	return nil
}

// TestReferenceTrajectories runs every optax case for 100 steps in float64 on the pure-Go
// backend, through the same path core takes (Level 1 BuildRuleChain, Program, Hyper as device
// inputs compiled ONCE, EffectiveHyper per step), and matches every step to 1e-6 relative.
func TestReferenceTrajectories(t *testing.T) {
	runReference(t, dtypes.Float64, dtypes.Int32)
}

// TestReferenceTrajectoriesFloat32 is the same with float32 parameters, gradients, state and
// hyperparameters, and the step as a float32 scalar, exactly as core feeds the optimizer program
// in training: every rule must still match the float64 optax trajectory to 1e-6 relative on every
// step. It guards the step-dependent scalars (bias corrections, RAdam's rho_t, r_t and switch),
// which a float32 computation gets 0.2% wrong once rectification switches on (1 - 0.999 is
// 0.00099998713 in float32, and rho_t cancels catastrophically).
func TestReferenceTrajectoriesFloat32(t *testing.T) {
	runReference(t, dtypes.Float32, dtypes.Float32)
}

// normRelErr is runReference's error measure at one step: ||got - want||_inf / ||want||_inf over
// the whole parameter vector (the relative error in the max norm, the same measure as the
// whole-run test in integration/wholerun_f64_test.go uses per array). It is the element-wise
// relative error for the largest elements and bounds the absolute error of the others by the
// vector's scale: an element passing near zero (the SGD and Momentum trajectories cross zero) is
// not held to 1e-6 of its own vanishing magnitude, which float32's absolute resolution (about 1e-7
// at magnitude 1-3) cannot give. Even per leaf, float32 Momentum is at the format's floor: with
// only the state stored in float32 (all arithmetic exact) the biases leaf of
// momentum_decay_zero_unmasked is 6.6e-7 off, and 1.07e-6 with float32 arithmetic.
func normRelErr(got, want []float64) float64 {
	diff, scale := 0.0, 0.0
	for j := range want {
		diff = max(diff, math.Abs(got[j]-want[j]))
		scale = max(scale, math.Abs(want[j]))
	}
	return diff / max(scale, 1e-12)
}

func runReference(t *testing.T, dt, stepDType dtypes.DType) {
	ref := loadReference(t)
	var leaves []optimizers.ParamLeaf
	for _, l := range ref.Leaves {
		leaves = append(leaves, optimizers.ParamLeaf{Keypath: l.Keypath, Shape: shapes.Make(dt, l.Dims...)})
	}
	overall := 0.0
	for _, c := range ref.Cases {
		t.Run(c.Name, func(t *testing.T) {
			// One group holding both leaves, or (clip case) one group per leaf.
			var layouts []*optimizers.Layout
			if c.Clip > 0 {
				var err error
				layouts, err = optimizers.GroupLayouts(leaves, func(kp []string) string {
					if kp[1] == "weights" {
						return optimizers.DefaultGroup
					}
					return "biases"
				})
				if err != nil {
					t.Fatal(err)
				}
			} else {
				l, err := optimizers.NewLayout(optimizers.DefaultGroup, leaves)
				if err != nil {
					t.Fatal(err)
				}
				layouts = []*optimizers.Layout{l}
			}
			rule := c.rule(t)
			scheduled := []string{optimizers.EtaField}
			if c.RhoScheduled {
				scheduled = append(scheduled, optimizers.RhoField)
			}
			var chains []*optimizers.Chain
			var params []*tensors.Tensor
			var flatShapes []shapes.Shape
			for _, l := range layouts {
				setup := optimizers.GroupSetup{Name: l.Group, Layout: l, Scheduled: scheduled}
				if c.Decay != nil {
					setup.Lambda = c.Decay.WD
					switch c.Decay.Anchor {
					case "w0":
						setup.Anchor = optimizers.AnchorW0
					case "array":
						setup.Anchor = optimizers.AnchorArray(tensorOf(dt, ref.Anchor))
					}
					if c.Decay.Masked {
						setup.NoDecay = l.NoDecayMask(nil) // default: the 1-D biases are excluded
					}
				}
				ch, err := optimizers.BuildRuleChain(rule, setup)
				if err != nil {
					t.Fatal(err)
				}
				chains = append(chains, ch)
				params = append(params, sliceGroup(dt, ref.Params0, l))
				flatShapes = append(flatShapes, l.FlatShape())
			}
			prog, err := optimizers.NewProgram(chains, c.Clip)
			if err != nil {
				t.Fatal(err)
			}
			states, err := prog.Init(params)
			if err != nil {
				t.Fatal(err)
			}
			base, err := optimizers.RuleHyperValues(rule)
			if err != nil {
				t.Fatal(err)
			}
			sp := compileStep(t, prog, flatShapes, dt, stepDType)
			worst, worstStep := 0.0, 0
			for step := range ref.Steps {
				values := map[string]float64{}
				for k, v := range base {
					values[k] = v
				}
				values[optimizers.EtaField] = ref.Eta[step]
				if c.RhoScheduled {
					values[optimizers.RhoField] = ref.Rho[step]
				}
				if c.Decay != nil {
					values[optimizers.LambdaField] = c.Decay.WD
				}
				hyper := make([]map[string]float64, len(layouts))
				grads := make([]*tensors.Tensor, len(layouts))
				for i, l := range layouts {
					if hyper[i], err = optimizers.EffectiveHyper(values, 1); err != nil {
						t.Fatal(err)
					}
					grads[i] = sliceGroup(dt, ref.Grads[step], l)
				}
				params, states = sp.run(t, params, grads, states, hyper, dt, scalarOf(stepDType, step+1))
				var got []float64
				for _, p := range params {
					got = append(got, asF64(t, p)...)
				}
				want := c.Trajectory[step]
				if e := normRelErr(got, want); e > worst {
					worst, worstStep = e, step+1
				}
				if worst > 1e-6 {
					t.Fatalf("%s: step %d: got %.9g, optax %.9g (relative error %.3g in the max norm)", dt, step+1, got, want, worst)
				}
			}
			overall = max(overall, worst)
			t.Logf("%s %s: 100 steps, worst relative error %.3g at step %d (optax %s)", dt, c.Name, worst, worstStep, ref.OptaxVersion)
		})
	}
	t.Logf("%s: worst relative error over all cases %.3g", dt, overall)
}

// sliceGroup cuts a group's elements out of the reference's flat (weights, biases) vector, as a
// tensor of dt. The reference packs the leaves in the same order as the single-group Layout.
func sliceGroup(dt dtypes.DType, all []float64, l *optimizers.Layout) *tensors.Tensor {
	offset := 0
	if l.Group != optimizers.DefaultGroup {
		offset = 6 // the biases follow the 2x3 weights
	}
	return tensorOf(dt, all[offset:offset+l.Size])
}

// TestReferenceRAdamSwitchesInsideTheWindow guards the fixture: the rectification switch
// (rho_t >= 5) happens within the 100 steps for both RAdam betas, and the clip case clips on
// some steps and not on others.
func TestReferenceRAdamSwitchesInsideTheWindow(t *testing.T) {
	ref := loadReference(t)
	for _, b2 := range []float64{0.999, 0.95} {
		rhoInf := 2/(1-b2) - 1
		switched := 0
		for step := 1; step <= ref.Steps; step++ {
			b2t := pow(b2, step)
			if rhoInf-2*float64(step)*b2t/(1-b2t) >= optimizers.RAdamThreshold {
				switched = step
				break
			}
		}
		if switched < 2 || switched > 20 {
			t.Errorf("beta2 %v: rectification switches on at step %d, want within the first steps", b2, switched)
		}
	}
	for _, c := range ref.Cases {
		if c.Clip > 0 && (c.ClippedSteps == 0 || c.ClippedSteps == ref.Steps) {
			t.Errorf("case %s clips on %d of %d steps: want a mix", c.Name, c.ClippedSteps, ref.Steps)
		}
	}
}

func pow(b float64, n int) float64 {
	r := 1.0
	for range n {
		r *= b
	}
	return r
}
