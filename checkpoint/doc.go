// Package checkpoint saves and restores training checkpoints: each is one safetensors file that
// holds everything an exact resume needs, kept by a policy (TopK: the K best by a metric plus the
// newest; EveryN; Memory for tests) and listed in the manifest.json beside it. Guide:
// docs/checkpoints.md. A Record (tensors; epoch, step, metrics, run, experiment values, logger
// and RNG state; the data Position in global batches, which Rebatch maps onto another batch size;
// the caller's opaque Control JSON) is stored as header metadata "nitro.record", with a CRC-32C
// of the data and, first, a SHA-256 of the header, so a record read alone is verified too.
// Checkpointer is the seam; Ranker and Adopter are optional sides; ReadOnly views one for a
// process that shares the writer's directory. Files go through FS and tensorfile.WriteFS: temp
// file, fsync, rename, fsync of the directory, retried on transient errors (WithIORetry); the
// manifest is rewritten the same way, and rotation removes a displaced file only after both are
// durable; the next open finishes removals a killed save left pending.
// Left to the caller: tensors to and from the device, the metric, resume decisions, one writer
// per directory. Errors: a malformed file is a *FormatError naming the file and the field (never a
// panic); I/O errors name the path and the step; ErrNotRotated means the save itself succeeded; a
// newest listed file that does not open is a *NewestError naming the older ones.
// TopK, EveryN, Memory and MemFS are safe for concurrent use; a Record is not.
package checkpoint
