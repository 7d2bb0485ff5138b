// Package cli is the nitro command line as a library: a user's own main registers experiments
// and calls Main to get the same commands the nitro binary has (train, evaluate, list, info, ls,
// setup).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/compilecache"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/core/backend"
	"github.com/nitro-go/nitro/logjson"
	"github.com/nitro-go/nitro/markers"
)

// entry is a registered experiment type.
type entry struct {
	name, doc string
	build     func(preset string) (any, error)
	presets   func() map[string]map[string]any
}

var registry = map[string]entry{}

// Register makes experiment type E available to the CLI under name. Construction goes through
// markers (defaults, presets, validated overrides), so every CLI-built experiment is checked the
// same way a Go caller's is.
func Register[E any](name, doc string) {
	registry[name] = entry{
		name: name, doc: doc,
		build: func(preset string) (any, error) {
			if preset != "" {
				return markers.FromPreset[E](preset, nil)
			}
			return markers.New[E](nil)
		},
		presets: markers.Presets[E],
	}
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// Main runs the CLI with args (without the program name) and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if err := run(args, stdout, stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "nitro:", err)
		return 1
	}
	return 0
}

const usage = `usage: nitro <command> [arguments]

commands:
  train <experiment> [--preset P] [--set field=value]... [--max-epochs N] [--backend xla|go] [--quiet]
        [--run-dir DIR] [--no-log] [--log-every N] [--resume auto|PATH] [--no-checkpoints]
        set up, train, validate each epoch, then report the test split; the run's record goes to
        <run dir>/metrics.jsonl (default run dir: runs/<Experiment>), one line per step, and a
        checkpoint per epoch into the run dir (the 3 best by val_loss plus the newest);
        --resume auto continues from the run dir's newest checkpoint (none: a fresh run)
  evaluate <experiment> [--split test] [--checkpoint PATH|RUN_DIR] [same flags]
        set up and evaluate one split, with the weights of a checkpoint (a run dir: its newest),
        else as BuildModel initializes them; it keeps no metrics.jsonl and writes no checkpoint
  list  the registered experiments and their presets
  info <experiment>|<checkpoint file>
        the experiment's fields: kind, type, default, doc; or what a checkpoint says about itself
        (epoch, step, preset, run id, stop reason, metrics), read from its header alone
  ls <run dir>
        the run dir's checkpoints, one line each, from its manifest (no checkpoint is opened)
  setup [--dir DIR] [--wheel FILE] [--force]
        install the pinned XLA CPU PJRT plugin (default DIR: the user cache folder, nitro/pjrt);
        without it nitro runs on the pure-Go backend, about ten times slower
`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("no command given")
	}
	switch args[0] {
	case "train", "evaluate":
		return runExperiment(args[0], args[1:], stdout, stderr)
	case "list":
		for _, name := range sortedNames() {
			e := registry[name]
			presets := make([]string, 0)
			for p := range e.presets() {
				presets = append(presets, p)
			}
			sort.Strings(presets)
			fmt.Fprintf(stdout, "%-16s %s (presets: %s)\n", name, e.doc, strings.Join(presets, ", "))
		}
		return nil
	case "info":
		if len(args) < 2 {
			return fmt.Errorf("info needs an experiment name or a checkpoint file; registered: %s", strings.Join(sortedNames(), ", "))
		}
		if fi, err := os.Stat(args[1]); err == nil && !fi.IsDir() {
			return checkpointInfo(args[1], stdout)
		}
		e, err := lookup(args[1])
		if err != nil {
			return err
		}
		x, err := e.build("")
		if err != nil {
			return err
		}
		fields, err := markers.ConfigMetadata(x)
		if err != nil {
			return err
		}
		for _, f := range fields {
			fmt.Fprintf(stdout, "%-16s %-10s %-8s default %-8v %s\n", f.Name, f.Kind, f.Type, f.Default, f.Doc)
		}
		return nil
	case "ls":
		if len(args) != 2 {
			return fmt.Errorf("ls needs one run directory, e.g. nitro ls runs/MLP")
		}
		return listCheckpoints(args[1], stdout)
	case "setup":
		return runSetup(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

func lookup(name string) (entry, error) {
	e, ok := registry[name]
	if !ok {
		return e, fmt.Errorf("unknown experiment %q; registered: %s", name, strings.Join(sortedNames(), ", "))
	}
	return e, nil
}

func sortedNames() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func runExperiment(cmd string, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%s needs an experiment name first; registered: %s", cmd, strings.Join(sortedNames(), ", "))
	}
	ent, err := lookup(args[0])
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "", "named preset of the experiment")
	var sets multi
	fs.Var(&sets, "set", "field=value override (repeatable)")
	maxEpochs := fs.Int("max-epochs", -1, "epochs to train (overrides the experiment)")
	backendName := fs.String("backend", "", "force a backend: xla or go (default: xla when the plugin is installed)")
	quiet := fs.Bool("quiet", false, "print only the results")
	fused := fs.Bool("fused", false, "compile each training step as one program (gradient and update); needs accum 1")
	noProgress := fs.Bool("no-progress", false, "no live progress display on stderr (the epoch lines on stdout stay)")
	heartbeat := fs.String("heartbeat", "", "rewrite `FILE` atomically with the run's phase, step, epoch and progress counter, for a supervisor")
	stall := fs.Duration("stall-timeout", 0, "report a stall when no step or eval batch completes for this `long` (x10 while compiling); 0 is off")
	stopOnStall := fs.Bool("stop-on-stall", false, "with --stall-timeout: also request a graceful stop on a stall")
	split := fs.String("split", "test", "split to evaluate (evaluate only)")
	runDir := fs.String("run-dir", "", "the run directory, where metrics.jsonl goes (default: the experiment's, else runs/<Experiment>)")
	noLog := fs.Bool("no-log", false, "keep no metrics.jsonl (train)")
	logEvery := fs.Int("log-every", 1, "write a train line every `N`th optimizer step (train)")
	resume := fs.String("resume", "", "continue a run: `auto` (the run dir's newest checkpoint; none: a fresh run) or a checkpoint PATH (train)")
	noCkpt := fs.Bool("no-checkpoints", false, "write no checkpoints (train)")
	fromCkpt := fs.String("checkpoint", "", "evaluate the weights of this checkpoint `PATH`, or of a RUN_DIR's newest (evaluate)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if cmd != "train" && (*resume != "" || *noCkpt) {
		return fmt.Errorf("--resume and --no-checkpoints are train flags; evaluate a checkpoint with --checkpoint PATH|RUN_DIR")
	}
	if cmd != "evaluate" && *fromCkpt != "" {
		return fmt.Errorf("--checkpoint is an evaluate flag; to continue a run from a checkpoint, use --resume auto|PATH")
	}
	if *logEvery < 1 {
		return fmt.Errorf("--log-every %d: must be >= 1 (1 writes a train line every optimizer step, N every Nth)", *logEvery)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v (flags go after the experiment name)", fs.Args())
	}
	e, err := ent.build(*preset)
	if err != nil {
		return err
	}
	if err := markers.ApplyText(e, sets); err != nil {
		return err
	}
	// The backend first, so that a fallback to pure Go is the first thing said, on stderr. core.New
	// resolves the same name again and gets the same process-wide backend.
	r, err := backend.Resolve(*backendName)
	if err != nil {
		return err
	}
	if r.Warning != "" {
		fmt.Fprintln(stderr, "nitro:", r.Warning)
	}
	opts := []core.Option{core.WithOutput(stdout), core.WithBackend(*backendName), core.WithPreset(*preset)}
	watch, err := startMonitors(monitorFlags{progress: !*noProgress && !*quiet, heartbeat: *heartbeat, stall: *stall, stopOnStall: *stopOnStall}, stderr)
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
	if *maxEpochs >= 0 {
		opts = append(opts, core.WithMaxEpochs(*maxEpochs))
	}
	if *quiet {
		opts = append(opts, core.Quiet())
	}
	if *fused {
		opts = append(opts, core.WithFusedStep())
	}
	if *runDir != "" {
		opts = append(opts, core.WithRunDir(*runDir))
	}
	// The default JSON Lines logger records a training run; evaluate keeps no record.
	if *noLog || cmd != "train" {
		opts = append(opts, core.WithoutLogger())
	} else {
		opts = append(opts, core.WithLogEvery(*logEvery))
	}
	// Training checkpoints into the run dir (core's default TopK); evaluate writes none.
	if *noCkpt || cmd != "train" {
		opts = append(opts, core.WithoutCheckpoints())
	}
	if *resume != "" {
		opts = append(opts, core.WithResume(*resume))
	}
	if *fromCkpt != "" {
		opts = append(opts, core.WithCheckpoint(*fromCkpt))
	}
	n, err := core.New(e, opts...)
	if err != nil {
		return err
	}
	// Ctrl+C is a graceful stop: the epoch breaks at the next step boundary, validates, and the
	// run returns with stop reason "requested". A second Ctrl+C kills the process as usual.
	defer onInterrupt(stderr, n.Interrupt)()
	switch cmd {
	case "train":
		if err := n.Train(); err != nil {
			return err
		}
		watch.settle()
		fmt.Fprintf(stdout, "stopped: %s after %d epochs, %d optimizer steps\n", n.StopReason(), n.Epoch(), n.Step())
		if _, ok := n.Experiment().(interface{ BuildData() (core.Data, error) }); ok {
			if m, err := n.Evaluate("test"); err == nil {
				fmt.Fprintf(stdout, "test:%s\n", fmtMetrics("test_", m))
			} else if !errors.Is(err, core.ErrNoSplit) {
				return err
			}
		}
	case "evaluate":
		m, err := n.Evaluate(*split)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s:%s\n", *split, fmtMetrics(*split+"_", m))
	}
	s := compilecache.Default().Stats()
	fmt.Fprintf(stdout, "compile cache: %d misses, %d hits, %d entries\n", s.Misses, s.Hits, s.Entries)
	if p, ok := logjson.Info(n.Logger())["path"].(string); ok && p != "" {
		fmt.Fprintf(stdout, "metrics: %s\n", p)
	}
	if p := n.LastCheckpoint(); p != "" && cmd == "train" {
		fmt.Fprintf(stdout, "checkpoint: %s\n", p)
	}
	return nil
}

// checkpointInfo prints what a checkpoint says about itself, from its header alone.
func checkpointInfo(path string, stdout io.Writer) error {
	h, err := checkpoint.Info(path)
	if err != nil {
		return err
	}
	row := func(k string, v any) { fmt.Fprintf(stdout, "%-12s %v\n", k, v) }
	orNone := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	values := 0
	for _, t := range h.Tensors {
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		values += n
	}
	row("checkpoint", path)
	row("epoch", h.Epoch)
	row("step", h.Step)
	row("preset", orNone(h.Preset))
	row("run id", orNone(h.RunID))
	if h.RunURL != "" {
		row("run url", h.RunURL)
	}
	row("stop reason", orNone(h.StopReason))
	row("position", fmt.Sprintf("epoch %d, batch %d", h.Position.Epoch, h.Position.Batch))
	names := make([]string, 0, len(h.Metrics))
	for k := range h.Metrics {
		names = append(names, k)
	}
	sort.Strings(names)
	var ms []string
	for _, k := range names {
		ms = append(ms, fmt.Sprintf("%s %.6g", k, h.Metrics[k]))
	}
	row("metrics", orNone(strings.Join(ms, "  ")))
	row("tensors", fmt.Sprintf("%d (%d values)", len(h.Tensors), values))
	row("build", orNone(h.Build))
	return nil
}

// listCheckpoints prints a run dir's manifest, oldest first: file, epoch, step, score, stop reason.
func listCheckpoints(dir string, stdout io.Writer) error {
	entries, err := checkpoint.ReadManifest(dir)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		fmt.Fprintf(stdout, "no checkpoints in %s\n", dir)
		return nil
	}
	for _, e := range entries {
		score := "unscored"
		if e.Score != nil {
			score = fmt.Sprintf("%s %g", e.Metric, *e.Score)
		}
		line := fmt.Sprintf("%-48s epoch %-4d step %-8d %s", e.File, e.Epoch, e.Step, score)
		if e.StopReason != "" {
			line += "  stopped: " + e.StopReason
		}
		fmt.Fprintln(stdout, line)
	}
	return nil
}

// fmtMetrics prints m sorted by name, each labelled prefix+name unless it already starts with
// prefix (test_accuracy, val_loss), so a line says which split it is about. core.ValLoss, the
// Loss fallback of an experiment without a Metrics hook, is named val_loss whatever the split,
// so on another split it prints as <split>_loss.
func fmtMetrics(prefix string, m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		label := k
		if k == core.ValLoss {
			label = "loss"
		}
		if !strings.HasPrefix(label, prefix) {
			label = prefix + label
		}
		fmt.Fprintf(&b, " %s %.4f", label, m[k])
	}
	return b.String()
}
