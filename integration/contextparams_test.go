package integration_test

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
)

// CtxParam hands a Host field to Forward through a context hyperparameter set in BuildModel, the
// idiomatic GoMLX configuration path (layers read "activation", "dropout_rate", ... from ctx).
type CtxParam struct {
	Width int `nitro:"graphconst" default:"8"`
	Scale float64
}

func (e *CtxParam) BuildModel(ctx *context.Context) error {
	ctx.SetParam("scale", e.Scale)
	return nil
}
func (e *CtxParam) BuildData() (core.Data, error) { return splits(64, 64, 32) }
func (e *CtxParam) Forward(ctx *context.Context, in Inputs) core.Outputs {
	s := context.GetParamOr(ctx, "scale", 1.0)
	return core.Outputs{"logits": graph.MulScalar(mlp(ctx, in.X, e.Width), s)}
}
func (e *CtxParam) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.ReduceAllMean(xent(out["logits"], in.Y))
}

// A value that shapes the graph through the context is in no key and escapes the Host check: a
// second Nitro with Scale 100 reuses the Scale 1 program from the shared cache and predicts with
// the stale constant, silently. (With private caches the logits differ 100-fold.)
func TestContextParamIsKeyed(t *testing.T) {
	requireXLA(t)
	c := compilecache.New()
	x, _ := synthetic(4, 3)
	var first []float32
	for _, s := range []float64{1, 100} {
		n, err := core.New(&CtxParam{Width: 8, Scale: s}, core.WithBackend("xla"), core.Quiet(), core.WithCache(c), core.WithoutLogger(), core.WithoutCheckpoints())
		if err != nil {
			t.Logf("Scale %v: core.New refused (an acceptable fix): %v", s, err)
			return
		}
		p, err := n.Predict(core.Batch{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		row := p["logits"].Value().([][]float32)[0]
		if first == nil {
			first = row
			continue
		}
		if math.Abs(float64(row[0]-100*first[0])) > 1e-3*math.Abs(float64(100*first[0])) {
			t.Errorf("Scale 100 predicts %v, want 100 x %v: the Scale 1 program was reused (stats %+v)", row, first, c.Stats())
		}
	}
}
