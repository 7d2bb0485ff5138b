// Package checkpoint stores training checkpoints: a Record (tensors as plain little-endian bytes
// plus epoch, step, metrics, run, experiment values, logger, RNG and data-position state, and the
// caller's opaque Control JSON) is one safetensors file, its metadata JSON under the header's
// "__metadata__" key "nitro.record" with a CRC-32C of the data and, first, a SHA-256 of the header
// itself, so that the record (epoch, step, …) read alone is verified too. The record and its
// digest are this package's; the safetensors codec, DType and Tensor are tensorfile's (not
// github.com/nlpodyssey/safetensors: that library decodes the header into a map, where a duplicate
// tensor name silently wins, needs the whole file in memory even for the header, reorders tensors
// by dtype and reports errors without the field). Checkpointer is the seam: TopK (K best by a metric plus the newest), EveryN, Memory;
// Ranker (the metric TopK ranks by) and Adopter (take the run's directory) are optional sides.
// ReadOnly views a checkpointer for a process that shares the writer's directory: it reads,
// writes nothing, and leaves pending removals to the writer.
// Files go through FS and tensorfile.WriteFS: temp file, fsync, rename, fsync of the directory,
// retried on transient errors (WithIORetry); the manifest.json beside them is rewritten the same way, and rotation
// removes a displaced file only after both are durable.
// Left to the caller: converting tensors to and from the device, choosing the metric (a metric
// no record carries only makes checkpoints unscored), resume decisions, one writer per directory.
// Where a manifest lists a file, the two must agree (epoch, step, stop reason, score); the next
// open of a directory (Latest, Load) finishes the removals a killed save left pending; a newest
// listed file that does not open is a *NewestError naming the older ones.
// Errors: a malformed file is a *FormatError naming the file and the field (never a panic); I/O
// errors name the path and the step; ErrNotRotated means the save itself succeeded. A file a
// failed or interrupted save left unlisted is marked displaced beforehand; the next Save removes it.
// TopK, EveryN, Memory and MemFS are safe for concurrent use; a Record is not.
package checkpoint
