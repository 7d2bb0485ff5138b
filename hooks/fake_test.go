package hooks_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/hooks"
)

// twoGroupStep is a manual step of two groups: "a" fits x to 3, "b" fits x*a to 1, each stepped
// once with its own Backward.
func twoGroupStep(s hooks.ManualStep, x *graph.Node) hooks.StepResult {
	a := func(ctx *context.Context) *graph.Node {
		return ctx.In("a").VariableWithValue("w", float32(2)).ValueGraph(x.Graph())
	}
	b := func(ctx *context.Context) *graph.Node {
		return ctx.In("b").VariableWithValue("w", float32(5)).ValueGraph(x.Graph())
	}
	lossA, gradsA := s.Backward(func(ctx *context.Context) *graph.Node {
		return graph.Square(graph.Sub(graph.Mul(x, a(ctx)), graph.Const(x.Graph(), float32(3))))
	}, "a")
	s.StepOptimizer("a", gradsA)
	lossB, gradsB := s.Backward(func(ctx *context.Context) *graph.Node {
		return graph.Square(graph.Sub(graph.Mul(graph.Mul(x, a(ctx)), b(ctx)), graph.Const(x.Graph(), float32(1))))
	}, "b")
	s.StepOptimizer("b", gradsB)
	return hooks.StepResult{Loss: graph.Add(lossA, lossB)}
}

func TestFakeStepDifferentiatesTheNamedGroupsOnly(t *testing.T) {
	backend, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	fake := &hooks.FakeStep{Group: func(kp string) string { return strings.SplitN(kp, "/", 2)[0] }}
	exec, err := context.NewExecAny(backend, ctx, func(ctx *context.Context, x *graph.Node) []*graph.Node {
		fake.Context, fake.StepAt = ctx.Checked(false), graph.Scalar(x.Graph(), dtypes.Float32, 1)
		res := twoGroupStep(fake, x)
		ga, gb := fake.Stepped["a"]["a/w"], fake.Stepped["b"]["b/w"]
		if ga == nil || gb == nil || len(fake.Stepped["a"]) != 1 || len(fake.Stepped["b"]) != 1 {
			t.Errorf("each group's step got its own gradient only: %v", fake.Stepped)
		}
		return []*graph.Node{res.Loss, ga, gb}
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Exec(float32(1))
	if err != nil {
		t.Fatal(err)
	}
	// x=1, a=2, b=5: lossA=(2-3)^2=1, lossB=(10-1)^2=81; dA/da=2(a-3)=-2; dB/db=2(ab-1)a=36.
	want := []float32{82, -2, 36}
	for i, w := range want {
		if got := out[i].Value().(float32); got != w {
			t.Errorf("output %d = %v, want %v", i, got, w)
		}
	}
	if got := fake.Groups(); strings.Join(got, ",") != "a,b" {
		t.Errorf("Groups() = %v, want [a b]", got)
	}
	if len(fake.Backwards) != 2 || fake.Backwards[0][0] != "a" || fake.Backwards[1][0] != "b" {
		t.Errorf("Backwards = %v, want [[a] [b]]", fake.Backwards)
	}
}

func TestFakeStepRefusesASecondStepOfAGroup(t *testing.T) {
	fake := &hooks.FakeStep{}
	fake.StepOptimizer("a", hooks.Grads{})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "at most once") {
			t.Errorf("a second StepOptimizer of one group: recovered %v, want an error saying a group steps at most once", r)
		}
	}()
	fake.StepOptimizer("a", hooks.Grads{})
}
