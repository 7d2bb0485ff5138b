// The large-block cache: blocks of BLOCKS_MIN bytes or more, which glibc always maps on malloc and
// unmaps on free (so a step's temporaries fault in again, page by page, every step), come from an
// address range reserved once; a freed block stays mapped and serves the next request it fits.
// Everything smaller goes to glibc's allocator, arenas and all.
//
// These definitions in the executable come before every library's in symbol lookup, for the PJRT
// plugin loaded later too. Until nitro_blocks_enable every call goes straight to glibc; after it,
// a pointer is routed by where it lies: inside the reserved range it is ours, anywhere else
// glibc's. So a block is always freed, resized and measured by the allocator that made it,
// whenever it was made. Every function glibc has that reads a block's size is defined here for
// that reason.
//
// Unless another allocator owns malloc: one loaded ahead of glibc (LD_PRELOAD, or linked in before
// it) is the next definition after these. Then every call goes to its functions, never to glibc's
// and never to the cache, which stays off: such an allocator also serves blocks through entry
// points of its own that these never see (jemalloc's operator new allocates inside jemalloc while
// its operator delete calls free, which binds here), so a block it made can reach any of these,
// and handing one to glibc aborts the process ("free(): invalid pointer"). Who owns malloc is
// settled by the first call, whichever function and thread it is, before anything is allocated.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "hostalloc.h"

#ifdef __GLIBC__

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

// From 1 MiB up. glibc maps every block of 32 MiB or more, and a thread arena's heaps are 64 MiB
// at most: an arena that needs more makes another heap and unmaps it when it empties, so a step
// whose arena holds more than that faults pages in every step (a CNN at batch 128: hundreds to
// thousands a step with the cache from 32 MiB). From 1 MiB the arenas hold only small blocks.
#define BLOCKS_MIN ((size_t)1 << 20)
// Blocks are whole multiples of 64 KiB (at most 7% more than a 1 MiB request), and the page
// before the caller's pointer holds the block's header.
#define GRAIN ((size_t)64 << 10)
#define PAGE ((size_t)4096)
// Free extents kept; with neighbours merged there is at most one more than blocks in use.
#define MAXFREE 16384
#define MAGIC 0x6e6974726f426c6bull

struct header {
	uint64_t magic; // MAGIC ^ the caller's pointer: a free of anything else is caught
	char *blk;      // the block's start (the caller's pointer is blk + the alignment offset)
	size_t len;     // the block's length, a multiple of GRAIN
};

struct extent {
	char *start;
	size_t len;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int on;
static _Atomic uintptr_t lo, hi; // the reserved range [lo, hi)
static char *bump;               // below it the range is read-write; above, still reserved
static struct extent freed[MAXFREE]; // sorted by start, never adjacent (merged on free)
static int nfreed;
static struct nitro_blocks_stats stats;

static int ours(const void *p) {
	uintptr_t a = (uintptr_t)p;
	return a >= atomic_load_explicit(&lo, memory_order_acquire) && a < atomic_load_explicit(&hi, memory_order_acquire);
}

static struct header *header_of(void *p) { return (struct header *)((char *)p - PAGE); }

// corrupt stops the process as glibc does on a bad free: carrying on would hand the same memory
// to two owners.
static void corrupt(const char *what, void *p) {
	char msg[160];
	int n = snprintf(msg, sizeof msg, "nitro hostalloc: %s %p: not a block the large-block cache handed out, or its header was overwritten\n", what, p);
	if (n > 0) write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
	abort();
}

static size_t usable(void *p) {
	struct header *h = header_of(p);
	if (h->magic != (MAGIC ^ (uint64_t)(uintptr_t)p)) corrupt("size of", p);
	return (size_t)(h->blk + h->len - (char *)p);
}

// grow makes n more bytes of the range read-write at bump (mu held).
static int grow(size_t n) {
	if ((uintptr_t)bump + n > atomic_load_explicit(&hi, memory_order_relaxed)) return 0;
	if (mprotect(bump, n, PROT_READ | PROT_WRITE) != 0) return 0;
	bump += n;
	return 1;
}

static void remove_extent(int i) {
	memmove(&freed[i], &freed[i + 1], (size_t)(nfreed - i - 1) * sizeof freed[0]);
	nfreed--;
}

// block_alloc returns n bytes aligned to align (a power of two, at most GRAIN), or NULL when the
// range is spent. *fresh says the bytes were never handed out (still zero from the kernel).
static void *block_alloc(size_t n, size_t align, int *fresh) {
	size_t off = align > PAGE ? align : PAGE;
	if (n > SIZE_MAX - off - GRAIN) return NULL;
	size_t want = (n + off + GRAIN - 1) & ~(GRAIN - 1);
	char *blk = NULL;
	*fresh = 0;
	pthread_mutex_lock(&mu);
	int best = -1;
	for (int i = 0; i < nfreed; i++)
		if (freed[i].len >= want && (best < 0 || freed[i].len < freed[best].len)) best = i;
	if (best >= 0) {
		// Best fit; what is left of the extent stays free where it was.
		blk = freed[best].start;
		stats.cached_bytes -= want;
		stats.reused++;
		if (freed[best].len == want) {
			remove_extent(best);
		} else {
			freed[best].start += want;
			freed[best].len -= want;
		}
	} else if (nfreed > 0 && freed[nfreed - 1].start + freed[nfreed - 1].len == bump && grow(want - freed[nfreed - 1].len)) {
		// A free extent at the top: extend it rather than leave it behind.
		blk = freed[nfreed - 1].start;
		stats.cached_bytes -= freed[nfreed - 1].len;
		stats.reused++;
		remove_extent(nfreed - 1);
	} else {
		char *at = bump;
		if (grow(want)) {
			blk = at;
			*fresh = 1;
		}
	}
	if (blk != NULL) {
		stats.served++;
		stats.in_use_bytes += want;
	}
	pthread_mutex_unlock(&mu);
	if (blk == NULL) return NULL;
	char *p = blk + off;
	struct header *h = header_of(p);
	h->magic = MAGIC ^ (uint64_t)(uintptr_t)p;
	h->blk = blk;
	h->len = want;
	return p;
}

static void block_free(void *p) {
	struct header *h = header_of(p);
	if (h->magic != (MAGIC ^ (uint64_t)(uintptr_t)p)) corrupt("free of", p);
	h->magic = 0; // a second free of p is caught until the block is handed out again
	char *blk = h->blk;
	size_t len = h->len;
	pthread_mutex_lock(&mu);
	stats.in_use_bytes -= len;
	int i = 0; // the first extent after blk
	for (int a = 0, b = nfreed; a < b;) {
		int m = (a + b) / 2;
		if (freed[m].start < blk) a = i = m + 1; else b = i = m;
	}
	int prev = i > 0 && freed[i - 1].start + freed[i - 1].len == blk;
	int next = i < nfreed && blk + len == freed[i].start;
	if (prev && next) {
		freed[i - 1].len += len + freed[i].len;
		remove_extent(i);
	} else if (prev) {
		freed[i - 1].len += len;
	} else if (next) {
		freed[i].start = blk;
		freed[i].len += len;
	} else if (nfreed < MAXFREE) {
		memmove(&freed[i + 1], &freed[i], (size_t)(nfreed - i) * sizeof freed[0]);
		freed[i].start = blk;
		freed[i].len = len;
		nfreed++;
	} else {
		// No room to remember it: give its pages back; its addresses are not used again.
		stats.dropped_bytes += len;
		pthread_mutex_unlock(&mu);
		madvise(blk, len, MADV_DONTNEED);
		return;
	}
	stats.cached_bytes += len;
	pthread_mutex_unlock(&mu);
}

static void lock_for_fork(void) { pthread_mutex_lock(&mu); }
static void unlock_after_fork(void) { pthread_mutex_unlock(&mu); }

int nitro_blocks_enable(void) {
	pthread_mutex_lock(&mu);
	if (atomic_load(&on)) {
		pthread_mutex_unlock(&mu);
		return 1;
	}
	// Address space only (no memory, no swap charged until a block is handed out): 1 TiB, or
	// less where a limit on the address space refuses that.
	void *r = MAP_FAILED;
	size_t size;
	for (size = (size_t)1 << 40; size >= ((size_t)4 << 30); size /= 2) {
		r = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r != MAP_FAILED) break;
	}
	if (r == MAP_FAILED) {
		pthread_mutex_unlock(&mu);
		return 0;
	}
	// The range starts on a GRAIN boundary, so every block does.
	uintptr_t start = ((uintptr_t)r + GRAIN - 1) & ~(uintptr_t)(GRAIN - 1);
	bump = (char *)start;
	stats.reserved_bytes = (uintptr_t)r + size - start;
	atomic_store_explicit(&hi, (uintptr_t)r + size, memory_order_release);
	atomic_store_explicit(&lo, start, memory_order_release);
	pthread_mutex_unlock(&mu);
	// A child of fork gets the lock unheld, whichever thread held it in the parent.
	pthread_atfork(lock_for_fork, unlock_after_fork, unlock_after_fork);
	atomic_store_explicit(&on, 1, memory_order_release);
	return 1;
}

size_t nitro_blocks_min(void) { return BLOCKS_MIN; }

struct nitro_blocks_stats nitro_blocks_stats(void) {
	pthread_mutex_lock(&mu);
	struct nitro_blocks_stats s = stats;
	pthread_mutex_unlock(&mu);
	return s;
}

static int enabled(void) { return atomic_load_explicit(&on, memory_order_acquire); }

// Who owns malloc: unsettled until the first call; glibc; or another allocator, loaded ahead of
// glibc, whose functions (next) serve every call.
enum { OWNER_UNSETTLED, OWNER_GLIBC, OWNER_OTHER, OWNER_SETTLING };

static _Atomic int owner;
static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*memalign)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	size_t (*usable)(void *);
} next; // written once, before owner is published
static char owner_file[256];
static pthread_mutex_t settle_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int settling;
static pthread_t settler;

// The few bytes dlsym might ask for while the owner is being settled (glibc's asks for none on
// success) come from here; they are never freed.
static _Alignas(64) char boot[16 << 10];
static size_t boot_used;

static int in_boot(const void *p) { return (const char *)p >= boot && (const char *)p < boot + sizeof boot; }

static void *boot_alloc(size_t n) {
	size_t at = (boot_used + 63) & ~(size_t)63; // settle_mu is held: only the settling thread is here
	if (n > sizeof boot - at) {
		errno = ENOMEM;
		return NULL;
	}
	boot_used = at + n;
	return boot + at;
}

// same_object is the next definition of name if it lies in the object at base, else NULL: a
// function the other allocator lacks is glibc's, which must never see its blocks.
static void *same_object(const char *name, void *base) {
	Dl_info d;
	void *f = dlsym(RTLD_NEXT, name);
	return f != NULL && dladdr(f, &d) && d.dli_fbase == base ? f : NULL;
}

static int settle(void) {
	Dl_info m, c;
	void *f = dlsym(RTLD_NEXT, "malloc");
	// gnu_get_libc_version is glibc's alone: the object it lies in is libc.
	void *libc = dlsym(RTLD_NEXT, "gnu_get_libc_version");
	if (f == NULL || libc == NULL || !dladdr(f, &m) || !dladdr(libc, &c) || m.dli_fbase == c.dli_fbase) return OWNER_GLIBC;
	next.malloc = (void *(*)(size_t))f;
	next.free = (void (*)(void *))same_object("free", m.dli_fbase);
	next.calloc = (void *(*)(size_t, size_t))same_object("calloc", m.dli_fbase);
	next.realloc = (void *(*)(void *, size_t))same_object("realloc", m.dli_fbase);
	next.memalign = (void *(*)(size_t, size_t))same_object("memalign", m.dli_fbase);
	next.posix_memalign = (int (*)(void **, size_t, size_t))same_object("posix_memalign", m.dli_fbase);
	next.aligned_alloc = (void *(*)(size_t, size_t))same_object("aligned_alloc", m.dli_fbase);
	next.usable = (size_t (*)(void *))same_object("malloc_usable_size", m.dli_fbase);
	if (next.free == NULL || next.realloc == NULL) return OWNER_GLIBC; // no allocator: a wrapper of glibc's
	snprintf(owner_file, sizeof owner_file, "%s", m.dli_fname != NULL ? m.dli_fname : "?");
	return OWNER_OTHER;
}

// malloc_owner settles who owns malloc on the first call and returns it; OWNER_SETTLING is a call
// made by the settling thread from inside dlsym.
static int malloc_owner(void) {
	int o = atomic_load_explicit(&owner, memory_order_acquire);
	if (o != OWNER_UNSETTLED) return o;
	if (atomic_load(&settling) && pthread_equal(settler, pthread_self())) return OWNER_SETTLING;
	pthread_mutex_lock(&settle_mu);
	o = atomic_load(&owner);
	if (o == OWNER_UNSETTLED) {
		settler = pthread_self();
		atomic_store(&settling, 1);
		o = settle();
		atomic_store(&settling, 0);
		atomic_store_explicit(&owner, o, memory_order_release);
	}
	pthread_mutex_unlock(&settle_mu);
	return o;
}

int nitro_blocks_other_owner(void) { return malloc_owner() == OWNER_OTHER; }
const char *nitro_blocks_owner_file(void) { return owner_file; }

// other_aligned serves an aligned request from the other allocator, through whichever of its
// aligned entry points it has.
static void *other_aligned(size_t align, size_t n) {
	if (next.memalign != NULL) return next.memalign(align, n);
	if (next.aligned_alloc != NULL) return next.aligned_alloc(align, n);
	void *p = NULL;
	if (next.posix_memalign != NULL) {
		int rc = next.posix_memalign(&p, align, n);
		if (rc != 0) errno = rc;
	} else {
		errno = ENOMEM;
	}
	return p;
}

// libc_usable is glibc's own malloc_usable_size, looked up in libc itself: the next definition
// after ours could be a preloaded allocator's, which knows nothing of glibc's blocks.
static size_t libc_usable(void *p) {
	static size_t (*_Atomic fn)(void *);
	size_t (*f)(void *) = atomic_load(&fn);
	if (f == NULL) {
		void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
		if (libc != NULL) f = (size_t (*)(void *))dlsym(libc, "malloc_usable_size");
		if (f == NULL) corrupt("glibc's malloc_usable_size missing for", p);
		atomic_store(&fn, f);
	}
	return f(p);
}

static void *memset_nonnull(void *p, size_t n) { return p == NULL ? NULL : memset(p, 0, n); }

// bad_alignment answers an alignment that is no power of two as the owner of malloc does.
static void *bad_alignment(size_t align, size_t n) {
	if (malloc_owner() == OWNER_OTHER) return next.aligned_alloc != NULL ? next.aligned_alloc(align, n) : other_aligned(align, n);
	return __libc_memalign(align, n); // glibc's answer
}

void *malloc(size_t n) {
	switch (malloc_owner()) {
	case OWNER_OTHER: return next.malloc(n);
	case OWNER_SETTLING: return boot_alloc(n);
	}
	if (n >= BLOCKS_MIN && enabled()) {
		int fresh;
		void *p = block_alloc(n, 0, &fresh);
		if (p != NULL) return p;
	}
	return __libc_malloc(n);
}

void free(void *p) {
	if (p == NULL || in_boot(p)) return;
	if (ours(p)) {
		block_free(p);
		return;
	}
	switch (malloc_owner()) {
	case OWNER_OTHER: next.free(p); return;
	case OWNER_SETTLING: return; // its owner is not known yet: kept, not handed to the wrong one
	}
	__libc_free(p);
}

void *calloc(size_t count, size_t size) {
	size_t n;
	if (__builtin_mul_overflow(count, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	switch (malloc_owner()) {
	case OWNER_OTHER: return next.calloc != NULL ? next.calloc(count, size) : memset_nonnull(next.malloc(n), n);
	case OWNER_SETTLING: return boot_alloc(n); // boot's bytes are zero: never reused
	}
	if (n >= BLOCKS_MIN && enabled()) {
		int fresh;
		void *p = block_alloc(n, 0, &fresh);
		if (p != NULL) {
			// A reused block holds its last owner's bytes; a fresh one is the kernel's zeroes
			// (left untouched, so its pages fault in only when used).
			if (!fresh) memset(p, 0, n);
			return p;
		}
	}
	return __libc_calloc(count, size);
}

void *realloc(void *p, size_t n) {
	if (p == NULL) return malloc(n);
	if (in_boot(p)) {
		// A boot block's size is not kept: copy what can lie in it (it is never given back).
		size_t room = (size_t)(boot + sizeof boot - (char *)p);
		void *q = n == 0 ? NULL : malloc(n);
		if (q != NULL) memcpy(q, p, n < room ? n : room);
		return q;
	}
	if (ours(p)) {
		size_t have = usable(p);
		if (n == 0) {
			// glibc's realloc(p, 0) frees p and returns NULL.
			block_free(p);
			return NULL;
		}
		if (n <= have && n >= BLOCKS_MIN) return p;
		void *q = malloc(n);
		if (q == NULL) return NULL; // p is untouched, as realloc promises
		memcpy(q, p, n < have ? n : have);
		block_free(p);
		return q;
	}
	switch (malloc_owner()) {
	case OWNER_OTHER: return next.realloc(p, n);
	case OWNER_SETTLING: errno = ENOMEM; return NULL;
	}
	if (n >= BLOCKS_MIN && enabled()) {
		int fresh;
		void *q = block_alloc(n, 0, &fresh);
		if (q != NULL) {
			size_t have = libc_usable(p);
			memcpy(q, p, n < have ? n : have);
			__libc_free(p);
			return q;
		}
	}
	return __libc_realloc(p, n);
}

void *reallocarray(void *p, size_t count, size_t size) {
	size_t n;
	if (__builtin_mul_overflow(count, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, n);
}

size_t malloc_usable_size(void *p) {
	if (p == NULL || in_boot(p)) return 0;
	if (ours(p)) return usable(p);
	switch (malloc_owner()) {
	case OWNER_OTHER: return next.usable != NULL ? next.usable(p) : 0;
	case OWNER_SETTLING: return 0;
	}
	return libc_usable(p);
}

// aligned serves an aligned request of a valid power-of-two alignment.
static void *aligned(size_t align, size_t n) {
	switch (malloc_owner()) {
	case OWNER_OTHER: return other_aligned(align, n);
	case OWNER_SETTLING: return align <= 64 ? boot_alloc(n) : NULL;
	}
	if (n >= BLOCKS_MIN && align <= GRAIN && enabled()) {
		int fresh;
		void *p = block_alloc(n, align, &fresh);
		if (p != NULL) return p;
	}
	return __libc_memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n) {
	if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void *) != 0) return EINVAL;
	int saved = errno; // posix_memalign reports by its result and leaves errno alone
	void *p = aligned(align, n);
	if (p == NULL) {
		errno = saved;
		return ENOMEM;
	}
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t n) {
	if (align == 0 || (align & (align - 1)) != 0) return bad_alignment(align, n);
	return aligned(align, n);
}

// The rest of the C library's entry points are defined too, so every block comes from and goes
// back to this file's routing (a preloaded allocator would otherwise serve these and see its
// blocks freed by glibc). They are rare and page-sized: glibc serves them, or the other
// allocator's aligned entry point.
void *valloc(size_t n) { return malloc_owner() == OWNER_OTHER ? other_aligned(PAGE, n) : __libc_valloc(n); }
void *pvalloc(size_t n) {
	if (malloc_owner() != OWNER_OTHER) return __libc_pvalloc(n);
	if (n > SIZE_MAX - PAGE) {
		errno = ENOMEM;
		return NULL;
	}
	return other_aligned(PAGE, n == 0 ? PAGE : (n + PAGE - 1) & ~(PAGE - 1));
}
void free_sized(void *p, size_t n) {
	(void)n;
	free(p);
}
void free_aligned_sized(void *p, size_t align, size_t n) {
	(void)align;
	(void)n;
	free(p);
}

void *memalign(size_t align, size_t n) {
	if (align == 0 || (align & (align - 1)) != 0) return bad_alignment(align, n);
	return aligned(align, n);
}

#else

int nitro_blocks_enable(void) { return 0; }
size_t nitro_blocks_min(void) { return 0; }
int nitro_blocks_other_owner(void) { return 0; }
const char *nitro_blocks_owner_file(void) { return ""; }
struct nitro_blocks_stats nitro_blocks_stats(void) {
	struct nitro_blocks_stats s = {0};
	return s;
}

#endif
