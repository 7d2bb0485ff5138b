// Package parquet is a prefetch.Source over Parquet files: one file, or every *.parquet file in
// a directory read as one dataset. Config.Fields maps columns to batch fields: a numeric column
// to a [batch] tensor, a fixed-size list column to [batch, Shape...], in the declared dtype.
// BatchAt(i) serves batch i of the epoch's plan (in order, or a permutation drawn from the seed
// and the epoch by BeginEpoch), decoding only the row groups its samples live in, through a
// bounded LRU cache of decoded row groups. Config.Rows carves a split (a prefix, a seeded
// validation set) out of the files without rewriting them.
//
// Left to the caller: the batch size, the shuffle seed, the cache size (a shuffled epoch wants
// every row group cached), normalization and any other per-batch transform, and Close.
//
// Errors: Open checks every column of every file against its field (a missing column, a list
// where a number is declared or the reverse, a column that cannot convert to the dtype) and
// names the file and the column. Files are untrusted: a truncated or corrupted file, a null, a
// list of the wrong length or a value out of the dtype's range is an error naming the file, row
// group, column and row; the library's panics on corrupted data are recovered into errors.
//
// Goroutine safety: BatchAt and Sequential may run on any number of goroutines at once within
// an epoch, each row group decoded once however many ask for it; BeginEpoch and Close must not
// overlap them (the prefetch.Source contract).
package parquet
