#!/usr/bin/env bash
# The long form of cmd/cli's TestSupervisorRestartLoop: 20 trials (or $1) of a supervisor that
# SIGKILLs `nitro train --resume auto` at random and restarts it until it exits 0, each ending
# bitwise equal to an uninterrupted run. make test runs the short form (2 trials).
set -euo pipefail
cd "$(dirname "$0")/.."
NITRO_SUPERVISOR_TRIALS="${1:-20}" go test -count=1 -timeout 60m -run '^TestSupervisorRestartLoop$' -v ./cmd/cli/
