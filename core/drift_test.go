package core_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/metrics"
	"github.com/nitro-go/nitro/prefetch"
)

// Drift has one field of each kind a verb compares: Width bakes, Temperature is a traced input,
// MaxEpochs is a run knob New resolves, Note a plain Host field, and Stash a Host field the
// experiment's own FinalizeMetrics writes during a verb.
type Drift struct {
	Width       int `nitro:"graphconst"`
	Temperature markers.Device[float32]
	Shift       markers.Device[[]float32]
	MaxEpochs   int
	Note        string
	Stash       float64
}

func newDrift() *Drift {
	return &Drift{Width: 4, Temperature: markers.NewDevice[float32](1), Shift: markers.NewDevice([]float32{0}), MaxEpochs: 1, Note: "host"}
}

func (*Drift) BuildModel(*context.Context) error { return nil }

func (e *Drift) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return devForward(ctx, in, e.Width, e.Temperature.Node(), e.Shift.Node())
}

func (*Drift) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["pred"], in.Y)
}

func (e *Drift) FinalizeMetrics(acc metrics.Result, split string) map[string]float64 {
	e.Stash = acc.Scalars["loss"] + 1 // state the experiment keeps for itself: no drift
	return acc.Scalars
}

func (e *Drift) FinalizedMetricNames() []string { return []string{core.ValLoss} }

type warnings struct{ msgs []string }

func (w *warnings) add(m string) { w.msgs = append(w.msgs, m) }
func (w *warnings) take() []string {
	m := w.msgs
	w.msgs = nil
	return m
}

func newDriftNitro(t *testing.T, e *Drift, w *warnings, more ...core.Option) *core.Nitro {
	t.Helper()
	return coretest.MustNew(t, e, coretest.Data(t, 32), append([]core.Option{core.WithWarn(w.add)}, more...)...)
}

// A Host knob assigned after New is warned about at the next verb, once, naming the field, the
// value New resolved and the new one; the run keeps the frozen value.
func TestDriftHostKnobIsWarnedOnceAndTheFrozenValueRuns(t *testing.T) {
	e, w := newDrift(), &warnings{}
	n := newDriftNitro(t, e, w)
	e.MaxEpochs = 3
	coretest.Train(t, n)
	msgs := w.take()
	if len(msgs) != 1 {
		t.Fatalf("warnings %q, want one", msgs)
	}
	for _, s := range []string{"Train: Host field MaxEpochs of Drift was assigned after core.New", "was 1, now 3", "stays 1 (field", "set it before core.New or pass core.WithMaxEpochs to core.New"} {
		if !strings.Contains(msgs[0], s) {
			t.Errorf("warning %q lacks %q", msgs[0], s)
		}
	}
	if n.Epoch() != 1 {
		t.Errorf("trained %d epochs, want the frozen MaxEpochs 1", n.Epoch())
	}
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if msgs := w.take(); len(msgs) != 0 {
		t.Errorf("a second verb warned again: %q", msgs)
	}
	// A Host field the experiment's own hooks write during a verb (FinalizeMetrics' Stash) is no
	// drift, and neither is a verb with nothing changed.
	if e.Stash == 0 {
		t.Fatal("FinalizeMetrics did not run")
	}
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if msgs := w.take(); len(msgs) != 0 {
		t.Errorf("warnings %q for fields only the hooks wrote", msgs)
	}
	// Another new value of a plain Host field: warned at the next verb, naming both values.
	e.Note = "changed"
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if msgs := w.take(); len(msgs) != 1 || !strings.Contains(msgs[0], `Evaluate("val"): Host field Note of Drift was assigned after core.New (was "host", now "changed")`) {
		t.Errorf("warnings %q, want one naming Note with both values", msgs)
	}
}

// A Device field set back to its value on the device is no drift, and the warning it had is
// forgotten: the same new value assigned again is news again, warned once more. (A Host field is
// adopted as each verb leaves it, so only Device and GraphConst fields can be set back.)
func TestDriftSetBackForgetsTheWarning(t *testing.T) {
	e, w := newDrift(), &warnings{}
	n := newDriftNitro(t, e, w)
	x, _ := coretest.Synthetic(4, 3)
	predict := func() []string {
		t.Helper()
		_ = must(n.Predict(prefetch.Batch{"x": x}))
		return w.take()
	}
	e.Temperature = markers.NewDevice[float32](2)
	if msgs := predict(); len(msgs) != 1 {
		t.Fatalf("warnings %q, want one for Temperature", msgs)
	}
	if msgs := predict(); len(msgs) != 0 {
		t.Errorf("the same value warned twice: %q", msgs)
	}
	e.Temperature = markers.NewDevice[float32](1)
	if msgs := predict(); len(msgs) != 0 {
		t.Errorf("set back, still warned: %q", msgs)
	}
	e.Temperature = markers.NewDevice[float32](2)
	if msgs := predict(); len(msgs) != 1 || !strings.Contains(msgs[0], "Device field Temperature") {
		t.Errorf("assigned again after a set-back: warnings %q, want one for Temperature", msgs)
	}
}

// A GraphConst field assigned after New is refused by every verb, naming the field, both values
// and the fix; set back, the verbs run again.
func TestDriftGraphConstIsRefusedByEveryVerb(t *testing.T) {
	e, w := newDrift(), &warnings{}
	n := newDriftNitro(t, e, w)
	x, _ := coretest.Synthetic(4, 3)
	before := must(n.Predict(prefetch.Batch{"x": x}))
	e.Width = 8
	want := []string{"GraphConst field Width (4 at New, now 8) of Drift was assigned after core.New", "set it before core.New", "or set it back"}
	coretest.WantErr(t, n.Train(), append([]string{"Train refused"}, want...)...)
	_, err := n.Validate()
	coretest.WantErr(t, err, append([]string{`Evaluate("val") refused`}, want...)...)
	_, err = n.Predict(prefetch.Batch{"x": x})
	coretest.WantErr(t, err, append([]string{"Predict refused"}, want...)...)
	for _, err := range n.PredictAll(prefetch.NoPrefetch(coretest.Arrays(t, 8, 4, 1, prefetch.ArrayOptions{}))) {
		coretest.WantErr(t, err, append([]string{"PredictAll refused"}, want...)...)
		break
	}
	// The model view (what the export module exports through) is refused as a verb is, before
	// its function runs.
	err = n.ViewModel("Export", func(*core.ModelView) error {
		t.Error("ViewModel ran its function under a GraphConst drift")
		return nil
	})
	coretest.WantErr(t, err, append([]string{"Export refused"}, want...)...)
	if n.Epoch() != 0 {
		t.Errorf("a refused Train trained %d epochs", n.Epoch())
	}
	e.Width = 4
	after := must(n.Predict(prefetch.Batch{"x": x}))
	sameBits(t, "Predict after Width was set back", flatF32(after["pred"]), flatF32(before["pred"]))
	if msgs := w.take(); len(msgs) != 0 {
		t.Errorf("warnings %q: GraphConst drift is an error, not a warning", msgs)
	}
}

// A Device field assigned directly after New is warned about once, naming SetDevice; the device
// copy is what runs. SetDevice (field and device copy together) and a schedule are no drift.
func TestDriftDeviceIsWarnedAndSetDeviceIsNot(t *testing.T) {
	e, w := newDrift(), &warnings{}
	n := newDriftNitro(t, e, w)
	x, _ := coretest.Synthetic(4, 3)
	before := must(n.Predict(prefetch.Batch{"x": x}))
	e.Temperature = markers.NewDevice[float32](2)
	got := must(n.Predict(prefetch.Batch{"x": x}))
	sameBits(t, "Predict after a direct assignment (the device copy runs)", flatF32(got["pred"]), flatF32(before["pred"]))
	msgs := w.take()
	if len(msgs) != 1 {
		t.Fatalf("warnings %q, want one", msgs)
	}
	for _, s := range []string{"Predict: Device field Temperature of Drift was assigned after core.New (1 on the device, the field now 2)", "so 1 is what runs", `n.SetDevice("Temperature", value)`} {
		if !strings.Contains(msgs[0], s) {
			t.Errorf("warning %q lacks %q", msgs[0], s)
		}
	}
	_ = must(n.Predict(prefetch.Batch{"x": x}))
	if msgs := w.take(); len(msgs) != 0 {
		t.Errorf("warned twice about one value: %q", msgs)
	}
	// A new slice value is seen by content.
	e.Shift = markers.NewDevice([]float32{0.5})
	_ = must(n.Predict(prefetch.Batch{"x": x}))
	if msgs := w.take(); len(msgs) != 1 || !strings.Contains(msgs[0], "Device field Shift of Drift was assigned after core.New ([0] on the device, the field now [0.5])") {
		t.Errorf("warnings %q, want one naming Shift", msgs)
	}
	// SetDevice writes both: no warning (the values differ from the ones warned about), and its
	// value runs.
	if err := n.SetDevice("Temperature", float32(3)); err != nil {
		t.Fatal(err)
	}
	if err := n.SetDevice("Shift", []float32{0.25}); err != nil {
		t.Fatal(err)
	}
	moved := must(n.Predict(prefetch.Batch{"x": x}))
	if msgs := w.take(); len(msgs) != 0 {
		t.Errorf("warnings after SetDevice: %q", msgs)
	}
	if flatF32(moved["pred"])[0] == flatF32(before["pred"])[0] {
		t.Error("SetDevice's value did not reach the program")
	}
	coretest.Train(t, n) // and training (Stash written by FinalizeMetrics, nothing else) is silent
	if msgs := w.take(); len(msgs) != 0 {
		t.Errorf("warnings after SetDevice and Train: %q", msgs)
	}
}

// Derive's values and a scheduled Device field are written by the framework: never drift.
func TestDriftScheduledDeviceIsNotDrift(t *testing.T) {
	w := &warnings{}
	e := &SchedDev{Width: 4, Temperature: markers.NewDevice[float32](2), Shift: markers.NewDevice([]float32{0})}
	n := coretest.MustNew(t, e, coretest.Data(t, 32), core.WithMaxEpochs(2), core.WithWarn(w.add))
	coretest.Train(t, n)
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if msgs := w.take(); len(msgs) != 0 {
		t.Errorf("warnings for a scheduled Device field: %q", msgs)
	}
}

// Big has a Host field past the hash budget: its contents are not hashed per verb, but a new
// slice assigned to it is still seen; a small one is hashed, so an in-place write is seen too.
type Big struct {
	coretest.Base
	Table []float32
	Small []float32
}

func TestDriftBigHostFieldIsComparedByIdentity(t *testing.T) {
	w := &warnings{}
	e := &Big{Table: make([]float32, 1<<19), Small: []float32{1, 2}}
	n := coretest.MustNew(t, e, coretest.Data(t, 32), core.WithWarn(w.add))
	e.Table[0] = 1 // in place, past the budget: not seen (documented)
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if msgs := w.take(); len(msgs) != 0 {
		t.Errorf("warnings %q", msgs)
	}
	e.Table = make([]float32, 1<<19)
	e.Small[1] = 3
	if _, err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	msgs := strings.Join(w.take(), "\n")
	if !strings.Contains(msgs, "Host field Table of Big was assigned after core.New (was a []float32 value, now a []float32 value)") ||
		!strings.Contains(msgs, "Host field Small of Big was assigned after core.New (was [1 2], now [1 3])") {
		t.Errorf("warnings %q, want Table (replaced) and Small (written in place)", msgs)
	}
}
