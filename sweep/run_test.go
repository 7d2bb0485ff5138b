package sweep_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nitro-go/nitro/sweep"
)

// curve is a fake objective: trial values follow a learning curve whose floor is the distance of
// LearningRate from 1e-2 (log scale), reported at validations 1..epochs; it stops when pruned.
type curve struct {
	epochs int
	// cancelAt, when set, cancels the sweep's context once trial cancelAt.number has reported
	// cancelAt.step: a kill between reports.
	cancelAt *struct{ number, step int }
	cancel   context.CancelFunc
	fail     map[int]bool // trials that return an error

	mu      sync.Mutex
	resumed []int // the numbers handed back with Resume set
	runs    atomic.Int32
}

func floor(p map[string]float64) float64 {
	return math.Abs(math.Log10(p["LearningRate"]) + 2)
}

func (c *curve) Run(ctx context.Context, t *sweep.TrialRun) (sweep.Outcome, error) {
	c.runs.Add(1)
	if t.Resume {
		c.mu.Lock()
		c.resumed = append(c.resumed, t.Number)
		c.mu.Unlock()
	}
	if c.fail[t.Number] {
		return sweep.Outcome{}, errors.New("out of memory (fake)")
	}
	for s := 1; s <= c.epochs; s++ {
		if ctx.Err() != nil {
			return sweep.Outcome{}, ctx.Err()
		}
		prune, err := t.Report(s, floor(t.Params)+1/float64(s))
		if err != nil {
			return sweep.Outcome{}, err
		}
		if c.cancelAt != nil && c.cancelAt.number == t.Number && c.cancelAt.step == s {
			c.cancel()
			return sweep.Outcome{}, context.Canceled
		}
		if prune {
			return sweep.Outcome{Pruned: true}, nil
		}
	}
	return sweep.Outcome{Attrs: map[string]any{"steps": c.epochs}}, nil
}

func config(t *testing.T, dir string) sweep.Config {
	t.Helper()
	p, err := sweep.ParseParam("LearningRate=loguniform:1e-4,1")
	if err != nil {
		t.Fatal(err)
	}
	return sweep.Config{Dir: dir, Metric: "val_loss", Space: sweep.Space{p}, Trials: 9, Sampler: sweep.NewRandom(7)}
}

// summary is what must agree between two sweeps: each trial's number, state, value and values.
func summary(st *sweep.Study) string {
	var b strings.Builder
	for _, t := range st.Trials {
		fmt.Fprintf(&b, "%d %s %v %.17g %v\n", t.Number, t.State, t.HasValue, t.Value, t.Params)
	}
	return b.String()
}

// TestRunRecordsEveryTrial: every trial ends COMPLETE with its last report as its value, the best
// is the one nearest the optimum, and the progress line counts them.
func TestRunRecordsEveryTrial(t *testing.T) {
	cfg := config(t, t.TempDir())
	var lines []string
	cfg.Progress = func(p sweep.Progress) { lines = append(lines, p.String()) }
	st, err := sweep.Run(context.Background(), cfg, &curve{epochs: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Trials) != 9 {
		t.Fatalf("%d trials recorded, want 9", len(st.Trials))
	}
	bestFloor := math.Inf(1)
	for _, tr := range st.Trials {
		want := floor(tr.Params) + 0.25
		if tr.State != sweep.Complete || !tr.HasValue || tr.Value != want || len(tr.Intermediate) != 4 {
			t.Errorf("trial %d: %s value %v (has %v), %d reports; want COMPLETE %v with 4", tr.Number, tr.State, tr.Value, tr.HasValue, len(tr.Intermediate), want)
		}
		if tr.Attrs["run_dir"] != sweep.TrialDir(tr.Number) {
			t.Errorf("trial %d: run_dir %v, want %s", tr.Number, tr.Attrs["run_dir"], sweep.TrialDir(tr.Number))
		}
		bestFloor = min(bestFloor, floor(tr.Params))
	}
	b, ok := st.Best()
	if !ok || floor(b.Params) != bestFloor {
		t.Errorf("best %+v, want the trial with floor %v", b, bestFloor)
	}
	if n, _ := st.Attrs["best_trial"].(float64); int(n) != b.Number || st.Attrs["best_value"] != b.Value {
		t.Errorf("the record names best_trial %v (%v), want %d (%v)", st.Attrs["best_trial"], st.Attrs["best_value"], b.Number, b.Value)
	}
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "trial 9/9, 0 running") || !strings.Contains(last, fmt.Sprintf("best val_loss %.4g (trial %d)", b.Value, b.Number)) {
		t.Errorf("last progress line %q", last)
	}
}

// TestResumeEndsAsAnUninterruptedSweep: a sweep stopped between two reports of a trial leaves it
// RUNNING; --resume hands that trial back (Resume set), keeps the finished ones (not run again)
// and ends with the same trials, states and values as a sweep never stopped, pruned ones included.
func TestResumeEndsAsAnUninterruptedSweep(t *testing.T) {
	for _, pruner := range []sweep.Pruner{nil, &sweep.ASHA{MinResource: 1, Reduction: 3}} {
		t.Run(fmt.Sprintf("pruner=%v", pruner != nil), func(t *testing.T) {
			whole := config(t, t.TempDir())
			whole.Pruner = pruner
			want, err := sweep.Run(context.Background(), whole, &curve{epochs: 9})
			if err != nil {
				t.Fatal(err)
			}
			cut := config(t, t.TempDir())
			cut.Pruner = pruner
			ctx, cancel := context.WithCancel(context.Background())
			c := &curve{epochs: 9, cancelAt: &struct{ number, step int }{4, 1}, cancel: cancel}
			st, err := sweep.Run(ctx, cut, c)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted sweep: err %v, want context.Canceled", err)
			}
			if n := len(st.Trials); n != 5 || st.Trials[4].State != sweep.Running {
				t.Fatalf("interrupted sweep recorded %d trials, trial 4 %v; want 5, trial 4 RUNNING", n, st.Trials[len(st.Trials)-1].State)
			}
			cut.Resume = true
			again := &curve{epochs: 9}
			got, err := sweep.Run(context.Background(), cut, again)
			if err != nil {
				t.Fatal(err)
			}
			if summary(got) != summary(want) {
				t.Errorf("resumed sweep:\n%s\nuninterrupted:\n%s", summary(got), summary(want))
			}
			// Trial 4 had reported validation 1: if that report pruned it, the resume records the
			// decision again without running it; else it is handed back to continue.
			runs, back := int32(5), "[4]"
			if w := want.Trials[4]; w.State == sweep.Pruned && len(w.Intermediate) == 1 {
				runs, back = 4, "[]"
			}
			if fmt.Sprint(again.resumed) != back || again.runs.Load() != runs {
				t.Errorf("resume ran %d trials, handed back %v; want %d, %s", again.runs.Load(), again.resumed, runs, back)
			}
		})
	}
}

// TestResumeRefusesAnotherSpace: the recorded space, metric and direction are the sweep's; a
// resume that asks for others is refused, naming the difference, before any trial runs.
func TestResumeRefusesAnotherSpace(t *testing.T) {
	dir := t.TempDir()
	cfg := config(t, dir)
	cfg.Trials = 2
	if _, err := sweep.Run(context.Background(), cfg, &curve{epochs: 1}); err != nil {
		t.Fatal(err)
	}
	p, _ := sweep.ParseParam("LearningRate=loguniform:1e-5,1")
	other := config(t, dir)
	other.Space, other.Resume = sweep.Space{p}, true
	c := &curve{epochs: 1}
	_, err := sweep.Run(context.Background(), other, c)
	if err == nil || !strings.Contains(err.Error(), "LearningRate was loguniform:0.0001,1, now loguniform:1e-05,1") {
		t.Errorf("resume over another space: %v", err)
	}
	other = config(t, dir)
	other.Resume, other.Maximize = true, true
	if _, err := sweep.Run(context.Background(), other, c); err == nil || !strings.Contains(err.Error(), "minimize") {
		t.Errorf("resume in the other direction: %v", err)
	}
	// The settings that make the trials what they are, and the seed, must be the recorded ones.
	pinned := config(t, t.TempDir())
	pinned.Trials, pinned.Pinned = 1, map[string]any{"preset": "tiny", "max_epochs": 3}
	if _, err := sweep.Run(context.Background(), pinned, &curve{epochs: 1}); err != nil {
		t.Fatal(err)
	}
	pinned.Resume, pinned.Seed, pinned.Pinned = true, 5, map[string]any{"preset": "small", "max_epochs": 3}
	_, err = sweep.Run(context.Background(), pinned, c)
	for _, want := range []string{"preset was tiny, now small", "seed was 0, now 5"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("resume with other settings: %v; want %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "max_epochs") {
		t.Errorf("resume refused an unchanged setting (3 recorded, read back as a float): %v", err)
	}
	if c.runs.Load() != 0 {
		t.Errorf("%d trials ran after a refused resume", c.runs.Load())
	}
	fresh := config(t, dir)
	if _, err := sweep.Run(context.Background(), fresh, c); err == nil || !strings.Contains(err.Error(), "resume") {
		t.Errorf("a new sweep over a recorded one: %v; want a refusal naming --resume", err)
	}
}

// TestPrunedAndFailedTrials: ASHA stops trials that are behind at a rung (PRUNED, valued at their
// last report, fewer reports), a trial's error fails that trial alone (FAIL with the error), and
// the best trial is never pruned.
func TestPrunedAndFailedTrials(t *testing.T) {
	cfg := config(t, t.TempDir())
	cfg.Trials = 12
	cfg.Pruner = &sweep.ASHA{MinResource: 1, Reduction: 3}
	st, err := sweep.Run(context.Background(), cfg, &curve{epochs: 9, fail: map[int]bool{3: true}})
	if err != nil {
		t.Fatal(err)
	}
	pruned := 0
	for _, tr := range st.Trials {
		switch tr.State {
		case sweep.Pruned:
			pruned++
			if !tr.HasValue || len(tr.Intermediate) >= 9 {
				t.Errorf("pruned trial %d: value %v (has %v), %d reports", tr.Number, tr.Value, tr.HasValue, len(tr.Intermediate))
			}
		case sweep.Fail:
			if tr.Number != 3 || !strings.Contains(fmt.Sprint(tr.Attrs["error"]), "out of memory") {
				t.Errorf("trial %d failed: %v", tr.Number, tr.Attrs["error"])
			}
		case sweep.Complete:
		default:
			t.Errorf("trial %d ended %s", tr.Number, tr.State)
		}
	}
	if pruned == 0 {
		t.Error("ASHA pruned no trial of 12")
	}
	if st.Trials[3].State != sweep.Fail {
		t.Errorf("trial 3 ended %s, want FAIL", st.Trials[3].State)
	}
	b, _ := st.Best()
	for _, tr := range st.Trials {
		if tr.State != sweep.Fail && floor(tr.Params) < floor(b.Params) {
			t.Errorf("trial %d (floor %v) beats the best %d (floor %v) but ended %s", tr.Number, floor(tr.Params), b.Number, floor(b.Params), tr.State)
		}
	}
}

// TestParallelTrials: K workers record every trial once, numbers 0..N-1, each with the values
// its number's sample has whatever the order they ran in (Random is pure in the number).
func TestParallelTrials(t *testing.T) {
	cfg := config(t, t.TempDir())
	cfg.Trials, cfg.Parallel = 16, 4
	st, err := sweep.Run(context.Background(), cfg, &curve{epochs: 3})
	if err != nil {
		t.Fatal(err)
	}
	seq := config(t, t.TempDir())
	seq.Trials = 16
	want, err := sweep.Run(context.Background(), seq, &curve{epochs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if summary(st) != summary(want) {
		t.Errorf("parallel 4:\n%s\nsequential:\n%s", summary(st), summary(want))
	}
}

// TestConfigRefused: a config that cannot run is refused naming each field, nothing recorded.
func TestConfigRefused(t *testing.T) {
	_, err := sweep.Run(context.Background(), sweep.Config{Dir: t.TempDir()}, &curve{})
	for _, want := range []string{"Metric is empty", "Trials = 0", "Sampler is nil", "Space is empty"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("empty config: %v; want %q", err, want)
		}
	}
}

// quadratic is an Objective whose "training" reports (x-0.3)^2 + 1/step at steps 1..3.
type quadratic struct{}

func (quadratic) Run(ctx context.Context, t *sweep.TrialRun) (sweep.Outcome, error) {
	for step := 1; step <= 3; step++ {
		prune, err := t.Report(step, math.Pow(t.Params["X"]-0.3, 2)+1/float64(step))
		if err != nil || prune {
			return sweep.Outcome{Pruned: prune}, err
		}
	}
	return sweep.Outcome{}, nil
}

// TestRanked: complete trials by value, then running ones by their newest report, then pruned
// ones by their last value, then the rest by number; maximize reverses the values' order.
func TestRanked(t *testing.T) {
	st := &sweep.Study{Trials: []sweep.Trial{
		{Number: 0, State: sweep.Fail},
		{Number: 1, State: sweep.Pruned, HasValue: true, Value: 0.1, Intermediate: map[int]float64{1: 0.1}},
		{Number: 2, State: sweep.Complete, HasValue: true, Value: 0.5},
		{Number: 3, State: sweep.Running, Intermediate: map[int]float64{1: 0.9, 3: 0.2}},
		{Number: 4, State: sweep.Complete, HasValue: true, Value: 0.3},
		{Number: 5, State: sweep.Running},
		{Number: 6, State: sweep.Running, Intermediate: map[int]float64{2: 0.4}},
	}}
	order := func() []int {
		var n []int
		for _, tr := range sweep.Ranked(st) {
			n = append(n, tr.Number)
		}
		return n
	}
	if got := fmt.Sprint(order()); got != "[4 2 3 6 1 0 5]" {
		t.Errorf("minimize: %s, want [4 2 3 6 1 0 5]", got)
	}
	st.Maximize = true
	if got := fmt.Sprint(order()); got != "[2 4 6 3 1 0 5]" {
		t.Errorf("maximize: %s, want [2 4 6 3 1 0 5]", got)
	}
}
