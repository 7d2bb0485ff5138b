// Package hostalloc is the C allocator a nitro program opts into by importing it (import _
// "github.com/nitro-go/nitro/hostalloc"; the nitro CLI and nitro new's template do): jemalloc,
// preloaded with its decay off, so that the CPU plugin's large step buffers, freed at each step's
// end, stay mapped for the next step instead of being unmapped and faulted in again page by page.
// A program that imports only core keeps its own allocator.
//
// Malloc binds when the dynamic loader starts the process, so the choice cannot be made inside
// it: this package's init re-executes the program once, with LD_PRELOAD naming libjemalloc.so.2
// and MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1 (a MALLOC_CONF of the user's is kept).
// Nothing is re-executed when $NITRO_HOST_MALLOC=system (glibc's defaults), when LD_PRELOAD is
// already set (the deployment's allocator stands), or when no libjemalloc.so.2 is found
// ($NITRO_JEMALLOC names the file; Debian's libjemalloc2 installs it): glibc's defaults then run,
// and Policy says so and how to have jemalloc. $NITRO_HOST_MALLOC=jemalloc makes a missing
// library an error; any other value is refused by Policy, naming the variable. The backend reads
// Policy through hostalloc/seam for the config report. All of it is safe for concurrent use.
//
// Why jemalloc and no allocator of ours (docs/profiling.md, "Host allocators side by side"): on
// the transformer at batch 128 glibc's defaults fault 14,759 pages a step; jemalloc with its decay
// off faulted 2 and spent 1.01x the CPU of the large-block cache this package used to define,
// which it replaced.
package hostalloc
