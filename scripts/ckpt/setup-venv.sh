#!/usr/bin/env bash
# Creates .nitro/ckpt-venv with the pinned scripts/ckpt/requirements.txt: the reference Python
# safetensors package that checkpoint's interop test opens nitro's files with. Test-only.
# Idempotent: a stamp holds the sha256 of requirements.txt; a match with a working interpreter
# means nothing to do, anything else rebuilds the venv, and the stamp is written last.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
req="$here/requirements.txt"
venv="$root/.nitro/ckpt-venv"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && "$venv/bin/python" -c 'import safetensors, numpy' 2>/dev/null; then
  exit 0
fi
echo "ckpt-venv: installing $(grep -v '^#' "$req" | tr '\n' ' ')into $venv"
rm -rf "$venv"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
echo "$want" > "$stamp"
