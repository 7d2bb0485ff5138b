package core

import (
	"errors"
	"fmt"
	"strings"

	"github.com/nitro-go/nitro/earlystop"
)

// Examples in error texts: a checkpointer suggestion that compiles as printed, ranking by the
// mode the metric's name calls for (earlystop.ModeOf). A suggestion that does not compile, or
// ranks an error by "max", costs the user a second mistake on the way to fixing the first.

// pickMetric is the metric an example uses (earlystop.PickMetric), a placeholder for none.
func pickMetric(names []string) string {
	if m := earlystop.PickMetric(names); m != "" {
		return m
	}
	return first(names)
}

// checkpointerHook is the experiment-level Checkpointer hook ranking by metric, as Go source
// that compiles in the experiment's package (which imports package checkpoint).
func checkpointerHook(typeName, metric string) string {
	mode, known := earlystop.ModeOf(metric)
	note := ""
	if !known {
		note = ` // "min" if lower is better, "max" if higher is`
	}
	return fmt.Sprintf(`func (e *%s) Checkpointer() checkpoint.Checkpointer {
	tk, err := checkpoint.NewTopK(3, %q, %q, "", nil)%s
	if err != nil {
		panic(err) // New reports it as a setup error
	}
	return tk
}`, typeName, metric, mode, note)
}

// Where a run's checkpointer came from, for checkpointMetricError.
const (
	ckptFromDefault = iota // no option, no hook: TopK by val_loss
	ckptFromHook           // the experiment's Checkpointer()
	ckptFromOption         // WithCheckpointer
)

// checkpointMetricError is the setup error for a checkpoint ranking metric the val split does
// not report. It suggests the experiment-level hook first, so that every run of the experiment
// checkpoints the same way, then the one-run option, then turning checkpoints off.
func checkpointMetricError(typeName, metric string, from int, names []string) error {
	m := pickMetric(names)
	mode := earlystop.SuggestMode(m)
	hook := strings.ReplaceAll(checkpointerHook(typeName, m), "\n", "\n\t")
	option := fmt.Sprintf("tk, err := checkpoint.NewTopK(3, %q, %q, \"\", nil), then core.WithCheckpointer(tk)", m, mode)
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint metric %q", metric)
	switch from {
	case ckptFromDefault:
		fmt.Fprintf(&b, " (the default checkpointer, TopK by %s)", ValLoss)
	case ckptFromHook:
		fmt.Fprintf(&b, " (from %s.Checkpointer())", typeName)
	case ckptFromOption:
		b.WriteString(" (from WithCheckpointer)")
	}
	fmt.Fprintf(&b, ": no metric of the val split has this name; it reports %s. ", strings.Join(names, ", "))
	switch from {
	case ckptFromHook:
		fmt.Fprintf(&b, "Rank by one of them in the hook:\n\n\t%s\n\n", hook)
	case ckptFromOption:
		fmt.Fprintf(&b, "Rank by one of them: %s; or in the experiment, so every run of it checkpoints the same way:\n\n\t%s\n\n", option, hook)
	default:
		fmt.Fprintf(&b, "Rank by one of them in the experiment, so every run of it checkpoints the same way:\n\n\t%s\n\nor for one run, %s; ", hook, option)
	}
	b.WriteString("or turn checkpoints off with core.WithoutCheckpoints()")
	return errors.New(b.String())
}
