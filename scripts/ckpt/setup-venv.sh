#!/usr/bin/env bash
# Creates .nitro/ckpt-venv with the pinned scripts/ckpt/requirements.txt: the reference Python
# safetensors package that checkpoint's interop test opens nitro's files with. Test-only.
# Idempotent (scripts/pinned-venv.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
exec "$here/../pinned-venv.sh" ckpt-venv "$root/.nitro/ckpt-venv" "$here/requirements.txt" 'import safetensors, numpy'
