// Package earlystop is the stopping policy of a training loop: when a run ends because a
// validation metric stopped improving. It knows nothing of the loop; the loop holds this contract:
//
//   - Once per epoch, after validation, the loop calls Policy.ShouldStop with the epoch (1-based)
//     and the validation metrics named as the record names them (val_loss, val_accuracy); the
//     loop has checked that each metric the policy reads is present and finite.
//   - A policy that names its metric (MetricReader) is checked against the metrics validation
//     reports before training, and only that metric is validated; else every one is.
//   - A Stateful policy's State is kept with each checkpoint and handed back to Restore on
//     resume, so the count goes on where the run left off; Exhauster says whether a restored
//     state already stops the run.
//   - One policy value holds one run's progress: a loop copies an *EarlyStopping (Fresh) before
//     using it, and a custom policy is returned new for each run.
//
// EarlyStopping is the built-in policy (patience and min_delta, as Keras and Lightning count);
// ModeOf, SuggestMode and PickMetric read a metric's name for examples in error texts.
package earlystop
