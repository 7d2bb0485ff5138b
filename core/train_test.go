package core_test

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/optimizers"
	"github.com/nitro-go/nitro/prefetch"
)

func TestTrainLearnsAndRecordsHistory(t *testing.T) {
	const epochs = 5
	cache := newCache()
	// 48 validation samples: three full batches, so one eval program.
	n, err := core.New(&coretest.Reg{}, coretest.GoOpts(cache, core.WithData(coretest.Data(t, 48)), core.WithMaxEpochs(epochs), core.WithLearningRate(0.05))...)
	if err != nil {
		t.Fatal(err)
	}
	before, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if n.Step() != 0 || n.Epoch() != 0 || len(n.History()) != 0 {
		t.Errorf("Validate trained: step %d epoch %d history %d", n.Step(), n.Epoch(), len(n.History()))
	}
	p0 := flatParams(t, n)
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	h := n.History()
	if len(h) != epochs {
		t.Fatalf("History has %d epochs, want %d", len(h), epochs)
	}
	for i, r := range h {
		if r.Epoch != i+1 || r.Steps != 4 || r.Seconds <= 0 || math.IsNaN(r.TrainLoss) {
			t.Errorf("History[%d] = %+v; want epoch %d, 4 steps, positive seconds, finite loss", i, r, i+1)
		}
		if _, ok := r.Val[core.ValLoss]; !ok || len(r.Val) != 1 {
			t.Errorf("History[%d].Val = %v, want exactly %s (no Metrics hook)", i, r.Val, core.ValLoss)
		}
	}
	first, last := h[0], h[epochs-1]
	if !(last.TrainLoss < first.TrainLoss/2) {
		t.Errorf("train loss did not fall: epoch 1 %.4f, epoch %d %.4f", first.TrainLoss, epochs, last.TrainLoss)
	}
	if !(last.Val[core.ValLoss] < before[core.ValLoss]/2) {
		t.Errorf("val loss did not fall: untrained %.4f, epoch %d %.4f", before[core.ValLoss], epochs, last.Val[core.ValLoss])
	}
	if n.Step() != epochs*4 || n.Epoch() != epochs || n.TotalSteps() != epochs*4 || n.StopReason() != core.StopCompleted {
		t.Errorf("Step %d Epoch %d TotalSteps %d StopReason %q; want %d %d %d %q",
			n.Step(), n.Epoch(), n.TotalSteps(), n.StopReason(), epochs*4, epochs, epochs*4, core.StopCompleted)
	}
	// Validate after training reports the last epoch's number: nothing moved since.
	after, err := n.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if after[core.ValLoss] != last.Val[core.ValLoss] {
		t.Errorf("Validate after Train = %v, last epoch's = %v", after[core.ValLoss], last.Val[core.ValLoss])
	}
	if p1 := flatParams(t, n); slices.Equal(p0, p1) {
		t.Errorf("parameters did not change")
	}
	// Train + validate compiles 3 (gradient, optimizer, eval): nothing twice, nothing per step.
	if s := cache.Stats(); s.Misses != 3 || s.Entries != 3 {
		t.Errorf("compile cache %+v: want 3 misses, 3 entries (gradient, optimizer, eval)", s)
	}
	// Parameters stayed resident: uploaded once at setup, never per step or per eval batch.
	if u := n.Uploads(); u.Params != 1 {
		t.Errorf("Uploads %+v: want 1 parameter upload (setup's, the default group's flat buffer)", u)
	}
	// A second Train with every epoch done trains nothing.
	if err := n.Train(); err != nil || n.Step() != epochs*4 || len(n.History()) != epochs {
		t.Errorf("second Train: err %v, step %d, history %d", err, n.Step(), len(n.History()))
	}
}

func TestAccumHalvesTheOptimizerSteps(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 0), core.WithMaxEpochs(3), core.WithAccum(2))
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if n.Step() != 3*4/2 || n.TotalSteps() != 6 {
		t.Errorf("accum 2: Step %d TotalSteps %d, want 6 and 6", n.Step(), n.TotalSteps())
	}
	for _, r := range n.History() {
		if r.Steps != 2 {
			t.Errorf("epoch %d took %d optimizer steps, want 2", r.Epoch, r.Steps)
		}
	}
	if len(n.History()) != 3 || n.History()[0].Val != nil {
		t.Errorf("History %+v: want 3 epochs and no validation (no val split)", n.History())
	}
}

// SGDOne is a Level 1 SGD regression, used to check one optimizer step against the host.
type SGDOne struct{ coretest.Base }

func (*SGDOne) OptimizerRule(group string) optimizers.Rule { return optimizers.SGD{} } // eta: LearningRate

// TestOneSGDStepMatchesTheHost checks the gradient and optimizer programs numerically: one
// plain SGD step on one batch must move the weights by exactly -lr * dL/dw.
func TestOneSGDStepMatchesTheHost(t *testing.T) {
	const lr = 0.1
	// One epoch of exactly one optimizer step: one batch, or two micro-batches with accum 2.
	for _, accum := range []int{1, 2} {
		tr := coretest.Arrays(t, 16*accum, 16, 7, prefetch.ArrayOptions{DropPartial: true})
		n := coretest.MustNew(t, &SGDOne{}, prefetch.Data{"train": tr}, core.WithLearningRate(lr), core.WithAccum(accum))
		w0, b0 := linearParams(t, n)
		// Expected: the mean over the step's micro-batches of each one's gradient.
		gw, gb := make([]float64, coretest.Features), 0.0
		for i := 0; i < accum; i++ {
			bw, bb := mseGrad(t, must(tr.BatchAt(i)), w0, b0)
			for j := range gw {
				gw[j] += bw[j] / float64(accum)
			}
			gb += bb / float64(accum)
		}
		if err := n.Train(); err != nil {
			t.Fatal(err)
		}
		if n.Step() != 1 {
			t.Fatalf("accum %d: %d steps, want 1", accum, n.Step())
		}
		w1, b1 := linearParams(t, n)
		for j := range w0 {
			if want := w0[j] - lr*gw[j]; math.Abs(w1[j]-want) > 1e-4*(1+math.Abs(want)) {
				t.Errorf("accum %d: w[%d] = %v after one SGD step, want %v (w0 %v, grad %v)", accum, j, w1[j], want, w0[j], gw[j])
			}
		}
		if want := b0 - lr*gb; math.Abs(b1-want) > 1e-4*(1+math.Abs(want)) {
			t.Errorf("accum %d: b = %v after one SGD step, want %v", accum, b1, want)
		}
	}
}

// nanSource serves the synthetic train split, except that in epoch nanEpoch batch nanBatch has
// NaN targets.
type nanSource struct {
	*prefetch.ArrayBatches
	epoch, nanEpoch, nanBatch int
}

func (s *nanSource) BeginEpoch(e int) error { s.epoch = e; return s.ArrayBatches.BeginEpoch(e) }

func (s *nanSource) BatchAt(i int) (prefetch.Batch, error) {
	b, err := s.ArrayBatches.BatchAt(i)
	if err == nil && s.epoch == s.nanEpoch && i == s.nanBatch {
		b["y"].MutableFlatData(func(flat any) { flat.([]float32)[0] = float32(math.NaN()) })
	}
	return b, err
}

func TestNonFiniteLossStopsTrainNamingEpochAndStep(t *testing.T) {
	src := &nanSource{ArrayBatches: coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), nanEpoch: 2, nanBatch: 1}
	n := coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"train": src}, core.WithMaxEpochs(3))
	err := n.Train()
	// Epoch 1 takes steps 1-4; epoch 2's batch 1 is step 6.
	coretest.WantErr(t, err, "non-finite loss", "epoch 2, step 6", "lower learning rate")
	if n.Step() != 5 || n.Epoch() != 1 || len(n.History()) != 1 {
		t.Errorf("after the NaN: step %d epoch %d history %d; want 5, 1, 1", n.Step(), n.Epoch(), len(n.History()))
	}

	// With accum 2, the NaN micro-batch is named too.
	src = &nanSource{ArrayBatches: coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), nanEpoch: 1, nanBatch: 3}
	n = coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"train": src}, core.WithAccum(2))
	coretest.WantErr(t, n.Train(), "non-finite loss", "epoch 1, step 2 (micro-batch 2)")
}

// stopSource calls RequestStop on its Nitro when batch stopAt of epoch 1 is read.
type stopSource struct {
	*prefetch.ArrayBatches
	n      *core.Nitro
	epoch  int
	stopAt int
	served int
}

func (s *stopSource) BeginEpoch(e int) error { s.epoch = e; return s.ArrayBatches.BeginEpoch(e) }

func (s *stopSource) BatchAt(i int) (prefetch.Batch, error) {
	if s.n != nil {
		s.served++
		if s.epoch == 1 && i == s.stopAt {
			s.n.RequestStop()
		}
	}
	return s.ArrayBatches.BatchAt(i)
}

func TestRequestStopFromTheDataPath(t *testing.T) {
	src := &stopSource{ArrayBatches: coretest.Arrays(t, 64, 16, 1, prefetch.ArrayOptions{DropPartial: true}), stopAt: 1}
	n := coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"train": src, "val": coretest.Arrays(t, 40, 16, 2, prefetch.ArrayOptions{})}, core.WithMaxEpochs(3))
	src.n = n
	if err := n.Train(); err != nil {
		t.Fatalf("Train after RequestStop returned %v, want nil", err)
	}
	if n.StopReason() != core.StopRequested {
		t.Errorf("StopReason = %q, want %q", n.StopReason(), core.StopRequested)
	}
	// It finishes the epoch (all 4 steps), validates it, and starts no other.
	if n.Step() != 4 || src.served != 4 {
		t.Errorf("stopped after %d steps and %d batches read; want the whole epoch: 4 and 4", n.Step(), src.served)
	}
	h := n.History()
	if n.Epoch() != 1 || len(h) != 1 || h[0].Steps != 4 {
		t.Fatalf("Epoch %d, History %+v: want the stopped epoch recorded with 4 steps", n.Epoch(), h)
	}
	if _, ok := h[0].Val[core.ValLoss]; !ok {
		t.Errorf("the stopped epoch was not validated: Val = %v", h[0].Val)
	}
	// A new Train resumes at the next epoch and runs to the end.
	if err := n.Train(); err != nil {
		t.Fatal(err)
	}
	if n.StopReason() != core.StopCompleted || n.Epoch() != 3 || n.Step() != 3*4 {
		t.Errorf("resumed: reason %q epoch %d step %d; want completed, 3, 12", n.StopReason(), n.Epoch(), n.Step())
	}
}

func TestTrainNeedsATrainSplit(t *testing.T) {
	n := coretest.MustNew(t, &coretest.Reg{}, prefetch.Data{"val": coretest.Arrays(t, 40, 16, 2, prefetch.ArrayOptions{})})
	coretest.WantErr(t, n.Train(), `needs a "train" split`, "[val]")
	// Evaluating works without one.
	if _, err := n.Validate(); err != nil {
		t.Errorf("Validate without a train split: %v", err)
	}
}

// flatParams reads every parameter back as one float slice, in key order.
func flatParams(t testing.TB, n *core.Nitro) []float64 {
	t.Helper()
	p, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	var out []float64
	for _, k := range keys(p) {
		p[k].ConstFlatData(func(flat any) {
			for _, v := range flat.([]float32) {
				out = append(out, float64(v))
			}
		})
	}
	return out
}

// linearParams reads a one-Dense-layer model's weights [features] and bias.
func linearParams(t testing.TB, n *core.Nitro) ([]float64, float64) {
	t.Helper()
	p, err := n.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	wt, bt := p["dense_0/dense/weights"], p["dense_0/dense/biases"]
	if wt == nil || bt == nil {
		t.Fatalf("parameters %v: want dense_0/dense/{weights,biases}", keys(p))
	}
	var w []float64
	for _, row := range wt.Value().([][]float32) {
		w = append(w, float64(row[0]))
	}
	return w, float64(bt.Value().([]float32)[0])
}

// predictHost computes x·w + b for each row of a batch's x.
func predictHost(x *tensors.Tensor, w []float64, b float64) []float64 {
	var out []float64
	for _, row := range x.Value().([][]float32) {
		s := b
		for j, v := range row {
			s += float64(v) * w[j]
		}
		out = append(out, s)
	}
	return out
}

// mseGrad is the gradient of mean((x·w + b - y)^2) over a batch.
func mseGrad(t testing.TB, b prefetch.Batch, w []float64, bias float64) ([]float64, float64) {
	t.Helper()
	pred := predictHost(b["x"], w, bias)
	x := b["x"].Value().([][]float32)
	y := b["y"].Value().([][]float32)
	gw, gb := make([]float64, len(w)), 0.0
	m := float64(len(pred))
	for i := range pred {
		r := 2 * (pred[i] - float64(y[i][0])) / m
		for j := range gw {
			gw[j] += r * float64(x[i][j])
		}
		gb += r
	}
	return gw, gb
}
