// Package hostalloc keeps the PJRT plugin's host buffers resident between steps. XLA's CPU
// client allocates each execution's temporaries with malloc and frees them when it ends; glibc
// serves a block over 32 MiB by mmap and unmaps it on free, and its per-thread arenas give back
// emptied heaps, so every step faulted its temporaries in again, page by page (a transformer at
// batch 128: 14,800 minor faults and about a third of its CPU time per step). Linking this package
// sets, before any thread starts, one malloc arena, no mmap for large blocks and no trimming:
// freed blocks stay in the heap for the next step, and the process keeps its peak heap.
//
// $NITRO_HOST_MALLOC chooses: "steady" (or unset) applies it; "system" keeps glibc's defaults;
// a GLIBC_TUNABLES holding any glibc.malloc setting is the user's choice and is left alone.
// Policy reports what was done, and returns an error naming the variable for any other value
// (nothing is applied then). Without glibc nothing is applied and Policy says so.
//
// The only state is set once at load; Policy is safe from any goroutine.
package hostalloc
