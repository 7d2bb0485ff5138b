#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hostalloc.h"
#ifdef __GLIBC__
#include <malloc.h>
#endif

static int state = NITRO_HOSTALLOC_NOT_GLIBC;
static int arenas_before;
static char bad_value[64];
static pthread_mutex_t apply_mu = PTHREAD_MUTEX_INITIALIZER;

// gpu_possible: the run may be on a GPU, so the steady policy waits for the CPU plugin to start
// (nitro_hostalloc_steady): $NITRO_BACKEND names another backend than the CPU plugin, or leaves
// the choice to nitro on a host with an NVIDIA driver (where a CUDA plugin is preferred).
static int gpu_possible(void) {
	const char *b = getenv(NITRO_HOSTALLOC_BACKEND_ENV);
	if (b != NULL && b[0] != 0 && strcmp(b, "auto") != 0) {
		return strcmp(b, "xla") != 0 && strcmp(b, "pjrt") != 0 && strcmp(b, "stablehlo") != 0;
	}
	return access("/proc/driver/nvidia/version", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0;
}

static void apply_steady(void);

// Reads the user's choice when the binary loads, and applies the steady policy then, before the
// Go runtime or a plugin start a thread, when the run can only be on the CPU. glibc fixes how
// many arenas threads may take when a thread first needs one past those it made freely, and each
// Go thread takes one at its start: only a limit set here holds for every thread. Where the run
// may be on a GPU it waits: one arena there serializes the GPU compiler's autotuning threads.
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
	state = NITRO_HOSTALLOC_PENDING;
	// An explicit "steady" is the user's choice and holds from load, GPU or not; unset, nitro
	// chooses by where the run can be.
	if ((v != NULL && v[0] != 0) || !gpu_possible()) apply_steady();
#endif
}

#ifdef __GLIBC__
// arenas counts the malloc arenas threads have taken so far (malloc_info writes one <heap> each).
static int arenas(void) {
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	if (f == NULL) return -1;
	if (malloc_info(0, f) != 0) {
		fclose(f);
		free(buf);
		return -1;
	}
	fclose(f);
	int n = 0;
	for (char *p = buf; p != NULL && (p = strstr(p, "<heap nr=")) != NULL; p++) n++;
	free(buf);
	return n;
}
#endif

// apply_steady sets the policy if it is still pending (callers hold apply_mu, or run before any
// thread).
static void apply_steady(void) {
#ifdef __GLIBC__
	if (state != NITRO_HOSTALLOC_PENDING) return;
	arenas_before = arenas();
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

// Applies the steady policy now if it waited at load; returns the state. Threads that took an
// arena before keep it (arenas_before counts them).
int nitro_hostalloc_steady(void) {
	pthread_mutex_lock(&apply_mu);
	apply_steady();
	int s = state;
	pthread_mutex_unlock(&apply_mu);
	return s;
}

int nitro_hostalloc_arenas_before(void) { return arenas_before; }
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
