package markers_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gopjrt/dtypes"

	"github.com/nitro-go/nitro/markers"
)

type sweep struct {
	Temperature markers.Device[float32]   `default:"1"`
	Weights     markers.Device[[]float32] `default:"1,2,3"`
	Step        markers.Device[int]
	Classes     int `nitro:"graphconst" default:"10"`
	MaxEpochs   int
}

func TestDeviceValuesInDeclarationOrder(t *testing.T) {
	e := must(markers.New[sweep](nil))
	dvs := must(markers.DeviceValues(e))
	if len(dvs) != 3 || dvs[0].Name != "Temperature" || dvs[0].Value != float32(1) ||
		dvs[1].Name != "Weights" || len(dvs[1].Value.([]float32)) != 3 || dvs[2].Name != "Step" || dvs[2].Value != 0 {
		t.Errorf("got %+v", dvs)
	}
	if s := must(markers.DeviceShapeOf(e, "Weights")); !s.Equal(shapes.Make(dtypes.Float32, 3)) {
		t.Errorf("Weights shape %s", s)
	}
	if s := must(markers.DeviceShapeOf(e, "Step")); s.DType != dtypes.Int64 || s.Rank() != 0 {
		t.Errorf("Step (Go int) shape %s", s)
	}
}

func TestSetDevice(t *testing.T) {
	e := must(markers.New[sweep](nil))
	before := must(markers.GraphConstHash(e))
	must(0, markers.SetDevice(e, "Temperature", float32(0.5)))
	w := []float32{7, 8, 9}
	must(0, markers.SetDevice(e, "Weights", w))
	w[0] = 0 // SetDevice copied the slice
	if e.Temperature.Value() != 0.5 || e.Weights.Value()[0] != 7 {
		t.Errorf("got %v %v", e.Temperature, e.Weights)
	}
	if v := must(markers.DeviceValueOf(e, "Temperature")); v != float32(0.5) {
		t.Errorf("DeviceValueOf: %v", v)
	}
	if must(markers.GraphConstHash(e)) != before {
		t.Error("a Device write moved the GraphConst hash")
	}
	must(0, markers.SetDevice(e, "Temperature", markers.NewDevice[float32](2)))
	if e.Temperature.Value() != 2 {
		t.Errorf("a Device[T] value: %v", e.Temperature)
	}
}

func TestSetDeviceRefusals(t *testing.T) {
	e := must(markers.New[sweep](nil))
	wantErr(t, markers.SetDevice(e, "Classes", 3), "field Classes of sweep is GraphConst", "bakes", "different program", "new run")
	wantErr(t, markers.SetDevice(e, "MaxEpochs", 3), "field MaxEpochs of sweep is Host", "reaches no trace", "change nothing compiled", "Apply")
	wantErr(t, markers.SetDevice(e, "Temperature", 0.5), "field Temperature of sweep holds float32, got float64", "pass a float32")
	wantErr(t, markers.SetDevice(e, "Weights", []float32{1, 2}), "field Weights of sweep has shape (Float32)[3], got (Float32)[2]", "different shape")
	wantErr(t, markers.SetDevice(e, "Weights", []float32{}), "Weights", "not a tensor")
	wantErr(t, markers.SetDevice(e, "Temp", float32(1)), "no field Temp in sweep", "Device fields: Temperature, Weights, Step")
	wantErr(t, markers.SetDevice(*e, "Temperature", float32(1)), "non-nil pointer")
	if e.Temperature.Value() != 1 || len(e.Weights.Value()) != 3 {
		t.Error("a refused SetDevice wrote the field")
	}
	_, err := markers.DeviceValueOf(e, "Classes")
	wantErr(t, err, "field Classes of sweep is GraphConst, not Device", "read the field directly")
	_, err = markers.DeviceValueOf(e, "MaxEpochs")
	wantErr(t, err, "field MaxEpochs of sweep is Host, not Device", "read the field directly")
}

func TestDeviceValueAndNodeGuards(t *testing.T) {
	e := must(markers.New[sweep](nil))
	wantPanic(t, func() { e.Temperature.Node() }, "Device field Temperature has no graph node", "use Value()")
	wantPanic(t, func() { markers.NewDevice(1.0).Node() }, "unnamed markers.Device[float64]")

	g := graph.NewGraph(goBackend(t), "view")
	nodes := map[string]*graph.Node{
		"Temperature": graph.Parameter(g, "Temperature", shapes.Make(dtypes.Float32)),
		"Weights":     graph.Parameter(g, "Weights", shapes.Make(dtypes.Float32, 3)),
		"Step":        graph.Parameter(g, "Step", shapes.Make(dtypes.Int64)),
	}
	view := must(markers.BindDevice(e, nodes)).(*sweep)
	if view.Temperature.Node() != nodes["Temperature"] || !view.Step.IsBound() || e.Temperature.IsBound() {
		t.Error("BindDevice did not bind the copy, or bound the original")
	}
	wantPanic(t, func() { view.Temperature.Value() }, "host value of Device field Temperature inside traced code", "use Node()", "SetDevice")
	if s := view.Weights.String(); s != "Device(node (Float32)[3])" {
		t.Errorf("bound String: %q", s)
	}
	if s := e.Weights.String(); s != "[1 2 3]" {
		t.Errorf("host String: %q", s)
	}
}

func TestBindDeviceChecksNodes(t *testing.T) {
	e := must(markers.New[sweep](nil))
	g := graph.NewGraph(goBackend(t), "view")
	_, err := markers.BindDevice(e, map[string]*graph.Node{
		"Temperature": graph.Parameter(g, "Temperature", shapes.Make(dtypes.Float64)),
		"Weights":     graph.Parameter(g, "Weights", shapes.Make(dtypes.Float32, 4)),
		"MaxEpochs":   graph.Parameter(g, "MaxEpochs", shapes.Make(dtypes.Int64)),
	})
	wantErr(t, err, "BindDevice on sweep",
		"node for Device field Temperature has shape (Float64), but its host value has (Float32)",
		"Device field Weights", "(Float32)[4]", "DeviceShapeOf",
		"Device field Step has no node", "(Int64)",
		"MaxEpochs is not a Device field")
}
