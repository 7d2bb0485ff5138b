package earlystop

import (
	"strings"
	"unicode"
)

// Examples in error texts need the mode a metric's name calls for: a suggestion that ranks an
// error by "max" costs the user a second mistake on the way to fixing the first.

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

// ModeOf is the mode a metric's name calls for: "min" for losses and errors, "max" for scores;
// known is false (and mode "min") when the name says neither.
func ModeOf(metric string) (mode string, known bool) {
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

// SuggestMode is ModeOf's mode, "min" when the name says neither.
func SuggestMode(metric string) string {
	m, _ := ModeOf(metric)
	return m
}

// PickMetric is the metric an example uses: the first whose name says its mode, else the first
// ("" for none).
func PickMetric(names []string) string {
	for _, n := range names {
		if _, ok := ModeOf(n); ok {
			return n
		}
	}
	if len(names) == 0 {
		return ""
	}
	return names[0]
}
