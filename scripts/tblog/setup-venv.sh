#!/usr/bin/env bash
# Creates .nitro/tb-venv with the pinned scripts/tblog/requirements.txt: TensorBoard's reader,
# which tblog's test opens nitro's event files with. Test-only. $NITRO_TB_VENV puts the venv
# elsewhere (a worktree whose .nitro is shared). Idempotent (scripts/pinned-venv.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
exec "$here/../pinned-venv.sh" tb-venv "${NITRO_TB_VENV:-$root/.nitro/tb-venv}" "$here/requirements.txt" \
  'import tensorboard.backend.event_processing.plugin_event_accumulator'
