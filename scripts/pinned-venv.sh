#!/usr/bin/env bash
# Usage: pinned-venv.sh NAME VENV REQUIREMENTS CHECK
# Creates the test-only venv VENV with the pinned REQUIREMENTS; CHECK is Python code that must
# run in it (the imports the tests need). NAME prefixes what it prints. The ckpt and tblog venv
# scripts call it.
# Idempotent: a stamp holds the sha256 of REQUIREMENTS; a match with an interpreter that runs
# CHECK means nothing to do, anything else rebuilds the venv (so a dropped package does not
# linger), and the stamp is written last, so an interrupted install is redone next time.
set -euo pipefail
name="$1" venv="$2" req="$3" check="$4"
# The venv is made at its physical path: a venv records where it was made in its entry scripts'
# first lines, and a path through a git worktree's .nitro link dies with that worktree.
mkdir -p "$(dirname "$venv")"
venv="$(cd "$(dirname "$venv")" && pwd -P)/$(basename "$venv")"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  exit 0
fi
echo "$name: installing $(grep -v '^#' "$req" | tr '\n' ' ')into $venv"
rm -rf "$venv"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
echo "$want" > "$stamp"
