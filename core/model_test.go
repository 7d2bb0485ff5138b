package core_test

import (
	"bytes"
	"errors"
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
	"github.com/nitro-go/nitro/markers"
)

// ViewHost is Dev (its fields repeated: a Device field must be top-level) with a Host field
// Forward reads only at batch size 1.
type ViewHost struct {
	Width       int `nitro:"graphconst"`
	Temperature markers.Device[float32]
	Shift       markers.Device[[]float32]
	Scale       float64
}

func (*ViewHost) BuildModel(*context.Context) error { return nil }

func (*ViewHost) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["pred"], in.Y)
}

func (e *ViewHost) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	out := devForward(ctx, in, e.Width, e.Temperature.Node(), e.Shift.Node())
	if in.X.Shape().Dimensions[0] == 1 {
		out["pred"] = graph.MulScalar(out["pred"], e.Scale)
	}
	return out
}

// TestModelView: the view names the weights as a checkpoint does (parameters, then layer
// state), the parameters with the values Parameters reads; gives the Device values SetDevice wrote, Forward's fields and the data contract; traces
// Forward with the batch-first check; and checks Host independence at a given batch size.
func TestModelView(t *testing.T) {
	e := &ViewHost{Width: 4, Temperature: markers.NewDevice[float32](1), Shift: markers.NewDevice([]float32{0}), Scale: 2}
	n := coretest.MustNew(t, e, coretest.Data(t, 0))
	if err := n.SetDevice("Temperature", float32(3)); err != nil {
		t.Fatal(err)
	}
	params := must(n.Parameters())
	ran := false
	err := n.ViewModel("Export", func(m *core.ModelView) error {
		ran = true
		if m.TypeName() != "ViewHost" || m.Experiment() != any(e) {
			t.Errorf("TypeName %q, Experiment %T", m.TypeName(), m.Experiment())
		}
		ws := must(m.Weights())
		var names []string
		for _, w := range ws {
			names = append(names, w.Name)
			if !strings.HasPrefix(w.Name, "param/") {
				continue // layer state (the RNG's): Parameters holds parameters only
			}
			p := params[strings.TrimPrefix(w.Name, "param/")]
			if p == nil || !slices.Equal(w.Shape, p.Shape().Dimensions) || w.DType != p.DType() {
				t.Errorf("weight %s %s%v: Parameters has %v", w.Name, w.DType, w.Shape, p)
				continue
			}
			p.ConstBytes(func(b []byte) {
				if !bytes.Equal(b, w.Data) {
					t.Errorf("weight %s: its bytes differ from Parameters'", w.Name)
				}
			})
		}
		if want := []string{"param/dense_0/dense/biases", "param/dense_0/dense/weights", "param/dense_1/dense/biases", "param/dense_1/dense/weights", "state/#rngState"}; !slices.Equal(names, want) {
			t.Errorf("weights %v, want %v", names, want)
		}
		devs := must(m.Device())
		if len(devs) != 2 || devs[0].Name != "Temperature" || devs[1].Name != "Shift" || tensors.ToScalar[float32](devs[0].Value) != 3 {
			t.Errorf("Device values %+v, want Temperature (3, as SetDevice wrote it) then Shift", devs)
		}
		if fields, whole := m.ForwardFields(); whole || !slices.Equal(fields, []core.ForwardField{{Name: "x"}}) {
			t.Errorf("ForwardFields %+v (whole %v)", fields, whole)
		}
		if s, ok := m.FieldSpec("x"); !ok || s.DType != dtypes.Float32 || !slices.Equal(s.Shape, []int{coretest.Features}) || m.FromInputSpecs() {
			t.Errorf("FieldSpec(x) %+v %v (FromInputSpecs %v)", s, ok, m.FromInputSpecs())
		}
		if _, ok := m.FieldSpec("nope"); ok {
			t.Error("FieldSpec of a field the data lacks")
		}

		frozen := map[string]*tensors.Tensor{}
		for _, d := range devs {
			frozen[d.Name] = d.Value
		}
		be, _, _ := m.Backend()
		trace := func(rows, width int) error {
			g := graph.NewGraph(be, "view_test")
			defer g.Finalize()
			consts := map[string]*graph.Node{}
			for _, d := range devs {
				consts[d.Name] = graph.ConstTensor(g, d.Value)
			}
			x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, rows, coretest.Features))
			_, err := m.Forward(g, consts, map[string]*graph.Node{"x": x, "unread": x}, width)
			return err
		}
		if err := trace(2, 2); err != nil {
			t.Errorf("Forward at batch size 2: %v", err)
		}
		coretest.WantErr(t, trace(2, 3), `Forward output "pred" has shape [2 1]`, "leading axis must be the batch (3)")

		batch := func(b int) func(g *graph.Graph) map[string]*graph.Node {
			return func(g *graph.Graph) map[string]*graph.Node {
				return map[string]*graph.Node{"x": graph.Parameter(g, "x", shapes.Make(dtypes.Float32, b, coretest.Features))}
			}
		}
		if err := m.CheckHostIndependent(4, frozen, batch(4)); err != nil {
			t.Errorf("batch size 4 reads no Host field: %v", err)
		}
		err := m.CheckHostIndependent(1, frozen, batch(1))
		var hre *markers.HostReadError
		if !errors.As(err, &hre) || !slices.Equal(hre.Fields, []string{"Scale"}) {
			t.Errorf("batch size 1: got %v, want a *markers.HostReadError naming Scale", err)
		}

		prov := m.Provenance()
		if prov["experiment"] != "ViewHost" || prov["framework"] != "nitro" || prov["step"] != "0" || prov["graphconst.Width"] == "" {
			t.Errorf("provenance %v", prov)
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("ViewModel: %v (ran %v)", err, ran)
	}

	err = n.ViewModel("Export", func(*core.ModelView) error { panic("deliberately broken") })
	coretest.WantErr(t, err, "export: deliberately broken")
	var nilNitro *core.Nitro
	coretest.WantErr(t, nilNitro.ViewModel("Export", func(*core.ModelView) error { return nil }), "Export: nil *Nitro")
}
