// Package dotgrad replaces GoMLX's gradients of Dot and DotGeneral with matrix products.
//
// GoMLX v0.25.0 differentiates a dot product by broadcasting the adjoint and the other operand to
// their joint [batch, lhs free, rhs free, contracted] shape, multiplying, then summing axes away.
// XLA keeps that outer product in memory: the gradient of a 784-512-512-10 MLP at batch 128
// needs 260 MiB of temporary buffers, against under 1 MiB here, and its step runs ~30x slower. Install
// registers gradients that are one DotGeneral each (the adjoint with the other operand), plus a
// transpose back to the operand's axis order when needed.
//
// Dot's axes follow from the operand ranks. A DotGeneral node keeps its axes in an unexported
// struct, so they are parsed from Node.String() ("DotGeneral(lhs=[#3], lhsContractingAxes=[1], ...)"
// after any alias) and checked against the inputs' ids and the shapes; anything that does not
// parse or agree, a non-float dtype, or an adjoint not shaped like the output (a Jacobian) goes to
// the gradient GoMLX had registered, kept by Install. The tests compare both gradients and finite
// differences, so a GoMLX upgrade that changes that text or the gradients fails them.
//
// Nothing returns errors; a gradient panics only if it must fall back and GoMLX had none. The
// caller calls Install once, before building any graph and never concurrently with graph building
// (it writes a process-wide map); gradients may then be built from many goroutines, as in GoMLX.
package dotgrad
