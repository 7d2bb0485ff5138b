package core_test

import (
	"slices"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/logjson"
)

// stepsIn sums the optimizer steps of the epochs a Nitro trained.
func stepsIn(h []core.EpochResult) int {
	s := 0
	for _, r := range h {
		s += r.Steps
	}
	return s
}

// TrainSteps stops at its step, mid-epoch, and the next call finishes that epoch from the next
// batch: three calls (one inside an epoch, one across an epoch boundary, one to the horizon) end
// bit for bit where one Train does. shuffled has 8 steps per epoch; the horizon is 24.
func TestTrainStepsComposesToOneRun(t *testing.T) {
	straight := coretest.New(t, &Groups{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(3))...)
	coretest.Train(t, straight)

	lg := &logjson.Memory{}
	n := coretest.New(t, &Groups{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(3), core.WithLogger(lg))...)
	for _, c := range []struct{ to, epoch, epochs int }{{5, 1, 1}, {13, 2, 3}, {24, 3, 5}} {
		if err := n.TrainSteps(c.to); err != nil {
			t.Fatal(err)
		}
		if n.Step() != c.to || n.Epoch() != c.epoch || len(n.History()) != c.epochs || stepsIn(n.History()) != c.to {
			t.Fatalf("after TrainSteps(%d): step %d epoch %d, %d epoch results holding %d steps; want %d, %d, %d, %d",
				c.to, n.Step(), n.Epoch(), len(n.History()), stepsIn(n.History()), c.to, c.epoch, c.epochs, c.to)
		}
		if c.to < 24 && len(lg.Finishes()) != 0 {
			t.Fatalf("TrainSteps(%d) stopped before the horizon and finished the log record: %v", c.to, lg.Finishes())
		}
	}
	sameBits(t, "parameters after TrainSteps 5, 13, 24", flatParams(t, n), flatParams(t, straight))
	if got := lg.Finishes(); !slices.Equal(got, []logjson.Status{logjson.StatusCompleted}) || n.StopReason() != core.StopCompleted {
		t.Errorf("finishes %v, stop reason %q: want one completed", got, n.StopReason())
	}
	if got := len(lg.Metrics("train")); got != 24 {
		t.Errorf("%d train lines, want 24 (one per step, none repeated or lost across calls)", got)
	}
	// Nothing left: a no-op, and past the horizon: refused naming MaxEpochs.
	if err := n.TrainSteps(24); err != nil || n.Step() != 24 {
		t.Errorf("TrainSteps(24) at step 24: %v, step %d", err, n.Step())
	}
	coretest.WantErr(t, n.TrainSteps(25), "TrainSteps(25)", "24 optimizer steps", "MaxEpochs 3")
}

// TrainEpochs trains to the run's epoch count, finishing an epoch cut short first; one more epoch
// is n.TrainEpochs(n.Epoch()+1). Past MaxEpochs is refused.
func TestTrainEpochs(t *testing.T) {
	straight := coretest.New(t, &Groups{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(2))...)
	coretest.Train(t, straight)

	n := coretest.New(t, &Groups{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(3))...)
	if err := n.TrainSteps(3); err != nil {
		t.Fatal(err)
	}
	if err := n.TrainEpochs(1); err != nil { // finishes epoch 1: steps 4..8
		t.Fatal(err)
	}
	if n.Step() != 8 || n.Epoch() != 1 {
		t.Fatalf("TrainEpochs(1) after 3 steps: step %d epoch %d, want 8 and 1", n.Step(), n.Epoch())
	}
	if err := n.TrainEpochs(n.Epoch() + 1); err != nil {
		t.Fatal(err)
	}
	if n.Step() != 16 || n.Epoch() != 2 {
		t.Fatalf("one more epoch: step %d epoch %d, want 16 and 2", n.Step(), n.Epoch())
	}
	sameBits(t, "parameters after 3 steps, epoch 1, epoch 2", flatParams(t, n), flatParams(t, straight))
	coretest.WantErr(t, n.TrainEpochs(4), "TrainEpochs(4)", "MaxEpochs 3")
	if err := n.TrainEpochs(2); err != nil || n.Step() != 16 {
		t.Errorf("TrainEpochs(2) at epoch 2: %v, step %d (want a no-op)", err, n.Step())
	}
}

// A TrainSteps run that crashes (here: the process simply ends) after checkpointing mid-epoch is
// resumed by the same call: it trains only the remaining steps and ends where an uninterrupted
// run does, bit for bit.
func TestTrainStepsResumesTheRemainingSteps(t *testing.T) {
	straight := coretest.New(t, &Groups{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(3))...)
	if err := straight.TrainSteps(20); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first := coretest.New(t, &Groups{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(3))...)
	if err := first.TrainSteps(11); err != nil {
		t.Fatal(err)
	}
	second := coretest.New(t, &Groups{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(3), core.WithResume(core.ResumeAuto))...)
	if second.Step() != 11 {
		t.Fatalf("resumed at step %d, want 11 (the mid-epoch checkpoint)", second.Step())
	}
	if err := second.TrainSteps(20); err != nil {
		t.Fatal(err)
	}
	if second.Step() != 20 || stepsIn(second.History()) != 9 {
		t.Fatalf("resumed TrainSteps(20): step %d, %d steps trained; want 20 and 9", second.Step(), stepsIn(second.History()))
	}
	sameBits(t, "parameters after resume", flatParams(t, second), flatParams(t, straight))
	// Step 20 is part-way through the last epoch: its checkpoint says where, and that the run is
	// not complete (a resume would otherwise have nothing left to do).
	h, err := checkpoint.Info(second.LastCheckpoint())
	if err != nil {
		t.Fatal(err)
	}
	if h.StopReason != "" || h.Position != (checkpoint.Position{Epoch: 3, Batch: 4, GlobalBatch: 8, EpochBatches: 8}) {
		t.Errorf("checkpoint at step 20 of 24: stop reason %q, position %+v; want none and epoch 3 batch 4 of 8 (8 samples each)", h.StopReason, h.Position)
	}
}

// EndRun finishes a record a bounded call left open, as requested; after a call that reached the
// horizon it does nothing.
func TestEndRunFinishesAnOpenRecord(t *testing.T) {
	lg := &logjson.Memory{}
	n := coretest.New(t, &Groups{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(3), core.WithLogger(lg))...)
	if err := n.TrainEpochs(1); err != nil {
		t.Fatal(err)
	}
	if len(lg.Finishes()) != 0 {
		t.Fatalf("finished after one of three epochs: %v", lg.Finishes())
	}
	if err := n.EndRun(); err != nil {
		t.Fatal(err)
	}
	if err := n.EndRun(); err != nil {
		t.Fatal(err)
	}
	if got := lg.Finishes(); !slices.Equal(got, []logjson.Status{logjson.StatusRequested}) {
		t.Errorf("finishes %v, want one requested", got)
	}
}

// Early stopping judges whole epochs: one-step TrainSteps calls validate at every call, but the
// policy counts an epoch only when it is finished. Here no epoch ever improves enough (min_delta
// 1e9, patience 2): the stop comes after the third whole epoch, as for one Train, not after the
// third call.
func TestTrainStepsEarlyStoppingCountsWholeEpochs(t *testing.T) {
	es := core.WithEarlyStopping("val_loss", "min", 2, 1e9)
	n := coretest.MustNew(t, &coretest.Reg{}, coretest.Data(t, 16), core.WithMaxEpochs(10), es)
	for n.StopReason() != core.StopEarly && n.Step() < 40 {
		if err := n.TrainSteps(n.Step() + 1); err != nil {
			t.Fatal(err)
		}
	}
	if n.StopReason() != core.StopEarly || n.Step() != 12 || n.Epoch() != 3 || len(n.History()) != 12 {
		t.Fatalf("one-step calls: stop %q at step %d epoch %d after %d validations; want early_stop at step 12, epoch 3 (4 steps an epoch), 12 validations",
			n.StopReason(), n.Step(), n.Epoch(), len(n.History()))
	}
}
