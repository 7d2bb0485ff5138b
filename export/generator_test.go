package export_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gopjrt/dtypes"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/export"
	"github.com/nitro-go/nitro/exportbundle"
	"github.com/nitro-go/nitro/internal/prereq"
	"github.com/nitro-go/nitro/tensorfile"
)

// Stepping is a regression with a decode step made up for the test: its logits at position i of
// the vocabulary are i times the sum of the Dense weights plus the steps taken since the window's
// start (the state, a counter). The biases are never read, and an unused variable sits beside
// the state: neither is in the bundle.
type Stepping struct{ coretest.Base }

// stepContext copies the view's weights into a fresh context under their checkpoint scopes, as
// an experiment does, and adds the counter and an unused variable.
func stepContext(m *core.ModelView) (*context.Context, error) {
	ws, err := m.Weights()
	if err != nil {
		return nil, err
	}
	ctx := context.New()
	for _, w := range ws {
		keypath, ok := strings.CutPrefix(w.Name, "param/")
		if !ok {
			continue // the RNG's state: no step reads it
		}
		i := strings.LastIndex(keypath, "/")
		t := tensors.FromShape(shapes.Make(w.DType, w.Shape...))
		t.MutableBytes(func(b []byte) { copy(b, w.Data) })
		ctx.InAbsPath("/"+keypath[:i]).VariableWithValue(keypath[i+1:], t)
	}
	ctx.InAbsPath("/counter").VariableWithValue("steps", tensors.FromShape(shapes.Make(dtypes.Int32, 1, 1)))
	ctx.InAbsPath("/unused").VariableWithValue("junk", tensors.FromShape(shapes.Make(dtypes.Float32, 3)))
	return ctx, nil
}

func (*Stepping) ExportStep(m *core.ModelView) (*context.Context, func(*context.Context, *graph.Node, *graph.Node) *graph.Node, int, error) {
	ctx, err := stepContext(m)
	return ctx, func(ctx *context.Context, token, pos *graph.Node) *graph.Node {
		g := token.Graph()
		w := graph.ReduceAllSum(ctx.InAbsPath("/dense_0/dense").GetVariable("weights").ValueGraph(g))
		counter := ctx.InAbsPath("/counter").GetVariable("steps")
		steps := counter.ValueGraph(g)
		counter.SetValueGraph(graph.AddScalar(steps, 1))
		iota := graph.Iota(g, shapes.Make(dtypes.Float32, 1, exportbundle.GeneratorVocab), 1)
		return graph.Add(graph.Mul(iota, w), graph.ConvertDType(steps, dtypes.Float32))
	}, 6, err
}

// Forgetful reads its counter and never sets it: state it would not carry.
type Forgetful struct{ Stepping }

func (*Forgetful) ExportStep(m *core.ModelView) (*context.Context, func(*context.Context, *graph.Node, *graph.Node) *graph.Node, int, error) {
	ctx, err := stepContext(m)
	return ctx, func(ctx *context.Context, token, pos *graph.Node) *graph.Node {
		steps := graph.ConvertDType(ctx.InAbsPath("/counter").GetVariable("steps").ValueGraph(token.Graph()), dtypes.Float32)
		return graph.BroadcastToDims(graph.Reshape(steps), 1, exportbundle.GeneratorVocab)
	}, 6, err
}

// Narrow returns logits of the wrong width.
type Narrow struct{ Stepping }

func (*Narrow) ExportStep(m *core.ModelView) (*context.Context, func(*context.Context, *graph.Node, *graph.Node) *graph.Node, int, error) {
	ctx, err := stepContext(m)
	return ctx, func(ctx *context.Context, token, pos *graph.Node) *graph.Node {
		return graph.Zeros(token.Graph(), shapes.Make(dtypes.Float32, 1, 10))
	}, 6, err
}

// Broken's ExportStep fails.
type Broken struct{ Stepping }

func (*Broken) ExportStep(*core.ModelView) (*context.Context, func(*context.Context, *graph.Node, *graph.Node) *graph.Node, int, error) {
	return nil, nil, 0, errors.New("no weights today")
}

// ExportGenerator writes the step's program with token, position and the state as inputs, the
// weights the step reads (and only those), the logits and the state as outputs, and the
// generator entry; the bundle runs under Runner.Stepper with the counter carried on the device.
// What the export cannot make a generator of is refused by name before anything is written.
func TestExportGenerator(t *testing.T) {
	n := coretest.MustNew(t, &Stepping{}, coretest.Data(t, 0))
	coretest.Train(t, n) // the view holds weights once Forward has been built
	refuse := func(n *core.Nitro, spec export.ExportSpec, want ...string) {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "b")
		_, err := export.ExportGenerator(n, dir, spec)
		coretest.WantErr(t, err, want...)
		if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
			t.Errorf("the bundle directory exists after a refusal (%v)", serr)
		}
	}
	refuse(coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0)), export.ExportSpec{Name: "g"}, "experiment Reg has no decode step", "export.StepExporter")
	refuse(n, export.ExportSpec{Name: "g", Inputs: []string{"x"}}, "a text generator's inputs and outputs are its decode step's", "leave Inputs")
	refuse(n, export.ExportSpec{Name: "g", BatchSizes: []int{1, 4}}, "ExportSpec.BatchSizes [1 4]", "batch size 1")
	refuse(n, export.ExportSpec{}, "ExportSpec.Name is empty")
	refuse(nil, export.ExportSpec{Name: "g"}, "nil *Nitro")
	refuse(coretest.MustNew(t, &Broken{}, coretest.Data(t, 0)), export.ExportSpec{Name: "g"}, "ExportStep: no weights today")

	plugin := prereq.Plugin(t) // the capture needs the XLA plugin from here on
	refuse(coretest.MustNew(t, &Forgetful{}, coretest.Data(t, 0)), export.ExportSpec{Name: "g"}, `variable state/counter/steps is no weight of the model and the step does not set it`)
	refuse(coretest.MustNew(t, &Narrow{}, coretest.Data(t, 0)), export.ExportSpec{Name: "g"}, "the step returned logits", "want float32 [1, 256]")

	dir := filepath.Join(t.TempDir(), "gen")
	b, err := export.ExportGenerator(n, dir, export.ExportSpec{Name: "gen", Provenance: map[string]string{"note": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	g := b.Generator
	if g == nil || g.Context != 6 || g.Vocab != 256 || g.Token != "token" || g.Position != "position" || g.Logits != "logits" || !slices.Equal(g.State, []string{"state/counter/steps"}) {
		t.Fatalf("generator entry %+v", g)
	}
	var names []string
	for _, w := range b.Weights {
		names = append(names, w.Name)
	}
	if !slices.Equal(names, []string{"param/dense_0/dense/weights"}) || b.Provenance["note"] != "test" {
		t.Errorf("weights %v (want the one the step reads), provenance %v", names, b.Provenance)
	}
	if ins := b.Inputs; len(ins) != 3 || ins[2].Name != "state/counter/steps" || ins[2].DType != tensorfile.I32 || !slices.Equal(ins[2].Shape, []int{-1, 1}) {
		t.Errorf("inputs %+v", ins)
	}

	r, err := exportbundle.Open(dir, plugin)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Stepper()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for pos := range 3 {
		logits, err := s.Step(7, pos)
		if err != nil {
			t.Fatal(err)
		}
		if logits[0] != float32(pos) || logits[1]-logits[0] == 0 {
			t.Errorf("step at %d: logits start %v, want %d (the steps before it), then a slope", pos, logits[:2], pos)
		}
	}
}
