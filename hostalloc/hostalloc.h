#include <stddef.h>

enum {
	NITRO_HOSTALLOC_NOT_GLIBC = 0,
	NITRO_HOSTALLOC_STEADY,
	NITRO_HOSTALLOC_SYSTEM,
	NITRO_HOSTALLOC_TUNABLES,
	NITRO_HOSTALLOC_BAD_VALUE,
	NITRO_HOSTALLOC_REFUSED_ARENA,
	NITRO_HOSTALLOC_REFUSED_MMAP,
	NITRO_HOSTALLOC_REFUSED_TRIM,
};
int nitro_hostalloc_state(void);
const char *nitro_hostalloc_bad_value(void);
long nitro_hostalloc_refault(size_t n);
