// Package cmd holds nitro's command line and its built-in example experiments.
//
//   - cmd/nitro is the `nitro` binary: train, evaluate, list and info over registered experiments.
//   - cmd/cli is the same command line as a library: a user's own main calls cli.Register for
//     each experiment type and cli.Main, and gets the same commands and flags.
//   - cmd/examples/mnist is the MNIST MLP experiment (real digits from the GoMNIST module in the
//     Go module cache; never downloaded at run time), with presets including "groups".
//
// Construction goes through markers, so --preset and --set are validated exactly as a Go caller's
// overrides are: an unknown field or a value of the wrong type is an error naming the field.
// Errors exit with status 1 and a message naming the fix; SIGINT during train asks the run to
// stop after the epoch's validation; during evaluate it stops at the next batch, prints the
// partial metrics as partial, and exits 1. Nothing here is meant for concurrent use.
package cmd
