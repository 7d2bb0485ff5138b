//go:build cgo

package hostalloc

// #cgo LDFLAGS: -ldl
// #include "hostalloc.h"
import "C"

import "fmt"

// Env is the variable that chooses the policy: unset (nitro's default), "blocks", "steady" or
// "system".
const Env = "NITRO_HOST_MALLOC"

// Policy says what is in effect, in one line for a config report, or an error naming Env when
// its value is no choice (then nothing is applied, ever).
func Policy() (string, error) { return report(C.nitro_hostalloc_state()) }

// bypassed is said of an allocator an LD_PRELOAD library brought: this package's malloc comes
// first in symbol lookup and hands what it does not keep to glibc's, whatever the policy.
const bypassed = "; the malloc of an LD_PRELOAD library is bypassed (nitro's definitions hand small blocks to glibc's)"

// Apply turns the large-block cache on, once, unless the user chose otherwise (Env set, a malloc
// setting in GLIBC_TUNABLES), and reports what is in effect as Policy does. Call it before the CPU
// plugin's client starts; blocks allocated before it stay glibc's, and are freed by glibc.
func Apply() (string, error) { return report(C.nitro_hostalloc_apply()) }

func report(state C.int) (string, error) {
	line, err := reportState(state)
	if err == nil && C.nitro_hostalloc_preloaded() != 0 {
		line += bypassed
	}
	return line, err
}

func reportState(state C.int) (string, error) {
	switch state {
	case C.NITRO_HOSTALLOC_BLOCKS:
		return "large-block cache: blocks of 1 MiB or more stay mapped for reuse when freed; below, glibc's arenas without mmap or trimming ($" + Env + "=system for glibc's defaults)", nil
	case C.NITRO_HOSTALLOC_BLOCKS_REFUSED_MMAP:
		return "large-block cache for blocks of 1 MiB or more; below, glibc's defaults (mallopt refused M_MMAP_THRESHOLD=1 MiB)", nil
	case C.NITRO_HOSTALLOC_BLOCKS_REFUSED_TRIM:
		return "large-block cache for blocks of 1 MiB or more; below, glibc's arenas without mmap, trimming on (mallopt refused M_TRIM_THRESHOLD=-1)", nil
	case C.NITRO_HOSTALLOC_STEADY:
		return "steady ($" + Env + "=steady): one malloc arena, no mmap, no trimming", nil
	case C.NITRO_HOSTALLOC_PENDING:
		return "glibc's defaults: the large-block cache serves the CPU plugin's step buffers, and no CPU plugin has started", nil
	case C.NITRO_HOSTALLOC_SYSTEM:
		return "glibc's defaults ($" + Env + "=system)", nil
	case C.NITRO_HOSTALLOC_TUNABLES:
		return "glibc's, as $GLIBC_TUNABLES sets it (nitro's policy not applied)", nil
	case C.NITRO_HOSTALLOC_BAD_VALUE:
		return "", fmt.Errorf("$%s=%q: want blocks (the default: freed large host buffers are reused), steady (one malloc arena) or system (glibc's defaults)", Env, C.GoString(C.nitro_hostalloc_bad_value()))
	case C.NITRO_HOSTALLOC_REFUSED_RANGE:
		return "glibc's defaults (the large-block cache could not reserve its address range: is the address space limited, ulimit -v?)", nil
	case C.NITRO_HOSTALLOC_REFUSED_ARENA:
		return "glibc's defaults (mallopt refused M_ARENA_MAX=1)", nil
	case C.NITRO_HOSTALLOC_REFUSED_MMAP:
		return "one malloc arena only (mallopt refused M_MMAP_MAX=0)", nil
	case C.NITRO_HOSTALLOC_REFUSED_TRIM:
		return "one malloc arena, no mmap, trimming on (mallopt refused M_TRIM_THRESHOLD=-1)", nil
	}
	return "the C library's defaults (nitro's policies need glibc)", nil
}

// Blocks counts the large-block cache's work so far (all zero while it is off).
type Blocks struct {
	Served, Reused                        int64 // blocks handed out; of them, from freed blocks
	InUseBytes, CachedBytes, DroppedBytes int64 // in blocks in use; kept for reuse; given back
	ReservedBytes                         int64 // the address range blocks come from
}

// BlockStats reports the large-block cache's counters.
func BlockStats() Blocks {
	s := C.nitro_blocks_stats()
	return Blocks{Served: int64(s.served), Reused: int64(s.reused), InUseBytes: int64(s.in_use_bytes),
		CachedBytes: int64(s.cached_bytes), DroppedBytes: int64(s.dropped_bytes), ReservedBytes: int64(s.reserved_bytes)}
}

func refault(n int) int64 { return int64(C.nitro_hostalloc_refault(C.size_t(n))) }
