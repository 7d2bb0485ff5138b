// Package diskcache is nitro's persistent compile cache: a folder of compiled executables, one
// file per key, that outlives the process, so a program compiles once per machine. It is plain Go
// over a small Call interface (the interposer in package pjrthook implements it over the PJRT
// C API; tests use a fake), so every policy below is tested without a plugin.
//
// The key is SHA-256 over the program's format and bytes, the serialized compile options, the
// plugin file's SHA-256, the PJRT API version, platform name and version, device count and kind,
// the host CPU's feature flags, $XLA_FLAGS and the entry format. An entry is magic, metadata (the
// key, the program's name, each part's digest), the executable and a SHA-256 over all of it,
// written durably (temporary file, fsync, rename): concurrent writers of one key leave one whole
// entry, and a process that exits mid-write leaves none. A Call that is a Holder gets its
// executable back at once; the entry is serialized and written in the background, one at a time,
// once no compile has run for a second, and the Holder's owner finishes that write before
// destroying the executable (Flush: all, at once).
//
// Any read failure (truncated, flipped, foreign, refused by the plugin) is a miss that deletes the
// entry and says so once, never an error or a wrong program. Only rank 0 writes. A folder that
// cannot be written is warned about once and the process runs uncached; past MaxBytes the least
// recently used entries go. A miss next to entries of the same program name says what moved
// against the nearest of them (see explainMiss).
package diskcache
