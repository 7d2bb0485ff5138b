package core_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/coretest"
	"github.com/nitro-go/nitro/logjson"
)

// periodSteps lists the run's step at the end of each reported period.
func periodSteps(n *core.Nitro) []int {
	var s []int
	for _, r := range n.History() {
		s = append(s, r.Step)
	}
	return s
}

// A step-based run (MaxSteps 20, ValEvery 6 over epochs of 8 steps) validates and reports at
// steps 6, 12, 18 and the horizon 20, crossing epoch boundaries inside periods, and trains bit for
// bit what the same horizon trained with epoch periods does: where the reports fall does not
// change training.
func TestStepPeriodsReportEveryValEverySteps(t *testing.T) {
	straight := coretest.New(t, &Groups{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxSteps(20))...)
	coretest.Train(t, straight)
	if got := periodSteps(straight); !slices.Equal(got, []int{8, 16, 20}) {
		t.Fatalf("MaxSteps 20 without ValEvery reports at steps %v, want epoch ends 8, 16 and the horizon 20", got)
	}

	lg := &logjson.Memory{}
	n := coretest.New(t, &Groups{}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxSteps(20), core.WithValEvery(6),
		core.WithLogger(lg))...)
	if n.TotalSteps() != 20 {
		t.Fatalf("TotalSteps %d, want MaxSteps 20", n.TotalSteps())
	}
	coretest.Train(t, n)
	if got := periodSteps(n); !slices.Equal(got, []int{6, 12, 18, 20}) {
		t.Fatalf("periods end at steps %v, want 6, 12, 18, 20", got)
	}
	wantEpochs := []int{1, 2, 3, 3}
	for i, r := range n.History() {
		if r.Epoch != wantEpochs[i] || r.Val == nil || r.TotalSteps != 20 {
			t.Errorf("period %d: epoch %d, val %v, total steps %d; want epoch %d, a validation, 20", i, r.Epoch, r.Val, r.TotalSteps, wantEpochs[i])
		}
	}
	if stepsIn(n.History()) != 20 || n.Step() != 20 || n.StopReason() != core.StopCompleted {
		t.Errorf("%d steps in the periods, step %d, stop %q: want 20, 20, completed", stepsIn(n.History()), n.Step(), n.StopReason())
	}
	if got := len(lg.Metrics("validate")); got != 4 {
		t.Errorf("%d validate lines, want 4", got)
	}
	if got := len(lg.Metrics("train")); got != 20 {
		t.Errorf("%d train lines, want 20", got)
	}
	if w := n.History()[1].Where(0); w != "step 12/20 (epoch 2)" {
		t.Errorf("the console names the second period %q, want step 12/20 (epoch 2)", w)
	}
	sameBits(t, "parameters of MaxSteps 20 with and without ValEvery 6", flatParams(t, n), flatParams(t, straight))
}

// Checkpoints come every CheckpointEvery steps (a multiple of ValEvery) and at the horizon, each
// inside an epoch recording its data position; a resume from the one at step 12, in the middle of
// epoch 2, ends bit for bit where the uninterrupted run does.
func TestStepCheckpointsResumeExactly(t *testing.T) {
	dir := t.TempDir()
	opts := func(more ...core.Option) []core.Option {
		return coretest.CkptOpts(dir, append([]core.Option{core.WithData(shuffled(t)), core.WithMaxSteps(20), core.WithValEvery(3),
			core.WithCheckpointEvery(6)}, more...)...)
	}
	keepAll, err := checkpoint.NewTopK(100, "val_loss", "min", dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	full := coretest.New(t, &Dropped{}, opts(core.WithCheckpointer(keepAll))...)
	coretest.Train(t, full)
	var steps []int
	var at12 string
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, p := range files {
		rec, err := checkpoint.Read(p)
		if err != nil {
			continue // the manifest, the record
		}
		steps = append(steps, rec.Step)
		if rec.Step == 12 {
			at12 = p
			if rec.Position.Epoch != 2 || rec.Position.Batch != 4 {
				t.Errorf("the step-12 checkpoint records data position %+v, want epoch 2, batch 4", rec.Position)
			}
		}
	}
	slices.Sort(steps)
	if !slices.Contains(steps, 12) || !slices.Contains(steps, 20) || slices.Contains(steps, 9) || slices.Contains(steps, 15) {
		t.Fatalf("checkpoints at steps %v: want 12 and 20 among them and none at 9 or 15 (not multiples of 6)", steps)
	}

	resumed := coretest.New(t, &Dropped{}, opts(core.WithResume(at12), core.WithRunDir(t.TempDir()))...)
	if resumed.Step() != 12 {
		t.Fatalf("resumed at step %d, want 12", resumed.Step())
	}
	coretest.Train(t, resumed)
	if got := periodSteps(resumed); !slices.Equal(got, []int{15, 18, 20}) {
		t.Errorf("the resumed run reports at steps %v, want 15, 18, 20", got)
	}
	sameBits(t, "parameters resumed from step 12 vs uninterrupted", flatParams(t, resumed), flatParams(t, full))
}

// The step knobs are refused by name: negative values, a checkpoint cadence without or off the
// validation cadence, and two horizons of the same rank; a run option wins over a field.
func TestStepKnobsAreChecked(t *testing.T) {
	for _, c := range []struct {
		opts []core.Option
		want []string
	}{
		{[]core.Option{core.WithMaxSteps(-1)}, []string{"MaxSteps = -1 from run option", ">= 0"}},
		{[]core.Option{core.WithValEvery(-2)}, []string{"ValEvery = -2"}},
		{[]core.Option{core.WithCheckpointEvery(4)}, []string{"CheckpointEvery = 4 from run option without ValEvery", "set ValEvery"}},
		{[]core.Option{core.WithValEvery(3), core.WithCheckpointEvery(4)}, []string{"CheckpointEvery = 4", "not a multiple of ValEvery = 3", "multiple of 3"}},
		{[]core.Option{core.WithMaxSteps(5), core.WithMaxEpochs(2)}, []string{"MaxSteps = 5 from run option and MaxEpochs = 2 from run option", "one horizon"}},
	} {
		err := newErr(t, &Groups{}, shuffled(t), c.opts...)
		coretest.WantErr(t, err, c.want...)
	}
	// A field MaxSteps and a MaxEpochs run option: the option wins (the CLI's --max-epochs).
	n := coretest.New(t, &stepped{MaxSteps: 5}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxEpochs(2))...)
	if n.TotalSteps() != 16 {
		t.Errorf("MaxEpochs 2 as a run option over a MaxSteps 5 field: horizon %d steps, want 16", n.TotalSteps())
	}
	n = coretest.New(t, &stepped{MaxSteps: 5, MaxEpochs: 3}, coretest.GoOpts(nil, core.WithData(shuffled(t)), core.WithMaxSteps(7))...)
	if n.TotalSteps() != 7 {
		t.Errorf("MaxSteps 7 as a run option over a MaxEpochs 3 field: horizon %d steps, want 7", n.TotalSteps())
	}
	coretest.WantErr(t, newErr(t, &stepped{MaxSteps: 5, MaxEpochs: 3}, shuffled(t)), "MaxSteps = 5 from field MaxSteps and MaxEpochs = 3 from field MaxEpochs")
}

// stepped is Groups with the step knobs as fields.
type stepped struct {
	Groups
	MaxSteps, MaxEpochs int
}

// A checkpoint records its run's horizon; resuming it under another horizon is said, naming both
// and the flag that continues it exactly, since the schedules take other values from there. The
// same horizon resumes without a word.
func TestResumeUnderAnotherHorizonIsSaid(t *testing.T) {
	dir := t.TempDir()
	first := coretest.New(t, &Groups{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxSteps(12), core.WithValEvery(6))...)
	if err := first.TrainSteps(6); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		steps int
		want  string
	}{{12, ""}, {20, "its run's horizon was 12 optimizer steps, this one's is 20"}} {
		var warned []string
		warn := core.WithWarn(func(m string) { warned = append(warned, m) })
		coretest.New(t, &Groups{}, coretest.CkptOpts(dir, core.WithData(shuffled(t)), core.WithMaxSteps(c.steps), core.WithValEvery(6),
			core.WithResume(core.ResumeAuto), warn)...)
		got := strings.Join(warned, "\n")
		if c.want == "" && strings.Contains(got, "horizon") || c.want != "" && !strings.Contains(got, c.want) || c.want != "" && !strings.Contains(got, "--max-steps 12") {
			t.Errorf("resume under MaxSteps %d warned %q, want %q", c.steps, got, c.want)
		}
	}
}
