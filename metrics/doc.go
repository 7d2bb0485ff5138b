// Package metrics accumulates evaluation metrics over a split, in plain Go on the host: what the
// HostMetrics hook returns per batch and FinalizeMetrics reads at the end, with confusion-matrix
// and AUC helpers. Guide: docs/experiment.md#metrics.
//
// A batch
// reports each metric as a Metric: Mean (a scalar sum over a scalar count, divided at the end),
// Total (a scalar summed, never divided), Summed (an array summed elementwise and never divided,
// such as a confusion matrix) or Collected (values appended over the split, for what is not a
// sum of per-batch parts: sorting, matching, AUC, mAP). An Accumulator adds a split's batches
// and its Result hands the scalars, arrays and collections to whoever finalizes them.
//
// The helpers work on what a Result holds: ConfusionCounts and Confusion build and read a
// confusion matrix, Normalize and PerClassAccuracy derive from it, AUC ranks collected scores,
// ArgMaxRows turns logits into predicted classes.
//
// Errors name the metric and what changed: a metric whose kind or array shape differs from the
// earlier batches', a Mean with a negative count, labels outside the class range. An
// Accumulator is not safe for concurrent use (one split is added by one goroutine); the helpers
// keep no state and are.
package metrics
