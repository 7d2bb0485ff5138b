// Package cli is the nitro command line as a library: a user's own main registers experiments
// and calls Main to get the same commands the nitro binary has (train, evaluate, render, export,
// run-bundle, serve, list, info, ls, plot, board, data convert, setup, new, completion). It is built on github.com/spf13/cobra: every command
// has its own help and flags, flags may come before or after the arguments, and a bad flag
// value is an error naming the flag.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/checkpoint"
	"github.com/nitro-go/nitro/core"
	"github.com/nitro-go/nitro/markers"
)

// entry is a registered experiment type.
type entry struct {
	name, doc string
	build     func(preset string) (any, error)
	presets   func() map[string]map[string]any
	// fromCkpt builds the experiment a checkpoint was trained with (fromckpt.go).
	fromCkpt func(path string, sets []string, opts ...core.Option) (*core.Nitro, error)
}

var registry = map[string]entry{}

// configure builds the experiment from its preset (none: its defaults) and applies the
// --set overrides, each checked against the experiment's fields.
func (e entry) configure(preset string, sets []string) (any, error) {
	x, err := e.build(preset)
	if err != nil {
		return nil, err
	}
	if err := markers.ApplyText(x, sets); err != nil {
		return nil, err
	}
	return x, nil
}

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
		presets:  markers.Presets[E],
		fromCkpt: fromCheckpoint[E],
	}
}

// Main runs the CLI with args (without the program name) and returns the process exit code: 0
// on success and for help, 1 on an error, which it prints on stderr after "nitro: ".
func Main(args []string, stdout, stderr io.Writer) int {
	return MainContext(context.Background(), args, stdout, stderr)
}

// MainContext is Main under ctx: a command that runs until stopped (serve) also stops, as on
// SIGINT or SIGTERM, when ctx is done.
func MainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		msg := strings.TrimRight(err.Error(), "\n")
		if strings.HasPrefix(msg, "unknown command") {
			msg += "\n(run nitro --help for the commands)"
		}
		fmt.Fprintln(stderr, "nitro:", msg)
		return 1
	}
	return 0
}

// commandOrder is the order the root help lists the commands in; others (completion, help)
// follow.
var commandOrder = []string{"train", "evaluate", "render", "export", "run-bundle", "serve", "list", "info", "ls", "plot", "board", "data", "setup", "new"}

// newRoot builds the command tree; each Main call gets its own, so flag values never leak from
// one call into the next.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "nitro",
		Short: "train, evaluate and inspect nitro experiments",
		// No arguments: the usage, and exit status 1, as for any other mistake.
		RunE: func(c *cobra.Command, args []string) error {
			writeRootHelp(stderr, c)
			return fmt.Errorf("no command given")
		},
		SilenceErrors: true, // Main prints the error once, its own way
		SilenceUsage:  true, // an error is not a reason to print the whole usage
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetHelpFunc(help)
	root.SetUsageFunc(func(c *cobra.Command) error { help(c, nil); return nil })
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newExperimentCmd("train", stdout, stderr),
		newExperimentCmd("evaluate", stdout, stderr),
		newExperimentCmd("render", stdout, stderr),
		newExportCmd(stdout, stderr),
		newRunBundleCmd(stdout),
		newServeCmd(stdout, stderr),
		newListCmd(stdout),
		newInfoCmd(stdout),
		newLsCmd(stdout),
		newPlotCmd(stdout, stderr),
		newBoardCmd(stdout, stderr),
		newDataCmd(stdout),
		newSetupCmd(stdout, stderr),
		newNewCmd(stdout, stderr),
	)
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args, c.RunE = cobra.ArbitraryArgs, completionShells
		}
	}
	return root
}

// completionShells runs when `completion` is given no shell it knows: cobra's own command would
// print its usage and exit 0, as if `completion tcsh` had written a script.
func completionShells(c *cobra.Command, args []string) error {
	var shells []string
	for _, s := range available(c) {
		shells = append(shells, s.Name())
	}
	list := strings.Join(shells, ", ")
	if len(args) == 0 {
		return fmt.Errorf("completion needs a shell: one of %s (e.g. nitro completion bash)", list)
	}
	return fmt.Errorf("completion: unknown shell %q: nitro writes completion scripts for %s", args[0], list)
}

// help prints c's help: on stdout, except a subcommand's -h/--help, which goes to stderr as the
// flag package's usage did (so `nitro train --help` never mixes into a pipe of results), while
// `nitro help train` goes to stdout.
func help(c *cobra.Command, _ []string) {
	w := c.OutOrStdout()
	if f := c.Flags().Lookup("help"); c.HasParent() && f != nil && f.Changed {
		w = c.ErrOrStderr()
	}
	if !c.HasParent() {
		writeRootHelp(w, c)
		return
	}
	fmt.Fprintf(w, "usage: %s\n", c.UseLine())
	if text := strings.TrimSpace(c.Long); text != "" {
		fmt.Fprintf(w, "\n%s\n", text)
	} else if c.Short != "" {
		fmt.Fprintf(w, "\n%s\n", c.Short)
	}
	if subs := available(c); len(subs) > 0 {
		fmt.Fprintf(w, "\ncommands:\n")
		for _, s := range subs {
			fmt.Fprintf(w, "  %-12s %s\n", s.Name(), s.Short)
		}
	}
	if c.HasAvailableLocalFlags() {
		fmt.Fprintf(w, "\nflags:\n%s", c.LocalFlags().FlagUsages())
	}
	if c.HasAvailableInheritedFlags() {
		fmt.Fprintf(w, "\nglobal flags:\n%s", c.InheritedFlags().FlagUsages())
	}
	if len(available(c)) > 0 {
		fmt.Fprintf(w, "\nRun \"%s <command> --help\" for a command's flags.\n", c.CommandPath())
	}
}

// writeRootHelp lists the commands, each with its arguments and what it does.
func writeRootHelp(w io.Writer, root *cobra.Command) {
	fmt.Fprintf(w, "nitro: %s\n\nusage: nitro <command> [arguments] [flags]\n\ncommands:\n", root.Short)
	for _, c := range ordered(root) {
		short := c.Short
		if subs := available(c); len(subs) == 1 {
			short = subs[0].Short
		}
		fmt.Fprintf(w, "  %s\n        %s\n", synopsis(c), short)
	}
	fmt.Fprintf(w, "\nFlags may come before or after the arguments. Run \"nitro <command> --help\" (or\n\"nitro help <command>\") for a command's flags.\n")
}

// ordered is root's available commands (and help) in commandOrder, then the rest by name.
func ordered(root *cobra.Command) []*cobra.Command {
	rank := func(c *cobra.Command) int {
		for i, n := range commandOrder {
			if c.Name() == n {
				return i
			}
		}
		return len(commandOrder)
	}
	var cmds []*cobra.Command
	for _, c := range root.Commands() {
		if c.IsAvailableCommand() || c.Name() == "help" {
			cmds = append(cmds, c)
		}
	}
	sort.SliceStable(cmds, func(i, j int) bool {
		ri, rj := rank(cmds[i]), rank(cmds[j])
		if ri != rj {
			return ri < rj
		}
		return cmds[i].Name() < cmds[j].Name()
	})
	return cmds
}

// synopsis is a command's use line within the root help: its Use, or for a command that only
// groups others, its name and theirs ("completion bash|fish|powershell|zsh").
func synopsis(c *cobra.Command) string {
	subs := available(c)
	if len(subs) == 0 {
		return c.Use
	}
	uses := make([]string, len(subs))
	for i, s := range subs {
		uses[i] = s.Use
	}
	return c.Name() + " " + strings.Join(uses, "|")
}

func available(c *cobra.Command) []*cobra.Command {
	var subs []*cobra.Command
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() {
			subs = append(subs, s)
		}
	}
	return subs
}

// flagError adds a hint to pflag's errors where the fix is not obvious: a long flag given with
// one dash (the flag package took -preset; pflag reads it as the shorthands -p -r -e ...).
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if i := strings.Index(msg, " in -"); strings.HasPrefix(msg, "unknown shorthand flag") && i >= 0 {
		name := strings.SplitN(msg[i+len(" in -"):], "=", 2)[0]
		if c.Flags().Lookup(name) != nil {
			return fmt.Errorf("%s: %w (long flags take two dashes: --%s)", c.Name(), err, name)
		}
	}
	return fmt.Errorf("%s: %w (see %s --help)", c.Name(), err, c.CommandPath())
}

// unknownFlagHints adds, to an unknown-flag error, the fix for a flag that belongs to another
// command (evaluate --resume, train --checkpoint).
func unknownFlagHints(hints map[string]string) func(*cobra.Command, error) error {
	return func(c *cobra.Command, err error) error {
		if name, ok := strings.CutPrefix(err.Error(), "unknown flag: --"); ok {
			if hint, ok := hints[name]; ok {
				return fmt.Errorf("%s: %w: %s", c.Name(), err, hint)
			}
		}
		return flagError(c, err)
	}
}

// experimentNames completes an experiment name as the first argument.
func experimentNames(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, n := range sortedNames() {
		out = append(out, cobra.CompletionWithDesc(n, registry[n].doc))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func newListCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "the registered experiments and their presets",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			for _, name := range sortedNames() {
				e := registry[name]
				presets := make([]string, 0)
				for p := range e.presets() {
					presets = append(presets, p)
				}
				sort.Strings(presets)
				if len(presets) == 0 { // an empty "(presets: )" would read as a formatting slip
					fmt.Fprintf(stdout, "%-16s %s\n", name, e.doc)
					continue
				}
				fmt.Fprintf(stdout, "%-16s %s (presets: %s)\n", name, e.doc, strings.Join(presets, ", "))
			}
			return nil
		},
	}
}

func newInfoCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "info <experiment>|<checkpoint file>",
		Short: "an experiment's fields, or what a checkpoint says about itself",
		Long: `Prints the experiment's fields: name, kind, type, default, doc. Given a checkpoint file
instead, prints what it says about itself (epoch, step, preset, run id, stop reason, position,
metrics, tensors, build), read from its header alone. A registered name is always the experiment,
even beside a file of that name: write ./NAME for the file.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("info needs an experiment name or a checkpoint file; registered: %s", strings.Join(sortedNames(), ", "))
			}
			if len(args) > 1 {
				return fmt.Errorf("info takes one experiment name or checkpoint file, got %d arguments %v", len(args), args)
			}
			return nil
		},
		ValidArgsFunction: func(c *cobra.Command, args []string, s string) ([]cobra.Completion, cobra.ShellCompDirective) {
			names, _ := experimentNames(c, args, s)
			return names, cobra.ShellCompDirectiveDefault // a checkpoint file too
		},
		RunE: func(_ *cobra.Command, args []string) error {
			e, err := infoExperiment(args[0], stdout)
			if err != nil || e.build == nil {
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
		},
	}
}

func newLsCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "ls <run dir>",
		Short: "the run dir's checkpoints, one line each, from its manifest",
		Long:  `Lists the run dir's checkpoints, oldest first, from its manifest (no checkpoint is opened): file, epoch, step, score, stop reason.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("ls needs one run directory, e.g. nitro ls runs/MLP")
			}
			return nil
		},
		ValidArgsFunction: dirsOnly,
		RunE: func(_ *cobra.Command, args []string) error {
			if err := runDirArg(args[0]); err != nil {
				return err
			}
			return listCheckpoints(args[0], stdout)
		},
	}
}

// dirsOnly completes a directory.
func dirsOnly(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
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

// notACheckpointFile says what is wrong with an info argument that is no experiment's name and
// no file, when it is a path: a directory (with its checkpoints), or missing (with whether its
// directory's manifest lists it). nil: it is neither, so lookup names the experiments.
func notACheckpointFile(arg string, fi os.FileInfo, statErr error) error {
	dir := filepath.Dir(arg)
	switch {
	case statErr == nil && fi.IsDir():
		msg := fmt.Sprintf("info %s: a directory, not a checkpoint file", arg)
		if p, ok, err := checkpoint.Newest(arg); err != nil {
			return fmt.Errorf("%s: %w", msg, err)
		} else if ok {
			return fmt.Errorf("%s; its newest checkpoint is %s (all of them: nitro ls %s)", msg, p, arg)
		}
		return fmt.Errorf("%s, and no run directory either (no %s listing a checkpoint)", msg, checkpoint.ManifestName)
	case statErr != nil && !errors.Is(statErr, fs.ErrNotExist):
		return fmt.Errorf("info %s: %w", arg, statErr)
	case !strings.ContainsRune(arg, filepath.Separator) && !strings.HasSuffix(arg, ".safetensors"):
		return nil // a name, not a path
	}
	msg := fmt.Sprintf("info %s: no such file (nor a registered experiment)", arg)
	entries, err := checkpoint.ReadManifest(dir)
	if err != nil || len(entries) == 0 {
		return errors.New(msg)
	}
	for _, e := range entries {
		if e.File == filepath.Base(arg) {
			return fmt.Errorf("%s: %s lists it as a checkpoint, so it was deleted or moved; the run dir's checkpoints: nitro ls %s", msg, filepath.Join(dir, checkpoint.ManifestName), dir)
		}
	}
	return fmt.Errorf("%s; the checkpoints %s lists: nitro ls %s", msg, filepath.Join(dir, checkpoint.ManifestName), dir)
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
	row("stop reason", orNone(string(h.StopReason)))
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
			line += "  stopped: " + string(e.StopReason)
		}
		fmt.Fprintln(stdout, line)
	}
	return nil
}

// metric is one labelled value.
type metric struct {
	name  string
	value float64
}

// prefixed is m sorted by name, each labelled prefix+name unless it already starts with prefix
// (test_accuracy, val_loss), so a line says which split it is about. With split, core.ValLoss,
// the Loss fallback of an experiment without a Metrics hook, which is named val_loss whatever the
// split, is labelled <prefix>loss.
func prefixed(prefix string, m map[string]float64, split bool) []metric {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]metric, len(keys))
	for i, k := range keys {
		label := k
		if split && k == core.ValLoss {
			label = "loss"
		}
		if !strings.HasPrefix(label, prefix) {
			label = prefix + label
		}
		out[i] = metric{label, m[k]}
	}
	return out
}

// fmtMetrics prints a split's metrics m as " name value" pairs, labelled as prefixed does.
func fmtMetrics(prefix string, m map[string]float64) string {
	var b strings.Builder
	for _, x := range prefixed(prefix, m, true) {
		fmt.Fprintf(&b, " %s %.4f", x.name, x.value)
	}
	return b.String()
}
