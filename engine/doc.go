// Package engine owns the device side of a training run: it builds the programs (gradient,
// optimizer, fused and manual step, eval, predict) through the compile cache, binds and runs
// them, and keeps the parameters, the optimizer and layer state and the Device fields on the
// device, over a mesh when there is more than one device, under the run's mixed precision.
// Parameters, gradients and optimizer state are a few buffers per parameter group (the small
// arrays flat in one, which Forward reads through views; each large array in its own: flat.go);
// on the host they stay one per array. Every program names each of its outputs, and a run's
// results are read by those names, never by position (outputs.go). A training program's updated
// outputs are declared as aliases of the donated inputs they replace, so XLA writes them in place
// (alias.go).
//
// The caller (core) resolves the experiment and gives New what is fixed for the run: the
// traced hooks as plain functions (the engine never reflects over the experiment), the knobs,
// the batch contract and callbacks for hyperparameters, phases and notices. It keeps the data
// streams, the step, epoch and data position, logging and checkpoint files: a step returns its
// values by name (StepValues), eval its metrics (EvalBatch), and the state is read and installed
// as named tensors (StateTensors, StageState, InstallState). The engine implements the types of
// package hooks (ManualStep for a manual TrainStep); an experiment names those, never the engine.
//
// Errors name the field or hook at fault and the fix; a hook's panic while a graph is built is
// returned as an error. An Engine is not safe for concurrent use, except Place, which a batch
// stream's transfer goroutine calls while the owner steps.
package engine
