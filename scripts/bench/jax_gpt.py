#!/usr/bin/env python3
"""JAX + optax peer of `nitro train gpt --preset small`: the same model, data, optimizer and budget.

Run it in the bench venv (make bench-venv) on the batches scripts/bench/gptdata writes:

    (cd scripts/bench/gptdata && GOWORK=off go run . -out /tmp/gptdata)
    .nitro/bench-venv/bin/python scripts/bench/jax_gpt.py --data /tmp/gptdata

It trains on every train batch of every epoch in the order nitro does (the .npy files are in that
order) and validates on the 20 val batches after each epoch (every 250 steps), printing one line per
epoch: the val loss (mean cross-entropy in nats over every position) and bits per byte (loss / ln 2),
as nitro's gpt reports them. --out FILE also writes those lines as JSON.

The model is cmd/examples/gpt's, in jax.numpy (float32): byte embedding [256, Dim] plus learned
positions [Context, Dim]; Layers pre-LayerNorm blocks of causal softmax attention (Heads heads,
q·k/sqrt(Dim/Heads), the future masked with -1e9 as nitro adds it) and a 4·Dim MLP with GELU's tanh
form; a final LayerNorm (eps 1e-5 everywhere); logits = x · wteᵀ (tied). Every linear layer has a
bias. Init: weight matrices and both embeddings N(0, 0.02²), the attention output projection and
the MLP's second layer N(0, (0.02/sqrt(2·Layers))²), biases 0, LayerNorm gain 1 and offset 0. The
random draws are JAX's from --seed, so the values differ from nitro's; the distributions do not.

The optimizer is nitro's as the gpt example configures it:
  - gradients clipped to global norm --clip over all parameters first (optax.clip_by_global_norm:
    g·clip/norm when norm >= clip), as nitro clips at the top of its optimizer program;
  - Adam in optax's form (b1 0.9, b2 --beta2, eps 1e-8 outside the square root, bias-corrected
    with the 1-based step), then decoupled decay lambda·params on the weight matrices only (not the
    biases, LayerNorm gains and offsets, or the two embeddings), both scaled by the learning rate:
    nitro hands its decay lambda already multiplied by the step's learning rate
    (optimizers.EffectiveHyper), which is what optax.adamw's single scale by the rate does;
  - the learning rate of schedules.WarmupCosine(0.05, lr, lr/10) over the run's steps: with
    s the 1-based step, W = round(0.05·total): lr·s/W for s <= W, then
    lr/10 + (lr - lr/10)·(1 + cos(pi·(s-W)/(total-W)))/2, reaching lr/10 at the last step. It is
    computed in float64 on the host, as nitro does, and read by the step from a table (optax's
    count is 0-based, so the table's entry k is step k+1).

--from-checkpoint FILE starts instead from one of nitro's checkpoints of this run (a .safetensors
its run dir holds): its weights, Adam's moments and its step, so the JAX step goes on from the
same state. It prints the val loss of the loaded weights (the JAX forward on nitro's weights, to
set beside the checkpoint's val_loss), then trains the epochs after the checkpoint's: with the
random init out of the way, what is left to differ is the arithmetic.

Flags: --data DIR (required) --layers 4 --heads 4 --dim 128 --lr 1e-3 --warmup-frac 0.05
--beta2 0.99 --wd 0.1 --clip 1.0 --seed 42 --threads N (XLA CPU threads; default: the CPUs this
process may run on) --out FILE --from-checkpoint FILE.
"""

import argparse
import json
import math
import os
import sys
import time


def parse_flags(argv):
    p = argparse.ArgumentParser(prog="jax_gpt.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the folder scripts/bench/gptdata wrote")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup-frac", type=float, default=0.05)
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default="")
    p.add_argument("--from-checkpoint", default="", help="a nitro checkpoint of this run to start from")
    a = p.parse_args(argv)
    if a.dim % a.heads:
        p.error(f"--dim {a.dim} does not divide by --heads {a.heads}")
    if not 0 <= a.warmup_frac < 1:
        p.error("--warmup-frac must be in [0, 1)")
    return a


def warmup_cosine(total, frac, peak, floor):
    """schedules.WarmupCosine's value at 1-based steps 1..total, in float64."""
    warmup = int(math.floor(frac * total + 0.5))  # Go's math.Round (halves up), not Python's round
    out = []
    for s in range(1, total + 1):
        if s <= warmup:
            out.append(peak * max(s, 1) / warmup)
            continue
        first = max(warmup, 1)
        p = 0.0 if s <= first else (1.0 if s >= total else (s - first) / (total - first))
        out.append(floor + (peak - floor) * (1 + math.cos(math.pi * p)) / 2)
    return out


def read_safetensors(path, np):
    """The arrays of a .safetensors file by name, and its metadata."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    kinds = {"F32": np.float32, "I32": np.int32, "I64": np.int64, "U64": np.uint64}
    out = {}
    for name, h in header.items():
        lo, hi = h["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + lo:8 + n + hi], kinds[h["dtype"]]).reshape(h["shape"])
    return out, meta


def nitro_tree(arrays, prefix, layers, jnp):
    """The parameter-shaped tree under prefix ("param/", "opt/default/0.adam.mu/") of a nitro gpt
    checkpoint, in this script's names."""
    def get(key):
        return jnp.asarray(arrays[prefix + key])

    def dense(key):
        return {"w": get(key + "/weights"), "b": get(key + "/biases")}

    def ln(key):
        return {"g": get(key + "/layer_normalization/gain"), "o": get(key + "/layer_normalization/offset")}

    return {
        "wte": get("token/embeddings"),
        "wpe": get("position/embeddings"),
        "blocks": [
            {"ln_1": ln(f"block_{i}/ln_1"), "qkv": dense(f"block_{i}/attention/qkv"),
             "proj": dense(f"block_{i}/attention/proj"), "ln_2": ln(f"block_{i}/ln_2"),
             "fc_1": dense(f"block_{i}/mlp/fc_1"), "fc_2": dense(f"block_{i}/mlp/fc_2")}
            for i in range(layers)
        ],
        "ln_f": ln("ln_f"),
    }



# The model and the optimizer, for this script and for jax_families.py's gpt families (which
# import them): jax is imported inside each, so that a caller sets NPROC and JAX_PLATFORMS first.

def init_params(seed, layers, heads, dim, ctx):
    """The parameters from --seed: a dict per layer; "w" names the weight matrices, the only
    leaves decayed."""
    import jax
    import jax.numpy as jnp

    std, proj_std = 0.02, 0.02 / math.sqrt(2 * layers)
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 4 + 4 * layers))

    def normal(shape, s):
        return jax.random.normal(next(keys), shape, jnp.float32) * jnp.float32(s)

    def dense(n_in, n_out, s):
        return {"w": normal((n_in, n_out), s), "b": jnp.zeros((n_out,), jnp.float32)}

    def ln():
        return {"g": jnp.ones((dim,), jnp.float32), "o": jnp.zeros((dim,), jnp.float32)}

    return {
        "wte": normal((256, dim), std),
        "wpe": normal((ctx, dim), std),
        "blocks": [
            {"ln_1": ln(), "qkv": dense(dim, 3 * dim, std), "proj": dense(dim, dim, proj_std),
             "ln_2": ln(), "fc_1": dense(dim, 4 * dim, std), "fc_2": dense(4 * dim, dim, proj_std)}
            for _ in range(layers)
        ],
        "ln_f": ln(),
    }


def make_forward(heads, dim, ctx):
    """forward(params, tokens [B, T]) -> logits [B, T, 256]."""
    import jax
    import jax.numpy as jnp

    d, H = dim, heads
    dh = d // H

    def layer_norm(p, x):
        mean = x.mean(-1, keepdims=True)
        var = jnp.square(x - mean).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p["g"] + p["o"]

    def linear(p, x):
        return x @ p["w"] + p["b"]

    causal = jnp.tril(jnp.ones((ctx, ctx), bool))

    def attention(p, x):
        b, t, _ = x.shape
        qkv = linear(p, x).reshape(b, t, 3, H, dh)  # nitro's layout: [q | k | v], heads inside each
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dh)
        logits = logits + jnp.where(causal[:t, :t], 0.0, -1e9)[None, None]
        w = jax.nn.softmax(logits, axis=-1)
        return jnp.einsum("bkhd,bhqk->bqhd", v, w).reshape(b, t, d)

    def forward(params, tokens):
        t = tokens.shape[1]
        x = params["wte"][tokens] + params["wpe"][:t][None]
        for blk in params["blocks"]:
            x = x + linear(blk["proj"], attention(blk["qkv"], layer_norm(blk["ln_1"], x)))
            h = jax.nn.gelu(linear(blk["fc_1"], layer_norm(blk["ln_2"], x)), approximate=True)
            x = x + linear(blk["fc_2"], h)
        x = layer_norm(params["ln_f"], x)
        return jnp.einsum("btd,vd->btv", x, params["wte"])  # tied output

    return forward


def make_optimizer(params, lrs, beta2, wd, clip):
    """nitro's gpt optimizer (see the module doc): clipping, then AdamW decaying the weight
    matrices only, its rate read from the table lrs (the rate of 1-based step k+1 at entry k; a
    count past the table reads its last entry)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    decay_mask = jax.tree_util.tree_map_with_path(
        lambda path, _: getattr(path[-1], "key", None) == "w", params)
    lr_table = jnp.asarray(np.asarray(lrs, np.float64).astype(np.float32))
    last = len(lrs) - 1
    return optax.chain(
        optax.clip_by_global_norm(clip),
        optax.adamw(lambda count: lr_table[jnp.minimum(count, last)], b1=0.9, b2=beta2, eps=1e-8,
                    weight_decay=wd, mask=decay_mask),
    )


def main(argv):
    a = parse_flags(argv)
    threads = a.threads or len(os.sched_getaffinity(0))
    os.environ["NPROC"] = str(threads)  # XLA's CPU client sizes its thread pool from it
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    import numpy as np
    import jax
    import jax.numpy as jnp
    import jaxlib
    import optax

    with open(os.path.join(a.data, "meta.json")) as f:
        meta = json.load(f)
    tr_tok = np.load(os.path.join(a.data, "train_tokens.npy"))
    tr_tgt = np.load(os.path.join(a.data, "train_targets.npy"))
    va_tok = np.load(os.path.join(a.data, "val_tokens.npy"))
    va_tgt = np.load(os.path.join(a.data, "val_targets.npy"))
    epochs, per_epoch, bsz, ctx = tr_tok.shape
    if list(tr_tok.shape) != meta["train_shape"] or list(va_tok.shape) != meta["val_shape"]:
        sys.exit(f"jax_gpt: {a.data}: the arrays' shapes disagree with meta.json")
    total = epochs * per_epoch
    d, L, H = a.dim, a.layers, a.heads
    params = init_params(a.seed, L, H, d, ctx)
    n_params = sum(x.size for x in jax.tree_util.tree_leaves(params))
    forward = make_forward(H, d, ctx)

    def xent(params, tokens, targets):
        logp = jax.nn.log_softmax(forward(params, tokens), axis=-1)
        return -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]  # [B, T] nats

    lrs = warmup_cosine(total, a.warmup_frac, a.lr, a.lr / 10)
    opt = make_optimizer(params, lrs, a.beta2, a.wd, a.clip)

    def loss_fn(params, tokens, targets):
        return xent(params, tokens, targets).mean()

    opt_state = opt.init(params)
    first_epoch = 0
    if a.from_checkpoint:
        arrays, cmeta = read_safetensors(a.from_checkpoint, np)
        record = json.loads(cmeta["nitro.record"])
        done = int(record["step"])
        if done % per_epoch or not 0 < done < total:
            sys.exit(f"jax_gpt: {a.from_checkpoint}: step {done} is not the end of an epoch before the last")
        loaded = nitro_tree(arrays, "param/", L, jnp)
        if jax.tree_util.tree_map(jnp.shape, loaded) != jax.tree_util.tree_map(jnp.shape, params):
            sys.exit("jax_gpt: the checkpoint's parameters have other shapes than this model's (--layers, --heads, --dim?)")
        params = loaded
        # The step's count is every optax counter: Adam's bias corrections and the schedule's.
        opt_state = optax.tree_utils.tree_set(
            opt_state, count=jnp.asarray(done, jnp.int32),
            mu=nitro_tree(arrays, "opt/default/0.adam.mu/", L, jnp),
            nu=nitro_tree(arrays, "opt/default/0.adam.nu/", L, jnp))
        # One buffer per leaf: the step donates its state, and the two counts share one array.
        opt_state = jax.tree_util.tree_map(lambda x: jnp.array(x, copy=True), opt_state)
        first_epoch = done // per_epoch

    def step(params, opt_state, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step = jax.jit(step, donate_argnums=(0, 1))

    @jax.jit
    def eval_sum(params, tokens, targets):
        return xent(params, tokens, targets).sum()

    va_tok_d, va_tgt_d = jnp.asarray(va_tok), jnp.asarray(va_tgt)

    def validate(params):
        # nitro sums each batch's cross-entropy and divides by the positions of all batches.
        s = sum(float(eval_sum(params, va_tok_d[i], va_tgt_d[i])) for i in range(va_tok.shape[0]))
        return s / va_tok.size

    print(f"jax_gpt: jax={jax.__version__} jaxlib={jaxlib.__version__} optax={optax.__version__} "
          f"threads={threads} device={jax.devices()[0].device_kind}; {n_params} parameters; "
          f"{epochs} epochs x {per_epoch} batches of [{bsz}, {ctx}] from {meta['corpus']}; "
          f"lr {lrs[0]:.3g} at step 1, {max(lrs):.3g} peak, {lrs[-1]:.3g} at step {total}", flush=True)
    t0 = time.perf_counter()
    c0 = time.perf_counter()
    step.lower(params, opt_state, tr_tok[0, 0], tr_tgt[0, 0]).compile()
    compile_s = time.perf_counter() - c0
    lines = []
    v0 = validate(params)
    what = "init"
    if a.from_checkpoint:
        what = f"nitro's weights; its own val_loss {record['metrics']['val_loss']:.6f}"
    print(f"epoch {first_epoch} ({what})  val_loss {v0:.6f}  val_bpb {v0 / math.log(2):.4f}", flush=True)
    train_s = 0.0
    for ep in range(first_epoch, epochs):
        e0 = time.perf_counter()
        tl = 0.0
        for i in range(per_epoch):
            params, opt_state, loss = step(params, opt_state, tr_tok[ep, i], tr_tgt[ep, i])
            tl += float(loss)  # read back each step, as nitro sums its train loss
        if not math.isfinite(tl):
            sys.exit(f"jax_gpt: non-finite train loss in epoch {ep + 1}")
        es = time.perf_counter() - e0
        train_s += es
        v = validate(params)
        rec = {"epoch": ep + 1, "step": (ep + 1) * per_epoch, "train_loss": tl / per_epoch,
               "val_loss": v, "val_bpb": v / math.log(2), "seconds": es, "steps_per_second": per_epoch / es}
        lines.append(rec)
        print(f"epoch {ep + 1}/{epochs}  train_loss {rec['train_loss']:.4f}  val_loss {v:.4f}  "
              f"val_bpb {rec['val_bpb']:.4f}  seconds {es:.2f}  steps_per_second {rec['steps_per_second']:.1f}", flush=True)
    wall = time.perf_counter() - t0
    steps = (epochs - first_epoch) * per_epoch
    print(f"jax_gpt: final val_loss {lines[-1]['val_loss']:.6f} val_bpb {lines[-1]['val_bpb']:.4f}; "
          f"compile {compile_s:.1f}s, training {train_s:.1f}s ({steps / train_s:.1f} steps/s), wall {wall:.1f}s", flush=True)
    if a.out:
        with open(a.out, "w") as f:
            for rec in lines:
                f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
