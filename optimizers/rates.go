package optimizers

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
)

// GroupLR is one group's base learning rate, as the learning_rate accessor returns it.
type GroupLR struct {
	Group string
	LR    float64
}

// LRRatios turns per-group learning rates into ratios against the default group's:
// ratio_g = lr(g) / lr(default). The schedule sets the absolute value of the default group, so
// eta_g(t) = schedule(t) * ratio_g and a backbone at 1e-4 against a default of 1e-3 stays a tenth
// of it for the whole run. lr(default) == 0 is an error (the ratio is undefined), as is a
// negative or non-finite rate.
func LRRatios(defaultLR float64, groups []GroupLR) (map[string]float64, error) {
	if defaultLR == 0 {
		return nil, fmt.Errorf("optimizers: learning_rate of the default group is 0: per-group rates are ratios against it, so it must be non-zero; set learning_rate (default 1e-3), and use a group's own rate or a schedule to freeze something")
	}
	if defaultLR < 0 || math.IsNaN(defaultLR) || math.IsInf(defaultLR, 0) {
		return nil, fmt.Errorf("optimizers: learning_rate of the default group is %v: it must be a positive finite number", defaultLR)
	}
	out := map[string]float64{DefaultGroup: 1}
	for _, g := range groups {
		if g.LR < 0 || math.IsNaN(g.LR) || math.IsInf(g.LR, 0) {
			return nil, fmt.Errorf("optimizers: learning_rate of group %q is %v: it must be a finite number >= 0", g.Group, g.LR)
		}
		out[g.Group] = g.LR / defaultLR
	}
	return out, nil
}

// EffectiveHyper returns the values one group's chain receives at one step, from the base values
// at that step (schedules evaluated, constants filled in): eta becomes eta * ratio, and lambda,
// decoupled, becomes lambda * (that effective eta), so an LR schedule modulates regularization.
// Other fields pass through; base is not modified. lambda without eta is an error, since the
// decay coefficient is defined relative to the learning rate.
func EffectiveHyper(base map[string]float64, ratio float64) (map[string]float64, error) {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]float64{}
	}
	eta, hasEta := out[EtaField]
	if hasEta {
		eta *= ratio
		out[EtaField] = eta
	}
	if lambda, ok := out[LambdaField]; ok {
		if !hasEta {
			return nil, fmt.Errorf("optimizers: EffectiveHyper: %q given without %q: decay is decoupled and scaled by the group's learning rate, so pass the base eta too", LambdaField, EtaField)
		}
		out[LambdaField] = lambda * eta
	}
	return out, nil
}

// HyperTensors returns one scalar host tensor of dtype per field, in the order given (the order
// the optimizer program declares its Hyper inputs). A missing field is an error naming it.
func HyperTensors(values map[string]float64, fields []string, dtype dtypes.DType) ([]*tensors.Tensor, error) {
	if !dtype.IsFloat() {
		return nil, fmt.Errorf("optimizers: HyperTensors dtype %s: hyperparameters are floats; use the parameters' dtype", dtype)
	}
	out := make([]*tensors.Tensor, len(fields))
	for i, f := range fields {
		v, ok := values[f]
		if !ok {
			have := slices.Sorted(maps.Keys(values))
			return nil, fmt.Errorf("optimizers: no value for hyperparameter %q (have %v): resolve every field of Chain.HyperFields (a schedule, the rule's own value, or the group's rate)", f, have)
		}
		out[i] = tensors.FromAnyValue(shapes.CastAsDType(v, dtype))
	}
	return out, nil
}
