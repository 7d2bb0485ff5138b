package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/nitro-go/nitro/backend"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/monitors"
	"github.com/nitro-go/nitro/precision"
	"github.com/nitro-go/nitro/promexport"
	"github.com/nitro-go/nitro/schedules"
)

// expFlags are the flags of train and evaluate; each command defines the ones it takes.
type expFlags struct {
	preset      string
	sets        []string
	maxEpochs   int
	maxSteps    int // --max-steps, --val-every, --checkpoint-every: a step-based run
	valEvery    int
	ckptEvery   int
	accum       int
	clipNorm    float64
	backend     string
	quiet       bool
	fused       bool
	independent bool // --independent-ranks
	precision   string
	devices     int
	noProgress  bool
	heartbeat   string
	stall       time.Duration
	stopOnStall bool
	runDir      string
	logFormat   string

	// train
	noLog       bool
	tensorboard bool // --tensorboard (tensorboard.go)
	logEvery    int
	resume      string
	overwrite   bool
	noCkpt      bool
	metricsAddr string
	schedules   []string       // --schedule KEY=SCHEDULE, as given
	runSched    map[string]any // --schedule parsed (checkFlags), for core.WithSchedules

	// evaluate and render
	split    string
	fromCkpt string

	weightsOnly bool // all four: build from the flags, load only the checkpoint's weights

	// render
	count       int
	predictions bool
}

const trainLong = `Sets the experiment up, trains it, validates each epoch, then reports the test split.

The run's record goes to <run dir>/metrics.jsonl (default run dir: the experiment's, else
runs/<Experiment>), one line per optimizer step, and a checkpoint per epoch into the run dir (the
3 best by val_loss plus the newest); --resume auto continues from the run dir's newest checkpoint
(none: a fresh run), and --resume PATH from that checkpoint (a run dir: its newest). A fresh run
into a run dir that holds an earlier run is refused (the two would share one record and one
checkpoint ranking): resume it, pick another --run-dir, or --overwrite it. A resumed
run rebuilds the experiment the checkpoint records (its preset and values: --preset and --set
are not needed again; one of them that contradicts it is refused), and --weights-only instead
starts a new run of the flags' experiment from the checkpoint's weights. The config and binding
reports, one line per epoch (train_* and val_* metrics), notices and warnings go to stdout, readable or as JSON Lines (--log-format); a live
progress display goes to stderr. --tensorboard also writes TensorBoard event files to <run dir>/tb;
--metrics-addr serves Prometheus gauges while it trains. Ctrl+C
stops gracefully after the current step (validating first); a second Ctrl+C kills.`

const evaluateLong = `Sets the experiment up and evaluates one split (--split, default test), with the weights of
a checkpoint (--checkpoint FILE, or a run dir: its newest), else as BuildModel initializes them.
Given a checkpoint, the experiment is the one it was trained with (the preset and values it
records; --weights-only builds the flags' experiment instead and loads the weights into it).
It keeps no metrics.jsonl and writes no checkpoint. Ctrl+C stops at the next batch: the metrics of
the batches evaluated are printed marked "partial: N of M batches", with "stopped: requested", and
the command exits 1; a second Ctrl+C kills.`

// foreignFlags are the other command's flags, with the fix to say when one is given.
var foreignFlags = map[string]map[string]string{
	"train": {
		"checkpoint": "--checkpoint is an evaluate flag; to continue a run from a checkpoint, use --resume auto|PATH",
		"split":      "--split is an evaluate flag; train reports the test split after training",
		"n":          "--n is a render flag: nitro render <experiment> --n N",
	},
	"evaluate": {
		"resume":         "--resume and --no-checkpoints are train flags; evaluate a checkpoint with --checkpoint PATH|RUN_DIR",
		"no-checkpoints": "--resume and --no-checkpoints are train flags; evaluate a checkpoint with --checkpoint PATH|RUN_DIR",
		"no-log":         "--no-log is a train flag; evaluate keeps no metrics.jsonl",
		"tensorboard":    "--tensorboard is a train flag; evaluate keeps no record",
		"overwrite":      "--overwrite is a train flag; evaluate writes nothing into the run dir",
		"log-every":      "--log-every is a train flag; evaluate keeps no metrics.jsonl",
		"metrics-addr":   "--metrics-addr is a train flag",
		"accum":          "--accum and --clip-norm are train flags; evaluation takes no optimizer step",
		"clip-norm":      "--accum and --clip-norm are train flags; evaluation takes no optimizer step",
		"max-epochs":     "--max-epochs and --fused are train flags; evaluation takes no optimizer step",
		"fused":          "--max-epochs and --fused are train flags; evaluation takes no optimizer step",
		"schedule":       "--schedule is a train flag; evaluation takes no optimizer step",
		"predictions":    "--predictions is a render flag: nitro render <experiment> --predictions",
	},
	"render": {
		"resume":       "--resume is a train flag; render a checkpoint's predictions with --checkpoint PATH|RUN_DIR --predictions",
		"no-log":       "--no-log is a train flag; render keeps no metrics.jsonl",
		"tensorboard":  "--tensorboard is a train flag; render keeps no record",
		"overwrite":    "--overwrite is a train flag; render writes no run record",
		"metrics-addr": "--metrics-addr is a train flag",
		"accum":        "--accum and --clip-norm are train flags; render takes no optimizer step",
		"clip-norm":    "--accum and --clip-norm are train flags; render takes no optimizer step",
		"max-epochs":   "--max-epochs and --fused are train flags; render takes no optimizer step",
		"fused":        "--max-epochs and --fused are train flags; render takes no optimizer step",
		"schedule":     "--schedule is a train flag; render takes no optimizer step",
	},
}

// newExperimentCmd builds train, evaluate or render.
func newExperimentCmd(name string, stdout, stderr io.Writer) *cobra.Command {
	f := &expFlags{}
	c := &cobra.Command{
		Use:               name + " <experiment> [flags]",
		ValidArgsFunction: experimentNames,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("%s needs an experiment name; registered: %s", name, strings.Join(sortedNames(), ", "))
			}
			if len(args) > 1 {
				return fmt.Errorf("unexpected arguments %v (%s takes one experiment name; flags may go before or after it)", args[1:], name)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return runExperiment(c, name, args[0], f, stdout, stderr) },
	}
	switch name {
	case "train":
		c.Short = "set up, train, validate each epoch, then report the test split"
		c.Long = trainLong
	case "render":
		c.Short = "draw a split's first samples (and predictions) to a PNG through the Visualize hook"
		c.Long = renderLong
	default:
		c.Short = "set up and evaluate one split, optionally with a checkpoint's weights"
		c.Long = evaluateLong
	}
	fs := c.Flags()
	fs.SortFlags = false
	fs.StringVar(&f.preset, "preset", "", "the experiment's preset `NAME` (nitro list shows them)")
	fs.StringArrayVar(&f.sets, "set", nil, "override an experiment field: `FIELD=VALUE` (repeatable)")
	if name == "train" {
		fs.IntVar(&f.maxEpochs, "max-epochs", 0, "epochs to train, `N` >= 0 (default: the experiment's)")
		fs.IntVar(&f.maxSteps, "max-steps", 0, "optimizer steps to train, `N` >= 1, instead of epochs (default: the experiment's MaxSteps, else its epochs)")
		fs.IntVar(&f.valEvery, "val-every", 0, "validate, report and checkpoint every `N` optimizer steps instead of at epoch ends (default: the experiment's ValEvery, else each epoch)")
		fs.IntVar(&f.ckptEvery, "checkpoint-every", 0, "checkpoint every `N` optimizer steps, a multiple of --val-every (default: at every validation)")
	}
	fs.StringVar(&f.backend, "backend", "", "force a `BACKEND`: xla, cuda or go (default: cuda when its plugin is installed, else xla when the CPU plugin is)")
	fs.StringVar(&f.runDir, "run-dir", "", "the run directory `DIR` (default: the experiment's, else runs/<Experiment>)")
	if name == "train" {
		fs.BoolVar(&f.noLog, "no-log", false, "keep no metrics.jsonl")
		fs.BoolVar(&f.tensorboard, "tensorboard", false, tensorBoardUsage)
		fs.IntVar(&f.logEvery, "log-every", 1, "write a train line every `N`th optimizer step")
		fs.IntVar(&f.accum, "accum", 0, "accumulate the gradients of `N` >= 1 micro-batches per optimizer step (default: the experiment's Accum, else 1)")
		fs.Float64Var(&f.clipNorm, "clip-norm", 0, "clip the gradients' global norm to `X` > 0; 0 is off (default: the experiment's GradientClipNorm, else off)")
		fs.StringVar(&f.resume, "resume", "", "continue a run from `WHERE`: auto (the run dir's newest checkpoint; none: a fresh run) or a checkpoint PATH")
		fs.BoolVar(&f.overwrite, "overwrite", false, "start afresh in a run dir that holds an earlier run: remove its metrics.jsonl, checkpoints and manifest, the TensorBoard event files in tb/ (and plots/, when nitro plot drew it) first; other files stay")
		fs.StringArrayVar(&f.schedules, "schedule", nil, "override the experiment's schedule of one key for this run: `KEY=SCHEDULE` (repeatable), e.g. eta=cosine:0.05,0; SCHEDULE is a number, constant:v, linear:from,to, cosine:peak,floor, warmup_cosine:frac,peak,floor, warmup_cosine_steps:steps,peak,floor, step_decay:initial,factor,every or piecewise:v,step,v[,step,v...]")
		fs.BoolVar(&f.noCkpt, "no-checkpoints", false, "write no checkpoints")
		fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus gauges on http://`ADDR`/metrics while training (e.g. 127.0.0.1:9090; port 0 picks one)")
	} else {
		fs.StringVar(&f.split, "split", "test", "the `SPLIT` to "+name)
		fs.StringVar(&f.fromCkpt, "checkpoint", "", name+" the weights of this checkpoint `PATH`, or of a RUN_DIR's newest; it rebuilds the experiment it was trained with")
	}
	fs.BoolVar(&f.weightsOnly, "weights-only", false, weightsOnlyUsage)
	if name == "render" {
		renderFlags(c, f)
	}
	if name == "train" {
		fs.BoolVar(&f.fused, "fused", false, "compile each training step as one program (gradient and update); needs accum 1")
	}
	fs.StringVar(&f.precision, "mixed-precision", "", "`MODE` of Forward's compute: bf16 (float32 parameters, optimizer state and loss; bfloat16 matmuls and convolutions) or f32 (default)")
	fs.BoolVar(&f.independent, "independent-ranks", false, "under a launcher whose processes share no collective (srun without MPI, torchrun, JAX_* variables, an indexed Job), let each process train a model of its own (a sweep); without it such a launch is refused")
	fs.IntVar(&f.devices, "devices", 0, "run data-parallel on `N` local devices, the batch size global (default: the experiment's Devices, else 1 on the CPU; $NITRO_CPU_DEVICES sets how many CPU devices there are)")
	fs.StringVar(&f.logFormat, "log-format", formatConsole, "`FORMAT` of the reports, epoch lines, notices, warnings and results on stdout: console or json (JSON Lines)")
	fs.BoolVar(&f.quiet, "quiet", false, "print only the results")
	fs.BoolVar(&f.noProgress, "no-progress", false, "no live progress display on stderr (the epoch lines on stdout stay)")
	fs.StringVar(&f.heartbeat, "heartbeat", "", "rewrite `FILE` atomically with the run's phase, step, epoch and progress counter, for a supervisor")
	fs.DurationVar(&f.stall, "stall-timeout", 0, "report a stall when no step or eval batch completes for this `DURATION` (x10 while compiling or writing a checkpoint); 0 is off")
	fs.BoolVar(&f.stopOnStall, "stop-on-stall", false, "with --stall-timeout: also request a graceful stop on a stall")
	c.SetFlagErrorFunc(unknownFlagHints(foreignFlags[name]))

	complete := func(values ...string) func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return values, cobra.ShellCompDirectiveNoFileComp
		}
	}
	_ = c.RegisterFlagCompletionFunc("backend", complete("xla", "go"))
	_ = c.RegisterFlagCompletionFunc("log-format", complete(formatConsole, formatJSON))
	_ = c.RegisterFlagCompletionFunc("mixed-precision", complete(string(precision.BF16), string(precision.F32)))
	_ = c.RegisterFlagCompletionFunc("preset", func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		if len(args) > 0 {
			if e, ok := registry[args[0]]; ok {
				for p := range e.presets() {
					out = append(out, p)
				}
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	})
	_ = c.RegisterFlagCompletionFunc("run-dir", dirsOnly)
	return c
}

// checkFlags refuses what the flag types let through: a value out of range, an empty value
// where empty would silently mean "not given", an option without the one it needs, and a
// --run-dir that training cannot write into.
func checkFlags(c *cobra.Command, f *expFlags) error {
	changed := c.Flags().Changed
	if changed("max-epochs") && f.maxEpochs < 0 {
		return fmt.Errorf("--max-epochs %d: must be >= 0 (leave it out to train the experiment's own epoch count)", f.maxEpochs)
	}
	for _, k := range []struct {
		flag string
		v    int
	}{{"max-steps", f.maxSteps}, {"val-every", f.valEvery}, {"checkpoint-every", f.ckptEvery}} {
		if changed(k.flag) && k.v < 0 {
			return fmt.Errorf("--%s %d: must be >= 0 (0 turns it off; leave it out for the experiment's own)", k.flag, k.v)
		}
	}
	if changed("accum") && f.accum < 1 {
		return fmt.Errorf("--accum %d: must be >= 1 (1 steps the optimizer on every batch, N on every Nth)", f.accum)
	}
	if changed("clip-norm") && !(f.clipNorm >= 0 && !math.IsInf(f.clipNorm, 1)) {
		return fmt.Errorf("--clip-norm %v: must be a finite number >= 0 (0 turns clipping off)", f.clipNorm)
	}
	if changed("devices") && f.devices < 1 {
		return fmt.Errorf("--devices %d: must be >= 1 (leave it out for the experiment's own, else 1 on the CPU)", f.devices)
	}
	if changed("log-every") && f.logEvery < 1 {
		return fmt.Errorf("--log-every %d: must be >= 1 (1 writes a train line every optimizer step, N every Nth)", f.logEvery)
	}
	for _, name := range []string{"preset", "backend", "run-dir", "resume", "checkpoint", "split", "heartbeat", "metrics-addr"} {
		if fl := c.Flags().Lookup(name); fl != nil && fl.Changed && fl.Value.String() == "" {
			return fmt.Errorf("--%s: empty value (leave the flag out for the default)", name)
		}
	}
	// Refused here, in flags, before core would refuse the options they become (in Go names).
	if f.overwrite && f.resume != "" {
		return fmt.Errorf("--overwrite with --resume %s: --overwrite discards the run dir's earlier run and starts afresh, --resume continues a run; drop one of them", f.resume)
	}
	if f.resume == core.ResumeAuto && f.noCkpt {
		return fmt.Errorf("--resume auto finds the newest checkpoint through the run's checkpoints, which --no-checkpoints turns off: resume from a file with --resume PATH, or drop --no-checkpoints")
	}
	if err := checkRenderFlags(c, f); err != nil {
		return err
	}
	if err := parseScheduleFlags(f); err != nil {
		return err
	}
	if err := checkLogFormat(f.logFormat); err != nil {
		return err
	}
	if _, err := precision.Parse(f.precision); err != nil {
		return fmt.Errorf("--mixed-precision: %w", err)
	}
	// The run dir is probed now, before the data, the compiles and an epoch, when this run writes
	// there (metrics.jsonl, checkpoints); core probes it again, under its own name, RunDir. Only
	// rank 0 writes there, and only rank 0 probes: the probe removes the folders it created, so
	// two ranks probing a new run dir at once could remove it under each other's probe.
	if f.runDir != "" && c.Name() == "train" && (!f.noLog || !f.noCkpt || f.tensorboard) && probesRunDir() {
		if err := core.CheckRunDir(f.runDir); err != nil {
			return fmt.Errorf("--run-dir %s: %w; the run's metrics.jsonl and checkpoints go there: give a writable directory (or --no-log and --no-checkpoints to write nothing)", f.runDir, err)
		}
	}
	return nil
}

// cacheStats is the process-level compile cache's hits and misses, for the Prometheus exporter.
func cacheStats() (hits, misses uint64) {
	s := compilecache.Default().Stats()
	return uint64(s.Hits), uint64(s.Misses)
}

func runExperiment(c *cobra.Command, cmd, expName string, f *expFlags, stdout, stderr io.Writer) (err error) {
	ent, err := lookup(expName)
	if err != nil {
		return err
	}
	if err := checkFlags(c, f); err != nil {
		return err
	}
	withDist, endDist, err := distOption(cmd, stderr) // dist.go: the rank (and MPI), before any work
	if err != nil {
		return err
	}
	defer func() { endDist(err) }()
	// Given a checkpoint, the experiment is the one it was trained with (fromckpt.go), built with
	// the Nitro below; else, or with --weights-only, the flags build it now.
	from, resume, err := checkpointSource(ent, f)
	if err != nil {
		return err
	}
	if f.weightsOnly && from == "" {
		return errors.New("--weights-only loads a checkpoint's weights into the experiment the flags give: name the checkpoint (evaluate and render: --checkpoint PATH; train: --resume PATH)")
	}
	var e any
	if from == "" || f.weightsOnly {
		if e, err = ent.configure(f.preset, f.sets); err != nil {
			return err
		}
	}
	// The backend first, so that a fallback to pure Go is the first thing said, on stderr. core.New
	// resolves the same name again and gets the same process-wide backend.
	r, err := backend.Resolve(f.backend)
	if err != nil {
		return err
	}
	if r.Warning != "" {
		fmt.Fprintln(stderr, "nitro:", r.Warning)
	}

	// The framework's own diagnostics (reports, epoch lines, notices, warnings) and the CLI's
	// results go through zap on stdout; under --quiet only the results, and warnings go to stderr.
	zl, err := newDiagnostics(stdout, f.logFormat)
	if err != nil {
		return err
	}
	defer func() { _ = zl.Sync() }() // syncing a terminal fails harmlessly
	res := results{z: zl, text: f.logFormat == formatConsole}
	opts, err := diagnosticOptions(f, zl, stderr)
	if err != nil {
		return err
	}
	opts = append(opts, withDist...)

	watch, err := startMonitors(monitorFlags{progress: !f.noProgress && !f.quiet, heartbeat: f.heartbeat, stall: f.stall, stopOnStall: f.stopOnStall}, stderr)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := watch.close(); cerr != nil {
			fmt.Fprintln(stderr, "nitro: closing monitors:", cerr)
		}
	}()
	for _, m := range watch.monitors {
		opts = append(opts, core.WithMonitor(m))
	}
	if m, ok := e.(monitors.Monitor); ok { // an experiment that logs from a phase monitor (mnist's confusion matrix)
		opts = append(opts, core.WithMonitor(m))
	}
	opts = append(opts, runOptions(c, f)...)
	logOpts, closeLog, err := loggerOptions(cmd, e, f, stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	opts = append(opts, logOpts...)
	// Training checkpoints into the run dir (core's default TopK); evaluate writes none.
	if f.noCkpt || cmd != "train" {
		opts = append(opts, core.WithoutCheckpoints())
	}
	n, err := openRun(ent, e, f, from, resume, opts)
	if err != nil {
		return err
	}
	if f.overwrite && (!f.noLog || !f.noCkpt) && n.Dist().IsRank0() { // core removed the rest
		if msg := clearPlots(n.RunDir()); msg != "" && !f.quiet {
			zl.Info(msg)
		}
	}
	// Ctrl+C is a graceful stop. Training breaks the epoch at the next step boundary, validates,
	// and returns with stop reason "requested"; evaluation stops at the next batch boundary and
	// reports its partial metrics, and the command fails with the stop reason. A second Ctrl+C
	// kills the process as usual.
	next := "stopping after this step, then validating"
	if cmd == "evaluate" {
		next = "stopping after this batch; the metrics will be partial"
	} else if cmd == "render" {
		next = "render draws its samples to the end"
	}
	defer onInterrupt(stderr, next, n.Interrupt)()
	if err := runVerb(cmd, n, f, res, watch); err != nil {
		return err
	}
	s := compilecache.Default().Stats()
	// The in-process cache's counts, then the plugin's: compiled, or loaded from the disk cache.
	compiled, fromDisk := backend.CompileCounts()
	res.say(fmt.Sprintf("in-process compile cache: %d misses, %d hits, %d entries; plugin: %d compiled, %d from disk", s.Misses, s.Hits, s.Entries, compiled, fromDisk),
		"compile cache", zap.Int("misses", s.Misses), zap.Int("hits", s.Hits), zap.Int("entries", s.Entries),
		zap.Int64("compiled", compiled), zap.Int64("from_disk", fromDisk))
	if p := n.MetricsPath(); p != "" {
		res.say("metrics: "+p, "metrics file", zap.String("path", p))
	}
	if w := tensorBoardWriter(n.Logger()); w != nil && w.Dir() != "" {
		res.say("tensorboard: "+w.Dir(), "tensorboard events", zap.String("path", w.Dir()))
	}
	if p := n.LastCheckpoint(); p != "" && cmd == "train" {
		res.say("checkpoint: "+p, "checkpoint", zap.String("path", p))
	}
	return nil
}

// diagnosticOptions route the framework's reports, epoch lines, notices and warnings through zl,
// or under --quiet none of them but the warnings, to stderr; and pass the backend and preset flags.
func diagnosticOptions(f *expFlags, zl *zap.Logger, stderr io.Writer) ([]core.Option, error) {
	opts := []core.Option{core.WithBackend(f.backend)}
	if f.preset != "" {
		opts = append(opts, core.WithPreset(f.preset))
	}
	if !f.quiet {
		return append(opts, core.WithConsole(zapConsole{z: zl, text: f.logFormat == formatConsole}), core.WithWarn(unlessFallback(zl))), nil
	}
	zw, err := newDiagnostics(stderr, f.logFormat)
	if err != nil {
		return nil, err
	}
	return append(opts, core.Quiet(), core.WithWarn(unlessFallback(zw))), nil
}

// unlessFallback warns through z, but for core's pure-Go fallback warning: the command said it
// already, on stderr, before anything else.
func unlessFallback(z *zap.Logger) func(string) {
	return func(msg string) {
		if msg != strings.TrimPrefix(backend.FallbackWarning, "warning: ") {
			z.Warn(msg)
		}
	}
}

// runOptions are the run options the flags set; a flag left out leaves the experiment's own value.
func runOptions(c *cobra.Command, f *expFlags) []core.Option {
	changed := c.Flags().Changed
	var opts []core.Option
	if changed("max-epochs") {
		opts = append(opts, core.WithMaxEpochs(f.maxEpochs))
	}
	if changed("max-steps") {
		opts = append(opts, core.WithMaxSteps(f.maxSteps))
	}
	if changed("val-every") {
		opts = append(opts, core.WithValEvery(f.valEvery))
	}
	if changed("checkpoint-every") {
		opts = append(opts, core.WithCheckpointEvery(f.ckptEvery))
	}
	if changed("accum") {
		opts = append(opts, core.WithAccum(f.accum))
	}
	if changed("clip-norm") {
		opts = append(opts, core.WithGradientClipNorm(f.clipNorm))
	}
	if f.independent {
		opts = append(opts, core.WithIndependentRanks())
	}
	if f.fused {
		opts = append(opts, core.WithFusedStep())
	}
	if f.precision != "" {
		opts = append(opts, core.WithMixedPrecision(f.precision))
	}
	if changed("devices") {
		opts = append(opts, core.WithDevices(f.devices))
	}
	if f.runDir != "" {
		opts = append(opts, core.WithRunDir(f.runDir))
	}
	if f.overwrite {
		opts = append(opts, core.WithOverwrite())
	}
	if len(f.runSched) > 0 {
		opts = append(opts, core.WithSchedules(f.runSched))
	}
	return opts
}

// parseScheduleFlags reads each --schedule KEY=SCHEDULE into f.runSched: the text through
// schedules.Parse, a key given twice refused. Whether the key binds is core's to say, as for the
// experiment's own Schedules().
func parseScheduleFlags(f *expFlags) error {
	for _, kv := range f.schedules {
		key, text, ok := strings.Cut(kv, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return fmt.Errorf("--schedule %q: write KEY=SCHEDULE, e.g. --schedule eta=cosine:0.05,0", kv)
		}
		if _, dup := f.runSched[key]; dup {
			return fmt.Errorf("--schedule %s is given twice: keep one", key)
		}
		p, err := schedules.Parse(text)
		if err != nil {
			return fmt.Errorf("--schedule %s: %w", key, err)
		}
		if f.runSched == nil {
			f.runSched = map[string]any{}
		}
		f.runSched[key] = p
	}
	return nil
}

// loggerOptions are the run's loggers: a training run keeps the record its experiment chooses
// (core.LoggerChooser), else the default JSON Lines logger (core places either in the run dir),
// with --tensorboard TensorBoard's event files beside it (tensorboard.go), and the Prometheus
// exporter with --metrics-addr; evaluate and render keep no record. The returned func closes the
// exporter.
func loggerOptions(cmd string, e any, f *expFlags, stderr io.Writer) ([]core.Option, func(), error) {
	if cmd != "train" || (f.noLog && f.metricsAddr == "" && !f.tensorboard) {
		return []core.Option{core.WithoutLogger()}, func() {}, nil
	}
	opts := []core.Option{core.WithLogEvery(f.logEvery)}
	if f.metricsAddr == "" && !f.tensorboard {
		return opts, func() {}, nil // core picks the logger
	}
	var loggers []logjson.Logger
	if !f.noLog {
		var record logjson.Logger = logjson.NewJSONLogger("")
		if c, ok := e.(core.LoggerChooser); ok {
			record = c.Logger()
		}
		if record != nil {
			loggers = append(loggers, record)
		}
	}
	if f.tensorboard {
		loggers = withTensorBoard(loggers)
	}
	closeExp := func() {}
	if f.metricsAddr != "" {
		exp, err := promexport.New(promexport.Options{Addr: f.metricsAddr, CacheStats: cacheStats})
		if err != nil {
			return nil, nil, fmt.Errorf("--metrics-addr %s: %w", f.metricsAddr, err)
		}
		closeExp = func() {
			if cerr := exp.Close(); cerr != nil {
				fmt.Fprintln(stderr, "nitro: closing the metrics endpoint:", cerr)
			}
		}
		fmt.Fprintf(stderr, "nitro: metrics endpoint: http://%s/metrics\n", exp.Addr())
		loggers = append(loggers, exp)
		opts = append(opts, core.WithMonitor(exp))
	}
	var logger logjson.Logger = logjson.Multi(loggers...)
	if len(loggers) == 1 {
		logger = loggers[0]
	}
	return append(opts, core.WithLogger(logger)), closeExp, nil
}

// runVerb runs the command's verb on the opened run and reports its results: train, then the
// test split when the experiment has one; evaluate's split; render's samples.
func runVerb(cmd string, n *core.Nitro, f *expFlags, res results, watch *watchers) error {
	e := n.Experiment()
	switch cmd {
	case "train":
		if err := n.Train(); err != nil {
			return err
		}
		watch.settle()
		res.say(fmt.Sprintf("stopped: %s after %d epochs, %d optimizer steps", n.StopReason(), n.Epoch(), n.Step()),
			"stopped", zap.String("reason", string(n.StopReason())), zap.Int("epochs", n.Epoch()), zap.Int("steps", n.Step()))
		if !hasBuildData(e) {
			return nil
		}
		m, err := n.Evaluate("test")
		if err == nil {
			sayMetrics(res, "test", m)
			sayConfusion(res, e, "test")
		} else if !errors.Is(err, core.ErrNoSplit) {
			return sayPartial(res, watch, m, err)
		}
	case "evaluate":
		m, err := n.Evaluate(f.split)
		if err != nil {
			return sayPartial(res, watch, m, err)
		}
		sayMetrics(res, f.split, m)
		sayConfusion(res, e, f.split)
	case "render":
		return renderSplit(res, n, f)
	}
	return nil
}

// sayPartial reports an evaluation that an interrupt cut short, its metrics marked partial
// ("test (partial: 3 of 10 batches): test_loss ...", and "stopped: requested ..."), and returns
// the error the command fails with, so the exit status says the split was not evaluated; any
// other error is returned as it is.
func sayPartial(res results, watch *watchers, m map[string]float64, err error) error {
	var pe *core.PartialError
	if !errors.As(err, &pe) {
		return err
	}
	watch.settle()
	part := fmt.Sprintf("partial: %d of %d batches", pe.Batches, pe.Total)
	res.say(fmt.Sprintf("stopped: %s after %d of %d batches of split %s", pe.Reason, pe.Batches, pe.Total, pe.Split),
		"stopped", zap.String("reason", string(pe.Reason)), zap.String("split", pe.Split), zap.Int("batches", pe.Batches), zap.Int("total", pe.Total))
	fields := []zap.Field{zap.String("split", pe.Split), zap.Bool("partial", true), zap.Int("batches", pe.Batches), zap.Int("total", pe.Total)}
	fields = append(fields, floatFields(prefixed(pe.Split+"_", m, true))...)
	res.say(pe.Split+" ("+part+"):"+fmtMetrics(pe.Split+"_", m), "evaluation", fields...)
	return err
}

// sayMetrics reports a split's metrics: "test: test_accuracy 0.9696 test_loss 0.0976", or in
// JSON {"msg":"evaluation","split":"test","test_accuracy":0.9696,...}.
func sayMetrics(res results, split string, m map[string]float64) {
	fields := append([]zap.Field{zap.String("split", split)}, floatFields(prefixed(split+"_", m, true))...)
	res.say(split+":"+fmtMetrics(split+"_", m), "evaluation", fields...)
}
