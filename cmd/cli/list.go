package cli

import (
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
	"github.com/nitro-go/nitro/markers"
)

// list, info and ls: what is registered, and what a checkpoint or a run dir holds.

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
