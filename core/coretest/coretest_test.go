package coretest_test

import (
	"errors"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// TestSyntheticIsTheTask: the same seed gives the same samples, another seed others, and every
// y is x·TrueW + 0.5.
func TestSyntheticIsTheTask(t *testing.T) {
	x, y := coretest.Synthetic(10, 3)
	x2, _ := coretest.Synthetic(10, 3)
	x3, _ := coretest.Synthetic(10, 4)
	xs, ys := tensors.MustCopyFlatData[float32](x), tensors.MustCopyFlatData[float32](y)
	if got := tensors.MustCopyFlatData[float32](x2); got[0] != xs[0] || got[len(got)-1] != xs[len(xs)-1] {
		t.Errorf("seed 3 twice gave different samples")
	}
	if got := tensors.MustCopyFlatData[float32](x3); got[0] == xs[0] {
		t.Errorf("seeds 3 and 4 gave the same first sample %v", got[0])
	}
	for i := range ys {
		want := float32(0.5)
		for j := range coretest.Features {
			want += xs[i*coretest.Features+j] * coretest.TrueW[j]
		}
		if d := ys[i] - want; d > 1e-5 || d < -1e-5 {
			t.Fatalf("y[%d] = %v, want x·TrueW + 0.5 = %v", i, ys[i], want)
		}
	}
}

// TestRegLearns: Reg trained on Data lowers its val loss, so the task is learnable as the tests
// that use it assume.
func TestRegLearns(t *testing.T) {
	d := coretest.Data(t, 32)
	if got := d["train"].Len(); got != 4 {
		t.Errorf("train split has %d batches, want 64/16 = 4", got)
	}
	n := coretest.MustNew(t, &coretest.Reg{}, d, core.WithMaxEpochs(5), core.WithLearningRate(0.05))
	coretest.Train(t, n)
	h := n.History()
	first, last := h[0].Val[core.ValLoss], h[len(h)-1].Val[core.ValLoss]
	t.Logf("val_loss %.4f after epoch 1, %.4f after epoch %d", first, last, len(h))
	if !(last < first) {
		t.Errorf("val_loss went from %v to %v over %d epochs: want it to fall", first, last, len(h))
	}
}

// TestWantErr: the checker passes an error holding every fragment, here core's own refusal.
func TestWantErr(t *testing.T) {
	coretest.WantErr(t, errors.New("split \"val\" is empty"), "split", `"val"`)
	_, err := core.New(&coretest.Reg{}, coretest.GoOpts(nil, core.WithData(prefetch.Data{}))...)
	coretest.WantErr(t, err, "no splits")
}
