package optimizers

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"
)

// Field names core and schedules share.
const (
	EtaField    = "eta"    // the learning rate, already the group's effective value
	LambdaField = "lambda" // Decay's coefficient, already multiplied by the group's eta
)

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func copyMap(m map[string]string) map[string]string { return maps.Clone(m) }

// adamTransform is Adam or, rectified, RAdam. Conventions (optax's scale_by_adam/scale_by_radam
// followed by scale_by_learning_rate, eps_root = 0, no Nesterov):
//
//	mu = (1-b1) g + b1 mu;  nu = (1-b2) g^2 + b2 nu
//	mu_hat = mu / (1 - b1^t);  nu_hat = nu / (1 - b2^t)          (t = 1-based step)
//	Adam:  dir = mu_hat / (sqrt(nu_hat) + eps)                  (eps outside the root)
//	RAdam: rho_inf = 2/(1-b2) - 1;  rho_t = rho_inf - 2 t b2^t / (1 - b2^t)
//	       dir = rho_t >= 5 ? r_t mu_hat / (sqrt(nu_hat) + eps) : mu_hat
//	       r_t = sqrt((rho_t-4)(rho_t-2) rho_inf / ((rho_inf-4)(rho_inf-2) rho_t))
//	update = -eta dir
//
// Every step-dependent scalar (b^t, the bias corrections, rho_t, r_t and the switch) is computed
// in float64 whatever the parameters' dtype (see stepScalars), and cast once; only the
// element-wise moment arithmetic runs in the parameters' dtype.
type adamTransform struct {
	rectified   bool
	b1, b2, eps float64
	hyper       []string
	nonsched    map[string]string
}

func (t *adamTransform) Name() string {
	if t.rectified {
		return "radam"
	}
	return "adam"
}

func (t *adamTransform) Describe() string {
	s := fmt.Sprintf("%s(beta1=%s,beta2=%s,eps=%s", t.Name(), fmtFloat(t.b1), fmtFloat(t.b2), fmtFloat(t.eps))
	if t.rectified {
		s += ",threshold=" + fmtFloat(RAdamThreshold)
	}
	return s + ")"
}

func (t *adamTransform) HyperFields() []string             { return append([]string(nil), t.hyper...) }
func (t *adamTransform) StateNames() []string              { return []string{"mu", "nu"} }
func (t *adamTransform) Nonschedulable() map[string]string { return copyMap(t.nonsched) }

func (t *adamTransform) Init(params *tensors.Tensor) (State[*tensors.Tensor], error) {
	if err := checkFloatParams(t.Name(), params); err != nil {
		return nil, err
	}
	return AdamState[*tensors.Tensor]{Mu: zerosLike(params), Nu: zerosLike(params)}, nil
}

func (t *adamTransform) Update(in UpdateInput) (*graph.Node, State[*graph.Node]) {
	st := AdamState[*graph.Node]{Mu: in.State[0], Nu: in.State[1]}
	g, dt := in.Updates, in.Params.DType()
	gr := g.Graph()
	// Constants too are built once per group (see Shared), so no scalar node grows with the arrays.
	c := func(name string, v float64) *graph.Node {
		return in.Shared.Node(fmt.Sprintf("%d.%s/%s/%s", in.Position, t.Name(), dt, name), func() *graph.Node { return graph.Scalar(gr, dt, v) })
	}

	mu := graph.Add(graph.Mul(c("1-b1", 1-t.b1), g), graph.Mul(c("b1", t.b1), st.Mu))
	nu := graph.Add(graph.Mul(c("1-b2", 1-t.b2), graph.Square(g)), graph.Mul(c("b2", t.b2), st.Nu))

	sc := t.scalars(in, dt)
	adaptive := graph.Div(graph.Mul(mu, sc.scale), graph.Add(graph.Sqrt(graph.Mul(nu, sc.invBC2)), c("eps", t.eps)))
	update := adaptive
	if t.rectified {
		update = graph.Where(sc.rectify, adaptive, graph.Mul(mu, sc.scale))
	}
	return update, AdamState[*graph.Node]{Mu: mu, Nu: nu}
}

// adamScalars are the step-dependent scalars of one Adam/RAdam update.
type adamScalars struct {
	// scale multiplies mu: -eta / (1 - b1^t), times r_t when RAdam rectifies, in the parameters'
	// dtype. The update is mu*scale / (sqrt(nu*invBC2) + eps) (adaptive) or mu*scale (RAdam
	// before the switch).
	scale *graph.Node
	// invBC2 is 1 / (1 - b2^t), in the parameters' dtype.
	invBC2 *graph.Node
	// rectify is rho_t >= RAdamThreshold, a boolean scalar (nil for Adam).
	rectify *graph.Node
}

// scalars returns stepScalars cast to dt, built once per group and shared by its arrays through
// in.Shared (keyed by chain position, name and dtype), so the scalar math does not grow with the
// array count.
func (t *adamTransform) scalars(in UpdateInput, dt dtypes.DType) adamScalars {
	key := fmt.Sprintf("%d.%s/%s/", in.Position, t.Name(), dt)
	var built *adamScalars
	build := func() adamScalars {
		if built == nil {
			s := t.stepScalars(in.Step, hyperScalar(in.Hyper, t.Name(), EtaField, dtypes.Float64))
			s.scale = graph.ConvertDType(s.scale, dt)
			s.invBC2 = graph.ConvertDType(s.invBC2, dt)
			built = &s
		}
		return *built
	}
	out := adamScalars{
		scale:  in.Shared.Node(key+"scale", func() *graph.Node { return build().scale }),
		invBC2: in.Shared.Node(key+"inv_bc2", func() *graph.Node { return build().invBC2 }),
	}
	if t.rectified {
		out.rectify = in.Shared.Node(key+"rectify", func() *graph.Node { return build().rectify })
	}
	return out
}

// stepScalars computes the step-dependent scalars (scale and invBC2 as float64 nodes) from the
// step and the baked constants, all in float64, so that float32 parameters get them correctly
// rounded. In float32, 1 - 0.999 is 0.00099998713, rho_inf comes out 1999.026 instead of 1999,
// and rho_t = rho_inf - 2t b2^t/(1-b2^t) cancels catastrophically (at t = 6, rho_t = 6.0005
// instead of 5.9942 and r_t is 0.18% too large); 1 - b2^t loses about log10(1/(1-b2^t)) digits
// for Adam too. In float64 the same cancellation leaves about 13 correct digits, so the switch
// falls exactly where float64 math puts it (step 6 for b2 = 0.999), and the two scalars the
// element-wise math needs, -eta r_t/(1-b1^t) and 1/(1-b2^t), are each cast to the parameters'
// dtype once. rho_inf and (rho_inf-4)(rho_inf-2) are host float64 constants; eta (a float32 or
// float64 device input) is converted to float64 exactly and folded into scale, which saves one
// rounding in the parameters' dtype.
//
// step is converted to float64: exact for any integer dtype up to 2^53 and for a float32 step up
// to 2^24 (core passes float32). Beyond 2^24 a float32 step is rounded (to a multiple of 2 up to
// 2^25, of 4 up to 2^26, ...), which moves b^t by at most t*|ln b|*2^-24 relative; by then b^t has
// underflowed to 0 unless 1/(1-b) is itself of the order of 10^6 or more.
func (t *adamTransform) stepScalars(step, eta *graph.Node) adamScalars {
	gr := step.Graph()
	c := func(v float64) *graph.Node { return graph.Scalar(gr, dtypes.Float64, v) }
	s := graph.ConvertDType(step, dtypes.Float64)
	b1t := graph.Pow(c(t.b1), s)
	b2t := graph.Pow(c(t.b2), s)
	bc2 := graph.Sub(c(1), b2t)
	out := adamScalars{invBC2: graph.Reciprocal(bc2)}
	// -eta / (1 - b1^t)
	scale := graph.Div(graph.Neg(eta), graph.Sub(c(1), b1t))
	if t.rectified {
		rhoInf := 2/(1-t.b2) - 1
		rho := graph.Sub(c(rhoInf), graph.Div(graph.Mul(graph.Mul(c(2), s), b2t), bc2))
		num := graph.Mul(graph.Mul(graph.Sub(rho, c(4)), graph.Sub(rho, c(2))), c(rhoInf))
		den := graph.Mul(c((rhoInf-4)*(rhoInf-2)), rho)
		// Before the switch the ratio is negative; clamping keeps the untaken branch finite.
		r := graph.Sqrt(graph.Max(graph.Div(num, den), c(0)))
		out.rectify = graph.GreaterOrEqual(rho, c(RAdamThreshold))
		scale = graph.Where(out.rectify, graph.Mul(r, scale), scale)
	}
	out.scale = scale
	return out
}

// sgdTransform: update = -eta g.
type sgdTransform struct{ hyper []string }

func (t *sgdTransform) Name() string                      { return "sgd" }
func (t *sgdTransform) Describe() string                  { return "sgd()" }
func (t *sgdTransform) HyperFields() []string             { return append([]string(nil), t.hyper...) }
func (t *sgdTransform) StateNames() []string              { return nil }
func (t *sgdTransform) Nonschedulable() map[string]string { return map[string]string{} }

func (t *sgdTransform) Init(params *tensors.Tensor) (State[*tensors.Tensor], error) {
	if err := checkFloatParams(t.Name(), params); err != nil {
		return nil, err
	}
	return NoState[*tensors.Tensor]{}, nil
}

func (t *sgdTransform) Update(in UpdateInput) (*graph.Node, State[*graph.Node]) {
	eta := hyperScalar(in.Hyper, t.Name(), EtaField, in.Params.DType())
	return graph.Mul(graph.Neg(eta), in.Updates), NoState[*graph.Node]{}
}

// momentumTransform is optax's trace followed by scale_by_learning_rate:
// v = g + rho v; update = -eta v. Both eta and rho are device inputs.
type momentumTransform struct{ hyper []string }

// RhoField is Momentum's coefficient key.
const RhoField = "rho"

func (t *momentumTransform) Name() string                      { return "momentum" }
func (t *momentumTransform) Describe() string                  { return "momentum()" }
func (t *momentumTransform) HyperFields() []string             { return append([]string(nil), t.hyper...) }
func (t *momentumTransform) StateNames() []string              { return []string{"velocity"} }
func (t *momentumTransform) Nonschedulable() map[string]string { return map[string]string{} }

func (t *momentumTransform) Init(params *tensors.Tensor) (State[*tensors.Tensor], error) {
	if err := checkFloatParams(t.Name(), params); err != nil {
		return nil, err
	}
	return MomentumState[*tensors.Tensor]{Velocity: zerosLike(params)}, nil
}

func (t *momentumTransform) Update(in UpdateInput) (*graph.Node, State[*graph.Node]) {
	st := MomentumState[*graph.Node]{Velocity: in.State[0]}
	dt := in.Params.DType()
	eta := hyperScalar(in.Hyper, t.Name(), EtaField, dt)
	rho := hyperScalar(in.Hyper, t.Name(), RhoField, dt)
	v := graph.Add(in.Updates, graph.Mul(rho, st.Velocity))
	return graph.Mul(graph.Neg(eta), v), MomentumState[*graph.Node]{Velocity: v}
}

var (
	_ Transform              = (*adamTransform)(nil)
	_ Transform              = (*sgdTransform)(nil)
	_ Transform              = (*momentumTransform)(nil)
	_ NonschedulableDeclarer = (*adamTransform)(nil)
)
