package integration_test

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/prefetch"
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
func (e *CtxParam) BuildData() (prefetch.Data, error) { return splits(64, 64, 32) }
func (e *CtxParam) Forward(ctx *context.Context, in Inputs) core.Outputs {
	s := context.GetParamOr(ctx, "scale", 1.0)
	return core.Outputs{"logits": graph.MulScalar(mlp(ctx, in.X, e.Width), s)}
}
func (e *CtxParam) Loss(out core.Outputs, in Labels) *graph.Node {
	return graph.ReduceAllMean(xent(out["logits"], in.Y))
}

// A value that shapes the graph through the context escapes the Host check (Forward reads ctx, not
// the field), so the context's settings are part of every program's key: a second Nitro with Scale
// 100 on a shared cache compiles its own predict program and predicts 100-fold logits, rather than
// reusing the Scale 1 program with the stale constant. Setup accepts both Nitros.
func TestContextParamIsKeyed(t *testing.T) {
	requireXLA(t)
	c := compilecache.New()
	x, _ := synthetic(4, 3)
	var first []float32
	for _, s := range []float64{1, 100} {
		n, err := core.New(&CtxParam{Width: 8, Scale: s}, core.WithBackend("xla"), core.Quiet(), core.WithCache(c), core.WithoutLogger(), core.WithoutCheckpoints())
		if err != nil {
			t.Fatalf("Scale %v: core.New: %v (a Host value passed through the context is keyed, not refused)", s, err)
		}
		p, err := n.Predict(prefetch.Batch{"x": x})
		if err != nil {
			t.Fatal(err)
		}
		row := p["logits"].Value().([][]float32)[0]
		if first == nil {
			first = row
			continue
		}
		if first[0] == 0 {
			t.Fatalf("Scale 1 predicts %v: a zero logit cannot show the scale", first)
		}
		if math.Abs(float64(row[0]-100*first[0])) > 1e-3*math.Abs(float64(100*first[0])) {
			t.Errorf("Scale 100 predicts %v, want 100 x %v: the Scale 1 program was reused (stats %+v)", row, first, c.Stats())
		}
	}
}
