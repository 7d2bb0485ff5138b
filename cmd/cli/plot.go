package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/cmd/plot"
	"github.com/nitro-go/nitro/core"
)

// PlotsDir is where `nitro plot <run dir>` draws unless --out says otherwise: <run dir>/plots.
const PlotsDir = "plots"

// clearPlots removes <run dir>/plots for train --overwrite when nitro plot drew it: it holds
// plot.IndexFile and otherwise only PNGs, the figures of the earlier run. A folder with anything
// else in it is kept, and the answer says so. "" when there is no such folder.
func clearPlots(runDir string) string {
	dir := filepath.Join(runDir, PlotsDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	index := false
	for _, e := range entries {
		switch {
		case e.Type().IsRegular() && e.Name() == plot.IndexFile:
			index = true
		case e.Type().IsRegular() && filepath.Ext(e.Name()) == ".png":
		default:
			return fmt.Sprintf("overwrite: kept %s: it holds %s, which nitro plot does not write; redraw the new run with nitro plot --out elsewhere, or remove the folder", dir, e.Name())
		}
	}
	if !index {
		return fmt.Sprintf("overwrite: kept %s: it has no %s, so nitro plot did not draw it", dir, plot.IndexFile)
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Sprintf("overwrite: %s holds the earlier run's figures, and removing them failed: %v", dir, err)
		}
	}
	os.Remove(dir) // empty now
	return fmt.Sprintf("overwrite: removed %s, the earlier run's %d figures and their index", dir, len(entries)-1)
}

func newPlotCmd(stdout, stderr io.Writer) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "plot <run dir>",
		Short: "draw a run's metrics.jsonl as PNG figures, with an index",
		Long: `Reads <run dir>/metrics.jsonl (or the JSON Lines file given) and draws one PNG per figure into
--out (default <run dir>/plots): the training loss per optimizer step, raw and smoothed, and each
other train metric the same way; each validation metric per epoch; steps/s per epoch; the data
line's values per epoch (data_wait_frac); the last confusion matrix logged, as a heat map
(confusion.png); then index.md listing them. It prints each file written
on stdout and, on stderr, what the file lacked or what was tolerated (a line a crash truncated).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("plot needs one run directory, e.g. nitro plot runs/MLP")
			}
			return nil
		},
		ValidArgsFunction: dirsOnly,
		RunE: func(c *cobra.Command, args []string) error {
			src, dir := filepath.Join(args[0], core.MetricsFile), args[0]
			if fi, err := os.Stat(args[0]); err == nil && !fi.IsDir() {
				src, dir = args[0], filepath.Dir(args[0])
			}
			if c.Flags().Changed("out") && out == "" {
				return fmt.Errorf("--out: empty value (leave the flag out for %s)", filepath.Join(dir, PlotsDir))
			}
			if out == "" {
				out = filepath.Join(dir, PlotsDir)
			}
			run, err := plot.Read(src)
			if err != nil {
				return err
			}
			files, err := plot.Write(run, out)
			for _, f := range files {
				fmt.Fprintln(stdout, f)
			}
			for _, w := range run.Warnings {
				fmt.Fprintln(stderr, "nitro: plot: warning:", w)
			}
			return err
		},
	}
	c.Flags().StringVar(&out, "out", "", "the `folder` to draw into (default <run dir>/plots)")
	_ = c.MarkFlagDirname("out")
	return c
}
