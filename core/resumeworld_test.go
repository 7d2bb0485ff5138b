package core_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/prefetch"
)

// shuffledData is collectiveData's task shuffled at every epoch (seed 7): the permutation is over
// samples, so batch i of width b is samples i*b..(i+1)*b-1 of one order whatever b is.
func shuffledData(t *testing.T, batch int) prefetch.Data {
	return prefetch.Data{
		"train": coretest.Arrays(t, 64, batch, 1, prefetch.ArrayOptions{Shuffle: true, Seed: 7, DropPartial: true}),
		"val":   coretest.Arrays(t, 40, 8, 2, prefetch.ArrayOptions{}),
	}
}

// trainWorld trains world ranks (one: a plain process) with batch 16/world each, a global batch
// of 16, checkpointing into dir; train is each rank's verb. It returns rank 0, failing the test
// on any rank's error.
func trainWorld(t *testing.T, world int, dir string, train func(n *core.Nitro) error, more ...core.Option) *core.Nitro {
	t.Helper()
	return trainWorldOf(t, world, 16/world, dir, train, more...)
}

// trainWorldOf is trainWorld with batch rows on each rank.
func trainWorldOf(t *testing.T, world, batch int, dir string, train func(n *core.Nitro) error, more ...core.Option) *core.Nitro {
	t.Helper()
	ns, errs := runRanksTo(t, func() any { return &coretest.Reg{} }, world, func(int) []core.Option {
		c, err := checkpoint.NewTopK(3, "val_loss", "min", dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		return append([]core.Option{core.WithData(shuffledData(t, batch)), core.WithMaxEpochs(2), core.WithRunDir(dir), core.WithCheckpointer(c)}, more...)
	}, train)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%d process(es), rank %d: %v", world, r, err)
		}
	}
	return ns[0]
}

func trainSteps(k int) func(n *core.Nitro) error {
	return func(n *core.Nitro) error { return n.TrainSteps(k) }
}

// A run stopped part-way through an epoch resumes under another world size where it stood: the
// position counts the whole run's batches, so every step trains on the global batch the
// uninterrupted run trains on, and the run ends on its step count and parameters (within 1e-5:
// the sum over processes adds in another order than one process does).
func TestResumeAcrossWorldSizes(t *testing.T) {
	ref := coretest.MustNew(t, &coretest.Reg{}, shuffledData(t, 16), core.WithMaxEpochs(2)) // 4 steps an epoch
	coretest.Train(t, ref)
	for _, c := range []struct{ from, to, stop int }{{2, 1, 2}, {1, 2, 6}, {2, 4, 3}, {4, 2, 5}} {
		t.Run(fmt.Sprintf("%d-to-%d-at-step-%d", c.from, c.to, c.stop), func(t *testing.T) {
			dir := t.TempDir()
			if n := trainWorld(t, c.from, dir, trainSteps(c.stop)); n.Step() != c.stop {
				t.Fatalf("stopped at step %d, want %d", n.Step(), c.stop)
			}
			n := trainWorld(t, c.to, dir, (*core.Nitro).Train, core.WithResume(core.ResumeAuto))
			if n.Step() != ref.Step() {
				t.Fatalf("the resumed run ended at step %d, the uninterrupted one at %d: a batch was trained twice or skipped", n.Step(), ref.Step())
			}
			sameParams(t, n, ref, 1e-5)
		})
	}
}

// A resume under another global batch continues at the same sample: 2 ranks of 16 stopped
// after step 1 (32 samples) resume on 1 process of 16 at batch 2, so the epoch ends after 2 more
// steps (4 batches of 16), and the run after 7 steps in all (1 + 2, then 4), where resuming at
// batch 1 would take 8.
func TestResumeUnderAnotherGlobalBatch(t *testing.T) {
	dir := t.TempDir()
	trainWorldOf(t, 2, 16, dir, trainSteps(1))
	n := trainWorldOf(t, 1, 16, dir, (*core.Nitro).Train, core.WithResume(core.ResumeAuto))
	if n.Step() != 7 || n.Epoch() != 2 {
		t.Errorf("ended at epoch %d, step %d; want epoch 2, step 7", n.Epoch(), n.Step())
	}
	if h := n.History(); len(h) != 2 || h[0].Steps != 2 || h[1].Steps != 4 {
		t.Errorf("epochs after the resume: %+v; want 2 steps, then 4", h)
	}
}

// A position that names no batch boundary of the resuming run is refused, naming the fields and
// the fix: batch 1 of 16 samples is sample 16, and a global batch of 32 has no batch there.
func TestResumeAcrossWorldSizesRefusesAnInexactPosition(t *testing.T) {
	dir := t.TempDir()
	trainWorld(t, 2, dir, trainSteps(1))
	path, err := core.NewestCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, errs := runRanks(t, 2, func(int) []core.Option {
		return []core.Option{core.WithData(shuffledData(t, 16)), core.WithMaxEpochs(2), core.WithRunDir(dir), core.WithResume(path)}
	})
	for _, err := range errs {
		coretest.WantErr(t, err, "position.batch 1 of 16 samples (position.global_batch) is sample 16 of epoch 1",
			"this run: 2 process(es) x batch 16", "resume with a global batch (processes x batch size) that divides 16, such as the recorded 16")
	}
}

// A record whose position counts each rank's shard batches (written before global positions) is
// refused under another world size, naming both, and resumes under its own exactly as before:
// bit for bit the parameters of the same record with a global position.
func TestResumeOfShardPositionsKeepsTheWorldSize(t *testing.T) {
	dir := t.TempDir()
	trainWorld(t, 2, dir, trainSteps(2))
	path, err := core.NewestCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	global := trainWorld(t, 2, dir, (*core.Nitro).Train, core.WithResume(path))
	rec.Position.GlobalBatch, rec.Position.EpochBatches = 0, 0
	old := dir + "/old.safetensors"
	if err := checkpoint.Write(old, rec); err != nil {
		t.Fatal(err)
	}
	_, err = core.New(&coretest.Reg{}, coretest.GoOpts(nil, core.WithData(shuffledData(t, 16)), core.WithMaxEpochs(2), core.WithRunDir(dir), core.WithResume(old))...)
	coretest.WantErr(t, err, "was written by a run of 2 process(es) and this run has 1", "no position.global_batch", "resume with 2")
	shard := trainWorld(t, 2, dir, (*core.Nitro).Train, core.WithResume(old))
	sameParams(t, shard, global, 0)
	if global.Step() != shard.Step() || global.Step() != 8 {
		t.Errorf("steps %d (global position) and %d (shard position), want 8", global.Step(), shard.Step())
	}

	// A shard position past this run's epoch (the batch size grew since) is refused, not taken.
	rec.Position.Batch = 1000
	past := dir + "/past.safetensors"
	if err := checkpoint.Write(past, rec); err != nil {
		t.Fatal(err)
	}
	_, errs := runRanksTo(t, func() any { return &coretest.Reg{} }, 2, func(int) []core.Option {
		return []core.Option{core.WithData(shuffledData(t, 8)), core.WithMaxEpochs(2), core.WithRunDir(dir), core.WithResume(past)}
	}, (*core.Nitro).Train)
	coretest.WantErr(t, errs[0], "position.batch 1000 is past this run's epoch", "--weights-only")
}

// sameParams fails the test unless got's parameters are want's, each within tol (0: bit for bit).
func sameParams(t *testing.T, got, want *core.Nitro, tol float64) {
	t.Helper()
	a, err := got.Parameters()
	if err != nil {
		t.Fatal(err)
	}
	b, err := want.Parameters()
	if err != nil || len(b) == 0 {
		t.Fatalf("%d parameters: %v", len(b), err)
	}
	for name, w := range b {
		x, y := tensors.MustCopyFlatData[float32](a[name]), tensors.MustCopyFlatData[float32](w)
		for i := range y {
			if d := math.Abs(float64(x[i] - y[i])); d > tol || tol == 0 && math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				t.Fatalf("%s[%d] = %g, want %g (within %g)", name, i, x[i], y[i], tol)
			}
		}
	}
}

// unordered is a train source that makes no promise about its order of samples (no
// SampleOrdered): only its own batch size can resume it at a sample.
type unordered struct{ prefetch.Source }

func (unordered) DropsPartial() bool { return true }

// A source that does not promise one order of samples whatever its batch size resumes under
// another world size only at its own batch size: 2 ranks of 8 stopped after step 2 (4 source
// batches) resume on 1 process of 8 at batch 4 (4 more steps, then 8), and are refused on 1
// process of 16, naming the batch sizes and the fix.
func TestResumeUnderAnotherBatchSizeNeedsSampleOrder(t *testing.T) {
	dir := t.TempDir()
	data := func(batch int) core.Option {
		d := shuffledData(t, batch)
		d["train"] = unordered{d["train"]}
		return core.WithData(d)
	}
	trainWorld(t, 2, dir, trainSteps(2), data(8))
	_, err := core.New(&coretest.Reg{}, coretest.CkptOpts(dir, data(16), core.WithMaxEpochs(2), core.WithResume(core.ResumeAuto))...)
	coretest.WantErr(t, err, "each process's train batch was 8 samples and is 16 now", "(prefetch.SampleOrderer)", "resume with a train batch of 8 per process")
	n := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, data(8), core.WithMaxEpochs(2), core.WithResume(core.ResumeAuto))...)
	coretest.Train(t, n)
	if h := n.History(); n.Step() != 14 || len(h) != 2 || h[0].Steps != 4 {
		t.Errorf("ended at step %d after epochs %+v; want step 14, the first epoch's last 4 steps", n.Step(), h)
	}
}
