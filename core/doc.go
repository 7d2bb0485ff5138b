// Package core is the Nitro: it composes markers, compilecache, optimizers and schedules into the
// documented hook surface and runs the driver. New runs setup only (hooks found and checked by
// reflection once, data built, Derive merged, parameters initialized and placed on the device);
// Train, Validate, Evaluate, Predict and SetDevice are the verbs. Each training step is two
// compiled programs, kept separate even at accum = 1: the gradient program (parameters, layer
// state, Device fields, declared batch fields -> loss, per-group flat gradients, new state) and
// the optimizer program (parameters, flat gradients, flat optimizer state, hyperparameters, step
// -> new parameters and state). Parameters and state stay on the device between steps; eval reuses
// them (Uploads counts every host-to-device transfer so tests can hold it to that).
//
// Left to the caller: the experiment's hooks and data. Errors: every exported function returns an
// error naming the hook, field or value and the fix; graph-building panics are recovered into
// errors at this boundary. A Nitro is not safe for concurrent use, except RequestStop.
//
// Go changes two things: batch routing is by the hook's batch struct type instead of keywords, and
// the batch axis leads (GoMLX is row-major); device metrics are fused into the eval program.
package core
