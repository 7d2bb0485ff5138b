package integration_test

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// tfOrderLoops builds two GoMLX loops of the transformer family at a batch, one per att·v order,
// on the same initial parameters (one seed, the variables created in the same order).
func tfOrderLoops(tb testing.TB, batch int) (*famBatches, [2]*famLoop) {
	r := requireXLA(tb)
	var loops [2]*famLoop
	for i, vLeft := range []bool{false, true} {
		f := *families()[2]
		f.batch = batch
		f.model = func(ctx *context.Context, x *graph.Node) *graph.Node { return tfModelOrdered(ctx, x, vLeft) }
		l, err := newFamLoop(r, &f, nil)
		if err != nil {
			tb.Fatal(err)
		}
		loops[i] = l
	}
	return newFamBatches(loops[0].f, 7, loops[0].f.steps*batch), loops
}

// TestTransformerValueLeft checks that writing att·v with v on the left changes only the speed:
// both orders, trained from the same parameters on the same batches, report the same losses
// within float32 rounding for several Adam steps.
func TestTransformerValueLeft(t *testing.T) {
	const batch, steps = 8, 6
	d, loops := tfOrderLoops(t, batch)
	for i := range steps {
		x, y := d.batch(i, batch)
		var ls [2]float32
		for k, l := range loops {
			v, err := l.step(x, y)
			if err != nil {
				t.Fatal(err)
			}
			ls[k] = v
		}
		if diff := math.Abs(float64(ls[0] - ls[1])); diff > 1e-5*math.Abs(float64(ls[0])) {
			t.Errorf("step %d: loss %.7f (att·v) vs %.7f (v on the left): want the same within float32 rounding", i, ls[0], ls[1])
		}
	}
}

// TestSelectFamilies: $NITRO_BENCH_FAMILIES picks families by name, optionally at another batch,
// and refuses an unknown name or a batch that is not a positive integer.
func TestSelectFamilies(t *testing.T) {
	all, err := selectFamilies(" ")
	if err != nil || len(all) != 3 {
		t.Fatalf("blank: %d families, %v; want all 3", len(all), err)
	}
	got, err := selectFamilies("transformer@128, mlp")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "transformer" || got[0].batch != 128 || got[1].name != "mlp" || got[1].batch != benchBatch {
		t.Fatalf("got %d families %+v, want transformer@128 and mlp at its own batch", len(got), got)
	}
	if families()[2].batch != 32 {
		t.Fatal("selecting at another batch changed the family's own batch")
	}
	for _, bad := range []string{"rnn", "mlp@0", "cnn@x", "transformer@-4"} {
		if _, err := selectFamilies(bad); err == nil {
			t.Errorf("%q: accepted, want an error", bad)
		}
	}
}
