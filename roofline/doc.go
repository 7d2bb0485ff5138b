// Package roofline measures what a device can compute and says how much of it a training run
// uses: Measure times one square matrix product on a GoMLX backend (the operation a transformer
// step spends most of its time in) and reports its rate, the roofline; Utilization divides a
// run's model FLOPs per second by it, the model FLOPs utilization (MFU) a step's time alone
// cannot show. Cached measures once per backend and dtype for the process, since a measurement
// costs about a second of the device.
//
// Left to the caller: the FLOPs a model spends per token (6N for the N weights of a transformer
// a token passes through, forward and backward, plus its attention term) and the tokens it
// processes per second; the device count a run spans (the roofline is one device's).
//
// Errors: a backend that cannot build or run the product, a size below 1; nothing panics out
// of an exported function. Measure and Cached are safe for concurrent use; a measurement run
// while other programs use the device reads low, so callers measure before training starts.
package roofline
