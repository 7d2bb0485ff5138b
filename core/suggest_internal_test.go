package core

import (
	"strings"
	"testing"
)

// TestMetricMode: the example metric is the first whose name says its mode (the name reading
// itself is tested in package earlystop, TestModeOf), a placeholder when there is none, and the
// hook suggested for a metric of unknown mode says to choose.
func TestMetricMode(t *testing.T) {
	if got := pickMetric([]string{"val_rows", "val_f1", "val_mse"}); got != "val_f1" {
		t.Errorf("pickMetric = %q, want the first whose mode is known", got)
	}
	if got := pickMetric(nil); got != "x" {
		t.Errorf("pickMetric(nil) = %q, want the placeholder x", got)
	}
	if h := checkpointerHook("E", "val_rows"); !strings.Contains(h, `"val_rows", "min", "", nil) // "min" if lower is better, "max" if higher is`) {
		t.Errorf("hook for a metric of unknown mode does not say to choose:\n%s", h)
	}
	if h := checkpointerHook("E", "val_acc"); !strings.Contains(h, `"val_acc", "max", "", nil)`+"\n") {
		t.Errorf("hook for a score does not rank by max:\n%s", h)
	}
}
