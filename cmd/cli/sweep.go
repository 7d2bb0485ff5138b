package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
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
		Use:         "sweep <experiment> --param NAME=KIND:ARGS... [flags] | sweep ls|best <sweep dir>",
		Short:       "search an experiment's fields over trials that share compiled programs, survive kills and prune early",
		Annotations: map[string]string{ownUse: "yes"}, // the root help shows the ls|best form too
		Long:        sweepLong,
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
		sayTotals(stdout, cfg, study, compiled-compiled0, fromDisk-fromDisk0, misses, time.Since(start))
	}
	if runErr != nil && ctx.Err() != nil {
		return fmt.Errorf("sweep stopped (%v): the running trials stay in the record; continue with the same command and --resume", ctx.Err())
	}
	return runErr
}

// sayTotals adds this invocation's compile counts to the record's and prints them with the best
// trial: a program per distinct set of GraphConst values, whatever the trial count.
func sayTotals(stdout io.Writer, cfg sweep.Config, study *sweep.Study, compiled, fromDisk int64, misses int, elapsed time.Duration) {
	if j, _, err := sweep.Open(cfg.Dir); err == nil {
		// The sweep's compiles in this process, from the plugin's counts: a program per
		// distinct set of GraphConst values, whatever the trial count.
		prev := intAttr(study.Attrs, "programs_compiled")
		_ = j.SetStudyAttr("programs_compiled", prev+int(compiled))
		_ = j.SetStudyAttr("programs_from_disk", intAttr(study.Attrs, "programs_from_disk")+int(fromDisk))
		_ = j.SetStudyAttr("program_cache_misses", intAttr(study.Attrs, "program_cache_misses")+misses)
		_ = j.Close()
	}
	fmt.Fprintf(stdout, "sweep %s: %d trials in %s; programs compiled %d, loaded from the disk cache %d, in-process cache misses %d\n",
		cfg.Dir, len(study.Trials), elapsed.Round(time.Second), compiled, fromDisk, misses)
	if b, ok := study.Best(); ok {
		sets, _ := cfg.Space.Sets(b.Params)
		fmt.Fprintf(stdout, "best %s %.6g: trial %d (%s), run dir %s\n", cfg.Metric, b.Value, b.Number, strings.Join(sets, " "), filepath.Join(cfg.Dir, sweep.TrialDir(b.Number)))
	}
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
	if step, _, ok := t.LastReport(); ok {
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
