// Package idx reads and writes the idx format of MNIST and its relatives (Fashion-MNIST, KMNIST,
// EMNIST), trusting nothing it reads. Guide: docs/data.md#the-idx-format.
//
// The format is a big-endian header (two zero bytes, an element type code, the number of
// dimensions, each dimension as a uint32) followed by the elements, big-endian, row-major. ReadFile gunzips a file
// that starts with the gzip magic; Decode reads a plain stream.
//   - Nothing read is trusted: the magic, the type code and every dimension are checked, the
//     element count is overflow-checked and bounded by MaxBytes before anything is allocated
//     for it, memory grows only with the bytes actually read, a short stream is "truncated" and
//     bytes after the data are "trailing data".
//   - ReadImages and ReadLabels are the dataset case: a 3-d uint8 array (n, rows, cols) and a
//     1-d uint8 array of n labels; Pixels are as stored (0..255): scaling is the caller's.
//
// Errors: a malformed stream is a *FormatError naming the file (when known), the byte offset and
// what is wrong, never a panic; an unreadable file is the os error, wrapped with its path.
// Goroutine-safe: every function; an Array is not copied on read and is the caller's.
// Imports nothing outside the standard library.
package idx
