// Package compilecache is the process-level cache of compiled programs. Default is one Cache shared by every
// Nitro in the process, so a new handle reuses every program whose Key did not move; New makes a private one.
// Guide: docs/markers.md (what recompiles and why).
//
// A Key is kind, experiment type name, GraphConst hash, hook identity, input names/dtypes/shapes, device
// count, Accum (gradient kind; 1 on the fused train_step kind), Clip (optimizer and train_step kinds)
// and Extra structure such as the optimizer chain description. Device and Host field values have no
// place in it: changing them never recompiles.
// Get compiles on a miss; Stats counts hits, misses and entries; Reset empties the cache and zeroes the
// counters. A miss that is not a new entry (failed compile retried, evicted key) leaves misses > entries.
// A miss next to an entry of the same kind and experiment says which component moved ("accum: 1 -> 2")
// in Lookup.Why and in Explanations. The caller builds the key and the program, and checks a hit against what
// it would build now (core traces its experiment on every hit: an equal key leaves Host values out by
// design); Reset is the escape hatch for what a key cannot see (a global or captured value a hook reads).
//
// Within a process a hook's identity cannot move: Go cannot redefine a function at run time, so a hook
// name and the binary identify the code. What outlives the process (checkpoint
// record, export manifest) stamps BuildIdentity instead: module version, VCS revision and dirty
// flag, and a hash of the binary. The disk compile cache (pjrthook/diskcache) needs none: it keys
// on the program's bytes, which is all the binary contributes to a compiled executable. It is the workspace's one build identity: core
// stamps it too, so that a record and a bundle from one binary name the same build.
//
// Errors: Get refuses an invalid Key (Accum off the gradient and train_step kinds, Clip off the optimizer
// and train_step kinds, duplicate names) and returns compile errors and panics as errors. Goroutine-safe: concurrent Gets of one key
// compile once.
package compilecache
