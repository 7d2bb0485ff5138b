// Package tensorfile is the one home of tensor files and durable writes: DType (the safetensors
// spelling, its byte width, its GoMLX/PJRT dtype), the safetensors codec, and WriteFile /
// WriteStream / WriteFS / WriteDir (temporary file, fsync, rename, fsync of the directory).
//   - The codec trusts nothing it reads: the header is bounded (MaxHeaderLen), walked token by
//     token (a duplicate key is refused, never resolved), sizes are overflow-checked and the byte
//     ranges must tile the data exactly; Encode writes the data's CRC-32C, ReadData checks it.
//   - EncodeHeader, ReadRawHeader, ParseHeader and ReadData are the steps, for a format on top
//     (checkpoint's signed record) that adds its own metadata and checks between them.
//   - OpenRegular opens only a regular file, without waiting on a named pipe: readers of run dirs
//     and records (the board, checkpoints) never hang on a FIFO someone left there.
//   - CheckDepth refuses JSON nested past a limit (MaxJSONDepth for nitro's files) in one pass over
//     the bytes; CheckUniqueKeys runs it, then refuses a key twice in an object, naming its path.
//     Readers of manifests and records call them before anything else parses the bytes.
//   - A durable write leaves path either as it was or complete, even across a crash; on a failure
//     before the rename no temporary file is left (their names start with TempPrefix).
//
// Left to the caller: what metadata means, converting tensors to and from a device, retrying a
// failed write (rewrite from scratch: a second fsync proves nothing), one writer per path.
// Errors: a malformed file is a *FormatError naming the file and the field, never a panic; an
// invalid tensor or name to encode is an error naming it; a failed write is a *WriteError naming
// the path and the step. Goroutine-safe: every function; a Tensor's Data is shared, not copied.
// Imports no nitro module.
package tensorfile
