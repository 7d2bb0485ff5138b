//go:build cgo

package hostalloc

// The C allocator's entry points, for this package's tests (Go test files cannot use cgo). The
// linker leaves them out of programs that do not call them.

/*
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>

// probe_cxx pairs operator new and delete as a C++ library does: under jemalloc preloaded, new
// allocates inside jemalloc and delete calls free, which binds to this package's. -1: no C++
// runtime is loaded.
static int probe_cxx(int n) {
	void *(*nw)(size_t) = (void *(*)(size_t))dlsym(RTLD_DEFAULT, "_Znwm");
	void (*del)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "_ZdlPv");
	if (nw == NULL || del == NULL) return -1;
	for (int i = 0; i < n; i++) {
		char *p = nw((size_t)(16 + i * 97 % 5000));
		p[0] = 1;
		del(p);
	}
	return 0;
}

// probe_owner_blocks hands blocks that the owner of malloc (the next definition: glibc's, or a
// preloaded allocator's) made itself to this package's free, realloc and malloc_usable_size; 0
// when every answer was right.
static int probe_owner_blocks(void) {
	void *(*m)(size_t) = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
	if (m == NULL) return 1;
	size_t sizes[] = {24, 4000, 300000, 4 << 20};
	for (int i = 0; i < 4; i++) {
		char *p = m(sizes[i]);
		if (p == NULL || malloc_usable_size(p) < sizes[i]) return 2;
		memset(p, 7, sizes[i]);
		p = realloc(p, sizes[i] * 2);
		if (p == NULL || p[sizes[i] - 1] != 7) return 3;
		free(p);
	}
	return 0;
}

static int probe_posix_memalign(void **out, size_t align, size_t n) { return posix_memalign(out, align, n); }
static void *probe_valloc(size_t n) { return valloc(n); }
static void *probe_reallocarray(void *p, size_t count, size_t size) { return reallocarray(p, count, size); }
*/
import "C"

import "unsafe"

func cMalloc(n int) unsafe.Pointer                    { return C.malloc(C.size_t(n)) }
func cCalloc(count, size int) unsafe.Pointer          { return C.calloc(C.size_t(count), C.size_t(size)) }
func cRealloc(p unsafe.Pointer, n int) unsafe.Pointer { return C.realloc(p, C.size_t(n)) }
func cReallocArray(p unsafe.Pointer, count, size int) unsafe.Pointer {
	return C.probe_reallocarray(p, C.size_t(count), C.size_t(size))
}
func cValloc(n int) unsafe.Pointer              { return C.probe_valloc(C.size_t(n)) }
func cFree(p unsafe.Pointer)                    { C.free(p) }
func cPvalloc(n int) unsafe.Pointer             { return C.pvalloc(C.size_t(n)) }
func cxxNewDelete(n int) int                    { return int(C.probe_cxx(C.int(n))) }
func ownerBlocks() int                          { return int(C.probe_owner_blocks()) }
func cUsable(p unsafe.Pointer) int              { return int(C.malloc_usable_size(p)) }
func cAlignedAlloc(align, n int) unsafe.Pointer { return C.aligned_alloc(C.size_t(align), C.size_t(n)) }
func cMemalign(align, n int) unsafe.Pointer     { return C.memalign(C.size_t(align), C.size_t(n)) }
func cPosixMemalign(align, n int) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	rc := C.probe_posix_memalign(&p, C.size_t(align), C.size_t(n))
	return p, int(rc)
}
