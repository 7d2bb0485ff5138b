#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hostalloc.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

static int state = NITRO_HOSTALLOC_NOT_GLIBC;
static char bad_value[64];
static pthread_mutex_t apply_mu = PTHREAD_MUTEX_INITIALIZER;

static void apply_steady(void);
static void apply_blocks(void);

// Reads the user's choice when the binary loads. Unset, nothing happens until the CPU plugin
// starts (nitro_hostalloc_apply). An explicit choice holds from load, wherever the run is:
// "steady" must be set before the Go runtime or a plugin start a thread, because glibc fixes how
// many arenas threads may take when a thread first needs one past those it made freely, and each
// Go thread takes one at its start; only a limit set here holds for every thread. Another
// allocator that owns malloc (loaded ahead of glibc) is the user's choice: nothing of nitro's
// applies over it, and a choice of nitro's policy too is refused (Policy's error).
__attribute__((constructor)) static void nitro_hostalloc_init(void) {
	const char *v = getenv("NITRO_HOST_MALLOC");
	if (v != NULL && v[0] != 0 && strcmp(v, "system") != 0 && strcmp(v, "steady") != 0 && strcmp(v, "blocks") != 0) {
		strncpy(bad_value, v, sizeof bad_value - 1);
		state = NITRO_HOSTALLOC_BAD_VALUE;
		return;
	}
	if (nitro_blocks_other_owner()) {
		state = NITRO_HOSTALLOC_OTHER_OWNER;
		if (v != NULL && (strcmp(v, "steady") == 0 || strcmp(v, "blocks") == 0)) {
			strncpy(bad_value, v, sizeof bad_value - 1);
			state = NITRO_HOSTALLOC_OTHER_OWNER_CHOICE;
		}
		return;
	}
	if (v != NULL && strcmp(v, "system") == 0) {
		state = NITRO_HOSTALLOC_SYSTEM;
		return;
	}
#ifdef __GLIBC__
	const char *t = getenv("GLIBC_TUNABLES");
	if (t != NULL && strstr(t, "glibc.malloc.") != NULL) {
		state = NITRO_HOSTALLOC_TUNABLES;
		return;
	}
	state = NITRO_HOSTALLOC_PENDING;
	if (v != NULL && strcmp(v, "steady") == 0) {
		apply_steady();
	} else if (v != NULL && strcmp(v, "blocks") == 0) {
		apply_blocks();
	}
#endif
}

// apply_steady sets the one-arena policy if nothing is in effect yet (run before any thread).
static void apply_steady(void) {
#ifdef __GLIBC__
	if (state != NITRO_HOSTALLOC_PENDING) return;
	// One arena: a block freed by any thread is reusable by all, and the main heap grows without
	// the 64 MiB bound of a thread arena's heaps. No mmap: large blocks come from that heap.
	// Trimming off (-1): what a step frees stays mapped for the next one.
	if (mallopt(M_ARENA_MAX, 1) != 1) {
		state = NITRO_HOSTALLOC_REFUSED_ARENA;
	} else if (mallopt(M_MMAP_MAX, 0) != 1) {
		state = NITRO_HOSTALLOC_REFUSED_MMAP;
	} else if (mallopt(M_TRIM_THRESHOLD, -1) != 1) {
		state = NITRO_HOSTALLOC_REFUSED_TRIM;
	} else {
		state = NITRO_HOSTALLOC_STEADY;
	}
#endif
}

// apply_blocks turns the large-block cache on if nothing is in effect yet (callers hold apply_mu,
// or run before any thread). Below the cache's threshold glibc's arenas stay, each thread on its
// own, but keep what is freed too: a fixed mmap threshold at the cache's (glibc's dynamic one
// starts at 128 KiB and maps blocks until a free raises it) and no trimming (a thread arena's heap
// shrinks and grows again every step otherwise: hundreds of faults a step for an MLP's 4 MiB
// arrays). Both are process-wide settings, so unlike the arena limit they hold for threads
// already running.
static void apply_blocks(void) {
#ifdef __GLIBC__
	if (state != NITRO_HOSTALLOC_PENDING) return;
	if (!nitro_blocks_enable()) {
		state = NITRO_HOSTALLOC_REFUSED_RANGE;
	} else if (mallopt(M_MMAP_THRESHOLD, (int)nitro_blocks_min()) != 1) {
		state = NITRO_HOSTALLOC_BLOCKS_REFUSED_MMAP;
	} else if (mallopt(M_TRIM_THRESHOLD, -1) != 1) {
		state = NITRO_HOSTALLOC_BLOCKS_REFUSED_TRIM;
	} else {
		state = NITRO_HOSTALLOC_BLOCKS;
	}
#endif
}

// Turns the large-block cache on if nothing is in effect yet; returns the state.
int nitro_hostalloc_apply(void) {
	pthread_mutex_lock(&apply_mu);
	apply_blocks();
	int s = state;
	pthread_mutex_unlock(&apply_mu);
	return s;
}

int nitro_hostalloc_state(void) {
	pthread_mutex_lock(&apply_mu);
	int s = state;
	pthread_mutex_unlock(&apply_mu);
	return s;
}
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
