#!/usr/bin/env bash
# Installs the malloc libraries deployments preload (jemalloc, tcmalloc, mimalloc), when absent, for
# the tests that run nitro under each one (LD_PRELOAD): Debian's libjemalloc2,
# libtcmalloc-minimal4 and libmimalloc2.0 through apt-get (sudo when not root). Idempotent.
# Training and `make run` need none of them.
set -euo pipefail
multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
for f in libjemalloc.so.2 libtcmalloc_minimal.so.4 libmimalloc.so.2; do
	if [ ! -e "/usr/lib/$multiarch/$f" ] && [ ! -e "/usr/lib/$f" ]; then
		exec "$(dirname "$0")/apt-install.sh" install-allocators \
			"jemalloc 5 (libjemalloc.so.2), gperftools' tcmalloc_minimal (libtcmalloc_minimal.so.4) and mimalloc 2 (libmimalloc.so.2; the preloaded-allocator tests need them)" \
			libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0
	fi
done
