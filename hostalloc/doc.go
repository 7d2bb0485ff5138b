// Package hostalloc keeps the CPU PJRT plugin's large host buffers mapped between steps. XLA's
// CPU client allocates each step's temporaries with malloc and frees them when it ends; glibc maps
// large blocks on malloc and unmaps them on free, so each step faulted its temporaries in again.
// This package defines malloc and its kin in the executable, where the plugin's calls bind too: a
// block of 1 MiB or more comes from an address range reserved once and stays mapped when freed
// for the next request it fits; smaller ones are glibc's arenas', with no mmap and no trimming.
// The cost: the process keeps its peak of large blocks until it exits.
//
// Linking it is the opt-in: a program imports it (import _ "github.com/nitro-go/nitro/hostalloc";
// the nitro CLI and nitro new's template do), and its init registers it with hostalloc/seam, which
// the backend reads; a program that imports only core keeps its own allocator. The backend calls
// Apply just before the CPU plugin's client starts, never under a GPU. $NITRO_HOST_MALLOC: "blocks"
// turns the cache on at load; "steady", one glibc arena with no mmap or trimming, at load;
// "system", glibc's defaults; anything else is refused by Policy and Apply, naming the variable. A
// GLIBC_TUNABLES malloc setting is left alone. An allocator loaded ahead of glibc (LD_PRELOAD)
// owns malloc: this package stands aside, hands every call to it, and reports it ("blocks" or
// "steady" then is refused). Without glibc nothing is applied. A free of a pointer in the cache's
// range that it did not hand out stops the process, as glibc's own check does. All of it is
// thread-safe.
//
// Figures (docs/profiling.md, "Host allocators side by side"): on the transformer at batch 128 the
// cache faults 5 pages a step against glibc's 14,759 (CPU 1.39x the cache's); jemalloc preloaded
// with its decay off matches it (CPU 1.01x, 2 faults, peak RSS 1.06x), as does tcmalloc with
// TCMALLOC_RELEASE_RATE=0 (0.90x, none, 0.90x); either is a well-kept replacement.
package hostalloc
