package core_test

import (
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
)

// A checkpoint records its run's Accum, and a resume under another Accum is refused: the step
// count and the schedules' position are counted in optimizer steps of that Accum. The same Accum
// resumes.
func TestResumeRefusesAnotherAccum(t *testing.T) {
	dir := t.TempDir()
	first := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithAccum(2))...)
	coretest.Train(t, first)
	rec, err := checkpoint.Read(first.LastCheckpoint())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Accum != 2 {
		t.Fatalf("checkpoint records Accum %d, want 2", rec.Accum)
	}
	_, err = core.New(&coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(2), core.WithResume(core.ResumeAuto), core.WithAccum(1))...)
	coretest.WantErr(t, err, "refused: its run stepped the optimizer every 2 micro-batches (Accum 2), this one has Accum = 1 (from run option)", "--accum 2")
	again := coretest.New(t, &coretest.Reg{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxEpochs(2), core.WithResume(core.ResumeAuto), core.WithAccum(2))...)
	if again.Epoch() != 1 {
		t.Errorf("a resume with the checkpoint's own Accum is at epoch %d, want 1", again.Epoch())
	}
}
