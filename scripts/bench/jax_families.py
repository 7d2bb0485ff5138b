#!/usr/bin/env python3
"""JAX + optax peer for nitro's three-family benchmark: a line-protocol server on stdin/stdout.

integration/bench_families_test.go (BenchmarkFamilies) starts one of these per family, in the venv
scripts/bench/setup-venv.sh builds (.nitro/bench-venv), and drives it one command at a time so its
timed repeats alternate with the Go sides' in one run. JAX is a dependency of `make bench` only.

The models are written with jax.numpy and lax alone (the venv has no Flax), as the Go side
writes them (integration/families_test.go), float32, softmax cross-entropy on integer labels
averaged over the batch (and positions):
  mlp          784-512-512-10 relu MLP; optax.radam(lr) at optax's defaults.
  cnn          the Flax MNIST example's shape on [28,28,1]: conv 32 3x3 SAME relu, avg pool 2,
               conv 64 3x3 SAME relu, avg pool 2 (lax.reduce_window, as flax.linen.avg_pool),
               dense 256 relu, dense 10; optax.sgd(lr, momentum=0.9).
  transformer  pre-norm encoder: token + position embeddings (vocab 64, seq 32, d 64), 2 blocks of
               4-head self-attention and a 4x relu MLP, layer norms (eps 1e-5) and residuals, a
               final layer norm and a dense head over the vocabulary; labels: the token at t-1
               (position 0: its own); optax.adam(lr).
  gpt, gpt2    cmd/examples/gpt's model (jax_gpt.py's init_params and make_forward, imported) at
               --layers, --heads, --dim, --context (the Go side passes its presets: gpt is the
               small one, gpt2 GPT-2 small's shape), next-byte cross-entropy over every position;
               jax_gpt.py's make_optimizer: global-norm clipping (--clip), then AdamW (b2
               --beta2, decay --wd on the weight matrices only) at WarmupCosine(--warmup-frac,
               lr, lr/10) over --horizon steps, as nitro runs the gpt example. The rows are
               byte sequences of a constant stride: row r is (s + k*t) mod 256 over t = 0..T, s
               uniform in [0, 256) and k in [1, 8], tokens its first T values and targets its
               last T (the Go side draws the same way).
The data are drawn with numpy from --seed (values differ from Go's; shapes and math do not).

One training step, as the Go sides do it: a FRESH host batch (numpy slices copied, then uploaded
with jax.device_put inside the timed loop), one jitted program fusing forward, gradient and the
optimizer update with params and opt_state donated, and the loss read back (float(loss), which
also waits for the step). A repeat is --steps steps over the rows; state carries over.

Flags: --family mlp|cnn|transformer (required) --batch 128 --steps 30 --lr (family default: mlp
1e-3, cnn 0.01, transformer 1e-3) --seed 7 --threads N (XLA CPU intra-op threads; default: the
CPUs this process may run on) --matmul 1024 (the roofline matmul's square size)
--matmul-seconds 0.3; for gpt and gpt2 --layers --heads --dim --context --beta2 --wd --clip
--warmup-frac --horizon (required there, no defaults). The Go benchmark passes --batch, --steps and --lr explicitly (it runs the
mlp and cnn at batch 128, the transformer at 32).

Protocol: one command per line on stdin, one answer line per command on stdout, flushed.
  (start)   -> "ready compile_ms=<ms> jax=<v> jaxlib=<v> optax=<v> threads=<n> platform=<p>
               device=<kind>" once the train step is lowered, compiled (compile_ms: that alone)
               and run once untimed; platform is JAX's (cpu, gpu), as JAX_PLATFORMS chose.
  "step"    -> "step_ms=<ms>": one repeat, timed from the end of its first step (its loss read
               back) to the end of its last, divided by --steps - 1. The Go sides time the same span.
  "matmul"  -> "matmul_gflops=<GFLOP/s>": a jitted [m,m] @ [m,m] matmul on the same two device
               inputs every call, each call waited on, looped for about --matmul-seconds.
  "flops"   -> "step_flops=<n>": matmul and convolution flops of one training step (2*M*N*K
               each; forward, weight gradient and input gradient per layer, less the input gradient
               of a layer whose input is data). Must equal the Go side's count.
  "eval P"  -> "eval_loss=<x> eval_acc=<a>": the loss and the accuracy (argmax against the label,
               over every prediction) of the current params on the batch in file P: the Go side's
               held-out batch, x's values then y's (int32), little-endian, row-major, sized
               --batch rows of the family's shapes (x float32, the transformer's int32).
  "maps"    -> "maps malloc=<lib|glibc>": the allocator library mapped in this process, read from
               /proc/self/maps (libjemalloc, libtcmalloc, libmimalloc), or glibc where none is: the
               proof that the LD_PRELOAD the driver started it with took.
  "reset"   -> "reset ok": params and optimizer state back to their starting values (after the
               driver's allocator probe, so that the peer trains as many steps as the Go sides),
               then one untimed step, as at the start.
  "quit"    -> no answer; exits 0. End of input also exits 0. Blank lines are ignored.
Any error prints "error <message>" on stdout and exits 1.
"""

import math
import os
import sys
import time

import numpy as np

# The MLP peer's say, die and one-line-error argparse: both peers speak one protocol. (This
# script's folder is on sys.path when it runs as a script.)
from jax_step import Parser, die, run, say, time_matmul

FAMILIES = ("mlp", "cnn", "transformer", "gpt", "gpt2")
GPT_FAMILIES = ("gpt", "gpt2")
DEFAULT_LR = {"mlp": 1e-3, "cnn": 0.01, "transformer": 1e-3, "gpt": 1e-3, "gpt2": 6e-4}
GPT_FLAGS = ("layers", "heads", "dim", "context", "beta2", "wd", "clip", "warmup_frac", "horizon")
VOCAB, SEQ, D, HEADS, BLOCKS, LN_EPS = 64, 32, 64, 4, 2, 1e-5
MLP_DIMS = (784, 512, 512, 10)


def parse_flags(argv):
    p = Parser(prog="jax_families.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--family", required=True, choices=FAMILIES)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--lr", type=float, default=0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--matmul", type=int, default=1024)
    p.add_argument("--matmul-seconds", type=float, default=0.3)
    for name in ("layers", "heads", "dim", "context", "horizon"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=0)
    for name in ("beta2", "wd", "clip", "warmup_frac"):
        p.add_argument("--" + name.replace("_", "-"), type=float, default=-1)
    a = p.parse_args(argv)
    if a.family in GPT_FAMILIES:
        missing = [n for n in GPT_FLAGS if getattr(a, n) in (0, -1) and n not in ("wd", "clip", "warmup_frac")]
        missing += [n for n in ("wd", "clip", "warmup_frac") if getattr(a, n) < 0]
        if missing:
            die(f"flags: --family {a.family} needs --{', --'.join(m.replace('_', '-') for m in missing)}")
        if a.dim % a.heads or a.horizon < 2:
            die(f"flags: --dim {a.dim} must divide by --heads {a.heads}, --horizon must be >= 2")
    if a.batch <= 0 or a.steps < 2 or a.matmul <= 0 or a.threads < 0 or a.lr < 0 or not a.matmul_seconds > 0:
        die("flags: --batch and --matmul must be > 0, --steps >= 2, --threads and --lr >= 0, --matmul-seconds > 0")
    a.lr = a.lr or DEFAULT_LR[a.family]
    return a


def gpt_flops(a, b):
    """roofline.TransformerFLOPsPerToken of the gpt's matrices (12*L*D^2 in the blocks, 256*D for
    the tied output) times the step's B*T tokens: the Go side's count (bench_gpt_test.go)."""
    weights = 12 * a.layers * a.dim * a.dim + 256 * a.dim
    per_token = 6 * weights + 12 * a.layers * a.dim * a.context
    return per_token * b * a.context


def gpt_rows(rng, n, t):
    """n rows of t+1 bytes of a constant stride (see the module doc): tokens and targets."""
    s = rng.integers(0, 256, size=(n, 1), dtype=np.int64)
    k = rng.integers(1, 9, size=(n, 1), dtype=np.int64)
    row = (s + k * np.arange(t + 1, dtype=np.int64)[None]) % 256
    return row[:, :t].astype(np.int32), row[:, 1:].astype(np.int32)


def malloc_mapped():
    """The preloaded allocator this process runs on, from /proc/self/maps, or glibc."""
    with open("/proc/self/maps") as f:
        maps = f.read()
    for lib in ("libjemalloc", "libtcmalloc", "libmimalloc"):
        if lib in maps:
            return lib
    return "glibc"


def step_flops(family, b, a=None):
    """The Go side's count (integration/families_test.go: mlpFlops, cnnFlops, tfFlops)."""
    if family == "mlp":
        total = 0
        for i, (k, n) in enumerate(zip(MLP_DIMS[:-1], MLP_DIMS[1:])):
            total += (3 if i > 0 else 2) * 2 * b * k * n
        return total
    if family in GPT_FAMILIES:
        return gpt_flops(a, b)
    if family == "cnn":
        conv0 = 2 * b * 28 * 28 * 32 * 9 * 1
        conv1 = 2 * b * 14 * 14 * 64 * 9 * 32
        dense0 = 2 * b * 7 * 7 * 64 * 256
        dense1 = 2 * b * 256 * 10
        return 2 * conv0 + 3 * (conv1 + dense0 + dense1)
    bs = b * SEQ
    attn = 2 * b * HEADS * SEQ * SEQ * (D // HEADS)
    block = 4 * 2 * bs * D * D + 2 * attn + 2 * 2 * bs * D * 4 * D
    return 3 * (BLOCKS * block + 2 * bs * D * VOCAB)


def main(argv):
    a = parse_flags(argv)
    threads = a.threads or len(os.sched_getaffinity(0))
    os.environ["NPROC"] = str(threads)  # read by XLA's CPU client for its thread pool size
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import jax
    import jax.numpy as jnp
    import jaxlib
    import optax
    from jax import lax

    jax.config.update("jax_enable_compilation_cache", False)  # compile_ms must be a real compile

    rng = np.random.default_rng(a.seed)
    n = a.steps * a.batch

    def dense(k, m):
        w = rng.standard_normal((k, m), dtype=np.float32) * np.float32(1.0 / math.sqrt(k))
        return {"w": jnp.asarray(w), "b": jnp.zeros(m, jnp.float32)}

    def linear(p, h):
        return h @ p["w"] + p["b"]

    def xent(logits, y):
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    if a.family == "mlp":
        x_host = rng.standard_normal((n, MLP_DIMS[0]), dtype=np.float32)
        y_host = rng.integers(0, 10, size=n, dtype=np.int32)
        params = [dense(k, m) for k, m in zip(MLP_DIMS[:-1], MLP_DIMS[1:])]
        opt = optax.radam(a.lr)

        def logits_fn(params, x):
            h = x
            for i, p in enumerate(params):
                h = linear(p, h)
                if i < len(params) - 1:
                    h = jax.nn.relu(h)
            return h

    elif a.family == "cnn":
        x_host = rng.standard_normal((n, 28, 28, 1), dtype=np.float32)
        y_host = rng.integers(0, 10, size=n, dtype=np.int32)

        def conv_p(cin, cout):
            w = rng.standard_normal((3, 3, cin, cout), dtype=np.float32) * np.float32(1.0 / math.sqrt(9 * cin))
            return {"w": jnp.asarray(w), "b": jnp.zeros(cout, jnp.float32)}

        params = {"c0": conv_p(1, 32), "c1": conv_p(32, 64), "d0": dense(7 * 7 * 64, 256), "d1": dense(256, 10)}
        opt = optax.sgd(a.lr, momentum=0.9)

        def conv_pool(p, h):
            h = lax.conv_general_dilated(h, p["w"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
            h = jax.nn.relu(h + p["b"])
            # flax.linen.avg_pool: a summing reduce_window over 2x2, stride 2, divided by 4
            return lax.reduce_window(h, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0

        def logits_fn(params, x):
            h = conv_pool(params["c1"], conv_pool(params["c0"], x))
            h = jax.nn.relu(linear(params["d0"], h.reshape(h.shape[0], -1)))
            return linear(params["d1"], h)

    elif a.family in GPT_FAMILIES:
        from jax_gpt import init_params, make_forward, make_optimizer, warmup_cosine

        x_host, y_host = gpt_rows(rng, n, a.context)
        params = init_params(a.seed, a.layers, a.heads, a.dim, a.context)
        opt = make_optimizer(params, warmup_cosine(a.horizon, a.warmup_frac, a.lr, a.lr / 10), a.beta2, a.wd, a.clip)
        logits_fn = make_forward(a.heads, a.dim, a.context)

    else:
        x_host = rng.integers(0, VOCAB, size=(n, SEQ), dtype=np.int32)
        y_host = np.concatenate([x_host[:, :1], x_host[:, :-1]], axis=1)

        def ln_p():
            return {"g": jnp.ones(D, jnp.float32), "b": jnp.zeros(D, jnp.float32)}

        def layer_norm(p, h):
            mu = h.mean(-1, keepdims=True)
            c = h - mu
            return c / jnp.sqrt((c * c).mean(-1, keepdims=True) + LN_EPS) * p["g"] + p["b"]

        params = {
            "tok": jnp.asarray(rng.standard_normal((VOCAB, D), dtype=np.float32) * np.float32(0.02)),
            "pos": jnp.asarray(rng.standard_normal((SEQ, D), dtype=np.float32) * np.float32(0.02)),
            "blocks": [{"ln0": ln_p(), "q": dense(D, D), "k": dense(D, D), "v": dense(D, D), "o": dense(D, D),
                        "ln1": ln_p(), "m0": dense(D, 4 * D), "m1": dense(4 * D, D)} for _ in range(BLOCKS)],
            "lnf": ln_p(), "head": dense(D, VOCAB),
        }
        opt = optax.adam(a.lr)
        dh = D // HEADS

        def logits_fn(params, x):
            b = x.shape[0]
            h = jnp.take(params["tok"], x, axis=0) + params["pos"][None]
            for p in params["blocks"]:
                z = layer_norm(p["ln0"], h)
                q, k, v = (linear(p[n], z).reshape(b, SEQ, HEADS, dh) for n in ("q", "k", "v"))
                att = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dh), axis=-1)
                o = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, SEQ, D)
                h = h + linear(p["o"], o)
                h = h + linear(p["m1"], jax.nn.relu(linear(p["m0"], layer_norm(p["ln1"], h))))
            return linear(params["head"], layer_norm(params["lnf"], h))

    def loss_fn(params, x, y):
        return xent(logits_fn(params, x), y)

    def score(params, x, y):
        logits = logits_fn(params, x)
        return xent(logits, y), (jnp.argmax(logits, -1) == y).mean(dtype=jnp.float32)

    opt_state = opt.init(params)

    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def batch(i):
        lo = i * a.batch
        return jax.device_put(x_host[lo:lo + a.batch].copy()), jax.device_put(y_host[lo:lo + a.batch].copy())

    # The starting state on the host, for "reset": the step donates the device copies.
    init_host = jax.device_get((params, opt_state))

    x0, y0 = batch(0)
    t0 = time.perf_counter()
    step = jax.jit(train_step, donate_argnums=(0, 1)).lower(params, opt_state, x0, y0).compile()
    compile_ms = (time.perf_counter() - t0) * 1e3

    def run_step(i):
        nonlocal params, opt_state
        xb, yb = batch(i)
        params, opt_state, loss = step(params, opt_state, xb, yb)
        lv = float(loss)
        if not math.isfinite(lv):
            die(f"non-finite loss {lv} at step {i} of a repeat")

    run_step(0)

    m = a.matmul
    ma = jax.device_put(rng.standard_normal((m, m), dtype=np.float32))
    mb = jax.device_put(rng.standard_normal((m, m), dtype=np.float32))
    matmul = jax.jit(jnp.matmul).lower(ma, mb).compile()
    matmul(ma, mb).block_until_ready()

    x_row = x_host.shape[1:]
    y_row = y_host.shape[1:]
    score_jit = jax.jit(score)

    def held_out(path):
        """Reads the Go side's held-out batch (x then y, little-endian, row-major) and scores on it."""
        xn, yn = a.batch * math.prod(x_row), a.batch * math.prod(y_row)
        want = 4 * (xn + yn)
        try:
            raw = open(path, "rb").read()
        except OSError as e:
            die(f"eval: reading the held-out batch: {e}")
        if len(raw) != want:
            die(f"eval: {path} holds {len(raw)} bytes, want {want} (x {(a.batch,) + x_row} {x_host.dtype}, y {(a.batch,) + y_row} int32)")
        xs = np.frombuffer(raw[:4 * xn], dtype=x_host.dtype.newbyteorder("<")).reshape((a.batch,) + x_row)
        ys = np.frombuffer(raw[4 * xn:], dtype=np.dtype("<i4")).reshape((a.batch,) + y_row)
        classes = {"transformer": VOCAB, "gpt": 256, "gpt2": 256}.get(a.family, MLP_DIMS[-1])
        if ys.size and (ys.min() < 0 or ys.max() >= classes):
            die(f"eval: a label in {path} is outside [0, {classes})")
        if x_host.dtype == np.int32 and xs.size and (xs.min() < 0 or xs.max() >= classes):
            die(f"eval: a token in {path} is outside [0, {classes})")
        if x_host.dtype != np.int32 and not np.isfinite(xs).all():
            die(f"eval: {path} holds a non-finite input")
        loss, acc = score_jit(params, jax.device_put(xs.astype(x_host.dtype)), jax.device_put(ys.astype(np.int32)))
        return float(loss), float(acc)

    say(f"ready compile_ms={compile_ms:.1f} jax={jax.__version__} jaxlib={jaxlib.__version__} "
        f"optax={optax.__version__} threads={threads} platform={jax.devices()[0].platform} "
        f"device={jax.devices()[0].device_kind.replace(' ', '_')}")

    for line in sys.stdin:
        cmd = line.strip()
        if not cmd:
            continue
        cmd, _, arg = cmd.partition(" ")
        if cmd == "step":
            run_step(0)
            t0 = time.perf_counter()
            for i in range(1, a.steps):
                run_step(i)
            say(f"step_ms={(time.perf_counter() - t0) * 1e3 / (a.steps - 1):.4f}")
        elif cmd == "matmul":
            iters, secs = time_matmul(matmul, ma, mb, a.matmul_seconds, 3)
            say(f"matmul_gflops={2.0 * m * m * m * iters / secs / 1e9:.2f}")
        elif cmd == "flops":
            say(f"step_flops={step_flops(a.family, a.batch, a)}")
        elif cmd == "reset":
            params, opt_state = jax.tree_util.tree_map(lambda v: jax.device_put(np.array(v, copy=True)), init_host)
            run_step(0)
            say("reset ok")
        elif cmd == "maps":
            say(f"maps malloc={malloc_mapped()}")
        elif cmd == "eval" and arg:
            loss, acc = held_out(arg)
            say(f"eval_loss={loss:.6f} eval_acc={acc:.6f}")
        elif cmd == "quit":
            return
        else:
            die(f"unknown command {line.strip()!r} (want step, matmul, flops, maps, reset, eval PATH or quit)")


if __name__ == "__main__":
    run(main)
