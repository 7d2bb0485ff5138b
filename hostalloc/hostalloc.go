//go:build cgo

package hostalloc

// #include "hostalloc.h"
import "C"

import "fmt"

// Env is the variable that chooses the policy: "steady" (the default) or "system".
const Env = "NITRO_HOST_MALLOC"

// Policy says what was applied at load, in one line for a config report, or an error naming
// Env when its value is neither choice (then nothing was applied).
func Policy() (string, error) {
	switch C.nitro_hostalloc_state() {
	case C.NITRO_HOSTALLOC_STEADY:
		return "steady: one malloc arena, no mmap, no trimming (freed step buffers are reused; $" + Env + "=system for glibc's defaults)", nil
	case C.NITRO_HOSTALLOC_SYSTEM:
		return "glibc's defaults ($" + Env + "=system)", nil
	case C.NITRO_HOSTALLOC_TUNABLES:
		return "glibc's, as $GLIBC_TUNABLES sets it (nitro's steady policy not applied)", nil
	case C.NITRO_HOSTALLOC_BAD_VALUE:
		return "", fmt.Errorf("$%s=%q: want steady (the default: reuse freed host buffers) or system (glibc's defaults)", Env, C.GoString(C.nitro_hostalloc_bad_value()))
	case C.NITRO_HOSTALLOC_REFUSED_ARENA:
		return "glibc's defaults (mallopt refused M_ARENA_MAX=1)", nil
	case C.NITRO_HOSTALLOC_REFUSED_MMAP:
		return "one malloc arena only (mallopt refused M_MMAP_MAX=0)", nil
	case C.NITRO_HOSTALLOC_REFUSED_TRIM:
		return "one malloc arena, no mmap, trimming on (mallopt refused M_TRIM_THRESHOLD=-1)", nil
	}
	return "the C library's defaults (the steady policy needs glibc)", nil
}

// refault is the minor page faults of writing a freed and reallocated block of n bytes (see
// nitro_hostalloc_refault): for the tests.
func refault(n int) int64 { return int64(C.nitro_hostalloc_refault(C.size_t(n))) }
