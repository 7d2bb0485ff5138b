#!/usr/bin/env bash
# Creates the project-local Python venv that `make bench` uses for its JAX + optax peer
# (scripts/bench/jax_step.py) and installs the pinned scripts/bench/requirements.txt into it.
#
# JAX is NOT a dependency of nitro, its tests or CI: only `make bench` runs this.
#
# Idempotent: the venv holds a stamp with the sha256 of requirements.txt; when it matches and the
# venv's interpreter still runs, there is nothing to do. Otherwise the venv is rebuilt from scratch
# (so packages dropped from requirements.txt do not linger) and the stamp is written last, so an
# interrupted install is redone on the next run.
#
# Environment: PYTHON (default python3) is the interpreter the venv is made from; it must be
# CPython >= 3.11 (jax 0.10 needs it).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
req="$here/requirements.txt"
# The venv's physical path: a venv records where it was made in its entry scripts' first lines,
# and a path through a git worktree's .nitro link dies with that worktree. (Nothing here runs
# those scripts: pip runs as python -m pip.)
mkdir -p "$root/.nitro"
venv="$(cd "$root/.nitro" && pwd -P)/bench-venv"
stamp="$venv/.requirements.sha256"
py="${PYTHON:-python3}"

fail() {
  echo "bench-venv: error: $*" >&2
  exit 1
}

[[ -f "$req" ]] || fail "missing $req"
want="$(sha256sum "$req" | cut -d' ' -f1)"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && "$venv/bin/python" -c '' 2>/dev/null; then
  echo "bench-venv: up to date at $venv (requirements sha256 ${want:0:12})"
  exit 0
fi

command -v "$py" >/dev/null 2>&1 || fail "no '$py' on PATH: install Python >= 3.11 or set PYTHON"
"$py" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' ||
  fail "$("$py" -c 'import sys; print(sys.version.split()[0])') is too old: jax 0.10 needs Python >= 3.11 (set PYTHON)"
"$py" -c 'import venv, ensurepip' 2>/dev/null ||
  fail "'$py' lacks the venv/ensurepip modules (on Debian/Ubuntu: apt-get install python3-venv)"

start=$SECONDS
if [[ -e "$venv" ]]; then
  echo "bench-venv: requirements changed or venv broken: removing $venv"
  rm -rf -- "$venv"
fi
echo "bench-venv: creating venv at $venv with $("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
mkdir -p "$root/.nitro"
"$py" -m venv "$venv" || fail "could not create the venv at $venv"

echo "bench-venv: installing $(grep -cE '^[A-Za-z]' "$req") pinned packages from $req (binary wheels only)"
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
  --only-binary=:all: -r "$req"; then
  fail "pip install -r $req failed (is the package registry reachable? see pip's message above)"
fi

versions="$("$venv/bin/python" -c 'import jax, jaxlib, optax, numpy; print(f"jax={jax.__version__} jaxlib={jaxlib.__version__} optax={optax.__version__} numpy={numpy.__version__}")')" ||
  fail "the installed packages do not import (see the traceback above)"

echo "$want" >"$stamp"
echo "bench-venv: ready in $((SECONDS - start))s: $versions"
