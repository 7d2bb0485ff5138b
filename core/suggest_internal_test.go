package core

import (
	"strings"
	"testing"
)

// TestMetricMode: the mode an example suggests fits the metric's name: min for losses and
// errors, max for scores, and unknown (min, said as a choice) for a name that says neither.
func TestMetricMode(t *testing.T) {
	for name, want := range map[string]string{
		"val_loss": "min", "val_mae": "min", "val_mse": "min", "val_rmse": "min", "val_error": "min",
		"val_top1_error": "min", "valloss": "min", "val_nll": "min", "val_perplexity": "min",
		"val_acc": "max", "val_accuracy": "max", "val_f1": "max", "val_auc": "max", "val_map": "max",
		"val_top5": "max", "val_iou": "max", "testaccuracy": "max", "val_r2": "max",
		"val_sse": "min", "val_rows": "", "val_heatmap": "",
	} {
		mode, known := metricMode(name)
		if want == "" {
			if known {
				t.Errorf("metricMode(%q) = %s, want unknown", name, mode)
			}
			continue
		}
		if !known || mode != want {
			t.Errorf("metricMode(%q) = %s (known %v), want %s", name, mode, known, want)
		}
	}
	if got := pickMetric([]string{"val_rows", "val_f1", "val_mse"}); got != "val_f1" {
		t.Errorf("pickMetric = %q, want the first whose mode is known", got)
	}
	if h := checkpointerHook("E", "val_rows"); !strings.Contains(h, `"val_rows", "min", "", nil) // "min" if lower is better, "max" if higher is`) {
		t.Errorf("hook for a metric of unknown mode does not say to choose:\n%s", h)
	}
}
