package pjrthook

/*
#define _GNU_SOURCE // RUSAGE_THREAD
#include <stdlib.h> // defines __GLIBC__ under glibc
#include <string.h>
#include <sys/resource.h>
#ifdef __GLIBC__
#include <malloc.h>
// Freed blocks up to 32 MiB (glibc's largest mmap threshold) come from the heap, and a heap's
// free top is never handed back: a step's buffers reuse the pages the last step freed.
static int nitro_retain_freed(void) {
	return mallopt(M_MMAP_THRESHOLD, 32 << 20) && mallopt(M_TRIM_THRESHOLD, 1 << 30);
}
static int nitro_glibc(void) { return 1; }
#else
static int nitro_retain_freed(void) { return 0; }
static int nitro_glibc(void) { return 0; }
#endif

// The minor page faults of rounds of a step-like pattern: n blocks of size bytes allocated,
// written and freed.
static long nitro_churn_faults(int rounds, int n, size_t size) {
	struct rusage before, after;
	void *blocks[16];
	if (n > 16) n = 16;
	getrusage(RUSAGE_THREAD, &before);
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < n; i++) {
			blocks[i] = malloc(size);
			if (blocks[i]) memset(blocks[i], r, size);
		}
		for (int i = 0; i < n; i++) free(blocks[i]);
	}
	getrusage(RUSAGE_THREAD, &after);
	return after.ru_minflt - before.ru_minflt;
}
*/
import "C"

import (
	"os"
	"runtime"
	"strings"
	"sync"
)

// EnvMallocRetain names the variable that, set to "off", keeps the C library's default malloc
// policy (see RetainFreedMemory).
const EnvMallocRetain = "NITRO_MALLOC_RETAIN"

var retain struct {
	once sync.Once
	on   bool
}

// RetainFreedMemory makes the C heap keep the pages it frees (glibc only; once per process) and
// reports whether that policy is in force. The XLA CPU plugin allocates every program output and
// frees every donated input with malloc: under glibc's default policy the megabyte-sized buffers
// of a training step go back to the kernel when freed and return as zeroed pages that the next
// step faults in, one fault per 4 KiB (on the MLP family's two-program step, 350-750 faults and
// about 1 ms of system time per step). Kept, the process's resident memory stays at its peak
// instead. $NITRO_MALLOC_RETAIN=off leaves the default.
func RetainFreedMemory() bool {
	retain.once.Do(func() {
		if strings.EqualFold(strings.TrimSpace(os.Getenv(EnvMallocRetain)), "off") {
			return
		}
		retain.on = C.nitro_retain_freed() != 0
	})
	return retain.on
}

// glibc reports whether the C library is glibc, the one whose policy RetainFreedMemory sets.
func glibc() bool { return C.nitro_glibc() != 0 }

// churnFaults is the page faults of rounds of n blocks of size bytes malloc'ed, written and
// freed on one thread.
func churnFaults(rounds, n, size int) int64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return int64(C.nitro_churn_faults(C.int(rounds), C.int(n), C.size_t(size)))
}
