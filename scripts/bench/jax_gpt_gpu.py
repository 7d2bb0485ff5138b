#!/usr/bin/env python3
"""JAX + optax peer of gpu-check's gpt stage: the step of `nitro train gpt --preset gpt2
--mixed-precision bf16 --fused`, timed on the same device, its tokens/s and MFU computed as nitro
computes its own.

    JAX_PLATFORMS=cuda python scripts/bench/jax_gpt_gpu.py --steps 30 --batch 8

It refuses to report when jax.devices() is not a GPU (the first GPU run's peer ran on the CPU and
nothing said so); --allow-cpu lifts that for gpu-check's CPU dry run, which runs it with the tiny
preset's shape.

The model is cmd/examples/gpt's (the same as scripts/bench/jax_gpt.py's, written here at module
level so that the two scripts can change apart): byte embedding [256, Dim] and learned positions
[Context, Dim], Layers pre-LayerNorm blocks (causal softmax attention, a 4·Dim GELU-tanh MLP,
biases everywhere, LayerNorm eps 1e-5), a final LayerNorm and the tied output x · wteᵀ. The
optimizer is nitro's gpt: clip to global norm, then AdamW (b1 0.9, --beta2, eps 1e-8) decaying the
weight matrices only; the rate warms up over --warmup-frac of the run and falls along a cosine to
a tenth (optax's warmup_cosine_decay_schedule: the same shape as nitro's WarmupCosine, which only
the loss, not the time, could tell apart).

bf16 as nitro's --mixed-precision bf16 does it (package precision): parameters, optimizer state,
gradients, normalizations, softmax and the loss stay float32; every matrix product (the linear
layers, the two attention einsums, the tied output) casts both operands to bfloat16, computes a
bfloat16 product and casts it back to float32. Autodiff carries the casts into the backward
products, so those run in bfloat16 too, as nitro's cast builder narrows the gradient's products.

The data: uniform random bytes, drawn from --seed. A step's time does not depend on the byte
values (the embedding is a gather, every other shape is fixed), and so the peer needs neither the
corpus nor Go on the GPU host.

Timing, as nitro's record times its second period: the step is compiled, --steps steps run
untimed (nitro's first period, which holds its compile and warm-up), then --steps steps are timed.
Each step uploads a fresh host batch and reads the loss back, as nitro's loop does.

MFU, with nitro's own accounting (cmd/examples/gpt Throughput, package roofline):
    FLOPs per token = 6·(12·Layers·Dim² + 256·Dim) + 12·Layers·Dim·Context
    MFU = tokens/s · FLOPs per token / peak
and the peak measured in this process as nitro measures its own: an n×n by n×n product (n 4096 on
a GPU, 1024 on the CPU) of zeros in the compute dtype (bfloat16 under bf16), the inputs on the
device, one untimed call, then calls for at least 0.5 s (and 3), each waited for and its result
dropped (gopjrt's Execute waits for the device as block_until_ready does), FLOPs = 2·n³ per call.

Output (the lines gpu-check parses):
    ready: jax=… platform=gpu device=… precision=bf16 parameters=…
    roofline: … GFLOP/s (bfloat16 4096² matmul)
    result: steps_per_second … tokens_per_second … mfu … loss_first … loss_last … compile_seconds …
"""

import argparse
import math
import os
import sys
import time


def parse_flags(argv):
    p = argparse.ArgumentParser(prog="jax_gpt_gpu.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=30, help="untimed steps, then as many timed")
    p.add_argument("--precision", choices=["bf16", "f32"], default="bf16")
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--warmup-frac", type=float, default=0.05)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--allow-cpu", action="store_true", help="report on a CPU too (gpu-check's dry run)")
    a = p.parse_args(argv)
    if a.dim % a.heads:
        p.error(f"--dim {a.dim} does not divide by --heads {a.heads}: pick a multiple of --heads")
    if a.steps < 1 or a.batch < 1 or a.context < 1:
        p.error("--steps, --batch and --context must be >= 1")
    return a


def flops_per_token(layers, dim, context):
    """roofline.TransformerFLOPsPerToken of the gpt's weights, as its Throughput declares them."""
    weights = 12 * layers * dim * dim + 256 * dim
    return 6.0 * weights + 12.0 * layers * dim * context


def measure_peak(jax, jnp, n, dtype, min_s=0.5):
    """roofline.Measure's figure: FLOP/s of n×n products on the default device."""
    f = jax.jit(lambda x, w: x @ w)
    x = jax.device_put(jnp.zeros((n, n), dtype))
    w = jax.device_put(jnp.zeros((n, n), dtype))
    f(x, w).block_until_ready()
    calls, start = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - start < min_s:
        out = f(x, w)
        out.block_until_ready()
        del out
        calls += 1
    window = time.perf_counter() - start
    return 2.0 * n ** 3 * calls / window


def build(a, jax, jnp):
    """The parameters (float32) and the loss function of the gpt under --precision."""
    d, L, H, ctx = a.dim, a.layers, a.heads, a.context
    dh = d // H
    std, proj_std = 0.02, 0.02 / math.sqrt(2 * L)
    keys = iter(jax.random.split(jax.random.PRNGKey(a.seed), 4 + 4 * L))

    def normal(shape, s):
        return jax.random.normal(next(keys), shape, jnp.float32) * jnp.float32(s)

    def dense(n_in, n_out, s):
        return {"w": normal((n_in, n_out), s), "b": jnp.zeros((n_out,), jnp.float32)}

    def ln():
        return {"g": jnp.ones((d,), jnp.float32), "o": jnp.zeros((d,), jnp.float32)}

    params = {
        "wte": normal((256, d), std),
        "wpe": normal((ctx, d), std),
        "blocks": [
            {"ln_1": ln(), "qkv": dense(d, 3 * d, std), "proj": dense(d, d, proj_std),
             "ln_2": ln(), "fc_1": dense(d, 4 * d, std), "fc_2": dense(4 * d, d, proj_std)}
            for _ in range(L)
        ],
        "ln_f": ln(),
    }

    if a.precision == "bf16":
        def product(spec, x, y):
            # The product's own dtype is bfloat16, cast back after: nitro's cast builder.
            return jnp.einsum(spec, x.astype(jnp.bfloat16), y.astype(jnp.bfloat16)).astype(jnp.float32)
    else:
        def product(spec, x, y):
            return jnp.einsum(spec, x, y)

    def layer_norm(p, x):
        mean = x.mean(-1, keepdims=True)
        var = jnp.square(x - mean).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p["g"] + p["o"]

    def linear(p, x):
        return product("...i,io->...o", x, p["w"]) + p["b"]

    causal = jnp.tril(jnp.ones((ctx, ctx), bool))

    def attention(p, x):
        b, t, _ = x.shape
        qkv = linear(p, x).reshape(b, t, 3, H, dh)  # nitro's layout: [q | k | v], heads inside each
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        logits = product("bqhd,bkhd->bhqk", q, k) / math.sqrt(dh)
        logits = logits + jnp.where(causal[:t, :t], 0.0, -1e9)[None, None]
        w = jax.nn.softmax(logits, axis=-1)
        return product("bkhd,bhqk->bqhd", v, w).reshape(b, t, d)

    def loss_fn(params, tokens, targets):
        t = tokens.shape[1]
        x = params["wte"][tokens] + params["wpe"][:t][None]
        for blk in params["blocks"]:
            x = x + linear(blk["proj"], attention(blk["qkv"], layer_norm(blk["ln_1"], x)))
            h = jax.nn.gelu(linear(blk["fc_1"], layer_norm(blk["ln_2"], x)), approximate=True)
            x = x + linear(blk["fc_2"], h)
        logits = product("btd,vd->btv", layer_norm(params["ln_f"], x), params["wte"])  # tied
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.take_along_axis(logp, targets[..., None], axis=-1).mean()

    return params, loss_fn


def main(argv):
    a = parse_flags(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import jax
    import jax.numpy as jnp
    import optax

    dev = jax.devices()[0]
    platform = dev.platform
    if platform != "gpu" and not a.allow_cpu:
        sys.exit(f"jax_gpt_gpu: jax.devices() is {jax.devices()}, not a GPU: no figures. Install a CUDA jax "
                 "(jax[cuda12] or jax[cuda13]) in this python and run with JAX_PLATFORMS=cuda; --allow-cpu "
                 "reports on the CPU (a dry run only)")
    params, loss_fn = build(a, jax, jnp)
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))
    decay_mask = jax.tree_util.tree_map_with_path(lambda path, _: getattr(path[-1], "key", None) == "w", params)
    total = 2 * a.steps
    warmup = int(math.floor(a.warmup_frac * total + 0.5))
    sched = optax.warmup_cosine_decay_schedule(0.0, a.lr, max(warmup, 1), total, a.lr / 10)
    opt = optax.chain(optax.clip_by_global_norm(a.clip),
                      optax.adamw(sched, b1=0.9, b2=a.beta2, eps=1e-8, weight_decay=a.wd, mask=decay_mask))
    opt_state = opt.init(params)

    def step(params, opt_state, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    rng = np.random.default_rng(a.seed)
    windows = rng.integers(0, 256, size=(total, a.batch, a.context + 1), dtype=np.int32)

    print(f"ready: jax={jax.__version__} optax={optax.__version__} platform={platform} device={dev.device_kind!r} "
          f"precision={a.precision} parameters={n_params} batch=[{a.batch}, {a.context}] steps={a.steps}+{a.steps}",
          flush=True)
    dtype = jnp.bfloat16 if a.precision == "bf16" else jnp.float32
    side = 1024 if platform == "cpu" else 4096
    peak = measure_peak(jax, jnp, side, dtype)
    print(f"roofline: {peak / 1e9:.1f} GFLOP/s ({jnp.dtype(dtype).name} {side}² matmul)", flush=True)

    c0 = time.perf_counter()
    step = step.lower(params, opt_state, windows[0, :, :-1], windows[0, :, 1:]).compile()
    compile_s = time.perf_counter() - c0
    losses = []
    for i in range(total):
        if i == a.steps:
            t0 = time.perf_counter()
        params, opt_state, loss = step(params, opt_state, windows[i, :, :-1], windows[i, :, 1:])
        losses.append(float(loss))  # read back each step, as nitro's loop does
    timed = time.perf_counter() - t0
    if not all(math.isfinite(x) for x in losses):
        sys.exit(f"jax_gpt_gpu: a non-finite loss: {losses}")
    sps = a.steps / timed
    tps = sps * a.batch * a.context
    mfu = tps * flops_per_token(a.layers, a.dim, a.context) / peak
    print(f"result: steps_per_second {sps:.4f} tokens_per_second {tps:.1f} mfu {mfu:.4f} "
          f"loss_first {losses[0]:.4f} loss_last {losses[-1]:.4f} compile_seconds {compile_s:.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
