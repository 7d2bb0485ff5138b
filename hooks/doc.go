// Package hooks holds the types an experiment's traced hooks exchange with nitro and nothing
// else: Metric (what Metrics returns per metric), ManualStep (what a manual TrainStep receives)
// with its Grads, and StepResult (what TrainStep returns). It is the contract between the code
// a user writes and the engine that runs it: core checks the hooks against these types, the
// engine implements ManualStep, and an experiment imports this package, never the engine.
//
// The package builds no graph itself and keeps no state. ManualStep is an interface so that the
// engine can implement it below this package and a test can hand TrainStep a fake (FakeStep):
// its verbs are valid only inside the TrainStep call that received them, and a misuse panics
// with an error naming the verb, which the program's build returns. Values of these types are
// graph nodes of one trace and are not safe to share across goroutines.
package hooks
