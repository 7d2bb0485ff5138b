#include <stddef.h>

// The variable that names the backend (package backend's EnvBackend): the policy waits when it
// names one that is not the CPU plugin.
#define NITRO_HOSTALLOC_BACKEND_ENV "NITRO_BACKEND"

enum {
	NITRO_HOSTALLOC_NOT_GLIBC = 0,
	NITRO_HOSTALLOC_STEADY,
	NITRO_HOSTALLOC_SYSTEM,
	NITRO_HOSTALLOC_TUNABLES,
	NITRO_HOSTALLOC_BAD_VALUE,
	NITRO_HOSTALLOC_REFUSED_ARENA,
	NITRO_HOSTALLOC_REFUSED_MMAP,
	NITRO_HOSTALLOC_REFUSED_TRIM,
	NITRO_HOSTALLOC_PENDING,
};
int nitro_hostalloc_state(void);
int nitro_hostalloc_steady(void);
int nitro_hostalloc_arenas_before(void);
const char *nitro_hostalloc_bad_value(void);
long nitro_hostalloc_refault(size_t n);
