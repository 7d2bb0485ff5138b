// Package core is the Nitro: it composes markers, compilecache, optimizers and schedules into the
// documented hook surface and runs the driver. New runs setup only (hooks found and checked by
// reflection once, data built, Derive merged, parameters initialized and placed on the device);
// Train, Validate, Evaluate, Predict and SetDevice are the verbs. Each training step is two
// compiled programs by default, kept separate even at accum = 1: the gradient program (parameters,
// layer state, Device fields, declared batch fields -> loss, the gradient of every parameter
// array, new state) and the optimizer program (parameters, gradients, optimizer state,
// hyperparameters, step -> new parameters and state), so a clip or accum change recompiles only
// the cheap one; WithFusedStep makes it one program at accum 1. Parameters, gradients and
// optimizer state stay per array and on the device between steps (no packing copies; the
// optimizer's scalar math is emitted once per group); eval reuses them (Uploads counts every
// host-to-device transfer so tests can hold it to that). New installs core/dotgrad's
// matrix-product gradients for Dot and DotGeneral before building any graph.
//
// Left to the caller: the experiment's hooks and data. Errors: every exported function returns an
// error naming the hook, field or value and the fix; graph-building panics are recovered into
// errors at this boundary. A Nitro is not safe for concurrent use, except RequestStop.
//
// Go changes two things: batch routing is by the hook's batch struct type instead of keywords, and
// the batch axis leads (GoMLX is row-major); device metrics are fused into the eval program.
package core
