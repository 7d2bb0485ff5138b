#!/usr/bin/env bash
# Installs Open MPI (mpirun and libmpi.so.40) for the multi-process tests, when absent: Debian's
# openmpi-bin and libopenmpi-dev through apt-get (sudo when not root). Idempotent. Training and
# `make run` need no MPI: the nitro binary loads libmpi at run time, only under mpirun.
set -euo pipefail
have_lib() { ldconfig -p 2>/dev/null | grep -q 'libmpi\.so\.40 '; }
if command -v mpirun >/dev/null 2>&1 && have_lib; then
	exit 0
fi
exec "$(dirname "$0")/apt-install.sh" install-openmpi "Open MPI 4 (mpirun and libmpi.so.40; the multi-process tests need it)" openmpi-bin libopenmpi-dev
