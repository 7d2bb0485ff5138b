// Package integration holds nitro's end-to-end tests and benchmarks, run against the XLA CPU PJRT
// plugin installed by `make setup`. In CI (CI=true) a missing plugin fails the run; elsewhere the
// tests that need it say loudly that they are skipped and why. The depcheck command enforcing the
// workspace layering lives here too, since only this module and cmd may sit above core.
package integration
