// Package prefetch is nitro's data contract and the pipeline that keeps the device fed: each split
// is an index-addressable source (ArrayBatches in memory, SplitArrays to deal one table into train,
// val and test, prefetch/parquet on disk), read ahead by
// workers and delivered in order; CheckBatchAt proves a source serves the batches it should.
// Guide: docs/data.md.
//
// It owns the data contract between a batch source and the training loop (Batch,
// the index-addressable Source with its EpochSource, PartialDropper and SampleOrderer refinements, Data,
// ArrayBatches, SplitArrays, BatchWidth, PadRows, and FieldSpec with CheckFieldSpecs for a field declared
// without data) and the pipeline that keeps the device fed from it.
// Prefetch declares a source with its settings and NoPrefetch declines; both pass BatchAt
// straight through, and Wrap declares every undeclared split at the framework's defaults. Start
// realizes a declaration for one epoch as a Stream on one of three paths behind one Next: a
// fan-out (workers build host batches, one goroutine transfers, a reorder buffer keeps index
// order, an exactly-once ledger checks every completed epoch), one producer goroutine, or inline.
//
// The caller keeps the policy: batch contents, the batch size, when epochs begin, and device
// placement. Transfer and Free are the caller's; the package never touches a device itself, but
// bounds what it holds: DeviceBatches+2 placed batches, about HostBatches host ones.
//
// Errors name what is wrong and where: a failed or panicking BatchAt, pad or Transfer surfaces at
// the consumer as a *BatchError with the batch index, never as a hang, and settings are refused
// naming the field. PadRows, which has no error result, panics on inputs it cannot pad.
//
// Goroutine safety: a Source's BatchAt may run on several goroutines at once within an epoch,
// never concurrently with BeginEpoch (ArrayBatches keeps that contract). A Stream is consumed by
// one goroutine; Close is safe from any goroutine, more than once, and after an error.
package prefetch
