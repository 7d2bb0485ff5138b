#include <stdlib.h>
#include <string.h>
#include "hostalloc.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

static int state = NITRO_HOSTALLOC_NOT_GLIBC;
static char bad_value[64];

// Runs when the binary loads, before the Go runtime or the plugin start a thread: glibc fixes
// how many arenas threads may take at the first malloc of a thread other than the main one, so
// the limit must be in place before that.
__attribute__((constructor)) static void nitro_hostalloc_init(void) {
	const char *v = getenv("NITRO_HOST_MALLOC");
	if (v != NULL && strcmp(v, "system") == 0) {
		state = NITRO_HOSTALLOC_SYSTEM;
		return;
	}
	if (v != NULL && v[0] != 0 && strcmp(v, "steady") != 0) {
		strncpy(bad_value, v, sizeof bad_value - 1);
		state = NITRO_HOSTALLOC_BAD_VALUE;
		return;
	}
#ifdef __GLIBC__
	const char *t = getenv("GLIBC_TUNABLES");
	if (t != NULL && strstr(t, "glibc.malloc.") != NULL) {
		state = NITRO_HOSTALLOC_TUNABLES;
		return;
	}
	// One arena: a block freed by any thread is reusable by all, and the main heap grows without
	// the 64 MiB bound of a thread arena's heaps. No mmap: large blocks come from that heap.
	// Trimming off (-1): what a step frees stays mapped for the next one.
	if (mallopt(M_ARENA_MAX, 1) != 1) {
		state = NITRO_HOSTALLOC_REFUSED_ARENA;
		return;
	}
	if (mallopt(M_MMAP_MAX, 0) != 1) {
		state = NITRO_HOSTALLOC_REFUSED_MMAP;
		return;
	}
	if (mallopt(M_TRIM_THRESHOLD, -1) != 1) {
		state = NITRO_HOSTALLOC_REFUSED_TRIM;
		return;
	}
	state = NITRO_HOSTALLOC_STEADY;
#endif
}

int nitro_hostalloc_state(void) { return state; }
const char *nitro_hostalloc_bad_value(void) { return bad_value; }

#include <sys/resource.h>

static long minor_faults(void) {
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_minflt;
}

// Allocates n bytes, writes every page, frees them, then does it again, and returns the minor
// page faults of the second round: near zero when the freed block stayed mapped for reuse, about
// n/4096 when it went back to the kernel. Tests use it to check the policy took effect.
long nitro_hostalloc_refault(size_t n) {
	for (int round = 0; round < 2; round++) {
		long before = minor_faults();
		volatile char *p = malloc(n);
		if (p == NULL) return -1;
		for (size_t i = 0; i < n; i += 4096) p[i] = 1;
		free((void *)p);
		if (round == 1) return minor_faults() - before;
	}
	return -1;
}
