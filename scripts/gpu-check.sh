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
# NITRO_COORDINATOR). The check above already started the plugin so when the host has 2+ GPUs.
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
step "two processes, one GPU each (XLA's distributed runtime through the interposer)"
if (( ngpu >= 2 )); then
  grep -E 'rank [01] of 2|process [01] of 2|RAN' "$out/check.log"
  go build -o "$out/nitro" ./cmd/nitro
  port=$((20000 + RANDOM % 20000))
  for r in 0 1; do
    CUDA_VISIBLE_DEVICES=$r NITRO_RANK=$r NITRO_WORLD_SIZE=2 NITRO_COORDINATOR=127.0.0.1:$port NITRO_BACKEND=cuda \
      timeout 600 "$out/nitro" train mnist-mlp --preset tiny --max-epochs 1 --no-checkpoints --no-log --no-progress \
      --run-dir "$out/2proc" >"$out/2proc-$r.log" 2>&1 &
  done
  wait
  for r in 0 1; do
    echo "rank $r:"
    grep -E '^  backend |^epoch 1/|rror' "$out/2proc-$r.log" || tail -20 "$out/2proc-$r.log"
  done
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
