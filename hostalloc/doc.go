// Package hostalloc keeps the CPU PJRT plugin's large host buffers mapped between steps. XLA's
// CPU client allocates each execution's temporaries with malloc and frees them when it ends;
// glibc maps large blocks on malloc and unmaps them on free, so each step faulted its temporaries
// in again, page by page (a transformer at batch 128: 14,800 minor faults and a third of its CPU
// time a step). The large-block cache defines malloc and its kin in the executable, where the
// plugin's calls bind too: a block of 1 MiB or more comes from an address range reserved once,
// and stays mapped when freed for the next request it fits; smaller ones are glibc's arenas',
// with no mmap and no trimming. Apply turns it on just before the CPU plugin's client starts, and only
// for that plugin: a GPU keeps step buffers on the device. The cost: the process keeps its peak of
// large blocks until it exits.
//
// $NITRO_HOST_MALLOC chooses: unset, Apply turns the cache on; "blocks" turns it on at load,
// wherever the run is; "steady" sets glibc to one arena, no mmap and no trimming at load (it
// keeps every freed block, but a model of many small kernels contends for its one arena);
// "system" keeps glibc's defaults. A GLIBC_TUNABLES holding any glibc.malloc setting is the
// user's and is left alone. Policy and Apply report what is in effect, or return an error naming
// the variable for any other value (nothing is applied then). Without glibc nothing is applied.
// A free of a pointer in the cache's range that it did not hand out stops the process, as glibc's
// own check does. State is set at load and once by Apply, under a lock; all of it is thread-safe.
package hostalloc
