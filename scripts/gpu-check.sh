#!/usr/bin/env bash
# The first run on a GPU host (docs/gpu.md): install the CUDA plugin, show that it starts and runs a
# program, then measure the MNIST MLP and CNN training step at batch 1024 on nitro and, when a JAX
# with CUDA is given, on JAX on the same GPU. About 5-8 minutes on one GPU, most of it the install
# (3.2 GB of wheels; pass NITRO_CUDA_WHEELS=DIR to take them from a folder, e.g. on a host with no
# registry). Output: the lines below on stdout, and each step's log under $OUT (default
# .nitro/gpu-check).
#   NITRO_CUDA_WHEELS=DIR   already downloaded wheels (`pip download` of the pins in backend/pin.go)
#   NITRO_JAX_PYTHON=PY     a python with jax[cuda12]==0.11.2 and optax, for the JAX peer
#   SKIP_INSTALL=1          use the CUDA plugin already installed in .nitro/pjrt
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${OUT:-$root/.nitro/gpu-check}"
mkdir -p "$out"
step() { printf '\n== %s\n' "$*"; }

step "host"
if ! nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; then
  echo "nvidia-smi failed: this is not a GPU host (or the driver is not loaded); nothing to measure" >&2
  exit 1
fi
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}"

step "install: nitro setup --cuda into .nitro/pjrt (and .nitro/nvidia)"
if [[ -z "${SKIP_INSTALL:-}" ]]; then
  start=$SECONDS
  go run ./cmd/nitro setup --cuda --dir .nitro/pjrt ${NITRO_CUDA_WHEELS:+--wheels "$NITRO_CUDA_WHEELS"} >"$out/setup.log" 2>&1 ||
    { tail -20 "$out/setup.log"; echo "install failed (log: $out/setup.log)" >&2; exit 1; }
  echo "installed in $((SECONDS - start)) s; $(du -sh .nitro/nvidia | cut -f1) of NVIDIA libraries"
fi

step "check: the real CUDA plugin starts and runs a program (backend's TestRealCUDAPluginNoDevice, GPU branch)"
go test -count=1 -v -run '^TestRealCUDAPluginNoDevice$' ./backend/ >"$out/check.log" 2>&1
grep -E 'RESOLVED|RAN|RESOLVE-ERROR|^(ok|FAIL|---)' "$out/check.log" || tail -20 "$out/check.log"

# Two processes, one GPU each, as a launcher would start them on two hosts: the CUDA client of each
# starts as its process of 2 (pjrthook's client-create piece; rank 0 serves the store at
# NITRO_COORDINATOR), and core takes that client as the run's collective, so each step's gradients
# are averaged on the GPUs by a program of their own (backend.XProcess, widened over the processes
# by the interposer). The check above already started the plugin so when the host has 2+ GPUs.
# integration/testdata/xprocess prints per step a hash of the parameters, the per-step losses and
# the final parameters: one model means every such line is the same on both ranks, after 32 steps
# (each rank trains its half of the data; ranks that train apart take 64 and only look alike).
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
step "two processes, one GPU each: one model, its gradients averaged on the GPUs"
twoproc=skipped
if (( ngpu >= 2 )); then
  grep -E 'rank [01] of 2|process [01] of 2|RAN' "$out/check.log"
  go build -o "$out/xprocess" ./integration/testdata/xprocess && go build -o "$out/nitro" ./cmd/nitro
  port=$((20000 + RANDOM % 20000))
  for r in 0 1; do
    CUDA_VISIBLE_DEVICES=$r NITRO_RANK=$r NITRO_WORLD_SIZE=2 NITRO_COORDINATOR=127.0.0.1:$port NITRO_BACKEND=cuda \
      timeout 600 "$out/xprocess" >"$out/xprocess-$r.log" 2>&1 &
  done
  wait
  twoproc=ok
  for r in 0 1; do
    echo "rank $r:"
    grep -E '^report: |^total_steps |^final |rror' "$out/xprocess-$r.log" || tail -20 "$out/xprocess-$r.log"
    grep -q '^report: processes.*summed over 2 processes (an XLA all-reduce on the device' "$out/xprocess-$r.log" ||
      { echo "FAIL: rank $r's config report does not name the on-device all-reduce" >&2; twoproc=FAIL; }
    grep -qx 'total_steps 32' "$out/xprocess-$r.log" ||
      { echo "FAIL: rank $r did not train its shard (total_steps is not 32)" >&2; twoproc=FAIL; }
  done
  model() { grep -E '^(step|stretch|final) ' "$out/xprocess-$1.log"; }
  if [[ $(model 0 | grep -c '^step ') -ne 32 ]]; then
    echo "FAIL: rank 0 logged $(model 0 | grep -c '^step ') steps, want 32" >&2; twoproc=FAIL
  elif ! diff <(model 0) <(model 1) >"$out/xprocess.diff"; then
    echo "FAIL: the ranks' per-step parameters or losses differ: two models (first lines of $out/xprocess.diff):" >&2
    head -6 "$out/xprocess.diff" >&2; twoproc=FAIL
  fi
  echo "two processes: $twoproc (per-step parameter hashes, per-step losses and final parameters compared)"
  # The CLI as a launcher would run it: both ranks must report the same epoch line.
  for r in 0 1; do
    CUDA_VISIBLE_DEVICES=$r NITRO_RANK=$r NITRO_WORLD_SIZE=2 NITRO_COORDINATOR=127.0.0.1:$((port + 1)) NITRO_BACKEND=cuda \
      timeout 600 "$out/nitro" train mnist-mlp --preset tiny --max-epochs 1 --no-checkpoints --no-log --no-progress \
      --run-dir "$out/2proc" >"$out/2proc-$r.log" 2>&1 &
  done
  wait
  for r in 0 1; do
    echo "nitro train, rank $r:"
    grep -E '^  backend |^  processes |^epoch 1/|rror' "$out/2proc-$r.log" || tail -20 "$out/2proc-$r.log"
  done
  e0=$(grep '^epoch 1/' "$out/2proc-0.log" | sed 's/ *seconds.*//')
  e1=$(grep '^epoch 1/' "$out/2proc-1.log" | sed 's/ *seconds.*//')
  if [[ -z "$e0" || "$e0" != "$e1" ]]; then
    echo "FAIL: nitro train's two ranks report different epochs: '$e0' and '$e1'" >&2; twoproc=FAIL
  fi
else
  echo "$ngpu GPU(s): the two-process run needs 2 or more"
fi

# nitro's side: two epochs (epoch 1 includes compiling), the fused step; epoch 2's steps/s is the
# figure. Each step also uploads a fresh batch and reads the loss back, as the JAX peer's does.
for exp in mnist-mlp mnist-cnn; do
  step "nitro $exp on cuda, batch 1024, fused step"
  NITRO_BACKEND=cuda go run ./cmd/nitro train "$exp" --fused --set BatchSize=1024 --max-epochs 2 \
    --no-checkpoints --no-log --no-progress --run-dir "$out/$exp" >"$out/$exp.log" 2>&1
  grep -E '^  backend |^epoch 2/|rror' "$out/$exp.log" || tail -20 "$out/$exp.log"
done

step "JAX peer on the same GPU (scripts/bench/jax_families.py), batch 1024"
if [[ -n "${NITRO_JAX_PYTHON:-}" ]]; then
  "$NITRO_JAX_PYTHON" -c 'import jax; print("jax", jax.__version__, jax.devices())'
  for fam in mlp cnn; do
    # 3 timed repeats of 50 steps each; step_ms is the mean step of one repeat.
    printf 'step\nstep\nstep\nflops\nquit\n' |
      "$NITRO_JAX_PYTHON" scripts/bench/jax_families.py --family "$fam" --batch 1024 --steps 50 |
      sed "s/^/jax $fam: /"
  done
else
  echo "NITRO_JAX_PYTHON is unset: no JAX figures (a python with jax[cuda12]==0.11.2 and optax)"
fi
echo
echo "logs: $out"
[[ "$twoproc" != FAIL ]] || exit 1
