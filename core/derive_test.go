package core_test

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/layers"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/prefetch"
)

// Derived sets a Host field and a Device field from the training targets' mean, before the
// Device values are placed.
type Derived struct {
	Offset markers.Device[float32]
	YMean  float64
	extra  bool // makes Derive return a key that is no field
}

func (*Derived) BuildModel(*context.Context) error { return nil }

func (e *Derived) Derive(d prefetch.Data) (map[string]any, error) {
	tr := d["train"]
	var sum float64
	var n int
	for i := 0; i < tr.Len(); i++ {
		b, err := tr.BatchAt(i)
		if err != nil {
			return nil, err
		}
		for _, row := range b["y"].Value().([][]float32) {
			sum += float64(row[0])
			n++
		}
	}
	out := map[string]any{"YMean": sum / float64(n), "Offset": float32(sum / float64(n))}
	if e.extra {
		out["Ymean"] = 1.0
	}
	return out, nil
}

func (e *Derived) Forward(ctx *context.Context, in coretest.In) core.Outputs {
	return core.Outputs{"pred": graph.Add(layers.Dense(ctx.In("dense_0"), in.X, true, 1), e.Offset.Node())}
}

func (*Derived) Loss(out core.Outputs, in coretest.Tgt) *graph.Node {
	return coretest.MSE(out["pred"], in.Y)
}

func TestDeriveMergesHostAndDeviceValues(t *testing.T) {
	e := &Derived{}
	d := coretest.Data(t, 0)
	n := coretest.MustNew(t, e, d)
	var want float64
	for i := 0; i < d["train"].Len(); i++ {
		for _, row := range must(d["train"].BatchAt(i))["y"].Value().([][]float32) {
			want += float64(row[0]) / 64
		}
	}
	if !near(e.YMean, want) {
		t.Errorf("YMean = %v, want the train targets' mean %v", e.YMean, want)
	}
	v, err := n.DeviceValue("Offset")
	if err != nil || !near(float64(v.(float32)), want) {
		t.Errorf("DeviceValue(Offset) = %v, %v; want %v", v, err, want)
	}
	// The derived value is what the program sees: Predict = x·w + b + Offset.
	x, _ := coretest.Synthetic(3, 4)
	p, err := n.Predict(prefetch.Batch{"x": x})
	if err != nil {
		t.Fatal(err)
	}
	w, b := linearParams(t, n)
	host := predictHost(x, w, b+want)
	if got := p["pred"].Value().([][]float32); !near(float64(got[0][0]), host[0]) {
		t.Errorf("Predict = %v, host (with Offset) %v", got, host)
	}

	err = newErr(t, &Derived{extra: true}, coretest.Data(t, 0))
	coretest.WantErr(t, err, "Derive returned values that do not fit the experiment", "Ymean", "YMean")
}
