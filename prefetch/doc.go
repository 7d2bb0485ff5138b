// Package prefetch will own the data pipeline between a batch source and the device: the
// PrefetchIterator / NoPrefetch declarations, the fan-out pipeline (worker goroutines, one transfer
// goroutine, credits, a reorder buffer and an exactly-once ledger), the eval padding stream, and
// index-addressable sources (in-memory batches, Parquet).
//
// Status: contract reserved, not implemented yet; core feeds batches synchronously meanwhile.
// It will leave batch contents and device placement policy to the caller, report source errors
// with the batch index, and every goroutine it starts will end on Close.
package prefetch
