// Package precision is the cast policy of mixed-precision training: which values a model's
// forward pass reads in a narrower compute dtype, and what is cast back.
//
// Under BF16, the float32 master parameters and float32 batch inputs reach Forward as bfloat16
// (CastIn), so its matmuls, convolutions and activations compute in bfloat16; Forward's bfloat16
// outputs are cast back to float32 (CastOut) before Loss and Metrics, which stay float32. The
// casts are graph nodes, so the gradient of the loss with respect to a master parameter is
// float32 and the optimizer and its state never see bfloat16. Other dtypes (integers, float64,
// float16) pass unchanged. Layer state and Device fields are not cast: they keep the dtype their
// values have on the host.
//
// No loss scaling: bfloat16 keeps float32's 8 exponent bits (range ~1e-38 to ~3e38) and drops
// mantissa bits only, so small gradients round but do not underflow to zero, as they do in
// float16 (5 exponent bits, smallest normal ~6e-5), which is what loss scaling exists to prevent.
//
// Parse is the one validation: an unknown mode is a *ModeError naming the value and the modes.
// A Mode is a plain value, safe to share between goroutines; the cast functions build graph
// nodes and follow GoMLX's rules for graph building (one goroutine per graph).
package precision
