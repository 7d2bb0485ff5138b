// Package text is a byte-level language-model data source: any UTF-8 text (a file, a folder
// walked in sorted order, or a Parquet string column) served as windows of Context+1 bytes,
// the bytes themselves the tokens (Vocab 256). Batch i of Open's or Split's Source is the
// epoch's windows i*BatchSize to (i+1)*BatchSize-1 as int32 [BatchSize, Context] fields Tokens
// ("tokens", a window's first Context bytes) and Targets ("targets", its last Context bytes);
// window j's position is a pure function of Config.Seed, the epoch and j, so the source is
// index-addressable, prefetch.CheckBatchAt holds, and dist.Shard shards it. Split holds val out
// by file (an FNV hash of the path), by Parquet row (a hash of the text) or as a single file's
// tail. Files are memory-mapped lazily, at most Config.MaxMapped at once, so a corpus larger
// than memory works; a Parquet column is decoded once into a temporary spill that is mapped.
// DefaultCorpus is the Go source tree, which needs no download.
//
// Left to the caller: the context, batch size and batches per epoch, the seed, and Close.
// Errors: bad options, a missing or empty corpus, a context longer than every file and a
// Parquet column that is missing or not one string per row are errors naming the Config field.
// Goroutine safety: BatchAt and Sequential may run on any number of goroutines at once within
// an epoch; BeginEpoch and Close must not overlap them (the prefetch.Source contract).
package text
