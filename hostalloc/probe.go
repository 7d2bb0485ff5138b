//go:build cgo

package hostalloc

// The C allocator's entry points, for this package's tests (Go test files cannot use cgo). The
// linker leaves them out of programs that do not call them.

/*
#include <stdlib.h>
#include <malloc.h>

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
func cUsable(p unsafe.Pointer) int              { return int(C.malloc_usable_size(p)) }
func cAlignedAlloc(align, n int) unsafe.Pointer { return C.aligned_alloc(C.size_t(align), C.size_t(n)) }
func cMemalign(align, n int) unsafe.Pointer     { return C.memalign(C.size_t(align), C.size_t(n)) }
func cPosixMemalign(align, n int) (unsafe.Pointer, int) {
	var p unsafe.Pointer
	rc := C.probe_posix_memalign(&p, C.size_t(align), C.size_t(n))
	return p, int(rc)
}
