package mnist_test

import (
	"testing"

	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
)

// TestWeightDecayIsAProgramInput: a run at another WeightDecay compiles nothing (its programs come
// from the first run's cache entries) and the penalty reaches the training loss: the same seed and
// data end with smaller weights, and a validation loss that differs.
func TestWeightDecayIsAProgramInput(t *testing.T) {
	cache := compilecache.New()
	run := func(wd float64) (sumSq float64, valLoss float64) {
		e := tiny(t, map[string]any{"TrainLimit": 2000, "ValSize": 500, "MaxEpochs": 1, "WeightDecay": wd})
		n, err := core.New(e, core.Quiet(), core.WithoutLogger(), core.WithoutCheckpoints(), core.WithCache(cache))
		if err != nil {
			t.Fatal(err)
		}
		ranOn(t, n)
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		params, err := n.Parameters()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range params {
			if p.Shape().Rank() != 2 { // the weight matrices, not the biases
				continue
			}
			for _, v := range p.Value().([][]float32) {
				for _, x := range v {
					sumSq += float64(x) * float64(x)
				}
			}
		}
		h := n.History()
		return sumSq, h[len(h)-1].Val["val_loss"]
	}
	sq0, loss0 := run(0)
	before := cache.Stats()
	sq1, loss1 := run(0.5)
	after := cache.Stats()
	if after.Misses != before.Misses || after.Entries != before.Entries {
		t.Errorf("WeightDecay 0.5 after 0: cache misses %d -> %d, entries %d -> %d; want no new program", before.Misses, after.Misses, before.Entries, after.Entries)
	}
	if after.Hits <= before.Hits {
		t.Errorf("WeightDecay 0.5 after 0: cache hits %d -> %d; want the first run's programs reused", before.Hits, after.Hits)
	}
	if !(sq1 < sq0) {
		t.Errorf("sum of squared weights: %g at WeightDecay 0.5, %g at 0; want smaller with the penalty", sq1, sq0)
	}
	if loss1 == loss0 {
		t.Errorf("val loss %g at both WeightDecay 0 and 0.5: the penalty did not reach training", loss0)
	}
}
