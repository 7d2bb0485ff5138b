// Package cmd holds nitro's command line and its built-in example experiments.
//
//   - cmd/nitro is the `nitro` binary. Its commands (`nitro CMD --help` for each one's flags):
//     `train`, `evaluate` and `render` (a split's samples and predictions as a PNG) over
//     registered experiments, from scratch or a checkpoint; `export` (a checkpoint's model as a
//     bundle); `sample` (a text generator's checkpoint continuing a prompt); `run-bundle` (a bundle run once, JSON in and out) and `serve` (bundles, or a
//     model repository of them, on the Open Inference Protocol; a single bundle on POST /predict
//     too); `list`, `info` (an experiment or a checkpoint), `ls` (a run dir's checkpoints),
//     `plot` (a run's metrics as PNGs), `board` (a live web page comparing runs, or a sweep's trials); `sweep` (a hyperparameter
//     search whose trials share compiled programs, recorded as an Optuna journal; `sweep ls`,
//     `sweep best`); `data convert`
//     (a built-in data set to Parquet); `setup` (the pinned XLA CPU plugin); `cache` (the
//     compile cache on disk: `ls`, `clear`, `verify`); `new` (a Go module with an experiment of
//     your own); `completion` (shell scripts). The list is cli's commands table; a test checks
//     that this paragraph names each.
//   - cmd/cli is the same command line as a library: a user's own main calls cli.Register for
//     each experiment type and cli.Main, and gets the same commands and flags.
//   - cmd/plot draws a run's metrics.jsonl (nitro plot).
//   - cmd/examples/mnist is the MNIST MLP experiment (real digits from the GoMNIST module in the
//     Go module cache; never downloaded at run time), with presets including "groups".
//
// Construction goes through markers, so --preset and --set are validated exactly as a Go caller's
// overrides are: an unknown field or a value of the wrong type is an error naming the field.
// Errors exit with status 1 and a message naming the fix; SIGINT during train asks the run to
// stop after the epoch's validation; during evaluate it stops at the next batch, prints the
// partial metrics as partial, and exits 1. Nothing here is meant for concurrent use.
package cmd
