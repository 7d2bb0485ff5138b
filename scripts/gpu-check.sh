#!/usr/bin/env bash
# The first run on a GPU host (docs/gpu.md): install the CUDA plugin (or take one already there),
# show that it starts and runs a program, that the persistent compile cache serves a second start
# on the GPU, then measure the MNIST MLP and CNN training step at batch 1024 on nitro and, when a
# JAX with CUDA is given, on JAX on the same GPU, and BenchmarkFamilies with every side on the GPU;
# and the gpt stage: GPT-2 small's shape trained in bf16 for a fixed number of steps, twice with one
# seed (the second start from the compile cache, the two final checkpoints compared byte for byte),
# its tokens/s and MFU beside the JAX peer's on the same GPU.
# About 5-8 minutes on one GPU, most of it the install (3.2 GB of wheels; pass
# NITRO_CUDA_WHEELS=DIR to take them from a folder, e.g. on a host with no registry), and the
# families benchmark (NITRO_GPU_BENCH_SECONDS, 300 at most). Output: the lines below on stdout, and
# each step's log under $NITRO_GPU_OUT (default .nitro/gpu-check).
#   --dry-run, or NITRO_GPU_DRYRUN=1: no GPU, no install: the gpt stage alone on the XLA CPU
#                           plugin with the tiny preset and a few steps, the peer on the CPU when
#                           NITRO_JAX_PYTHON is given, so that every command, parse and comparison
#                           of that stage runs in `make test` (integration/gpucheck_dryrun_test.go)
#   NITRO_GPU_STAGES=LIST   the stages to run, comma-separated, of check,twoproc,cache,mnist,
#                           jax-mnist,gpt,families (default: all); NITRO_GPU_STAGES=gpt is the gpt
#                           stage alone, about 3 minutes on an H100 once the plugin is there
#   NITRO_GPT_STEPS=N       the gpt stage's period: 2N steps, the second N timed (default 30; 5 dry)
#   NITRO_GPT_BATCH=B       its BatchSize (default 8, the gpt2 preset's: fits an 80 GB H100)
#   NITRO_GPT_CORPUS=PATH   its text (default: a copy of this repository's docs/, so that a host
#                           without Go, whose Go source tree the gpt reads by default, trains it
#                           all the same)
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

dry=${NITRO_GPU_DRYRUN:-}
[[ "$dry" == 0 ]] && dry=
for arg in "$@"; do
  case "$arg" in
  --dry-run) dry=1 ;;
  *) echo "gpu-check.sh: unknown argument $arg (the one flag is --dry-run; the rest is NITRO_* variables, listed at the top of this script)" >&2; exit 2 ;;
  esac
done
stages="${NITRO_GPU_STAGES:-check,twoproc,cache,mnist,jax-mnist,gpt,families}"
# A dry run has no GPU to start or measure: the gpt stage is the one that runs on the CPU as well.
[[ -n "$dry" ]] && stages=gpt
for s in ${stages//,/ }; do
  case "$s" in
  check | twoproc | cache | mnist | jax-mnist | gpt | families) ;;
  *) echo "NITRO_GPU_STAGES: unknown stage '$s' (want a comma-separated list of check,twoproc,cache,mnist,jax-mnist,gpt,families)" >&2; exit 2 ;;
  esac
done
want() { [[ ",$stages," == *",$1,"* ]]; }

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
  go build -o "$bin/nitro" ./cmd/nitro || { echo "build failed" >&2; exit 1; }
  # The test programs take a minute to link: only the stages that run them wait for them.
  if want check || want families; then
    go test -c -o "$bin/backend.test" ./backend/ && (cd integration && go test -c -o "$bin/integration.test" .) ||
      { echo "build failed" >&2; exit 1; }
  fi
  if want twoproc; then
    go build -o "$bin/xprocess" ./integration/testdata/xprocess || { echo "build failed" >&2; exit 1; }
  fi
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

if [[ -n "$dry" ]]; then
  step "host: a dry run on the CPU (no GPU, no install): the gpt stage alone, on the XLA CPU plugin"
  # The CUDA plugin is never taken, even on a host that has it: the figures are the CPU's.
  export NITRO_BACKEND=xla
else
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
fi

if want check; then
  step "check: the real CUDA plugin starts and runs a program (backend's TestRealCUDAPluginNoDevice, GPU branch)"
  (cd backend && timeout 300 "$bin/backend.test" -test.count=1 -test.v -test.run '^TestRealCUDAPluginNoDevice$') >"$out/check.log" 2>&1
  grep -E 'RESOLVED|RAN|RESOLVE-ERROR|^(ok|FAIL|---)' "$out/check.log" || tail -20 "$out/check.log"
fi

# Two processes, one GPU each, as a launcher would start them on two hosts: the CUDA client of each
# starts as its process of 2 (pjrthook's client-create piece; rank 0 serves the store at
# NITRO_COORDINATOR), and core takes that client as the run's collective, so each step's gradients
# are averaged on the GPUs by a program of their own (backend.XProcess, widened over the processes
# by the interposer). The check above already started the plugin so when the host has 2+ GPUs.
# integration/testdata/xprocess prints per step a hash of the parameters, the per-step losses and
# the final parameters: one model means every such line is the same on both ranks, after 32 steps
# (each rank trains its half of the data; ranks that train apart take 64 and only look alike).
twoproc=skipped
if want twoproc; then
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  step "two processes, one GPU each: one model, its gradients averaged on the GPUs"
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
fi

# The persistent compile cache on the GPU plugin: a second start of the same run loads every
# program from disk (the key holds the platform, its version and the device kind) and trains the
# same epoch.
cache=skipped
if want cache; then
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
fi

# nitro's side: two epochs (epoch 1 includes compiling), the fused step; epoch 2's steps/s is the
# figure. Each step also uploads a fresh batch and reads the loss back, as the JAX peer's does.
if want mnist; then
  for exp in mnist-mlp mnist-cnn; do
    step "nitro $exp on cuda, batch 1024, fused step"
    NITRO_BACKEND=cuda timeout 300 "$bin/nitro" train "$exp" --fused --set BatchSize=1024 "${mnist[@]}" --max-epochs 2 \
      --no-checkpoints --no-log --no-progress --run-dir "$out/$exp" >"$out/$exp.log" 2>&1
    grep -E '^  backend |^  host allocator |^epoch [12]/|rror' "$out/$exp.log" || tail -20 "$out/$exp.log"
  done
fi

peer=skipped
if want jax-mnist; then
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
fi

# The gpt stage: GPT-2 small's shape (the gpt2 preset: 86M parameters, context 1024) trained in
# bf16 for 2N steps, validating at N and 2N, so that the record's last data line times steps
# N+1..2N alone (the first period holds the compile and the warm-up); one fused program a step,
# as the JAX peer's jit step is one. Twice, with one seed and a fresh compile cache: the second
# start must take every program from disk, and the two final checkpoints (parameters and Adam's
# moments) must be the same bytes. Then the peer (scripts/bench/jax_gpt_gpu.py) on the same
# device, the model's shape and optimizer read from nitro's record, its MFU counted with nitro's
# FLOPs per token against a roofline it measures as nitro does.
gpt=skipped
if want gpt; then
  gpt=ok
  gstart=$SECONDS
  if [[ -n "$dry" ]]; then
    preset=tiny gsteps=${NITRO_GPT_STEPS:-5} gbe=xla jplat=cpu jdev=cpu
  else
    preset=gpt2 gsteps=${NITRO_GPT_STEPS:-30} gbe=cuda jplat=cuda jdev=gpu
  fi
  gbatch=${NITRO_GPT_BATCH:-8}
  if [[ -n "${NITRO_GPT_CORPUS:-}" ]]; then
    corpus="$(readlink -f "$NITRO_GPT_CORPUS")"
  else
    # A copy, so that an edit to docs/ between the two runs cannot make their checkpoints differ.
    corpus="$out/gpt-corpus"
    rm -rf "$corpus" && cp -r "$root/docs" "$corpus" || { echo "cannot copy $root/docs to $corpus" >&2; exit 1; }
  fi
  step "gpt: nitro train gpt --preset $preset --mixed-precision bf16 --fused on $gbe, $((2 * gsteps)) steps at batch $gbatch, twice with seed 42"
  # jnum prints the last value of a JSON number field NAME in its input (one record line).
  jnum() { grep -o "\"$1\":[-0-9.eE+]*" | tail -1 | cut -d: -f2; }
  gcache="$out/gpt-compile-cache"
  rm -rf "$gcache" "$out/gpt-1" "$out/gpt-2"
  for n in 1 2; do
    NITRO_BACKEND=$gbe NITRO_COMPILE_CACHE="$gcache" timeout 300 "$bin/nitro" train gpt --preset "$preset" \
      --mixed-precision bf16 --fused --set BatchSize="$gbatch" --set Seed=42 --set Corpus="$corpus" \
      --max-steps $((2 * gsteps)) --val-every "$gsteps" --checkpoint-every $((2 * gsteps)) --no-progress \
      --run-dir "$out/gpt-$n" >"$out/gpt-$n.log" 2>&1 ||
      { echo "FAIL: gpt run $n exited $? (the last lines of $out/gpt-$n.log):" >&2; tail -15 "$out/gpt-$n.log" >&2; gpt=FAIL; }
    echo "gpt nitro start $n: $(grep -m1 '^compile cache:' "$out/gpt-$n.log" || echo 'no compile cache line')"
    data=$(grep '"context":"data"' "$out/gpt-$n/metrics.jsonl" 2>/dev/null | tail -1)
    if [[ "$(jnum step <<<"$data")" != $((2 * gsteps)) ]]; then
      echo "FAIL: gpt run $n's record has no data line at step $((2 * gsteps)) ($out/gpt-$n/metrics.jsonl)" >&2; gpt=FAIL
      continue
    fi
    printf 'gpt nitro run %d: steps %d-%d steps_per_second %.4f tokens_per_second %.1f mfu %.4f (%s)\n' "$n" \
      $((gsteps + 1)) $((2 * gsteps)) "$(jnum steps_per_second <<<"$data")" "$(jnum tokens_per_second <<<"$data")" \
      "$(jnum mfu <<<"$data")" "$(grep -m1 -o '^roofline: .* per device' "$out/gpt-$n.log" || echo 'no roofline line')"
  done
  nmfu=$(jnum mfu <<<"$(grep '"context":"data"' "$out/gpt-2/metrics.jsonl" 2>/dev/null | tail -1)")
  grep -q '^compile cache: 0 compiled, [1-9][0-9]* from disk' "$out/gpt-2.log" ||
    { echo "FAIL: gpt's second start compiled again (or failed): $out/gpt-2.log" >&2; gpt=FAIL; }
  ck1=$(sed -n 's/^checkpoint: //p' "$out/gpt-1.log" | tail -1)
  ck2=$(sed -n 's/^checkpoint: //p' "$out/gpt-2.log" | tail -1)
  if [[ -z "$ck1" || -z "$ck2" ]]; then
    echo "FAIL: a gpt run wrote no final checkpoint (its log has no checkpoint line)" >&2; gpt=FAIL
  elif cmp -s "$ck1" "$ck2"; then
    echo "gpt bitwise: equal: the two runs' final checkpoints ($(basename "$ck1"), $(wc -c <"$ck1") bytes) are the same bytes"
  else
    echo "gpt bitwise: differ: $ck1 and $ck2 ($(cmp "$ck1" "$ck2" 2>&1 | head -1)); on a GPU a kernel that is not" \
      "deterministic would do it: rerun with XLA_FLAGS=--xla_gpu_deterministic_ops=true to tell" >&2
    gpt=FAIL
  fi
  if [[ -z "${NITRO_JAX_PYTHON:-}" ]]; then
    echo "gpt jax: skipped: NITRO_JAX_PYTHON is unset (a python with jax and optax; with CUDA on a GPU host)"
  elif ! params=$(head -1 "$out/gpt-1/metrics.jsonl" 2>/dev/null) || [[ "$params" != *'"type":"params"'* ]]; then
    echo "FAIL: gpt jax: no params line in $out/gpt-1/metrics.jsonl to take the model's shape from" >&2; gpt=FAIL
  else
    # The shape and optimizer are nitro's record's, so that a preset that changes moves both sides.
    JAX_PLATFORMS=$jplat XLA_PYTHON_CLIENT_PREALLOCATE=false timeout 300 "$NITRO_JAX_PYTHON" scripts/bench/jax_gpt_gpu.py \
      --layers "$(jnum Layers <<<"$params")" --heads "$(jnum Heads <<<"$params")" --dim "$(jnum Dim <<<"$params")" \
      --context "$(jnum Context <<<"$params")" --batch "$(jnum BatchSize <<<"$params")" --lr "$(jnum LearningRate <<<"$params")" \
      --warmup-frac "$(jnum WarmupFrac <<<"$params")" --beta2 "$(jnum Beta2 <<<"$params")" --wd "$(jnum Lambda <<<"$params")" \
      --clip "$(jnum GradientClipNorm <<<"$params")" --seed "$(jnum Seed <<<"$params")" --steps "$gsteps" --precision bf16 \
      ${dry:+--allow-cpu} 2>&1 | sed 's/^/gpt jax: /' | tee "$out/gpt-jax.log"
    # A peer on another device than nitro's would make the ratio a GPU against a CPU: refuse it.
    if ! grep -q "^gpt jax: ready: .* platform=$jdev " "$out/gpt-jax.log"; then
      echo "FAIL: gpt jax: the peer did not run on $jdev (its ready line names another platform, or it did not start)" >&2; gpt=FAIL
    elif ! jmfu=$(grep -o '^gpt jax: result: .* mfu [0-9.]*' "$out/gpt-jax.log" | awk '{print $NF}') || [[ -z "$jmfu" ]]; then
      echo "FAIL: gpt jax: no result line ($out/gpt-jax.log)" >&2; gpt=FAIL
    elif [[ -n "$nmfu" ]]; then
      awk -v n="$nmfu" -v j="$jmfu" -v d="${dry:+ a dry run: two CPU rooflines, the ratio says nothing of a GPU}" \
        'BEGIN { printf "gpt mfu nitro/jax: %.3f (nitro %.4f, jax %.4f; goal >= 1)%s\n", (j > 0 ? n / j : 0), n, j, d }'
    fi
  fi
  echo "gpt: $gpt ($((SECONDS - gstart)) s)"
fi

# Every side on the GPU, timed alike: nitro two-program and fused, the bare GoMLX loop, and JAX.
if want families; then
  families="${NITRO_GPU_FAMILIES:-mlp@1024,cnn@1024,transformer@128}"
  step "BenchmarkFamilies on cuda: $families"
  (cd integration && NITRO_BENCH_BACKEND=cuda NITRO_COMPILE_CACHE=off NITRO_BENCH_FAMILIES="$families" \
    NITRO_BENCH_PYTHON="${NITRO_JAX_PYTHON:-}" timeout "${NITRO_GPU_BENCH_SECONDS:-300}" "$bin/integration.test" \
    -test.run '^$' -test.bench 'BenchmarkFamilies$' -test.benchtime 1x) >"$out/families.log" 2>&1
  echo "exit $?"
  sed -n '/^the families, nitro against/,$p' "$out/families.log" | head -30
  grep -E 'FAIL|panic|rror' "$out/families.log" | head -10
fi

echo
echo "logs: $out"
[[ "$twoproc" != FAIL && "$cache" != FAIL && "$peer" != FAIL && "$gpt" != FAIL ]] || exit 1
