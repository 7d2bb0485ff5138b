package cli

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/earlystop"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/sweep"
)

const sweepLong = `Searches an experiment's fields: each trial is a training run of its own (its run dir under
the sweep dir, its seed, its metrics.jsonl and checkpoints) with the values the sampler proposes,
judged by a validation metric. --param names a field and its distribution:
  Name=uniform:LOW,HIGH   Name=loguniform:LOW,HIGH   Name=int:LOW,HIGH   Name=choice:A,B,C
Before the first trial the command says, per swept field, whether it recompiles: a Device or Host
field is a program input or host state (every trial runs the same compiled programs), a GraphConst
field bakes into the programs (one compile per distinct value). Trials share the compiled
programs (in this process's cache; --parallel's worker processes load them from the disk compile
cache once the first trial has compiled them), so a sweep over inputs compiles once; the counts
are in the record.
Samplers: tpe (Optuna's Tree-structured Parzen Estimator; its first 10 trials are random), random
(seeded: trial N's values depend only on --seed and N) and grid (every combination of choice and
int values). --prune asha stops trials whose metric is not in the top 1/3 at validations 1, 3,
9, ... (asynchronous successive halving; --asha-min-resource and --asha-reduction set the rungs).
The record is D/journal.log, an Optuna journal: optuna.load_study reads it (and so do
optuna-dashboard and Optuna's plots), and nitro board D shows the sweep. It is written durably
after each report: after a kill, the same command with --resume keeps the finished trials,
continues the interrupted ones from their newest checkpoints and runs the rest; with --parallel 1
it ends with the same trials and values, bit for bit, as an uninterrupted sweep.
nitro sweep ls D lists the trials ranked, nitro sweep best D prints the best trial's values as
--set flags. Ctrl+C stops the running trials at their next step, leaving them to --resume.`

// sweepFlags are nitro sweep's flags.
type sweepFlags struct {
	params    []string
	trials    int
	metric    string
	mode      string
	sampler   string
	prune     string
	minRes    int
	reduction int
	parallel  int
	dir       string
	resume    bool
	seed      int
	preset    string
	sets      []string
	backend   string
	maxEpochs int
	maxSteps  int
	valEvery  int
	inProcess bool
	worker    bool // this process is a worker the sweep's process started (sweepworker.go)
}

func newSweepCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &sweepFlags{}
	c := &cobra.Command{
		Use:   "sweep <experiment> --param NAME=KIND:ARGS... [flags] | sweep ls|best <sweep dir>",
		Short: "search an experiment's fields over trials that share compiled programs, survive kills and prune early",
		Long:  sweepLong,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("sweep takes one experiment name (got %d arguments); registered: %s", len(args), strings.Join(sortedNames(), ", "))
			}
			return nil
		},
		ValidArgsFunction: experimentNames,
		RunE: func(c *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runSweep(ctx, c, args[0], f, stdout, stderr)
		},
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringArrayVar(&f.params, "param", nil, "a searched field: `NAME=KIND:ARGS` with KIND uniform:LOW,HIGH, loguniform:LOW,HIGH, int:LOW,HIGH or choice:A,B,... (repeatable)")
	fs.IntVar(&f.trials, "trials", 20, "trials in all, `N` >= 1 (a resumed sweep's finished ones included)")
	fs.StringVar(&f.metric, "metric", core.ValLoss, "the validation `METRIC` trials are judged by, as the record names it (val_loss, val_accuracy, ...)")
	fs.StringVar(&f.mode, "mode", "", "`MODE`: min or max the metric (default: max for accuracy-like names, else min)")
	fs.StringVar(&f.sampler, "sampler", "tpe", "`SAMPLER`: tpe, random or grid")
	fs.StringVar(&f.prune, "prune", "none", "`PRUNER`: asha (asynchronous successive halving on the metric at each validation) or none")
	fs.IntVar(&f.minRes, "asha-min-resource", 1, "asha: the first rung, in validations `N` >= 1 (epochs, or --val-every periods)")
	fs.IntVar(&f.reduction, "asha-reduction", 3, "asha: keep the best 1/`N` at each rung, N >= 2; rungs at min-resource * N^k")
	fs.IntVar(&f.parallel, "parallel", 1, "trials at once, `K` >= 1: in K worker processes over the disk compile cache (measured faster than threads: docs/sweep.md), or with --in-process in this one")
	fs.BoolVar(&f.inProcess, "in-process", false, "with --parallel K: run the K trials in this process, on its shared compiled programs, instead of in worker processes")
	fs.StringVar(&f.dir, "sweep-dir", "", "the sweep `DIR` (default: sweeps/<experiment>)")
	fs.BoolVar(&f.resume, "resume", false, "continue the sweep recorded in --sweep-dir: keep its finished trials, continue the interrupted ones from their checkpoints")
	fs.IntVar(&f.seed, "seed", 0, "the sweep's `SEED`: the sampler's, and trial N initializes its model with SEED+N (default: the experiment's Seed field, else 42)")
	fs.StringVar(&f.preset, "preset", "", "the experiment's preset `NAME` every trial starts from")
	fs.StringArrayVar(&f.sets, "set", nil, "override an experiment field in every trial: `FIELD=VALUE` (repeatable)")
	fs.IntVar(&f.maxEpochs, "max-epochs", 0, "epochs each trial trains, `N` >= 1 (default: the experiment's)")
	fs.IntVar(&f.maxSteps, "max-steps", 0, "optimizer steps each trial trains, `N` >= 1, instead of epochs")
	fs.IntVar(&f.valEvery, "val-every", 0, "validate (and report to the pruner) every `N` optimizer steps instead of each epoch")
	fs.StringVar(&f.backend, "backend", "", "force a `BACKEND`: xla, cuda or go")
	fs.BoolVar(&f.worker, "worker", false, "(internal) train the trials the sweep's process orders on stdin")
	_ = fs.MarkHidden("worker")
	_ = c.RegisterFlagCompletionFunc("sampler", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return []cobra.Completion{"tpe", "random", "grid"}, cobra.ShellCompDirectiveNoFileComp
	})
	_ = c.RegisterFlagCompletionFunc("prune", func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return []cobra.Completion{"asha", "none"}, cobra.ShellCompDirectiveNoFileComp
	})
	c.AddCommand(newSweepLsCmd(stdout), newSweepBestCmd(stdout))
	return c
}

// sweepSetup is everything a sweep's trials share, resolved and checked before the first one.
type sweepSetup struct {
	ent     entry
	f       *sweepFlags
	space   sweep.Space
	base    []string // the --set overrides every trial starts from
	stdout  io.Writer
	setupMu sync.Mutex    // trials set up one at a time (see cliObjective.Run)
	dist    []core.Option // the process's rank (and MPI collective) under a launcher
	ranks   *rankLink     // under mpirun: rank 0 hands each trial to the other ranks; else nil
	stderr  io.Writer
	warned  sync.Map // warnings said once for the sweep, not once per trial
}

// warnOnce prints a trial's warning on stderr unless an earlier trial gave the same one.
func (st *sweepSetup) warnOnce(msg string) {
	if _, seen := st.warned.LoadOrStore(msg, true); !seen {
		fmt.Fprintln(st.stderr, "nitro: warning:", msg)
	}
}

// parseSweep turns the flags into the sweep's config, refusing unknown fields, values the fields
// cannot take, a grid that is not finite, a metric or mode that makes no sense: all before a trial.
func parseSweep(c *cobra.Command, expName string, f *sweepFlags) (*sweepSetup, sweep.Config, error) {
	var cfg sweep.Config
	ent, err := lookup(expName)
	if err != nil {
		return nil, cfg, err
	}
	changed := c.Flags().Changed
	switch {
	case len(f.params) == 0:
		return nil, cfg, errors.New("--param: give at least one searched field, e.g. --param LearningRate=loguniform:1e-4,1e-2")
	case f.trials < 1:
		return nil, cfg, fmt.Errorf("--trials %d: must be >= 1", f.trials)
	case f.parallel < 1:
		return nil, cfg, fmt.Errorf("--parallel %d: must be >= 1 (1 runs one trial at a time)", f.parallel)
	case f.metric == "":
		return nil, cfg, errors.New("--metric: empty value (e.g. val_loss; leave the flag out for val_loss)")
	case f.minRes < 1:
		return nil, cfg, fmt.Errorf("--asha-min-resource %d: must be >= 1 (validations)", f.minRes)
	case f.reduction < 2:
		return nil, cfg, fmt.Errorf("--asha-reduction %d: must be >= 2 (3 keeps the best third at each rung)", f.reduction)
	case changed("seed") && f.seed < 0:
		return nil, cfg, fmt.Errorf("--seed %d: must be >= 0", f.seed)
	}
	for _, k := range []struct {
		flag string
		v    int
	}{{"max-epochs", f.maxEpochs}, {"max-steps", f.maxSteps}, {"val-every", f.valEvery}} {
		if changed(k.flag) && k.v < 1 {
			return nil, cfg, fmt.Errorf("--%s %d: must be >= 1 (leave it out for the experiment's own)", k.flag, k.v)
		}
	}
	mode := f.mode
	switch mode {
	case "":
		mode = earlystop.SuggestMode(f.metric)
	case "min", "max":
	default:
		return nil, cfg, fmt.Errorf("--mode %q: want min or max", f.mode)
	}
	var space sweep.Space
	for _, p := range f.params {
		q, err := sweep.ParseParam(p)
		if err != nil {
			return nil, cfg, err
		}
		space = append(space, q)
	}
	if err := space.Check(); err != nil {
		return nil, cfg, fmt.Errorf("--param: %w", err)
	}
	st := &sweepSetup{ent: ent, f: f, space: space, base: f.sets}
	e, err := ent.configure(f.preset, f.sets)
	if err != nil {
		return nil, cfg, err
	}
	// The sweep's seed defaults to the experiment's: the sampler's seed, and trial N's model
	// initialization is seed+N (the data's order and validation carve stay the experiment's).
	seed := f.seed
	if !changed("seed") {
		seed = 42
		if v, err := markers.LogValues(e); err == nil {
			if s, ok := v["Seed"].(int); ok {
				seed = s
			}
		}
	}
	// Every value each field may take is applied once to a fresh experiment: an unknown field, or
	// a value its type cannot hold (a float for an int field), is refused now, by name.
	tr, err := markers.TraitsOf(e)
	if err != nil {
		return nil, cfg, err
	}
	for _, p := range space {
		if fd, ok := tr.Field(p.Name); ok && (p.Kind == sweep.Uniform || p.Kind == sweep.LogUniform) {
			switch fd.Type.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				return nil, cfg, fmt.Errorf("--param %s: %s is an integer field (%s) and %s proposes fractions: use %s=int:%g,%g", p, p.Name, fd.Type, p.Kind, p.Name, math.Ceil(p.Low), math.Floor(p.High))
			}
		}
		for _, v := range paramExtremes(p) {
			if _, err := ent.configure(f.preset, append(append([]string(nil), f.sets...), p.Name+"="+v)); err != nil {
				return nil, cfg, fmt.Errorf("--param %s: %w", p, err)
			}
		}
	}
	var sampler sweep.Sampler
	switch f.sampler {
	case "tpe":
		sampler = sweep.NewTPE(int64(seed), sweep.TPEOptions{Maximize: mode == "max"})
	case "random":
		sampler = sweep.NewRandom(int64(seed))
	case "grid":
		n, err := sweep.GridSize(space)
		if err != nil {
			return nil, cfg, fmt.Errorf("--sampler grid: %w", err)
		}
		if f.trials > n {
			return nil, cfg, fmt.Errorf("--sampler grid: the grid has %d combinations and --trials is %d: lower --trials to %d (or add values)", n, f.trials, n)
		}
		if sampler, err = sweep.NewGrid(space); err != nil {
			return nil, cfg, fmt.Errorf("--sampler grid: %w", err)
		}
	default:
		return nil, cfg, fmt.Errorf("--sampler %q: want tpe, random or grid", f.sampler)
	}
	var pruner sweep.Pruner
	switch f.prune {
	case "asha":
		pruner = &sweep.ASHA{MinResource: f.minRes, Reduction: f.reduction}
	case "none", "":
	default:
		return nil, cfg, fmt.Errorf("--prune %q: want asha or none", f.prune)
	}
	dir := f.dir
	if dir == "" {
		dir = filepath.Join("sweeps", expName)
	}
	cfg = sweep.Config{
		Dir: dir, Name: expName, Metric: f.metric, Maximize: mode == "max", Space: space,
		Trials: f.trials, Parallel: f.parallel, Sampler: sampler, Pruner: pruner, Seed: seed, Resume: f.resume,
		Attrs: map[string]any{"experiment": expName, "preset": f.preset, "sets": strings.Join(f.sets, " "),
			"sampler": f.sampler, "pruner": f.prune, "parallel": f.parallel},
	}
	return st, cfg, nil
}

// paramExtremes are the values of p that probe its field: a range's ends, every choice.
func paramExtremes(p sweep.Param) []string {
	switch p.Kind {
	case sweep.Choice:
		return p.Choices
	case sweep.Int:
		return []string{fmt.Sprint(int64(p.Low)), fmt.Sprint(int64(p.High))}
	}
	return []string{fmt.Sprint(p.Low), fmt.Sprint(p.High)}
}

// recompileReport says, per swept field, what a new value costs: nothing for a Device or Host
// field, a compile per distinct value for a GraphConst one.
func recompileReport(e any, space sweep.Space, trials int) (string, error) {
	tr, err := markers.TraitsOf(e)
	if err != nil {
		return "", err
	}
	var lines []string
	programs := 1
	for _, p := range space {
		fd, ok := tr.Field(p.Name)
		if !ok {
			return "", fmt.Errorf("--param %s: the experiment has no field %s", p, p.Name)
		}
		switch fd.Kind {
		case markers.KindGraphConst:
			n := trials
			switch p.Kind {
			case sweep.Choice:
				n = len(p.Choices)
			case sweep.Int:
				n = int(p.High-p.Low) + 1
			}
			n = min(n, trials)
			programs *= n
			lines = append(lines, fmt.Sprintf("  %s: GraphConst, baked into the programs: up to %d distinct values, a compile each", p.Name, n))
		case markers.KindDevice:
			lines = append(lines, fmt.Sprintf("  %s: Device, a program input: no recompile", p.Name))
		default:
			lines = append(lines, fmt.Sprintf("  %s: Host, never traced: no recompile", p.Name))
		}
	}
	programs = min(programs, trials)
	return fmt.Sprintf("swept fields:\n%s\nprograms: up to %d set(s) of compiled programs for %d trials", strings.Join(lines, "\n"), programs, trials), nil
}

func runSweep(ctx context.Context, c *cobra.Command, expName string, f *sweepFlags, stdout, stderr io.Writer) (err error) {
	st, cfg, err := parseSweep(c, expName, f)
	if err != nil {
		return err
	}
	st.stdout, st.stderr = stdout, stderr
	if f.worker {
		return st.serveWorker(ctx, cfg)
	}
	if _, err := backend.Resolve(f.backend); err != nil {
		return err
	}
	withDist, comm, endDist, err := distCollective("sweep", stderr)
	if err != nil {
		return err
	}
	defer func() { endDist(err) }()
	st.dist = withDist
	if link := newRankLink(comm); link != nil {
		if cfg.Parallel != 1 {
			return fmt.Errorf("--parallel %d under mpirun: every rank trains each trial together, one trial at a time; use --parallel 1", cfg.Parallel)
		}
		st.ranks = link
		if link.rank != 0 {
			// The other ranks train the trials rank 0 hands them; rank 0 keeps the record.
			return st.follow(ctx, cfg)
		}
		defer func() {
			if err == nil {
				err = link.send(trialOrder{Done: true})
			}
		}()
	}
	e, err := st.ent.configure(f.preset, f.sets)
	if err != nil {
		return err
	}
	report, err := recompileReport(e, cfg.Space, cfg.Trials)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, report)
	// The metric is checked by a setup of the first trial's configuration before the record is
	// written: a metric the experiment does not report is refused now, by name, and the programs
	// this compiles are the ones the first trial would compile (they stay in the process cache).
	if !cfg.Resume {
		if err := st.preflight(cfg); err != nil {
			return err
		}
	}
	compiled0, fromDisk0 := backend.CompileCounts()
	misses0 := compilecache.Default().Stats().Misses
	start := time.Now()
	last := ""
	cfg.Progress = func(p sweep.Progress) {
		if t := p.Ended; t != nil {
			fmt.Fprintln(stdout, trialLine(cfg, *t))
		}
		if s := p.String(); s != last {
			fmt.Fprintln(stdout, s)
			last = s
		}
	}
	cfg.Notice = func(msg string) { fmt.Fprintln(stdout, "resume:", msg) }
	var obj sweep.Objective = &cliObjective{st: st, cfg: cfg}
	var pool *workerPool
	if cfg.Parallel > 1 && !f.inProcess {
		pool = newWorkerPool(workerArgs(c, expName), stderr)
		defer pool.Close()
		obj = pool
	}
	study, runErr := sweep.Run(ctx, cfg, obj)
	compiled, fromDisk := backend.CompileCounts()
	misses := compilecache.Default().Stats().Misses - misses0
	if pool != nil { // the workers' compiles (each worker loads the rest from the disk cache)
		compiled += pool.compiled.Load()
		fromDisk += pool.fromDisk.Load()
		misses += int(pool.misses.Load())
	}
	if study != nil {
		if j, _, err := sweep.Open(cfg.Dir); err == nil {
			// The sweep's compiles in this process, from the plugin's counts: a program per
			// distinct set of GraphConst values, whatever the trial count.
			prev := intAttr(study.Attrs, "programs_compiled")
			_ = j.SetStudyAttr("programs_compiled", prev+int(compiled-compiled0))
			_ = j.SetStudyAttr("programs_from_disk", intAttr(study.Attrs, "programs_from_disk")+int(fromDisk-fromDisk0))
			_ = j.SetStudyAttr("program_cache_misses", intAttr(study.Attrs, "program_cache_misses")+misses)
			_ = j.Close()
		}
		fmt.Fprintf(stdout, "sweep %s: %d trials in %s; programs compiled %d, loaded from the disk cache %d, in-process cache misses %d\n",
			cfg.Dir, len(study.Trials), time.Since(start).Round(time.Second), compiled-compiled0, fromDisk-fromDisk0, misses)
		if b, ok := study.Best(); ok {
			sets, _ := cfg.Space.Sets(b.Params)
			fmt.Fprintf(stdout, "best %s %.6g: trial %d (%s), run dir %s\n", cfg.Metric, b.Value, b.Number, strings.Join(sets, " "), filepath.Join(cfg.Dir, sweep.TrialDir(b.Number)))
		}
	}
	if runErr != nil && ctx.Err() != nil {
		return fmt.Errorf("sweep stopped (%v): the running trials stay in the record; continue with the same command and --resume", ctx.Err())
	}
	return runErr
}

// trialLine is a trial's end in one line: "trial 3 COMPLETE val_loss 0.3248 (LearningRate=0.0176 WeightDecay=2.14e-05) 4.1 s".
func trialLine(cfg sweep.Config, t sweep.Trial) string {
	var vals []string
	for _, p := range cfg.Space {
		v := t.Params[p.Name]
		switch p.Kind {
		case sweep.Choice:
			if i := int(v); i >= 0 && i < len(p.Choices) {
				vals = append(vals, p.Name+"="+p.Choices[i])
			}
		case sweep.Int:
			vals = append(vals, fmt.Sprintf("%s=%d", p.Name, int64(v)))
		default:
			vals = append(vals, fmt.Sprintf("%s=%.4g", p.Name, v))
		}
	}
	s := fmt.Sprintf("trial %d %s", t.Number, t.State)
	if t.HasValue {
		s += fmt.Sprintf(" %s %.4g", cfg.Metric, t.Value)
	}
	if step, ok := lastStep(t); ok {
		s += fmt.Sprintf(" at validation %d", step)
	}
	s += " (" + strings.Join(vals, " ") + ")"
	if sec, ok := t.Attrs["seconds"].(float64); ok {
		s += fmt.Sprintf(" %.1f s", sec)
	}
	if e, ok := t.Attrs["error"].(string); ok {
		s += ": " + e
	}
	return s
}

// residentMB is the process's resident set in MB, where /proc says it (Linux).
func residentMB() (int, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.Atoi(f[1])
	if err != nil {
		return 0, false
	}
	return pages * os.Getpagesize() >> 20, true
}

func intAttr(m map[string]any, k string) int {
	switch v := m[k].(type) {
	case float64:
		return int(v)
	case int:
		return v
	}
	return 0
}

// preflight sets up the first trial's configuration once, without training, so that what only
// setup can check (the metric among the validation metrics, the data) fails before the record.
func (st *sweepSetup) preflight(cfg sweep.Config) error {
	params, err := cfg.Sampler.Sample(cfg.Space, nil, 0)
	if err != nil {
		return err
	}
	sets, err := cfg.Space.Sets(params)
	if err != nil {
		return err
	}
	e, err := st.ent.configure(st.f.preset, append(append([]string(nil), st.base...), sets...))
	if err != nil {
		return fmt.Errorf("trial 0 (%s): %w", strings.Join(sets, " "), err)
	}
	tmp, err := os.MkdirTemp("", "nitro-sweep-preflight-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// This process alone, whatever the launcher: under mpirun the other ranks are waiting for
	// rank 0's first trial, not for a setup of their own.
	opts := append(st.trialOptions(false), core.WithRunDir(tmp), core.WithoutCheckpoints(), core.WithoutLogger(), core.WithSeed(cfg.Seed),
		core.WithEarlyStopper(&metricProbe{metric: cfg.Metric}))
	if _, err := core.New(e, opts...); err != nil {
		return fmt.Errorf("--metric %s: setting up trial 0 (%s): %w", cfg.Metric, strings.Join(sets, " "), err)
	}
	runtime.GC()
	return nil
}

// trialOptions are the run options every trial takes from the flags; withDist adds the
// process's rank and collective (a trial under mpirun trains over every rank).
func (st *sweepSetup) trialOptions(withDist bool) []core.Option {
	f := st.f
	opts := []core.Option{core.WithBackend(f.backend), core.WithConsole(nil), core.WithWarn(st.warnOnce)}
	if withDist {
		opts = append(opts, st.dist...)
	}
	if f.preset != "" {
		opts = append(opts, core.WithPreset(f.preset))
	}
	if f.maxEpochs > 0 {
		opts = append(opts, core.WithMaxEpochs(f.maxEpochs))
	}
	if f.maxSteps > 0 {
		opts = append(opts, core.WithMaxSteps(f.maxSteps))
	}
	if f.valEvery > 0 {
		opts = append(opts, core.WithValEvery(f.valEvery))
	}
	return opts
}

// metricProbe is a stopping rule that never stops: setup refuses a metric it names that the
// validation split does not report.
type metricProbe struct{ metric string }

func (p *metricProbe) ShouldStop(int, map[string]float64) (bool, string) { return false, "" }
func (p *metricProbe) StopMetric() string                                { return p.metric }

// cliObjective runs a trial as nitro train would, in this process: the compiled programs are
// the process cache's, shared by every trial with the same GraphConst values.
type cliObjective struct {
	st  *sweepSetup
	cfg sweep.Config
}

var _ sweep.Objective = (*cliObjective)(nil)

func (o *cliObjective) Run(ctx context.Context, t *sweep.TrialRun) (sweep.Outcome, error) {
	order := newOrder(t)
	if o.st.ranks != nil {
		if err := o.st.ranks.send(order); err != nil {
			return sweep.Outcome{}, err
		}
	}
	return o.st.runOrder(ctx, o.cfg, order, t, o.cfg.Parallel == 1)
}

// newOrder is how a trial is set up: a trial handed back after a kill continues from its newest
// checkpoint, or starts afresh over what it had logged when it had none.
func newOrder(t *sweep.TrialRun) trialOrder {
	o := trialOrder{Number: t.Number, Sets: t.Sets, Seed: t.Seed, Dir: t.Dir}
	if t.Resume {
		_, o.FromCheckpoint, _ = checkpoint.Newest(t.Dir)
		o.Overwrite = !o.FromCheckpoint
	}
	return o
}

// runOrder sets a trial up and trains it, reporting through t. counts records the compiles it
// took, when this process runs no other trial beside it.
func (st *sweepSetup) runOrder(ctx context.Context, cfg sweep.Config, order trialOrder, t *sweep.TrialRun, counts bool) (sweep.Outcome, error) {
	start := time.Now()
	compiled0, fromDisk0 := backend.CompileCounts()
	misses0 := compilecache.Default().Stats().Misses
	pol := &prunePolicy{t: t, metric: cfg.Metric, viaStop: st.ranks != nil}
	n, err := st.setUp(order, pol)
	if err != nil {
		return sweep.Outcome{}, err
	}
	pol.n = n
	trainErr := n.TrainContext(ctx)
	out := sweep.Outcome{Pruned: pol.pruned, Attrs: map[string]any{
		"seconds": math.Round(time.Since(start).Seconds()*10) / 10, "steps": n.Step(), "stop_reason": string(n.StopReason()),
	}}
	if p := n.LastCheckpoint(); p != "" {
		out.Attrs["checkpoint"] = filepath.Base(p)
	}
	if counts {
		compiled, fromDisk := backend.CompileCounts()
		out.Attrs["plugin_compiles"] = int(compiled - compiled0)
		out.Attrs["plugin_from_disk"] = int(fromDisk - fromDisk0)
		out.Attrs["program_cache_misses"] = compilecache.Default().Stats().Misses - misses0
	}
	n, pol.n = nil, nil
	runtime.GC() // the trial's device buffers go before the next trial's
	if counts {
		// The process's resident memory once the trial is collected: a sweep whose figure climbs
		// from trial to trial keeps something of each.
		if mb, ok := residentMB(); ok {
			out.Attrs["rss_after_mb"] = mb
		}
	}
	switch {
	case trainErr != nil:
		return out, trainErr
	case pol.err != nil:
		return out, pol.err
	case ctx.Err() != nil:
		return out, ctx.Err()
	}
	return out, nil
}

// setUp builds a trial's run from its order: the experiment with the trial's values, its run
// dir, seed and resume. Setups run one at a time: with --parallel, the second trial to set up
// finds the first's programs in the process cache instead of compiling them again beside it.
func (st *sweepSetup) setUp(o trialOrder, stop earlystop.Policy) (*core.Nitro, error) {
	e, err := st.ent.configure(st.f.preset, append(append([]string(nil), st.base...), o.Sets...))
	if err != nil {
		return nil, err
	}
	opts := append(st.trialOptions(true), core.WithRunDir(o.Dir), core.WithSeed(o.Seed), core.WithEarlyStopper(stop))
	switch {
	case o.FromCheckpoint:
		opts = append(opts, core.WithResume(core.ResumeAuto))
	case o.Overwrite:
		opts = append(opts, core.WithOverwrite())
	}
	st.setupMu.Lock()
	defer st.setupMu.Unlock()
	return core.New(e, opts...)
}

// prunePolicy reports each validation's metric to the sweep, which records it, and stops the run
// when the pruner says so. Its steps are validations (epochs, or --val-every periods). Under
// mpirun (viaStop) it stops the run by RequestStop: the loop ends a run when any rank requested
// it, at the same validation on every rank, so rank 0's decision is every rank's.
type prunePolicy struct {
	t       *sweep.TrialRun
	metric  string
	n       *core.Nitro
	viaStop bool
	pruned  bool
	err     error
}

var (
	_ earlystop.Policy       = (*prunePolicy)(nil)
	_ earlystop.MetricReader = (*prunePolicy)(nil)
)

func (p *prunePolicy) StopMetric() string { return p.metric }

func (p *prunePolicy) ShouldStop(validation int, val map[string]float64) (bool, string) {
	v, ok := val[p.metric]
	if !ok {
		p.err = fmt.Errorf("validation %d reported no %s", validation, p.metric)
		return true, p.err.Error()
	}
	prune, err := p.t.Report(validation, v)
	if err != nil {
		p.err = fmt.Errorf("recording %s at validation %d: %w", p.metric, validation, err)
		return true, p.err.Error()
	}
	if prune {
		p.pruned = true
		if p.viaStop {
			p.n.RequestStop()
			return false, ""
		}
		return true, fmt.Sprintf("pruned: %s %.4g at validation %d is not among the best at its rung", p.metric, v, validation)
	}
	return false, ""
}

func newSweepLsCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "ls <sweep dir>",
		Short: "list a sweep's trials, best first, with their state, metric and values",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			st, err := sweep.Load(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, studyLine(st))
			space := make([]string, len(st.Space))
			for i, p := range st.Space {
				space[i] = p.String()
			}
			fmt.Fprintf(stdout, "space: %s\n", strings.Join(space, " "))
			fmt.Fprintf(stdout, "%-6s %-9s %-12s %-6s %s\n", "trial", "state", st.Metric, "step", "values")
			for _, t := range sweep.Ranked(st) {
				val := "-"
				if t.HasValue {
					val = fmt.Sprintf("%.6g", t.Value)
				}
				step := "-"
				if s, ok := lastStep(t); ok {
					step = fmt.Sprint(s)
				}
				sets, _ := st.Space.Sets(t.Params)
				fmt.Fprintf(stdout, "%-6d %-9s %-12s %-6s %s\n", t.Number, t.State, val, step, strings.Join(sets, " "))
			}
			return nil
		},
	}
}

func newSweepBestCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "best <sweep dir>",
		Short: "print a sweep's best trial: its metric, its values as --set flags and its run dir",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			st, err := sweep.Load(args[0])
			if err != nil {
				return err
			}
			b, ok := st.Best()
			if !ok {
				return fmt.Errorf("sweep %s: no trial has completed yet (%s)", args[0], studyLine(st))
			}
			sets, err := st.Space.Sets(b.Params)
			if err != nil {
				return err
			}
			flags := make([]string, len(sets))
			for i, s := range sets {
				flags[i] = "--set " + s
			}
			fmt.Fprintf(stdout, "trial %d: %s %.6g\n%s\nrun dir %s\n", b.Number, st.Metric, b.Value, strings.Join(flags, " "), filepath.Join(args[0], sweep.TrialDir(b.Number)))
			return nil
		},
	}
}

// studyLine sums a study up: "40 trials planned: 25 complete, 3 running, 12 pruned, 0 failed".
func studyLine(st *sweep.Study) string {
	count := map[sweep.State]int{}
	for _, t := range st.Trials {
		count[t.State]++
	}
	s := fmt.Sprintf("%d trials recorded", len(st.Trials))
	if n := intAttr(st.Attrs, "trials"); n > 0 {
		s += fmt.Sprintf(" of %d", n)
	}
	s += fmt.Sprintf(": %d complete, %d running, %d pruned, %d failed", count[sweep.Complete], count[sweep.Running], count[sweep.Pruned], count[sweep.Fail])
	if b, ok := st.Best(); ok {
		s += fmt.Sprintf("; best %s %.6g (trial %d)", st.Metric, b.Value, b.Number)
	}
	return s
}

func lastStep(t sweep.Trial) (int, bool) {
	best, ok := 0, false
	for s := range t.Intermediate {
		if !ok || s > best {
			best, ok = s, true
		}
	}
	return best, ok
}

// trialOrder is what rank 0 tells the other ranks of a trial under mpirun: everything a rank
// needs to set up the same run. Done ends the sweep.
type trialOrder struct {
	Number         int      `json:"number"`
	Sets           []string `json:"sets"`
	Seed           int      `json:"seed"`
	Dir            string   `json:"dir"`
	FromCheckpoint bool     `json:"from_checkpoint"`
	Overwrite      bool     `json:"overwrite"`
	Done           bool     `json:"done"`
}

// rankLink carries rank 0's trial orders to the other ranks over the run's collective.
type rankLink struct {
	rank int
	c    core.Collective
}

// newRankLink is the link under mpirun with more than one rank, else nil.
func newRankLink(c core.Collective) *rankLink {
	if c == nil || c.Size() < 2 {
		return nil
	}
	return &rankLink{rank: c.Rank(), c: c}
}

// send is rank 0's broadcast of an order: its length, then its JSON.
func (l *rankLink) send(o trialOrder) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
	if err := l.c.Broadcast(n[:], 0); err != nil {
		return fmt.Errorf("sweep under mpirun: handing trial %d to the other ranks: %w", o.Number, err)
	}
	if err := l.c.Broadcast(b, 0); err != nil {
		return fmt.Errorf("sweep under mpirun: handing trial %d to the other ranks: %w", o.Number, err)
	}
	return nil
}

// receive is the other ranks' side of send.
func (l *rankLink) receive() (trialOrder, error) {
	var o trialOrder
	var n [8]byte
	if err := l.c.Broadcast(n[:], 0); err != nil {
		return o, fmt.Errorf("sweep under mpirun, rank %d: waiting for rank 0's next trial: %w", l.rank, err)
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > 1<<20 {
		return o, fmt.Errorf("sweep under mpirun, rank %d: rank 0's trial order is %d bytes: not an order", l.rank, size)
	}
	b := make([]byte, size)
	if err := l.c.Broadcast(b, 0); err != nil {
		return o, fmt.Errorf("sweep under mpirun, rank %d: waiting for rank 0's next trial: %w", l.rank, err)
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("sweep under mpirun, rank %d: rank 0's trial order: %w", l.rank, err)
	}
	return o, nil
}

// follow is a rank other than 0 under mpirun: it trains each trial rank 0 orders, with a stopping
// rule that never stops by itself (rank 0's prune reaches it as a requested stop), until Done.
func (st *sweepSetup) follow(ctx context.Context, cfg sweep.Config) error {
	for {
		o, err := st.ranks.receive()
		if err != nil || o.Done {
			return err
		}
		n, err := st.setUp(o, &metricProbe{metric: cfg.Metric})
		if err != nil {
			return fmt.Errorf("trial %d: %w", o.Number, err)
		}
		if err := n.TrainContext(ctx); err != nil {
			return fmt.Errorf("trial %d: %w", o.Number, err)
		}
		fmt.Fprintf(st.stdout, "rank %d: trial %d ended at step %d (%s)\n", st.ranks.rank, o.Number, n.Step(), n.StopReason())
		n = nil
		runtime.GC()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
