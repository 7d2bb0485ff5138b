"""Reference trajectories for nitro's optimizers, computed with optax (float64).

Run once, in a throwaway venv (not part of the build):

    python3 -m venv /tmp/optaxvenv && /tmp/optaxvenv/bin/pip install optax jax
    /tmp/optaxvenv/bin/python optimizers/testdata/make_reference.py > optimizers/testdata/reference.json

Each case runs STEPS updates on a fixed, seeded gradient sequence (gradients do not depend on the
parameters) and records the parameters after every step. Learning rates (and Momentum's rho in one
case) follow a per-step schedule stored in the file: step t (1-based) uses eta[t-1], which is what
optax's schedules see as count = t-1. Decay is decoupled, as optax's adamw composes it:
chain(base, add_decayed_weights(wd, mask), scale_by_learning_rate(eta)), i.e. an update of
-eta*base - (eta*wd)*mask*(p - anchor). Anchored decay has no optax transform; it is the same
add_decayed_weights formula applied to (p - anchor), written below in optax's own
GradientTransformation form.
"""
import json
import sys

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

STEPS = 100


def schedule_array(values):
    arr = jnp.asarray(values, dtype=jnp.float64)
    return lambda count: arr[count]


def anchored_decay(wd, anchor, leaf_mask=None):
    """add_decayed_weights toward anchor (a tree like params), skipping leaves whose leaf_mask
    entry is False: u + wd * (p - anchor) on decayed leaves, u elsewhere."""
    def init_fn(params):
        return optax.EmptyState()

    def update_fn(updates, state, params):
        keep = leaf_mask if leaf_mask is not None else jax.tree.map(lambda _: True, params)
        return jax.tree.map(lambda u, p, a, k: u + wd * (p - a) if k else u,
                            updates, params, anchor, keep), state

    return optax.GradientTransformation(init_fn, update_fn)


def run(tx, params0, grads):
    """Applies tx to params0 for each gradient; returns the parameters after each step."""
    params = params0
    state = tx.init(params)
    traj = []
    for g in grads:
        updates, state = tx.update(g, state, params)
        params = optax.apply_updates(params, updates)
        traj.append(params)
    return traj


def to_list(x):
    return np.asarray(x, dtype=np.float64).tolist()


def flat(tree):
    """The group's flat buffer: leaves in order, each row-major (as nitro's Layout packs them)."""
    return jnp.concatenate([jnp.ravel(x) for x in tree])


def tree(flat_values):
    """Splits a flat 9-vector into the (weights 2x3, biases 3) tree."""
    v = jnp.asarray(flat_values)
    return (v[:6].reshape(2, 3), v[6:])


def main():
    rng = np.random.default_rng(20240601)
    # Leaves of the test group: a 2x3 weight (decayed) and a 3-vector bias (1-D: excluded by the
    # default no-decay rule). Flat order: weights then biases.
    leaves = [{"keypath": ["dense", "weights"], "dims": [2, 3]},
              {"keypath": ["dense", "biases"], "dims": [3]}]
    n = 9
    params0 = rng.normal(size=n)
    # Gradient scales vary over steps so clipping both triggers and does not.
    scales = 0.2 + 2.0 * rng.random(size=(STEPS, 1))
    grads = rng.normal(size=(STEPS, n)) * scales
    t = np.arange(STEPS)
    eta = 1e-2 * (1.0 + 0.5 * np.sin(t / 7.0))          # a non-trivial LR schedule
    rho = 0.85 + 0.1 * np.cos(t / 11.0)                  # a scheduled momentum coefficient
    anchor = rng.normal(size=n)
    sched = schedule_array(eta)
    p0 = tree(params0)
    gs = [tree(g) for g in grads]
    anchor_tree = tree(anchor)
    # optax masks per leaf, which is nitro's no-decay granularity: biases (1-D) are excluded.
    leaf_mask = (True, False)
    wd = 0.3
    cases = []

    def add(name, spec, traj):
        cases.append(dict(name=name, **spec, trajectory=[to_list(flat(p)) for p in traj]))

    add("radam", dict(rule="radam", beta1=0.9, beta2=0.999, eps=1e-8),
        run(optax.radam(sched, b1=0.9, b2=0.999, eps=1e-8), p0, gs))
    # A smaller beta2: rho_inf = 39, so rectification switches on at a different step.
    add("radam_b2_095", dict(rule="radam", beta1=0.8, beta2=0.95, eps=1e-6),
        run(optax.radam(sched, b1=0.8, b2=0.95, eps=1e-6), p0, gs))
    add("adam", dict(rule="adam", beta1=0.9, beta2=0.999, eps=1e-8),
        run(optax.adam(sched, b1=0.9, b2=0.999, eps=1e-8), p0, gs))
    add("sgd", dict(rule="sgd"), run(optax.sgd(sched), p0, gs))
    add("momentum", dict(rule="momentum", rho_scheduled=True),
        run(optax.inject_hyperparams(optax.sgd)(learning_rate=sched, momentum=schedule_array(rho)), p0, gs))
    add("radam_decay_zero_masked", dict(rule="radam", beta1=0.9, beta2=0.999, eps=1e-8,
                                        decay=dict(wd=wd, anchor="zero", masked=True)),
        run(optax.chain(optax.scale_by_radam(b1=0.9, b2=0.999, eps=1e-8),
                        optax.add_decayed_weights(wd, mask=leaf_mask),
                        optax.scale_by_learning_rate(sched)), p0, gs))
    add("adam_decay_w0_masked", dict(rule="adam", beta1=0.9, beta2=0.999, eps=1e-8,
                                     decay=dict(wd=wd, anchor="w0", masked=True)),
        run(optax.chain(optax.scale_by_adam(b1=0.9, b2=0.999, eps=1e-8),
                        anchored_decay(wd, p0, leaf_mask),
                        optax.scale_by_learning_rate(sched)), p0, gs))
    add("sgd_decay_array_unmasked", dict(rule="sgd", decay=dict(wd=wd, anchor="array", masked=False)),
        run(optax.chain(anchored_decay(wd, anchor_tree),
                        optax.scale_by_learning_rate(sched)), p0, gs))
    add("momentum_decay_zero_unmasked", dict(rule="momentum", rho_scheduled=False, rho=0.9,
                                             decay=dict(wd=wd, anchor="zero", masked=False)),
        run(optax.chain(optax.trace(decay=0.9),
                        optax.add_decayed_weights(wd),
                        optax.scale_by_learning_rate(sched)), p0, gs))

    # Two groups (group 0 = the weights, group 1 = the biases), one global-norm clip over both,
    # RAdam on each: optax clips the whole tree, which is the global norm across groups.
    clip = 2.5
    norms = [float(optax.global_norm(g)) for g in gs]
    add("clip_two_groups_radam", dict(rule="radam", beta1=0.9, beta2=0.999, eps=1e-8, clip=clip,
                                      clipped_steps=int(sum(1 for x in norms if x >= clip))),
        run(optax.chain(optax.clip_by_global_norm(clip), optax.radam(sched)), p0, gs))

    json.dump(dict(
        generator="optimizers/testdata/make_reference.py",
        optax_version=optax.__version__, jax_version=jax.__version__,
        steps=STEPS, leaves=leaves, params0=to_list(params0),
        grads=[to_list(g) for g in grads], eta=to_list(eta), rho=to_list(rho), anchor=to_list(anchor),
        cases=cases), sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
