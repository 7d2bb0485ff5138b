package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/schedules"
)

// Dev has one field of each marker kind: predictions are divided by Temperature and shifted by
// Shift (both traced inputs); Width bakes; Note is Host.
type Dev struct {
	Width       int `nitro:"graphconst"`
	Temperature markers.Device[float32]
	Shift       markers.Device[[]float32]
	Note        string
}

func newDev() *Dev {
	return &Dev{Width: 4, Temperature: markers.NewDevice[float32](1), Shift: markers.NewDevice([]float32{0}), Note: "host"}
}

func (*Dev) BuildModel(*context.Context) error { return nil }

func (e *Dev) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return devForward(ctx, in, e.Width, e.Temperature.Node(), e.Shift.Node())
}

func devForward(ctx *context.Context, in coretest.In, width int, temperature, shift *graph.Node) core.Outputs {
	h := layers.Dense(ctx.In("dense_0"), in.X, true, width)
	p := layers.Dense(ctx.In("dense_1"), h, true, 1)
	p = graph.Div(p, temperature)
	return core.Outputs{"pred": graph.Add(p, graph.ExpandAxes(shift, 0))}
}

func (*Dev) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["pred"], in.Y)
}

// SchedDev is Dev with its Temperature scheduled. (A Device field must be top-level, so it
// repeats Dev's fields rather than embedding it.)
type SchedDev struct {
	Width       int `nitro:"graphconst"`
	Temperature markers.Device[float32]
	Shift       markers.Device[[]float32]
}

func (*SchedDev) BuildModel(*context.Context) error { return nil }

func (e *SchedDev) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return devForward(ctx, in, e.Width, e.Temperature.Node(), e.Shift.Node())
}

func (*SchedDev) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["pred"], in.Y)
}

func (*SchedDev) Schedules() map[string]any {
	return map[string]any{"Temperature": schedules.Linear(2, 1)}
}

func TestSetDeviceDoesNotRecompile(t *testing.T) {
	cache := newCache()
	e := newDev()
	n, err := core.New(e, coretest.GoOpts(cache, core.WithData(coretest.Data(t, 40)))...)
	if err != nil {
		t.Fatal(err)
	}
	before, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	compiled := cache.Stats()
	uploads := n.Uploads()

	if err := n.SetDevice("Temperature", float32(2)); err != nil {
		t.Fatal(err)
	}
	if v, err := n.DeviceValue("Temperature"); err != nil || v != float32(2) {
		t.Errorf("DeviceValue(Temperature) = %v, %v; want 2", v, err)
	}
	if e.Temperature.Value() != 2 {
		t.Errorf("the experiment's field holds %v, want 2", e.Temperature.Value())
	}
	if err := n.SetDevice("Shift", []float32{0.5}); err != nil {
		t.Fatal(err)
	}
	after, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if s := cache.Stats(); s.Misses != compiled.Misses || s.Entries != compiled.Entries {
		t.Errorf("SetDevice recompiled: cache %+v -> %+v", compiled, s)
	}
	if after[core.ValLoss] == before[core.ValLoss] {
		t.Errorf("val_loss %v unchanged after SetDevice: the new values did not reach the program", after[core.ValLoss])
	}
	if u := n.Uploads(); u.Device != uploads.Device+2 || u.Params != uploads.Params {
		t.Errorf("Uploads %+v -> %+v: want exactly the two new Device values uploaded", uploads, u)
	}
	// Training uses the new values too, and still compiles only its own two programs.
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if s := cache.Stats(); s.Misses != s.Entries {
		t.Errorf("cache %+v: a program compiled twice", s)
	}
}

func TestSetDeviceRefusals(t *testing.T) {
	e := newDev()
	n := coretest.MustNew(t, e, coretest.Data(t, 0))
	cases := []struct {
		name  string
		value any
		want  []string
	}{
		{"Width", 8, []string{"field Width", "GraphConst", "new experiment", "build a new run"}},
		{"Note", "other", []string{"field Note", "Host", "reaches no trace"}},
		{"Temperature", 2.0, []string{"field Temperature", "float32", "got float64", "pass a float32"}},
		{"Shift", []float32{1, 2}, []string{"field Shift", "shape", "different program"}},
		{"Nope", float32(1), []string{"no field Nope", "Device fields: ", "Temperature", "Shift"}},
	}
	for _, c := range cases {
		err := n.SetDevice(c.name, c.value)
		coretest.WantErr(t, err, c.want...)
	}
	// Nothing refused was written.
	if e.Width != 4 || e.Note != "host" || e.Temperature.Value() != 1 || len(e.Shift.Value()) != 1 {
		t.Errorf("a refused SetDevice wrote the experiment: %+v", e)
	}
	_, err := n.DeviceValue("Note")
	coretest.WantErr(t, err, "field Note", "Host, not Device", "read the field directly")
}

func TestSetDeviceRefusesAScheduledField(t *testing.T) {
	d := newDev()
	e := &SchedDev{Width: d.Width, Temperature: d.Temperature, Shift: d.Shift}
	n := coretest.MustNew(t, e, coretest.Data(t, 0))
	err := n.SetDevice("Temperature", float32(3))
	coretest.WantErr(t, err, "Device field Temperature is driven by a schedule", `change the schedule instead (Schedules()["Temperature"])`)
	// The unscheduled Device field stays settable.
	if err := n.SetDevice("Shift", []float32{1}); err != nil {
		t.Errorf("SetDevice(Shift) next to a scheduled field: %v", err)
	}
	// The schedule writes the field once per optimizer step: Linear(2, 1) ends at 1 on the last step.
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if v, _ := n.DeviceValue("Temperature"); v != float32(1) {
		t.Errorf("after training, scheduled Temperature = %v, want 1 (its value at the last step)", v)
	}
	wantContains(t, "binding report", n.BindingReport(), "schedule Temperature")
}
