package optimizers_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

var (
	backendOnce sync.Once
	backendVal  backends.Backend
	backendErr  error
)

// goBackend is GoMLX's pure-Go backend: the unit tests need no PJRT plugin.
func goBackend(t testing.TB) backends.Backend {
	t.Helper()
	backendOnce.Do(func() { backendVal, backendErr = simplego.New("") })
	if backendErr != nil {
		t.Fatalf("simplego backend: %v", backendErr)
	}
	return backendVal
}

// stepProgram is a compiled optimizer program for a Program, as core would build it: inputs are
// every group's flat params, flat grads, state leaves and hyper scalars, then the step.
type stepProgram struct {
	g       *graph.Graph
	prog    *optimizers.Program
	fields  [][]string
	nStates []int
}

func compileStep(t testing.TB, prog *optimizers.Program, flat []shapes.Shape, hyperDType, stepDType dtypes.DType) *stepProgram {
	t.Helper()
	sp := &stepProgram{prog: prog}
	sp.g = graph.NewGraph(goBackend(t), "optimizer")
	chains := prog.Chains()
	n := len(chains)
	params, grads := make([]*graph.Node, n), make([]*graph.Node, n)
	states := make([][]*graph.Node, n)
	hyper := make([]optimizers.Hyper, n)
	for i, c := range chains {
		params[i] = graph.Parameter(sp.g, fmt.Sprintf("params%d", i), flat[i])
		grads[i] = graph.Parameter(sp.g, fmt.Sprintf("grads%d", i), flat[i])
		for _, name := range c.StateNames() {
			states[i] = append(states[i], graph.Parameter(sp.g, fmt.Sprintf("g%d.%s", i, name), flat[i]))
		}
		sp.nStates = append(sp.nStates, len(states[i]))
		hyper[i] = optimizers.Hyper{}
		sp.fields = append(sp.fields, c.HyperFields())
		for _, f := range c.HyperFields() {
			hyper[i][f] = graph.Parameter(sp.g, fmt.Sprintf("g%d.%s", i, f), shapes.Make(hyperDType))
		}
	}
	step := graph.Parameter(sp.g, "step", shapes.Make(stepDType))
	newParams, newStates := prog.Apply(params, grads, states, hyper, step)
	outs := append([]*graph.Node(nil), newParams...)
	for _, s := range newStates {
		outs = append(outs, s...)
	}
	sp.g.Compile(outs...)
	return sp
}

// run executes one step. hyper holds each group's values by field.
func (sp *stepProgram) run(t testing.TB, params, grads []*tensors.Tensor, states [][]*tensors.Tensor, hyper []map[string]float64, hyperDType dtypes.DType, step any) ([]*tensors.Tensor, [][]*tensors.Tensor) {
	t.Helper()
	var in []any
	for i := range params {
		in = append(in, params[i], grads[i])
		for _, s := range states[i] {
			in = append(in, s)
		}
		hts, err := optimizers.HyperTensors(hyper[i], sp.fields[i], hyperDType)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hts {
			in = append(in, h)
		}
	}
	in = append(in, step)
	outs := sp.g.Run(in...)
	n := len(params)
	newParams := outs[:n]
	newStates := make([][]*tensors.Tensor, n)
	pos := n
	for i := range n {
		newStates[i] = outs[pos : pos+sp.nStates[i]]
		pos += sp.nStates[i]
	}
	return newParams, newStates
}

func f64(t testing.TB, x *tensors.Tensor) []float64 {
	t.Helper()
	return tensors.MustCopyFlatData[float64](x)
}

func tensor64(values []float64) *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(append([]float64(nil), values...), len(values))
}

// relErr is |a-b| / max(|b|, 1e-12).
func relErr(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-12) }

// mustContain fails unless err's message contains every part.
func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want an error containing %q, got nil", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not contain %q", err, p)
		}
	}
}

// mustPanic runs fn and returns the panic's message; fails if fn does not panic.
func mustPanic(t *testing.T, fn func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("want a panic, got none")
		}
		msg = fmt.Sprint(r)
	}()
	fn()
	return ""
}

func buildRule(t testing.TB, r optimizers.Rule) optimizers.Transform {
	t.Helper()
	tr, err := r.Build()
	if err != nil {
		t.Fatalf("%s.Build: %v", r.RuleName(), err)
	}
	return tr
}

func mustChain(t testing.TB, ts ...optimizers.Transform) *optimizers.Chain {
	t.Helper()
	c, err := optimizers.NewChain(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tensorOf builds a rank-1 tensor of dt (float32 or float64) from float64 values, rounding once.
func tensorOf(dt dtypes.DType, values []float64) *tensors.Tensor {
	if dt == dtypes.Float64 {
		return tensor64(values)
	}
	return tensors.FromAnyValue(shapes.CastAsDType(append([]float64(nil), values...), dt))
}

// scalarOf is the scalar v as a Go value of dt, for a program input.
func scalarOf(dt dtypes.DType, v int) any {
	return shapes.CastAsDType(float64(v), dt)
}

// asF64 reads a float32 or float64 tensor as float64 values.
func asF64(t testing.TB, x *tensors.Tensor) []float64 {
	t.Helper()
	switch x.DType() {
	case dtypes.Float64:
		return tensors.MustCopyFlatData[float64](x)
	case dtypes.Float32:
		v := tensors.MustCopyFlatData[float32](x)
		out := make([]float64, len(v))
		for i, f := range v {
			out[i] = float64(f)
		}
		return out
	}
	t.Fatalf("asF64: dtype %s", x.DType())
	return nil
}

// relErrFloor is |a-b| / max(|b|, floor): relative error, absolute (scaled by 1/floor) for
// references smaller than floor in magnitude.
func relErrFloor(a, b, floor float64) float64 {
	return math.Abs(a-b) / math.Max(math.Abs(b), floor)
}
