package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nitro-go/nitro/sweep"
)

func newSweepLsCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "ls <sweep dir>",
		Short: "list a sweep's trials, best first, with their state, metric and values",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			st, err := sweep.Load(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, studyLine(st))
			space := make([]string, len(st.Space))
			for i, p := range st.Space {
				space[i] = p.String()
			}
			fmt.Fprintf(stdout, "space: %s\n", strings.Join(space, " "))
			fmt.Fprintf(stdout, "%-6s %-9s %-12s %-6s %s\n", "trial", "state", st.Metric, "step", "values")
			for _, t := range sweep.Ranked(st) {
				val := "-"
				if t.HasValue {
					val = fmt.Sprintf("%.6g", t.Value)
				}
				step := "-"
				if s, _, ok := t.LastReport(); ok {
					step = fmt.Sprint(s)
				}
				sets, _ := st.Space.Sets(t.Params)
				fmt.Fprintf(stdout, "%-6d %-9s %-12s %-6s %s\n", t.Number, t.State, val, step, strings.Join(sets, " "))
			}
			return nil
		},
	}
}

func newSweepBestCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "best <sweep dir>",
		Short: "print a sweep's best trial: its metric, its values as --set flags and its run dir",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			st, err := sweep.Load(args[0])
			if err != nil {
				return err
			}
			b, ok := st.Best()
			if !ok {
				return fmt.Errorf("sweep %s: no trial has completed yet (%s)", args[0], studyLine(st))
			}
			sets, err := st.Space.Sets(b.Params)
			if err != nil {
				return err
			}
			flags := make([]string, len(sets))
			for i, s := range sets {
				flags[i] = "--set " + s
			}
			fmt.Fprintf(stdout, "trial %d: %s %.6g\n%s\nrun dir %s\n", b.Number, st.Metric, b.Value, strings.Join(flags, " "), filepath.Join(args[0], sweep.TrialDir(b.Number)))
			return nil
		},
	}
}

// studyLine sums a study up: "40 trials planned: 25 complete, 3 running, 12 pruned, 0 failed".
func studyLine(st *sweep.Study) string {
	count := map[sweep.State]int{}
	for _, t := range st.Trials {
		count[t.State]++
	}
	s := fmt.Sprintf("%d trials recorded", len(st.Trials))
	if n := intAttr(st.Attrs, "trials"); n > 0 {
		s += fmt.Sprintf(" of %d", n)
	}
	s += fmt.Sprintf(": %d complete, %d running, %d pruned, %d failed", count[sweep.Complete], count[sweep.Running], count[sweep.Pruned], count[sweep.Fail])
	if b, ok := st.Best(); ok {
		s += fmt.Sprintf("; best %s %.6g (trial %d)", st.Metric, b.Value, b.Number)
	}
	return s
}
