#!/usr/bin/env bash
# Creates .nitro/serve-venv with the pinned scripts/serve/requirements.txt: Triton's and KServe's Python clients
# (tritonclient[http], kserve) that nitro serve's Open Inference Protocol test talks to it with, and the
# Prometheus Python client whose parser reads serve's metrics. Test-only. Idempotent
# (scripts/pinned-venv.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
exec "$here/../pinned-venv.sh" serve-venv "$root/.nitro/serve-venv" "$here/requirements.txt" \
  'import tritonclient.http, kserve, prometheus_client.parser, numpy'
