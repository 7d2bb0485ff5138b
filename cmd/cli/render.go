package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/nitro-go/nitro/core"
)

const renderLong = `Sets the experiment up and draws the first --n samples of one split (--split, default test), the
batches evaluate reads, through the experiment's Visualize hook, into <run dir>/render/<split>-<n>.png
(the run dir: --run-dir, else the experiment's, else runs/<Experiment>). Without --predictions it
runs no forward pass and compiles nothing; with it the figure shows Forward's outputs too, from a
checkpoint's weights (--checkpoint FILE, or a run dir: its newest; the experiment it was trained
with), else as BuildModel initializes them, into <split>-<n>-pred.png. It keeps no metrics.jsonl and writes no checkpoint.`

// renderFlags adds render's own flags (the others are evaluate's).
func renderFlags(c *cobra.Command, f *expFlags) {
	c.Flags().IntVar(&f.count, "n", 16, "draw the split's first `N` samples")
	c.Flags().BoolVar(&f.predictions, "predictions", false, "run Forward on the samples (eval mode) and draw its outputs too")
}

// checkRenderFlags refuses a sample count render cannot draw, before the data is read.
func checkRenderFlags(c *cobra.Command, f *expFlags) error {
	if c.Name() == "render" && f.count < 1 {
		return fmt.Errorf("--n %d: must be >= 1 (the number of samples to draw)", f.count)
	}
	return nil
}

// renderSplit draws the figure and says where it went.
func renderSplit(res results, n *core.Nitro, f *expFlags) error {
	var opts []core.RenderOption
	if f.predictions {
		opts = append(opts, core.RenderPredictions())
	}
	path, err := n.Render(f.split, f.count, opts...)
	if err != nil {
		return err
	}
	res.say(fmt.Sprintf("render: %s (%d samples of split %s, predictions %t)", path, f.count, f.split, f.predictions),
		"render", zap.String("path", path), zap.String("split", f.split), zap.Int("samples", f.count), zap.Bool("predictions", f.predictions))
	return nil
}
