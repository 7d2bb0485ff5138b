#!/usr/bin/env bash
# Installs Open MPI (mpirun and libmpi.so.40) for the multi-process tests, when absent: Debian's
# openmpi-bin and libopenmpi-dev through apt-get (sudo when not root). Idempotent. Training and
# `make run` need no MPI: the nitro binary loads libmpi at run time, only under mpirun.
set -euo pipefail
have_lib() { ldconfig -p 2>/dev/null | grep -q 'libmpi\.so\.40 '; }
if command -v mpirun >/dev/null 2>&1 && have_lib; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-openmpi: no apt-get here: install Open MPI 4 (mpirun and libmpi.so.40) yourself; the multi-process tests need it" >&2
	exit 0
fi
sudo=""; if [ "$(id -u)" -ne 0 ]; then sudo=sudo; fi
echo "install-openmpi: installing openmpi-bin and libopenmpi-dev (apt-get)"
$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null
