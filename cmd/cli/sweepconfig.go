package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/earlystop"
	"github.com/nitro-go/nitro/markers"
	"github.com/nitro-go/nitro/sweep"
)

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
		// An integer Seed field of any width is the experiment's seed.
		if v := reflect.Indirect(reflect.ValueOf(e)).FieldByName("Seed"); v.IsValid() && v.CanInt() {
			seed = int(v.Int())
		} else if v.IsValid() && v.CanUint() {
			seed = int(v.Uint())
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
	sampler, pruner, err := samplerAndPruner(f, space, seed, mode == "max")
	if err != nil {
		return nil, cfg, err
	}
	dir := f.dir
	if dir == "" {
		dir = filepath.Join("sweeps", expName)
	}
	cfg = sweep.Config{
		Dir: dir, Name: expName, Metric: f.metric, Maximize: mode == "max", Space: space,
		Trials: f.trials, Parallel: f.parallel, Sampler: sampler, Pruner: pruner, Seed: seed, Resume: f.resume,
		Attrs: map[string]any{"parallel": f.parallel},
		Pinned: map[string]any{"experiment": expName, "preset": f.preset, "sets": strings.Join(f.sets, " "),
			"max_epochs": f.maxEpochs, "max_steps": f.maxSteps, "val_every": f.valEvery,
			"sampler": f.sampler, "pruner": f.prune, "asha_min_resource": f.minRes, "asha_reduction": f.reduction},
	}
	return st, cfg, nil
}

// samplerAndPruner are the sampler and pruner the flags name.
func samplerAndPruner(f *sweepFlags, space sweep.Space, seed int, maximize bool) (sweep.Sampler, sweep.Pruner, error) {
	var sampler sweep.Sampler
	switch f.sampler {
	case "tpe":
		sampler = sweep.NewTPE(int64(seed), sweep.TPEOptions{Maximize: maximize})
	case "random":
		sampler = sweep.NewRandom(int64(seed))
	case "grid":
		n, err := sweep.GridSize(space)
		if err != nil {
			return nil, nil, fmt.Errorf("--sampler grid: %w", err)
		}
		if f.trials > n {
			return nil, nil, fmt.Errorf("--sampler grid: the grid has %d combinations and --trials is %d: lower --trials to %d (or add values)", n, f.trials, n)
		}
		if sampler, err = sweep.NewGrid(space); err != nil {
			return nil, nil, fmt.Errorf("--sampler grid: %w", err)
		}
	default:
		return nil, nil, fmt.Errorf("--sampler %q: want tpe, random or grid", f.sampler)
	}
	var pruner sweep.Pruner
	switch f.prune {
	case "asha":
		pruner = &sweep.ASHA{MinResource: f.minRes, Reduction: f.reduction}
	case "none", "":
	default:
		return nil, nil, fmt.Errorf("--prune %q: want asha or none", f.prune)
	}
	return sampler, pruner, nil
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
