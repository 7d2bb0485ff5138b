// Package cli is the nitro command line as a library: a user's own main registers experiments
// and calls Main to get the same commands the nitro binary has (the list is the commands table
// in cli.go; `nitro --help` prints it and package cmd's doc describes each). It is built on
// github.com/spf13/cobra: every command has its own help and flags, flags may come before or
// after the arguments, and a bad flag value is an error naming the flag.
package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/backend"
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
	// The command's programs compiled after its run finished (the test split's evaluation,
	// export, predict) are still being written to the disk cache: the process exits next.
	defer backend.FlushCompileCache()
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

// commands is every command the root adds, in the order its help lists them (cobra's completion
// and help follow): the one list of nitro's commands. The root, its help's order and the test
// that cmd/doc.go names every command all read it, so a new command is added here only.
var commands = []struct {
	name  string // the built command's Name (TestCommandsTable checks)
	build func(stdout, stderr io.Writer) *cobra.Command
}{
	{"train", experimentCmd("train")},
	{"evaluate", experimentCmd("evaluate")},
	{"render", experimentCmd("render")},
	{"export", newExportCmd},
	{"sample", newSampleCmd},
	{"run-bundle", stdoutOnly(newRunBundleCmd)},
	{"serve", newServeCmd},
	{"list", stdoutOnly(newListCmd)},
	{"info", stdoutOnly(newInfoCmd)},
	{"ls", stdoutOnly(newLsCmd)},
	{"plot", newPlotCmd},
	{"board", newBoardCmd},
	{"sweep", newSweepCmd},
	{"data", stdoutOnly(newDataCmd)},
	{"setup", newSetupCmd},
	{"cache", stdoutOnly(newCacheCmd)},
	{"new", newNewCmd},
}

// experimentCmd is the builder of train, evaluate or render, for the commands table.
func experimentCmd(name string) func(stdout, stderr io.Writer) *cobra.Command {
	return func(stdout, stderr io.Writer) *cobra.Command { return newExperimentCmd(name, stdout, stderr) }
}

// stdoutOnly adapts the builder of a command that never writes to stderr, for the commands table.
func stdoutOnly(build func(stdout io.Writer) *cobra.Command) func(stdout, stderr io.Writer) *cobra.Command {
	return func(stdout, _ io.Writer) *cobra.Command { return build(stdout) }
}

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
	for _, c := range commands {
		root.AddCommand(c.build(stdout, stderr))
	}
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

// ordered is root's available commands (and help) in the commands table's order, then the rest
// by name.
func ordered(root *cobra.Command) []*cobra.Command {
	rank := func(c *cobra.Command) int {
		for i, n := range commands {
			if c.Name() == n.name {
				return i
			}
		}
		return len(commands)
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
// groups others, its name and theirs ("completion bash|fish|powershell|zsh"). A command that runs
// and also has subcommands (sweep) names them in its Use and marks it with ownUse.
func synopsis(c *cobra.Command) string {
	subs := available(c)
	if len(subs) == 0 || c.Annotations[ownUse] != "" {
		return c.Use
	}
	uses := make([]string, len(subs))
	for i, s := range subs {
		uses[i] = s.Use
	}
	return c.Name() + " " + strings.Join(uses, "|")
}

// ownUse is the annotation that makes the root help show a command's Use as it is.
const ownUse = "nitro-own-use"

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
