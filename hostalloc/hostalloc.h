#include <stddef.h>

enum {
	NITRO_HOSTALLOC_NOT_GLIBC = 0,
	NITRO_HOSTALLOC_BLOCKS,
	NITRO_HOSTALLOC_BLOCKS_REFUSED_MMAP,
	NITRO_HOSTALLOC_BLOCKS_REFUSED_TRIM,
	NITRO_HOSTALLOC_STEADY,
	NITRO_HOSTALLOC_SYSTEM,
	NITRO_HOSTALLOC_TUNABLES,
	NITRO_HOSTALLOC_BAD_VALUE,
	NITRO_HOSTALLOC_REFUSED_RANGE,
	NITRO_HOSTALLOC_REFUSED_ARENA,
	NITRO_HOSTALLOC_REFUSED_MMAP,
	NITRO_HOSTALLOC_REFUSED_TRIM,
	NITRO_HOSTALLOC_PENDING,
	NITRO_HOSTALLOC_OTHER_OWNER,
	NITRO_HOSTALLOC_OTHER_OWNER_CHOICE,
};
int nitro_hostalloc_state(void);
int nitro_hostalloc_apply(void);
const char *nitro_hostalloc_bad_value(void);
long nitro_hostalloc_refault(size_t n);

// The large-block cache (blocks.c).
struct nitro_blocks_stats {
	size_t served;         // blocks handed out
	size_t reused;         // of them, from freed blocks
	size_t in_use_bytes;   // in blocks handed out and not freed
	size_t cached_bytes;   // in freed blocks kept mapped for reuse
	size_t dropped_bytes;  // freed with no room to keep them: given back, their addresses retired
	size_t reserved_bytes; // the address range blocks come from
};
int nitro_blocks_enable(void);
size_t nitro_blocks_min(void);
int nitro_blocks_other_owner(void);
const char *nitro_blocks_owner_file(void);
struct nitro_blocks_stats nitro_blocks_stats(void);
