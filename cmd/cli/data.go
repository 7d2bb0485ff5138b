package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nitro-go/nitro/cmd/examples/mnist"
	"github.com/spf13/cobra"
)

// converter writes a data set into a folder.
type converter struct {
	doc   string
	write func(dir string) error
}

// converters are the data sets `nitro data convert` knows, by name.
var converters = map[string]converter{
	"mnist": {doc: "MNIST (train and t10k) from the GoMNIST module as Parquet files", write: mnist.WriteParquet},
}

func newDataCmd(stdout io.Writer) *cobra.Command {
	data := &cobra.Command{
		Use:                   "data <command>",
		Short:                 "data set tools",
		Long:                  "Data set tools: convert writes a built-in data set into a folder as Parquet files.",
		DisableFlagsInUseLine: true,
	}
	names := make([]string, 0, len(converters))
	for n := range converters {
		names = append(names, n)
	}
	sort.Strings(names)
	var list strings.Builder
	for _, n := range names {
		fmt.Fprintf(&list, "\n  %-8s %s", n, converters[n].doc)
	}
	convert := &cobra.Command{
		Use:   "convert <dataset> <dir>",
		Short: "write a built-in data set into a folder as Parquet",
		Long:  "Writes the data set into dir (created if needed), each file whole or not at all, and lists the files written. Data sets:" + list.String(),
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return fmt.Errorf("data convert needs a data set and a folder, e.g. nitro data convert mnist data/mnist; data sets: %s", strings.Join(names, ", "))
			}
			return nil
		},
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				var out []cobra.Completion
				for _, n := range names {
					out = append(out, cobra.CompletionWithDesc(n, converters[n].doc))
				}
				return out, cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveFilterDirs
		},
		RunE: func(_ *cobra.Command, args []string) error {
			conv, ok := converters[args[0]]
			if !ok {
				return fmt.Errorf("unknown data set %q; data convert knows: %s", args[0], strings.Join(names, ", "))
			}
			if err := conv.write(args[1]); err != nil {
				return fmt.Errorf("data convert %s: %w", args[0], err)
			}
			files, err := filepath.Glob(filepath.Join(args[1], "*.parquet"))
			if err != nil {
				return err
			}
			for _, f := range files {
				size := ""
				if fi, err := os.Stat(f); err == nil {
					size = fmt.Sprintf(" (%.1f MiB)", float64(fi.Size())/(1<<20))
				}
				fmt.Fprintf(stdout, "%s%s\n", f, size)
			}
			return nil
		},
	}
	data.AddCommand(convert)
	return data
}
