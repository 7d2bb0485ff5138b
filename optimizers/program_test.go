package optimizers_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/optimizers"
)

func TestProgramErrors(t *testing.T) {
	_, err := optimizers.NewProgram(nil, 0)
	mustContain(t, err, "no chains", "one per parameter group")
	_, err = optimizers.NewProgram([]*optimizers.Chain{nil}, 0)
	mustContain(t, err, "group 0 is nil or empty", "NewChain")
	prog, err := optimizers.NewProgram([]*optimizers.Chain{mustChain(t, buildRule(t, optimizers.NewSGD()))}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = prog.Init(nil)
	mustContain(t, err, "got 0 parameter buffers for 1 groups")
	g := graph.NewGraph(goBackend(t), "prog")
	p := graph.Parameter(g, "p", shapes.Make(dtypes.Float32, 2))
	msg := mustPanic(t, func() { prog.Apply([]*graph.Node{p}, nil, nil, nil, p) })
	if !strings.Contains(msg, "1 groups but got 1 params, 0 grads") {
		t.Errorf("panic %s", msg)
	}
}

// TestProgramFloat32Training runs a few float32 RAdam steps as training would and checks the
// parameters keep their dtype (a type fixed point across the step) and move against the gradient.
func TestProgramFloat32Training(t *testing.T) {
	l := twoLeafLayout(t, dtypes.Float32)
	c, err := optimizers.BuildRuleChain(nil, optimizers.GroupSetup{Name: "default", Layout: l, Lambda: 1e-2, NoDecay: l.NoDecayMask(nil)})
	if err != nil {
		t.Fatal(err)
	}
	prog, err := optimizers.NewProgram([]*optimizers.Chain{c}, 1)
	if err != nil {
		t.Fatal(err)
	}
	params := []*tensors.Tensor{tensors.FromFlatDataAndDimensions([]float32{1, 1, 1, 1, 1, 1}, 6)}
	states, err := prog.Init(params)
	if err != nil {
		t.Fatal(err)
	}
	sp := compileStep(t, prog, []shapes.Shape{l.FlatShape()}, dtypes.Float32, dtypes.Int32)
	grad := []*tensors.Tensor{tensors.FromFlatDataAndDimensions([]float32{1, -1, 2, -2, 0.5, -0.5}, 6)}
	for step := 1; step <= 10; step++ {
		params, states = sp.run(t, params, grad, states, []map[string]float64{{"eta": 1e-2, "lambda": 1e-4}}, dtypes.Float32, int32(step))
	}
	if params[0].DType() != dtypes.Float32 {
		t.Fatalf("params became %s", params[0].DType())
	}
	got := tensors.MustCopyFlatData[float32](params[0])
	for i, sign := range []float32{1, -1, 1, -1, 1, -1} {
		if (got[i]-1)*sign >= 0 {
			t.Errorf("element %d = %v did not move against the gradient", i, got[i])
		}
	}
}
