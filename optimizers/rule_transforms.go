package optimizers

import (
	"fmt"
	"maps"
	"strconv"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
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
	eta := hyperScalar(in.Hyper, t.Name(), EtaField, dt)
	step := graph.ConvertDType(in.Step, dt)
	c := func(v float64) *graph.Node { return graph.Scalar(gr, dt, v) }

	mu := graph.Add(graph.Mul(c(1-t.b1), g), graph.Mul(c(t.b1), st.Mu))
	nu := graph.Add(graph.Mul(c(1-t.b2), graph.Square(g)), graph.Mul(c(t.b2), st.Nu))
	b2t := graph.Pow(c(t.b2), step)
	muHat := graph.Div(mu, graph.Sub(c(1), graph.Pow(c(t.b1), step)))
	nuHat := graph.Div(nu, graph.Sub(c(1), b2t))
	adaptive := graph.Div(muHat, graph.Add(graph.Sqrt(nuHat), c(t.eps)))

	dir := adaptive
	if t.rectified {
		rhoInf := 2/(1-t.b2) - 1
		rho := graph.Sub(c(rhoInf), graph.Div(graph.Mul(graph.Mul(c(2), step), b2t), graph.Sub(c(1), b2t)))
		num := graph.Mul(graph.Mul(graph.Sub(rho, c(4)), graph.Sub(rho, c(2))), c(rhoInf))
		den := graph.Mul(c((rhoInf-4)*(rhoInf-2)), rho)
		// Before the switch the ratio is negative; clamping keeps the untaken branch finite.
		r := graph.Sqrt(graph.Max(graph.Div(num, den), c(0)))
		rectify := graph.GreaterOrEqual(rho, c(RAdamThreshold))
		dir = graph.Where(rectify, graph.Mul(r, adaptive), muHat)
	}
	return graph.Mul(graph.Neg(eta), dir), AdamState[*graph.Node]{Mu: mu, Nu: nu}
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
