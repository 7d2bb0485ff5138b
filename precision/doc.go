// Package precision is the cast policy of mixed-precision training: which operations compute
// in a narrower dtype, and where the values are cast back.
// Guide: docs/scale.md.
//
// Under BF16, every product (Dot and DotGeneral: matmuls, Dense, Einsum, their gradients) and
// every convolution whose operands are both float32 computes in bfloat16: the backend builder
// of Mode.Backend converts both operands to bfloat16 and the product back to float32. Every other
// operation, so the loss (GoMLX v0.25's cross-entropies have no bfloat16 epsilon), the metrics,
// normalizations, the gradients as they reach the optimizer, the parameters and the optimizer
// state, stays float32: the graph a model builds is unchanged, since GoMLX layers take their
// variables' dtype from their input and a graph-level cast would ask for bfloat16 parameters.
//
// No loss scaling: bfloat16 keeps float32's 8 exponent bits (normal range ~1e-38 to ~3e38) and
// drops mantissa bits only, so small gradients round but do not flush to zero as they do in
// float16 (5 exponent bits, smallest normal ~6e-5), which is what loss scaling exists to prevent.
//
// Parse is the one validation: an unknown mode is a *ModeError naming the value and the modes.
// A Mode is a plain value and Backend is safe for concurrent use (one wrapper per backend for the
// process); a wrapper's builders, like GoMLX's, serve one graph on one goroutine.
package precision
