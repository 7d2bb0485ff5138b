#!/usr/bin/env python3
"""One JAX + optax start for nitro's disk compile cache benchmark: run once, print one line, exit.

integration/diskcache_bench_test.go (BenchmarkDiskCacheStart) runs this in fresh processes, in the
venv scripts/bench/setup-venv.sh builds (.nitro/bench-venv), beside nitro's own starts of the same
MLP: with JAX's persistent compilation cache off, on an empty folder, and a second time over that
folder. JAX is a peer measured against, never a dependency of nitro.

The model is the MNIST MLP nitro's bench trains (784-512-512-10, relu, softmax cross-entropy on
integer labels averaged over the batch, optax.radam(lr) at optax's defaults, float32), on a batch
of random normal inputs and uniform labels drawn with numpy from --seed. The process imports JAX,
places the parameters, initializes the optimizer state, and runs one jitted training step
(forward, gradient and update in one program, params and state donated), then reads the loss
back; that read-back is the end of its first optimizer step, as nitro's child measures it.

With --deep N (N >= 2) the model is nitro's many-array one instead (integration/diskcache_bench_test.go,
Arrays600): N dense layers, the inner ones --hidden wide, tanh after each but the first and the
last, so 2N parameter arrays; the same loss and optimizer.

Flags: --cache off|DIR (DIR: jax_compilation_cache_dir, with the minimum compile time and entry
size both 0 so that every program, small ones included, is written) --in 784 --hidden 512
--out 10 --batch 128 --lr 1e-3 --seed 7 --deep 0 --threads N (XLA CPU intra-op threads; default: the CPUs
this process may run on).

Output, one line on stdout:
  "START <end> <compiled> <loaded> <compile_s>": end is the Unix time in nanoseconds when the
  first step's loss was back on the host; compiled counts the compiles XLA ran, loaded those the
  persistent cache answered; compile_s is the seconds JAX reports for all of them
  (/jax/core/compile/backend_compile_duration, which holds a cache read when one answers).
  "START-ERROR <message>" on any failure, exit status 1.
"""

import math
import os
import sys
import time

from jax_step import Parser, dense_stack, mlp


def die(msg):
    sys.stdout.write("START-ERROR " + " ".join(str(msg).split()) + "\n")
    sys.stdout.flush()
    sys.exit(1)


def parse_flags(argv):
    p = Parser(prog="jax_start.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", required=True, help="off, or the persistent cache's folder")
    p.add_argument("--in", dest="n_in", type=int, default=784)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--out", type=int, default=10)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--deep", type=int, default=0, help="N >= 2: N dense layers (2N arrays) instead of the MLP")
    p.add_argument("--threads", type=int, default=0)
    return p.parse_args(argv)


def deep(a, rng):
    """The many-array model from flags a (n_in, hidden, out, lr, deep): as jax_step.mlp returns it."""
    import jax

    sizes = [a.n_in] + [a.hidden] * (a.deep - 1) + [a.out]
    return dense_stack(a, rng, sizes, lambda i, n, h: jax.numpy.tanh(h) if 0 < i < n - 1 else h)


def main(argv):
    a = parse_flags(argv)
    os.environ["NPROC"] = str(a.threads or len(os.sched_getaffinity(0)))
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import numpy as np
    import jax
    from jax import monitoring

    if a.cache == "off":
        jax.config.update("jax_enable_compilation_cache", False)
    else:
        jax.config.update("jax_enable_compilation_cache", True)
        jax.config.update("jax_compilation_cache_dir", a.cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

    counts = {"compiles": 0, "hits": 0, "seconds": 0.0}

    def on_duration(event, secs, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            counts["compiles"] += 1
            counts["seconds"] += secs

    def on_event(event, **_):
        if event == "/jax/compilation_cache/cache_hits":
            counts["hits"] += 1

    monitoring.register_event_duration_secs_listener(on_duration)
    monitoring.register_event_listener(on_event)

    rng = np.random.default_rng(a.seed)
    if a.deep == 1 or a.deep < 0:
        die(f"--deep {a.deep}: want 0 (the MLP) or a layer count >= 2")
    params, opt_state, train_step = (deep if a.deep else mlp)(a, rng)
    x = jax.device_put(rng.standard_normal((a.batch, a.n_in), dtype=np.float32))
    y = jax.device_put(rng.integers(0, a.out, size=a.batch, dtype=np.int32))
    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, x, y)
    lv = float(loss)  # the host read-back; also waits for the step
    end = time.time_ns()
    if not math.isfinite(lv):
        die(f"non-finite loss {lv}")
    hits = counts["hits"]
    print(f"START {end} {counts['compiles'] - hits} {hits} {counts['seconds']:.6f}", flush=True)


if __name__ == "__main__":
    # jax_step's run turns an exception into its own error line; this script's lines start START.
    try:
        main(sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - every failure must reach the driver as one line
        die(f"{type(e).__name__}: {e}")
