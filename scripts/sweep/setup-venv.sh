#!/usr/bin/env bash
# Creates .nitro/optuna-venv with the pinned scripts/sweep/requirements.txt: Optuna, whose
# JournalStorage sweep's test reads nitro's sweep records with (and writes one for nitro to read).
# Test-only. $NITRO_OPTUNA_VENV puts the venv elsewhere (a worktree whose .nitro is shared).
# Idempotent (scripts/pinned-venv.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
exec "$here/../pinned-venv.sh" optuna-venv "${NITRO_OPTUNA_VENV:-$root/.nitro/optuna-venv}" "$here/requirements.txt" \
  'import optuna.storages.journal'
