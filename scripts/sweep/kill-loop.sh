#!/usr/bin/env bash
# Kills a nitro sweep with SIGKILL at random moments, continues it with --resume after each kill,
# and compares the end with the same sweep run uninterrupted: both records' trials, values,
# reports and results (bitwise, as the journals hold them) must be identical. The long form of
# integration's TestSweepResumesAfterKill9AtRandomMoments.
#
#   scripts/sweep/kill-loop.sh [KILLS] [NITRO]     (default: 10 kills; nitro from PATH)
set -euo pipefail
kills="${1:-10}"
nitro="${2:-nitro}"
work="$(mktemp -d "${TMPDIR:-/tmp}/nitro-kill-loop.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export NITRO_COMPILE_CACHE="${NITRO_COMPILE_CACHE:-$work/compile-cache}"
sweep=("$nitro" sweep mnist-mlp --preset tiny --set TrainLimit=6000 --set ValSize=1000 --max-epochs 6
	--param LearningRate=loguniform:1e-4,1e-1 --param WeightDecay=loguniform:1e-6,1e-1
	--trials 24 --sampler tpe --prune asha)

start=$(date +%s%N)
"${sweep[@]}" --sweep-dir "$work/ref" > "$work/ref.log" 2>&1
span_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "uninterrupted: ${span_ms} ms"

done_kills=0 attempt=0
while :; do
	more=()
	[ -f "$work/killed/journal.log" ] && more=(--resume)
	"${sweep[@]}" --sweep-dir "$work/killed" "${more[@]}" > "$work/attempt-$attempt.log" 2>&1 &
	pid=$!
	if [ "$done_kills" -lt "$kills" ]; then
		delay_ms=$(( 300 + (RANDOM * 32768 + RANDOM) % (span_ms / 8 + 1) ))
		sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
		if kill -0 "$pid" 2>/dev/null; then
			kill -9 "$pid"
			wait "$pid" 2>/dev/null || true
			done_kills=$((done_kills + 1))
			trials=$(grep -c '"op_code":4' "$work/killed/journal.log" 2>/dev/null || true)
			echo "kill $done_kills after ${delay_ms} ms: $trials trials recorded"
			attempt=$((attempt + 1))
			continue
		fi
	fi
	wait "$pid"
	break
done
# What must agree, from each record: every trial's values (CREATE_TRIAL's params), its reports
# (a step re-reported after a resume carries the same value, so each distinct line once) and its
# end (state and value, all 17 digits as written), without the writers' ids and times.
facts() {
	local j="$1/journal.log"
	grep -o '"op_code":4,.*' "$j" | grep -o '"params":{[^}]*}' | cat -n
	grep -o '"op_code":7,.*' "$j" | sed 's/"worker_id":"[^"]*",//' | sort -u
	grep -o '"op_code":6,.*' "$j" | sed 's/"worker_id":"[^"]*",//; s/,"datetime_[a-z]*":"[^"]*"//' | grep -v '"state":0' | sort
}
facts "$work/ref" > "$work/ref.facts"
facts "$work/killed" > "$work/killed.facts"
if diff "$work/ref.facts" "$work/killed.facts"; then
	echo "after $done_kills kills: the same $(grep -c '"state"' "$work/ref.facts") trials, values, reports and results (bitwise) as the uninterrupted sweep"
	"$nitro" sweep ls "$work/killed" > "$work/killed.ls"
	head -n 1 "$work/killed.ls"
else
	echo "after $done_kills kills: the records differ (above)" >&2
	exit 1
fi
