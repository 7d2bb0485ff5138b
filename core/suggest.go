package core

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Examples in error texts: the mode a metric's name calls for, and a checkpointer suggestion
// that compiles as printed. A suggestion that does not compile, or ranks an error by "max",
// costs the user a second mistake on the way to fixing the first.

// Name parts of metrics where lower is better, and where higher is. A name mentioning a loss or
// an error is lower-is-better even when it also names a score ("top1_error").
var (
	lowerBetter = []string{"loss", "error", "err", "errors", "mae", "mse", "rmse", "sse", "sae", "rss", "msle", "rmsle", "mape", "smape",
		"nll", "xent", "crossentropy", "ce", "bce", "perplexity", "ppl", "wer", "cer", "ter", "distance", "dist",
		"l1", "l2", "huber", "kl", "divergence", "cost", "regret", "fid", "eer", "fpr", "fnr"}
	higherBetter = []string{"acc", "accuracy", "f1", "fscore", "auc", "auroc", "auprc", "roc", "precision", "recall",
		"iou", "miou", "dice", "map", "ap", "r2", "bleu", "rouge", "score", "top1", "top5", "ndcg", "mrr",
		"sensitivity", "specificity", "kappa", "corr", "correlation", "psnr", "ssim", "tpr", "hit", "hits", "reward"}
)

// metricMode is the mode a metric's name calls for: "min" for losses and errors, "max" for
// scores; known is false when the name says neither.
func metricMode(metric string) (mode string, known bool) {
	parts := strings.FieldsFunc(strings.ToLower(metric), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	has := func(words []string) bool {
		for _, p := range parts {
			for _, w := range words {
				// Whole parts, so "map" does not match "heatmap"; the long words also inside a
				// part, so "valloss" and "testaccuracy" are read too.
				if p == w || (len(w) >= 4 && strings.Contains(p, w)) {
					return true
				}
			}
		}
		return false
	}
	switch {
	case has(lowerBetter):
		return "min", true
	case has(higherBetter):
		return "max", true
	}
	return "min", false
}

// suggestMode is metricMode's mode, "min" when the name says neither.
func suggestMode(metric string) string {
	m, _ := metricMode(metric)
	return m
}

// pickMetric is the metric an example uses: the first whose name says its mode, else the first.
func pickMetric(names []string) string {
	for _, n := range names {
		if _, ok := metricMode(n); ok {
			return n
		}
	}
	return first(names)
}

// checkpointerHook is the experiment-level Checkpointer hook ranking by metric, as Go source
// that compiles in the experiment's package (which imports package checkpoint).
func checkpointerHook(typeName, metric string) string {
	mode, known := metricMode(metric)
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
	mode := suggestMode(m)
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
