#!/usr/bin/env python3
"""JAX + optax peer for nitro's `make bench`: a line-protocol server on stdin/stdout.

The Go benchmark (integration/bench_test.go) starts this as a subprocess, in the venv that
scripts/bench/setup-venv.sh builds (.nitro/bench-venv), and drives it one command at a time so its
timed repeats can alternate with the Go sides' in one run. JAX is never a dependency of nitro, its
tests or CI: only of `make bench`.

The problem is the Go side's: an MLP in-hidden-hidden-out (Dense with bias, relu, relu, linear),
softmax cross-entropy with integer labels averaged over the batch, optax.radam(lr) at optax's
defaults (b1=0.9, b2=0.999, eps=1e-8), float32, on random normal inputs (n = steps*batch rows) and
uniform labels in [0, out), drawn with numpy from --seed (the values differ from Go's; the shapes
and the math do not).

One training step, as the Go sides do it: a FRESH host batch (a numpy slice copied, then uploaded
with jax.device_put inside the timed loop), one jitted program fusing forward, gradient and the
RAdam update with params and opt_state donated, and the loss read back to the host (float(loss),
which also waits for the step to finish). A repeat is one pass over the n rows: --steps steps.
State carries over from repeat to repeat, as on the Go side's long-lived handle.

Flags (read once, at start): --in 784 --hidden 512 --out 10 --batch 128 --steps 30 --lr 1e-3
--seed 7, plus --threads N (XLA CPU intra-op threads; default: the CPUs this process may run on,
os.sched_getaffinity) and --matmul-seconds 0.2 (how long "matmul" times for).

Protocol: one command per line on stdin, one answer line per command on stdout, flushed.
  (start)   -> "ready compile_ms=<ms> jax=<v> jaxlib=<v> optax=<v> threads=<n>"
               after the train step is lowered and compiled (compile_ms: lower + compile of the
               train step alone) and then run once untimed (warm-up). Printed once.
  "step"    -> "step_ms=<ms>": one repeat of --steps steps (uploads and loss read-backs
               included), timed from the end of its first step (the loss read back) to the end of
               its last, divided by --steps - 1: a mean per step, no median. The Go sides time the
               same span, so no side is charged its per-repeat overhead.
  "matmul"  -> "matmul_gflops=<GFLOP/s>": a jitted single matmul [batch,in] @ [in,hidden] on the
               same two device inputs every call, each call waited on (block_until_ready), looped
               for about --matmul-seconds; 2*batch*in*hidden flops per call.
  "flops"   -> "step_flops=<n>": matmul flops of one training step, 2*M*N*K per matmul. Per layer:
               the forward matmul, the weight-gradient matmul (x^T @ dy) and the input-gradient
               matmul (dy @ W^T), except that the first layer needs no input gradient (its input
               is data), so 3 + 3 + 2 = 8 matmuls. Elementwise work (bias, relu, softmax, RAdam)
               is not counted. 784-512-512-10 at batch 128: 410779648.
  "quit"    -> no answer; exits 0. End of input also exits 0. Blank lines are ignored.
Any error (a bad flag, an unknown command, a non-finite loss, a JAX failure) prints
"error <message>" on stdout and exits 1; diagnostics, if any, go to stderr.
"""

import argparse
import math
import os
import sys
import time


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def die(msg):
    say("error " + " ".join(str(msg).split()))  # one line, whatever the message
    sys.exit(1)


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage to stderr and exit 2
        die("flags: " + message)


def parse_flags(argv):
    p = Parser(prog="jax_step.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--in", dest="n_in", type=int, default=784)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--out", type=int, default=10)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--threads", type=int, default=0,
                   help="XLA CPU intra-op threads (0: the CPUs this process may run on)")
    p.add_argument("--matmul-seconds", type=float, default=0.2)
    a = p.parse_args(argv)
    for name in ("n_in", "hidden", "out", "batch", "steps"):
        if getattr(a, name) <= 0:
            die(f"flags: --{name.removeprefix('n_')} must be > 0, got {getattr(a, name)}")
    if a.threads < 0 or not a.lr > 0 or not a.matmul_seconds > 0:
        die("flags: --threads must be >= 0, --lr and --matmul-seconds > 0")
    return a


def step_flops(a):
    """Matmul flops of one training step (see the module docstring)."""
    layers = [(a.n_in, a.hidden), (a.hidden, a.hidden), (a.hidden, a.out)]
    total = 0
    for i, (k, n) in enumerate(layers):
        mm = 2 * a.batch * k * n
        total += mm  # forward: x @ W
        total += mm  # weight gradient: x^T @ dy
        if i > 0:
            total += mm  # input gradient: dy @ W^T (none for the first layer: its input is data)
    return total


def main(argv):
    a = parse_flags(argv)

    # Must be set before jax is imported. NPROC is what XLA's PJRT CPU client sizes its intra-op
    # thread pool from (xla/pjrt DefaultThreadPoolSize), falling back to the CPU affinity count.
    threads = a.threads or len(os.sched_getaffinity(0))
    os.environ["NPROC"] = str(threads)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import numpy as np
    import jax
    import jax.numpy as jnp
    import jaxlib
    import optax

    jax.config.update("jax_enable_compilation_cache", False)  # compile_ms must be a real compile

    rng = np.random.default_rng(a.seed)
    n = a.steps * a.batch
    x_host = rng.standard_normal((n, a.n_in), dtype=np.float32)
    y_host = rng.integers(0, a.out, size=n, dtype=np.int32)

    params, opt_state, train_step = mlp(a, rng)

    def batch(i):
        lo = i * a.batch
        # A fresh host batch each step, copied out of the dataset and uploaded, as Go does.
        xb = jax.device_put(x_host[lo:lo + a.batch].copy())
        yb = jax.device_put(y_host[lo:lo + a.batch].copy())
        return xb, yb

    x0, y0 = batch(0)
    t0 = time.perf_counter()
    step = jax.jit(train_step, donate_argnums=(0, 1)).lower(params, opt_state, x0, y0).compile()
    compile_ms = (time.perf_counter() - t0) * 1e3

    def run_step(i):
        nonlocal params, opt_state
        xb, yb = batch(i)
        params, opt_state, loss = step(params, opt_state, xb, yb)
        lv = float(loss)  # the host read-back; also waits for the step
        if not math.isfinite(lv):
            die(f"non-finite loss {lv} at step {i} of a repeat")

    run_step(0)  # warm-up: first execution's allocations and thread start-up, untimed

    # The matmul probe, compiled now so "matmul" times nothing but execution.
    ma = jax.device_put(rng.standard_normal((a.batch, a.n_in), dtype=np.float32))
    mb = jax.device_put(rng.standard_normal((a.n_in, a.hidden), dtype=np.float32))
    matmul = jax.jit(jnp.matmul).lower(ma, mb).compile()
    matmul(ma, mb).block_until_ready()

    say(f"ready compile_ms={compile_ms:.1f} jax={jax.__version__} jaxlib={jaxlib.__version__} "
        f"optax={optax.__version__} threads={threads}")

    for line in sys.stdin:
        cmd = line.strip()
        if not cmd:
            continue
        if cmd == "step":
            if a.steps < 2:
                die("step: --steps must be >= 2 (the span starts at the end of the first step)")
            run_step(0)
            t0 = time.perf_counter()
            for i in range(1, a.steps):
                run_step(i)
            say(f"step_ms={(time.perf_counter() - t0) * 1e3 / (a.steps - 1):.4f}")
        elif cmd == "matmul":
            iters, secs = time_matmul(matmul, ma, mb, a.matmul_seconds, 5)
            gflops = 2.0 * a.batch * a.n_in * a.hidden * iters / secs / 1e9
            say(f"matmul_gflops={gflops:.2f}")
        elif cmd == "flops":
            say(f"step_flops={step_flops(a)}")
        elif cmd == "quit":
            return
        else:
            die(f"unknown command {cmd!r} (want step, matmul, flops or quit)")


def mlp(a, rng):
    """The MLP problem from flags a (n_in, hidden, out, lr): its parameters placed on the device,
    the optimizer state, and the training step train_step(params, opt_state, x, y) -> (params,
    opt_state, loss), not yet jitted. Imports jax: call it after the environment is set."""
    import jax

    sizes = [a.n_in, a.hidden, a.hidden, a.out]
    return dense_stack(a, rng, sizes, lambda i, n, h: jax.nn.relu(h) if i < n - 1 else h)


def dense_stack(a, rng, sizes, activate):
    """A stack of dense layers between the widths in sizes, activate(i, n, h) applied after layer i
    of n, trained with optax.radam(a.lr) on the softmax cross-entropy of integer labels: as mlp
    returns it. Weights are normals scaled by 1/sqrt(fan-in), biases zero."""
    import numpy as np
    import jax
    import optax

    params = []
    for k, m in zip(sizes[:-1], sizes[1:]):
        w = rng.standard_normal((k, m), dtype=np.float32) * np.float32(1.0 / math.sqrt(k))
        params.append({"w": jax.device_put(w), "b": jax.device_put(np.zeros(m, np.float32))})

    opt = optax.radam(a.lr)  # b1=0.9, b2=0.999, eps=1e-8: optax's defaults
    opt_state = opt.init(params)

    def loss_fn(params, x, y):
        h = x
        for i, layer in enumerate(params):
            h = activate(i, len(params), h @ layer["w"] + layer["b"])
        return optax.softmax_cross_entropy_with_integer_labels(h, y).mean()

    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return params, opt_state, train_step


def time_matmul(matmul, ma, mb, seconds, min_iters):
    """Runs matmul(ma, mb) for at least seconds and min_iters calls, each waited on; returns the
    number of calls and the elapsed seconds."""
    iters, t0 = 0, time.perf_counter()
    while True:
        matmul(ma, mb).block_until_ready()
        iters += 1
        now = time.perf_counter()
        if now - t0 >= seconds and iters >= min_iters:
            return iters, now - t0


def run(main):
    """Runs main(argv) so that every failure reaches the driver as one error line."""
    try:
        main(sys.argv[1:])
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except BaseException as e:  # noqa: BLE001 - every failure must reach the driver as one line
        try:
            die(f"{type(e).__name__}: {e}")
        except BrokenPipeError:
            sys.exit(1)


if __name__ == "__main__":
    run(main)
