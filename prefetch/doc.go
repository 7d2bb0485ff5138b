// Package prefetch owns the data contract between a batch source and the training loop: the Batch
// type (host arrays by field name, the batch on axis 0), the index-addressable Source with its
// EpochSource and PartialDropper refinements, Data (splits by name), and ArrayBatches, an
// in-memory source that cuts whole-dataset arrays into batches, optionally reshuffled per epoch
// as a pure function of seed and epoch. BatchWidth and PadRows check and pad a batch's leading
// axis. The fan-out pipeline (workers, a transfer goroutine, a reorder buffer) arrives with its
// own issue; until then callers read sources synchronously.
//
// The caller keeps the policy: batch contents and field names, the batch size, when epochs begin,
// and device placement; this package never touches a device. Errors name what is wrong and where
// (the field, the batch index, both lengths of a mismatch); PadRows, which has no error result,
// panics on inputs it cannot pad.
//
// Goroutine safety: a Source's BatchAt may be called from several goroutines at once within an
// epoch, never concurrently with BeginEpoch, and returns fresh tensors the caller owns.
// ArrayBatches keeps that contract. The package starts no goroutines.
package prefetch
