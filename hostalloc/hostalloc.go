//go:build cgo

package hostalloc

// #include "hostalloc.h"
import "C"

import "fmt"

// Env is the variable that chooses the policy: "steady" (the default) or "system".
const Env = "NITRO_HOST_MALLOC"

// BackendEnv is the variable that names the backend (package backend's EnvBackend): when it names
// another backend than the CPU plugin, the policy waits for Steady.
const BackendEnv = C.NITRO_HOSTALLOC_BACKEND_ENV

// Policy says what is in effect, in one line for a config report, or an error naming Env when
// its value is neither choice (then nothing is applied, ever).
func Policy() (string, error) { return report(C.nitro_hostalloc_state()) }

// Steady applies the steady policy, once, unless the user chose otherwise (Env=system, a malloc
// setting in GLIBC_TUNABLES), and reports what is in effect as Policy does. Call it before the CPU
// plugin's client starts its threads: the one-arena limit holds for threads that take an arena
// after it.
func Steady() (string, error) { return report(C.nitro_hostalloc_steady()) }

func report(state C.int) (string, error) {
	switch state {
	case C.NITRO_HOSTALLOC_STEADY:
		line := "steady: one malloc arena, no mmap, no trimming (freed step buffers are reused; $" + Env + "=system for glibc's defaults)"
		if n := int(C.nitro_hostalloc_arenas_before()); n > 1 {
			line += fmt.Sprintf("; applied after %d arenas were taken: their threads keep them, and glibc maps a block over 64 MiB from one of them directly", n)
		}
		return line, nil
	case C.NITRO_HOSTALLOC_PENDING:
		return "glibc's defaults: the steady policy (one malloc arena, no mmap, no trimming) serves the CPU plugin's step buffers, and no CPU plugin has started", nil
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

func refault(n int) int64 { return int64(C.nitro_hostalloc_refault(C.size_t(n))) }
