// Package coretest is test support for the packages that test a Nitro (core's own tests, export,
// integration): one small task and the helpers around it, so each test package does not keep its
// own copy. It is for tests only; nothing outside a _test.go file imports it.
//
// The task: x [n, 4] float32 standard normal, y [n, 1] float32 = x·TrueW + 0.5, a linear
// regression that one Dense layer (Reg) learns exactly. Synthetic is deterministic in its seed;
// Data is a train split of 64 samples (batch 16, partial dropped) and a val split of valN.
//
// Every helper takes the test and fails it (t.Fatal) on an unexpected error, so a test reads as
// its steps. GoOpts and CkptOpts build on the pure-Go backend with a private compile cache, so a
// test leaves no runs/ folder and shares no program with another; HostCheckBackends adds XLA
// where its plugin is installed (absent under CI is a failure, through internal/prereq).
package coretest
