//go:build cgo

package hostalloc

// #cgo LDFLAGS: -ldl
// #include "hostalloc.h"
import "C"

import (
	"fmt"

	"github.com/nitro-go/nitro/hostalloc/seam"
)

// Env is the variable that chooses the policy: unset (nitro's default), "blocks", "steady" or
// "system".
const Env = seam.Env

// The backend finds the allocator through the seam: linking this package is the opt-in.
func init() { seam.Register(seam.Allocator{Policy: Policy, Apply: Apply}) }

// Policy says what is in effect, in one line for a config report, or an error naming Env when
// its value is no choice (then nothing is applied, ever).
func Policy() (string, error) { return report(C.nitro_hostalloc_state()) }

// Apply turns the large-block cache on, once, unless the user chose otherwise (Env set, a malloc
// setting in GLIBC_TUNABLES, another allocator loaded ahead of glibc), and reports what is in
// effect as Policy does. Call it before the CPU plugin's client starts; blocks allocated before it
// stay glibc's, and are freed by glibc.
func Apply() (string, error) { return report(C.nitro_hostalloc_apply()) }

func report(state C.int) (string, error) {
	switch state {
	case C.NITRO_HOSTALLOC_OTHER_OWNER:
		return otherOwner() + ": hostalloc stands aside, every call of its malloc and kin goes there", nil
	case C.NITRO_HOSTALLOC_OTHER_OWNER_CHOICE:
		return "", fmt.Errorf("$%s=%q: malloc belongs to %s, loaded ahead of glibc (LD_PRELOAD?), and nitro's policies apply only over glibc's: unset %s, or drop that allocator", Env, C.GoString(C.nitro_hostalloc_bad_value()), otherOwner(), Env)
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

// otherOwner names the allocator that owns malloc when it is not glibc's.
func otherOwner() string { return "the allocator of " + C.GoString(C.nitro_blocks_owner_file()) }

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
