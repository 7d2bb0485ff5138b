// Package integration holds nitro's end-to-end tests and benchmarks, run against the XLA CPU PJRT
// plugin that `make setup` installs into .nitro/pjrt.
//
// What it proves, whole: the acceptance check of the compile cache (train+val compiles 3 programs,
// train-only 2, with the fused step 2 and 1, more epochs none, a second Nitro none; what a
// GraphConst, Device, Host, accum or clip change does and how the miss is explained), the
// four-hooks-only claim, parameter residency during evaluation, the short final batch, non-finite
// losses, RequestStop, Predict, float32 whole runs against float64, and the three benchmark
// families (MLP, CNN, transformer) learning and matching a hand-written GoMLX loop step for step.
// The docs test (docs_test.go) holds README.md and docs/*.md to the code: it builds and vets every
// ```go program block, runs the ```go program run ones and the nitro lines of every ```sh nitro
// block with the CLI built from the checkout, and fails on an unmarked go or shell block, a link
// to a missing file, a CLI command or go.work module missing from the README's tables, and a first
// experiment that does not build pasted into a `nitro new` project; architecture_test.go holds
// docs/architecture.md's module plan to `go list` (each module's row names exactly the workspace
// modules its non-test packages import).
// The benchmarks (`make bench`) print nitro's step time against a GoMLX loop and JAX + optax,
// measured in one run, on the MLP and on each family (with the held-out loss and accuracy each
// family's sides reached, a side off the others flagged), and the all-reduce's share of a step at
// 2 processes under mpirun (the test binary's TestMain turns a copy of it into one rank when
// NITRO_MPI_BENCH_FAMILY names a family).
//
// In CI (CI=true) a missing plugin fails the run; elsewhere the tests that need it say loudly
// that they are skipped and why. Tests use private caches (compilecache.New) so they can run in
// any order. The depcheck command, which enforces the workspace layering, lives here too, since
// only this module and cmd may sit above core.
package integration
