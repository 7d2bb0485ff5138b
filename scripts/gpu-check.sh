#!/usr/bin/env bash
# The first run on a GPU host (docs/gpu.md): install the CUDA plugin (or take one already there),
# show that it starts and runs a program, that the persistent compile cache serves a second start
# on the GPU, then measure the MNIST MLP and CNN training step at batch 1024 on nitro and, when a
# JAX with CUDA is given, on JAX on the same GPU, and BenchmarkFamilies with every side on the GPU.
# About 5-8 minutes on one GPU, most of it the install (3.2 GB of wheels; pass
# NITRO_CUDA_WHEELS=DIR to take them from a folder, e.g. on a host with no registry). Output: the
# lines below on stdout, and each step's log under $NITRO_GPU_OUT (default .nitro/gpu-check).
#   NITRO_CUDA_WHEELS=DIR   already downloaded wheels (`pip download` of the pins in backend/pin.go)
#   NITRO_CUDA_PLUGIN=FILE  a CUDA PJRT plugin already on the host instead of the install, e.g. a
#                           JAX install's jax_plugins/xla_cuda13/xla_cuda_plugin.so: it is named
#                           to nitro as pjrt_c_api_cuda_plugin.so beside itself, its wheels'
#                           NVIDIA libraries go on LD_LIBRARY_PATH, and XLA's CUDA data folder
#                           (ptxas, libdevice) is the first of those wheels' or /usr/local/cuda
#                           that holds libdevice
#   NITRO_GPU_BIN=DIR       nitro, backend.test, integration.test and xprocess built elsewhere
#                           (`make gpu-bin`), for a host without Go
#   NITRO_MNIST_DIR=DIR     the MNIST idx.gz files, for a host without the Go module cache
#   NITRO_JAX_PYTHON=PY     a python with jax (CUDA) 0.11.2 and optax, for the JAX peer
#   SKIP_INSTALL=1          use the CUDA plugin already installed in .nitro/pjrt
set -uo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
out="${NITRO_GPU_OUT:-$root/.nitro/gpu-check}"
mkdir -p "$out"
step() { printf '\n== %s\n' "$*"; }

# The programs: prebuilt, or built here once.
bin="${NITRO_GPU_BIN:-}"
if [[ -z "$bin" ]]; then
  bin="$out/bin"
  mkdir -p "$bin"
  go build -o "$bin/nitro" ./cmd/nitro && go test -c -o "$bin/backend.test" ./backend/ &&
    (cd integration && go test -c -o "$bin/integration.test" .) &&
    go build -o "$bin/xprocess" ./integration/testdata/xprocess || { echo "build failed" >&2; exit 1; }
fi
# Gzipped programs (make gpu-bin) are unpacked once into $out/bin.
if compgen -G "$bin/*.gz" >/dev/null; then
  mkdir -p "$out/bin"
  for f in "$bin"/*.gz; do gunzip -c "$f" >"$out/bin/$(basename "$f" .gz)" && chmod +x "$out/bin/$(basename "$f" .gz)"; done
  bin="$out/bin"
fi
bin="$(cd "$bin" && pwd)"
mnist=()
[[ -n "${NITRO_MNIST_DIR:-}" ]] && mnist=(--set "DataDir=$(cd "$NITRO_MNIST_DIR" && pwd)")

# stage_plugin names an existing CUDA plugin to nitro (see NITRO_CUDA_PLUGIN above).
stage_plugin() {
  local src dir site d libs
  src="$(readlink -f "$1")" || return 1
  [[ -f "$src" ]] || { echo "NITRO_CUDA_PLUGIN=$1 is not a file" >&2; return 1; }
  dir="$(dirname "$src")"
  # Beside itself when that folder is writable, so that its RPATH ($ORIGIN/../../nvidia/...) holds.
  if [[ "$(basename "$src")" != pjrt_c_api_cuda_plugin.so ]] &&
    ! ln -sfn "$(basename "$src")" "$dir/pjrt_c_api_cuda_plugin.so" 2>/dev/null; then
    dir="$out/plugin"
    mkdir -p "$dir" && ln -sfn "$src" "$dir/pjrt_c_api_cuda_plugin.so" || return 1
  fi
  export PJRT_PLUGIN_LIBRARY_PATH="$dir"
  site="$(dirname "$(dirname "$(dirname "$src")")")"
  libs="$(find "$site/nvidia" -mindepth 2 -maxdepth 2 -type d -name lib 2>/dev/null | paste -sd: -)"
  [[ -n "$libs" ]] && export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export GOPJRT_CUDA_CHECKS=0 # gopjrt looks for nvidia/ beside the plugin's folder only
  if [[ "${XLA_FLAGS:-}" != *--xla_gpu_cuda_data_dir* ]]; then
    for d in "$site/nvidia/cu13" "$site/nvidia/cuda_nvcc" "${CUDA_HOME:-/nonexistent}" /usr/local/cuda; do
      if [[ -f "$d/nvvm/libdevice/libdevice.10.bc" ]]; then
        export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_cuda_data_dir=$d"
        break
      fi
    done
  fi
  echo "plugin: $src (named as $dir/pjrt_c_api_cuda_plugin.so)"
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  echo "XLA_FLAGS=${XLA_FLAGS:-}"
}

step "host"
if ! nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; then
  echo "nvidia-smi failed: this is not a GPU host (or the driver is not loaded); nothing to measure" >&2
  exit 1
fi
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}"

if [[ -n "${NITRO_CUDA_PLUGIN:-}" ]]; then
  step "plugin: the one already on this host"
  stage_plugin "$NITRO_CUDA_PLUGIN" || { echo "cannot stage $NITRO_CUDA_PLUGIN" >&2; exit 1; }
elif [[ -z "${SKIP_INSTALL:-}" ]]; then
  step "install: nitro setup --cuda into .nitro/pjrt (and .nitro/nvidia)"
  start=$SECONDS
  "$bin/nitro" setup --cuda --dir .nitro/pjrt ${NITRO_CUDA_WHEELS:+--wheels "$NITRO_CUDA_WHEELS"} >"$out/setup.log" 2>&1 ||
    { tail -20 "$out/setup.log"; echo "install failed (log: $out/setup.log)" >&2; exit 1; }
  echo "installed in $((SECONDS - start)) s; $(du -sh .nitro/nvidia | cut -f1) of NVIDIA libraries"
fi

step "check: the real CUDA plugin starts and runs a program (backend's TestRealCUDAPluginNoDevice, GPU branch)"
(cd backend && timeout 300 "$bin/backend.test" -test.count=1 -test.v -test.run '^TestRealCUDAPluginNoDevice$') >"$out/check.log" 2>&1
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
  [[ -x "$bin/xprocess" ]] || go build -o "$bin/xprocess" ./integration/testdata/xprocess ||
    { echo "FAIL: no xprocess program (make gpu-bin builds it)" >&2; twoproc=FAIL; }
  port=$((20000 + RANDOM % 20000))
  for r in 0 1; do
    CUDA_VISIBLE_DEVICES=$r NITRO_RANK=$r NITRO_WORLD_SIZE=2 NITRO_COORDINATOR=127.0.0.1:$port NITRO_BACKEND=cuda \
      timeout 600 "$bin/xprocess" >"$out/xprocess-$r.log" 2>&1 &
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
      timeout 600 "$bin/nitro" train mnist-mlp --preset tiny --max-epochs 1 --no-checkpoints --no-log --no-progress \
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

# The persistent compile cache on the GPU plugin: a second start of the same run loads every
# program from disk (the key holds the platform, its version and the device kind) and trains the
# same epoch.
step "compile cache: two starts of mnist-mlp on cuda, the second from disk"
export NITRO_COMPILE_CACHE="$out/compile-cache"
rm -rf "$NITRO_COMPILE_CACHE"
cache=ok
for n in 1 2; do
  NITRO_BACKEND=cuda timeout 300 "$bin/nitro" train mnist-mlp --fused --set BatchSize=1024 "${mnist[@]}" --max-epochs 1 \
    --no-checkpoints --no-log --no-progress --run-dir "$out/cache-$n" >"$out/cache-$n.log" 2>&1
  echo "start $n: $(grep -E '^compile cache:' "$out/cache-$n.log" || echo "no compile cache line (exit or error: $(grep -m1 -i error "$out/cache-$n.log"))")"
done
grep -q '^compile cache: 0 compiled, [1-9][0-9]* from disk' "$out/cache-2.log" ||
  { echo "FAIL: the second start compiled again (or failed)" >&2; cache=FAIL; }
e1=$(grep '^epoch 1/' "$out/cache-1.log" | sed 's/ *seconds.*//')
e2=$(grep '^epoch 1/' "$out/cache-2.log" | sed 's/ *seconds.*//')
echo "start 1: $e1"
echo "start 2: $e2"
[[ -n "$e1" && "$e1" == "$e2" ]] && echo "the two starts trained the same epoch" ||
  echo "NOTE: the two starts' epochs differ (a GPU kernel that is not bitwise deterministic, or a cache fault)"
echo "compile cache on cuda: $cache"

# nitro's side: two epochs (epoch 1 includes compiling), the fused step; epoch 2's steps/s is the
# figure. Each step also uploads a fresh batch and reads the loss back, as the JAX peer's does.
for exp in mnist-mlp mnist-cnn; do
  step "nitro $exp on cuda, batch 1024, fused step"
  NITRO_BACKEND=cuda timeout 300 "$bin/nitro" train "$exp" --fused --set BatchSize=1024 "${mnist[@]}" --max-epochs 2 \
    --no-checkpoints --no-log --no-progress --run-dir "$out/$exp" >"$out/$exp.log" 2>&1
  grep -E '^  backend |^  host allocator |^epoch [12]/|rror' "$out/$exp.log" || tail -20 "$out/$exp.log"
done

step "JAX peer on the same GPU (scripts/bench/jax_families.py), batch 1024"
peer=ok
if [[ -n "${NITRO_JAX_PYTHON:-}" ]]; then
  JAX_PLATFORMS=cuda "$NITRO_JAX_PYTHON" -c 'import jax; print("jax", jax.__version__, jax.devices())'
  for fam in mlp cnn; do
    # 3 timed repeats of 50 steps each; step_ms is the mean step of one repeat.
    printf 'step\nstep\nstep\nflops\nquit\n' |
      JAX_PLATFORMS=cuda XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 300 "$NITRO_JAX_PYTHON" scripts/bench/jax_families.py --family "$fam" --batch 1024 --steps 50 |
      sed "s/^/jax $fam: /" | tee "$out/jax-$fam.log"
    # A peer that ran on the CPU would make every ratio a GPU against a CPU: say so.
    grep -q '^jax [a-z]*: ready .* platform=gpu ' "$out/jax-$fam.log" ||
      { echo "FAIL: the JAX peer did not run on the GPU (its ready line names another platform, or it did not start)" >&2; peer=FAIL; }
  done
else
  echo "NITRO_JAX_PYTHON is unset: no JAX figures (a python with jax (CUDA) 0.11.2 and optax)"
fi

# Every side on the GPU, timed alike: nitro two-program and fused, the bare GoMLX loop, and JAX.
families="${NITRO_GPU_FAMILIES:-mlp@1024,cnn@1024,transformer@128}"
step "BenchmarkFamilies on cuda: $families"
(cd integration && NITRO_BENCH_BACKEND=cuda NITRO_COMPILE_CACHE=off NITRO_BENCH_FAMILIES="$families" \
  NITRO_BENCH_PYTHON="${NITRO_JAX_PYTHON:-}" timeout "${NITRO_GPU_BENCH_SECONDS:-300}" "$bin/integration.test" \
  -test.run '^$' -test.bench 'BenchmarkFamilies$' -test.benchtime 1x) >"$out/families.log" 2>&1
echo "exit $?"
sed -n '/^the families, nitro against/,$p' "$out/families.log" | head -30
grep -E 'FAIL|panic|rror' "$out/families.log" | head -10
echo
echo "logs: $out"
[[ "$twoproc" != FAIL && "$cache" != FAIL && "$peer" != FAIL ]] || exit 1
