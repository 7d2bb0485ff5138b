package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Config is one sweep: where it is recorded, what it searches and how.
type Config struct {
	Dir      string  // the sweep dir: journal.log and trials/NNNN run dirs
	Name     string  // the study's name (default: Dir's base name)
	Metric   string  // the validation metric trials are judged by, as the run's record names it
	Maximize bool    // judge by the largest Metric (default: the smallest)
	Space    Space   // the searched fields
	Trials   int     // how many trials in all, a resumed sweep's finished ones included
	Parallel int     // trials at once (default 1)
	Sampler  Sampler // proposes each new trial's values
	Pruner   Pruner  // stops trials early on their reports; nil never prunes
	Seed     int     // the trials' seeds are Seed + their number
	// Resume continues the sweep recorded in Dir: finished trials are kept, interrupted ones are
	// handed back to the Objective with TrialRun.Resume set, and new ones fill up to Trials. The
	// record's space, metric and direction must be these (a difference is refused, named).
	Resume bool
	Attrs  map[string]any // more study attributes, recorded when the sweep is created
	// Pinned are the settings that make the trials what they are (the experiment, its preset and
	// overrides, the horizon, the sampler and pruner): recorded with the study, and a resume that
	// gives another value for one is refused naming it, since its trials would not be comparable
	// with the recorded ones (nor continue their checkpoints as they were trained).
	Pinned map[string]any
	// Progress is called after every change of a trial's state, from the goroutine that changed
	// it, one call at a time.
	Progress func(Progress)
	// Notice, when set, is told what a resume repaired (a torn last line of the record cut).
	Notice func(string)
}

// Progress is a sweep's state, for a progress line.
type Progress struct {
	Planned, Started, Running, Complete, Pruned, Failed int
	Metric                                              string
	Best                                                *Trial // nil until a trial completes
	Ended                                               *Trial // the trial whose end this call follows, else nil
}

// String is the progress line: "trial 12/40, 3 running, 5 pruned, best val_loss 0.061 (trial 7)".
func (p Progress) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trial %d/%d, %d running", p.Started, p.Planned, p.Running)
	if p.Pruned > 0 {
		fmt.Fprintf(&b, ", %d pruned", p.Pruned)
	}
	if p.Failed > 0 {
		fmt.Fprintf(&b, ", %d failed", p.Failed)
	}
	if p.Best != nil {
		fmt.Fprintf(&b, ", best %s %.4g (trial %d)", p.Metric, p.Best.Value, p.Best.Number)
	} else {
		b.WriteString(", no trial complete yet")
	}
	return b.String()
}

// TrialDir is trial number's run dir, relative to the sweep dir.
func TrialDir(number int) string { return filepath.Join("trials", fmt.Sprintf("%04d", number)) }

// check refuses a Config that cannot run, naming the field.
func (c *Config) check() error {
	var bad []string
	if c.Dir == "" {
		bad = append(bad, "Dir is empty: name the sweep dir (--sweep-dir)")
	}
	if c.Metric == "" {
		bad = append(bad, "Metric is empty: name the validation metric to judge trials by (--metric, e.g. val_loss)")
	}
	if c.Trials < 1 {
		bad = append(bad, fmt.Sprintf("Trials = %d: want >= 1 (--trials)", c.Trials))
	}
	if c.Parallel < 0 {
		bad = append(bad, fmt.Sprintf("Parallel = %d: want >= 1 (--parallel; 0 is 1)", c.Parallel))
	}
	if c.Sampler == nil {
		bad = append(bad, "Sampler is nil: use NewRandom, NewGrid or NewTPE")
	}
	if len(c.Space) == 0 {
		bad = append(bad, "Space is empty: give at least one parameter (--param Name=kind:args)")
	} else if err := c.Space.Check(); err != nil {
		bad = append(bad, err.Error())
	}
	if len(bad) > 0 {
		return fmt.Errorf("sweep: %s", strings.Join(bad, "; "))
	}
	return nil
}

// Run drives obj over the sweep cfg describes and returns the record as it stands at the end. It
// returns ctx's error when ctx ends first: the running trials stay RUNNING in the record, for
// --resume. A trial's own error fails that trial only.
func Run(ctx context.Context, cfg Config, obj Objective) (*Study, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 1
	}
	if cfg.Name == "" {
		cfg.Name = filepath.Base(filepath.Clean(cfg.Dir))
	}
	j, resumed, err := openRecord(cfg)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	d := &driver{cfg: cfg, j: j, obj: obj}
	for _, t := range resumed {
		d.queue = append(d.queue, t)
	}
	d.started = len(j.Study().Trials) - len(d.queue)
	d.progress(-1)

	var wg sync.WaitGroup
	errs := make(chan error, cfg.Parallel)
	for w := 0; w < cfg.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.work(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for e := range errs {
		all = append(all, e)
	}
	if err := ctx.Err(); err != nil {
		all = append(all, err)
	}
	return j.Study(), errors.Join(all...)
}

// openRecord creates the sweep's journal, or on resume opens it, checks that it is this sweep's
// and returns its interrupted trials, ready to be handed back.
func openRecord(cfg Config) (*Journal, []*TrialRun, error) {
	if !cfg.Resume {
		attrs := map[string]any{"trials": cfg.Trials, "seed": cfg.Seed}
		for k, v := range cfg.Attrs {
			attrs[k] = v
		}
		for k, v := range cfg.Pinned {
			attrs[k] = v
		}
		j, err := Create(cfg.Dir, cfg.Name, cfg.Metric, cfg.Maximize, cfg.Space, attrs)
		return j, nil, err
	}
	j, st, err := Open(cfg.Dir)
	if err != nil {
		return nil, nil, err
	}
	if r := j.Repaired(); r != "" && cfg.Notice != nil {
		cfg.Notice(r)
	}
	fail := func(err error) (*Journal, []*TrialRun, error) {
		j.Close()
		return nil, nil, err
	}
	if diff := st.Space.Diff(cfg.Space); diff != "" {
		return fail(fmt.Errorf("sweep %s: the search space differs from the recorded one: %s; resume with the recorded --param values, or start a new sweep in another --sweep-dir", cfg.Dir, diff))
	}
	if st.Metric != cfg.Metric || st.Maximize != cfg.Maximize {
		return fail(fmt.Errorf("sweep %s: recorded with metric %s (%s), resumed with %s (%s): resume with the recorded --metric and direction", cfg.Dir, st.Metric, direction(st.Maximize), cfg.Metric, direction(cfg.Maximize)))
	}
	if err := checkPinned(st.Attrs, cfg); err != nil {
		return fail(err)
	}
	// A resume may ask for more (or fewer) trials in all; the record says the latest plan.
	if planned, ok := st.Attrs["trials"].(float64); !ok || int(planned) != cfg.Trials {
		if err := j.SetStudyAttr("trials", cfg.Trials); err != nil {
			return fail(err)
		}
	}
	var resumed []*TrialRun
	for _, t := range st.Trials {
		if err := cfg.Space.Contains(t.Params); err != nil {
			return fail(fmt.Errorf("sweep %s: trial %d's recorded values do not fit the space: %w", cfg.Dir, t.Number, err))
		}
		if t.State != Running {
			continue
		}
		tr, err := newTrialRun(cfg, t.Number, t.Params)
		if err != nil {
			return fail(err)
		}
		tr.Resume = true
		resumed = append(resumed, tr)
	}
	return j, resumed, nil
}

// checkPinned refuses a resume whose seed or pinned settings differ from the recorded ones.
func checkPinned(recorded map[string]any, cfg Config) error {
	want := map[string]any{"seed": cfg.Seed}
	for k, v := range cfg.Pinned {
		want[k] = v
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var diffs []string
	for _, k := range keys {
		was, ok := recorded[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s is not in the record, now %v", k, want[k]))
		case !sameValue(was, want[k]):
			diffs = append(diffs, fmt.Sprintf("%s was %v, now %v", k, was, want[k]))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("sweep %s: resumed with other settings than it was recorded with: %s; its trials would not compare with the recorded ones: resume with the recorded settings, or start a new sweep in another --sweep-dir", cfg.Dir, strings.Join(diffs, "; "))
	}
	return nil
}

// sameValue compares two attribute values as the record holds them (JSON: numbers as floats).
func sameValue(a, b any) bool {
	norm := func(v any) string {
		j, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		var x any
		if json.Unmarshal(j, &x) != nil {
			return string(j)
		}
		j, _ = json.Marshal(x)
		return string(j)
	}
	return norm(a) == norm(b)
}

func direction(maximize bool) string {
	if maximize {
		return "maximize"
	}
	return "minimize"
}

func newTrialRun(cfg Config, number int, params map[string]float64) (*TrialRun, error) {
	sets, err := cfg.Space.Sets(params)
	if err != nil {
		return nil, fmt.Errorf("sweep: trial %d: %w", number, err)
	}
	return &TrialRun{Number: number, Params: params, Sets: sets, Dir: filepath.Join(cfg.Dir, TrialDir(number)), Seed: cfg.Seed + number}, nil
}

// driver hands trials to the workers. Sampling a trial and recording its start happen under mu,
// so numbers are given in order and each sampler call sees every trial started before it.
type driver struct {
	cfg Config
	j   *Journal
	obj Objective

	mu      sync.Mutex
	queue   []*TrialRun // interrupted trials to hand back first
	started int         // trials recorded, interrupted ones excluded until handed back
}

// next is the next trial to run, nil when the sweep has started all of them.
func (d *driver) next() (*TrialRun, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.queue) > 0 {
		t := d.queue[0]
		d.queue = d.queue[1:]
		d.started++
		return t, nil
	}
	st := d.j.Study()
	if len(st.Trials) >= d.cfg.Trials {
		return nil, nil
	}
	number := len(st.Trials)
	params, err := d.cfg.Sampler.Sample(d.cfg.Space, st.Trials, number)
	if err != nil {
		return nil, fmt.Errorf("sweep: sampling trial %d: %w", number, err)
	}
	t, err := newTrialRun(d.cfg, number, params)
	if err != nil {
		return nil, err
	}
	got, err := d.j.StartTrial(params, map[string]any{"run_dir": TrialDir(number), "seed": t.Seed})
	if err != nil {
		return nil, err
	}
	if got != number {
		return nil, fmt.Errorf("sweep: the record numbered the new trial %d, want %d: is another process writing %s?", got, number, d.cfg.Dir)
	}
	d.started++
	return t, nil
}

// work runs trials until none is left or ctx ends; it returns only the sweep's own failures
// (the record), never a trial's.
func (d *driver) work(ctx context.Context) error {
	for ctx.Err() == nil {
		t, err := d.next()
		if err != nil || t == nil {
			return err
		}
		d.progress(-1)
		if err := d.runTrial(ctx, t); err != nil {
			return err
		}
		d.progress(t.Number)
	}
	return nil
}

// runTrial runs one trial and records its end. A trial resumed after its last report may be
// pruned without running: the decision its report would have had is taken again first.
func (d *driver) runTrial(ctx context.Context, t *TrialRun) error {
	if t.Resume && d.cfg.Pruner != nil {
		if step, v, ok := lastReport(d.j.Study(), t.Number); ok && d.prune(t.Number, step, v) {
			return d.j.Finish(t.Number, Pruned, v, true)
		}
	}
	t.report = func(step int, value float64) (bool, error) {
		if err := d.j.Report(t.Number, step, value); err != nil {
			return false, err
		}
		return d.prune(t.Number, step, value), nil
	}
	out, runErr := d.obj.Run(ctx, t)
	for k, v := range out.Attrs {
		if err := d.j.SetTrialAttr(t.Number, k, v); err != nil {
			return err
		}
	}
	if runErr != nil && ctx.Err() != nil {
		return nil // interrupted: the trial stays RUNNING for --resume
	}
	if runErr != nil {
		if err := d.j.SetTrialAttr(t.Number, "error", runErr.Error()); err != nil {
			return err
		}
		return d.j.Finish(t.Number, Fail, 0, false)
	}
	step, v, ok := lastReport(d.j.Study(), t.Number)
	switch {
	case !ok:
		if err := d.j.SetTrialAttr(t.Number, "error", fmt.Sprintf("the trial reported no %s: is it a validation metric of this experiment, and does the run validate?", d.cfg.Metric)); err != nil {
			return err
		}
		return d.j.Finish(t.Number, Fail, 0, false)
	case math.IsNaN(v) || math.IsInf(v, 0):
		if err := d.j.SetTrialAttr(t.Number, "error", fmt.Sprintf("%s at step %d is %v", d.cfg.Metric, step, v)); err != nil {
			return err
		}
		return d.j.Finish(t.Number, Fail, 0, false)
	case out.Pruned:
		return d.j.Finish(t.Number, Pruned, v, true)
	}
	if err := d.j.Finish(t.Number, Complete, v, true); err != nil {
		return err
	}
	return d.recordBest(t.Number)
}

// recordBest writes the best trial into the study's attributes when number just became it, so
// the record names it without a reader recomputing the ranking.
func (d *driver) recordBest(number int) error {
	b, ok := d.j.Study().Best()
	if !ok || b.Number != number {
		return nil
	}
	if err := d.j.SetStudyAttr("best_trial", number); err != nil {
		return err
	}
	return d.j.SetStudyAttr("best_value", b.Value)
}

// prune asks the pruner about a report; the history is the record's, this report included.
func (d *driver) prune(number, step int, value float64) bool {
	if d.cfg.Pruner == nil {
		return false
	}
	return d.cfg.Pruner.Prune(d.j.Study().Trials, number, step, value, d.cfg.Maximize)
}

// lastReport is trial number's report at its largest step.
func lastReport(st *Study, number int) (step int, value float64, ok bool) {
	if number < 0 || number >= len(st.Trials) {
		return 0, 0, false
	}
	return st.Trials[number].LastReport()
}

// progress tells cfg.Progress where the sweep stands; ended is the trial that just ended, or -1.
func (d *driver) progress(ended int) {
	if d.cfg.Progress == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.j.Study()
	p := Progress{Planned: d.cfg.Trials, Started: d.started, Metric: d.cfg.Metric}
	for _, t := range st.Trials {
		switch t.State {
		case Running:
			p.Running++
		case Complete:
			p.Complete++
		case Pruned:
			p.Pruned++
		case Fail:
			p.Failed++
		}
	}
	// Interrupted trials not handed back yet are RUNNING in the record but not running here.
	p.Running -= len(d.queue)
	if b, ok := st.Best(); ok {
		p.Best = &b
	}
	if ended >= 0 && ended < len(st.Trials) && st.Trials[ended].State != Running {
		p.Ended = &st.Trials[ended]
	}
	d.cfg.Progress(p)
}

// LastReport is the trial's report at its largest step.
func (t Trial) LastReport() (step int, value float64, ok bool) {
	for s, v := range t.Intermediate {
		if !ok || s > step {
			step, value, ok = s, v, true
		}
	}
	return step, value, ok
}

// Ranked is the study's trials best first, the order `nitro sweep ls` and the board show: the
// complete ones by value in the study's direction, then the running ones by their newest report
// (still contenders), then the pruned ones by their last value (stopped early, so not comparable
// with a finished one), then the rest (failed, or with no finite value) by number.
func Ranked(st *Study) []Trial {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	key := func(t Trial) (group int, v float64) {
		switch t.State {
		case Complete:
			if t.HasValue && finite(t.Value) {
				return 0, t.Value
			}
		case Running:
			if _, v, ok := t.LastReport(); ok && finite(v) {
				return 1, v
			}
		case Pruned:
			if t.HasValue && finite(t.Value) {
				return 2, t.Value
			}
			if _, v, ok := t.LastReport(); ok && finite(v) {
				return 2, v
			}
		}
		return 3, 0
	}
	ts := append([]Trial(nil), st.Trials...)
	sort.SliceStable(ts, func(a, b int) bool {
		ga, va := key(ts[a])
		gb, vb := key(ts[b])
		switch {
		case ga != gb:
			return ga < gb
		case ga != 3 && va != vb:
			return (va < vb) != st.Maximize
		}
		return ts[a].Number < ts[b].Number
	})
	return ts
}
