package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/nitro-go/nitro/checkpoint"
)

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
	pos := fmt.Sprintf("epoch %d, batch %d", h.Position.Epoch, h.Position.Batch)
	if p := h.Position; p.Global() {
		pos += fmt.Sprintf(" of %d (global batches of %d samples)", p.EpochBatches, p.GlobalBatch)
	}
	row("position", pos)
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
