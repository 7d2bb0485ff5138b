// Package hostalloc keeps the CPU PJRT plugin's host buffers resident between steps. XLA's CPU
// client allocates each execution's temporaries with malloc and frees them when it ends; glibc
// serves a block over 32 MiB by mmap and unmaps it on free, and its per-thread arenas give back
// emptied heaps, so every step faulted its temporaries in again, page by page (a transformer at
// batch 128: 14,800 minor faults and about a third of its CPU time per step). Steady sets one
// malloc arena, no mmap for large blocks and no trimming: freed blocks stay in the heap for the
// next step, and the process keeps its peak heap. The caller applies it just before the CPU
// plugin's client starts its threads, and only for that plugin: a GPU keeps step buffers on the
// device, and one arena serializes the GPU compiler's autotuning threads (compiles 5x longer).
// On the CPU it costs a step of many small kernels, whose threads share the arena's lock (a
// transformer at batch 32: 10-15%); "system" is the better choice there (docs/profiling.md).
//
// $NITRO_HOST_MALLOC chooses: unset lets nitro apply it as above; "steady" applies it at load
// wherever the run is; "system" keeps glibc's defaults; a GLIBC_TUNABLES holding any glibc.malloc setting is the user's choice and is left
// alone. Policy and Steady report what is in effect, and return an error naming the variable for
// any other value (nothing is applied then). Without glibc nothing is applied and they say so.
//
// The state is set at load and once by Steady, under a lock; both are safe from any goroutine.
package hostalloc
