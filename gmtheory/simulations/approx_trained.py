"""Does training find the constructive error?  Trained attention of the same resources.

All eight targets of :mod:`gmtheory.approx`, each with a trainable family that contains
the explicit construction at the same heads, layers, ``beta`` and anchors (issue 28):

* ``square``: ``m`` layers of three attention-ReLU heads (same ``beta`` as the
  construction).  Layer ``s`` maps a carried scalar ``h`` to
  ``h_s = sum_j w_sj R(a_sj h + b_sj) + c_s``; the output is ``alpha x + sum_s gamma_s h_s
  + delta``.  Yarotsky's sawtooth is one point of this family (error ``4^{-(m+1)}``).
* ``reciprocal``: one layer of ``n`` attention-ReLU heads, output
  ``sum_j w_j R(a_j x + b_j) + c`` — contains the uniform piecewise-linear interpolant
  of ``1/x`` on ``[1/4, 1]``.  Knots start at jittered uniform positions (the first
  just left of the domain), weights at random.
* ``relu``, ``max-relu-tree``, ``multiply``, ``reciprocal-newton``: attention-ReLU
  networks with the construction's heads per layer on a carried state (see
  :data:`GENERIC`); ``interpolation``: one head with ``p`` trainable anchors;
  ``max-one-head``: one head with a trainable score scale ``<= beta``.

Every ReLU head is :func:`gmtheory.approx.relu` (the two-key softmax head).  All seeds are
trained at once (``batched=True``) by :func:`gmtheory.training.train`: gradient clipping
then optax Adam with a cosine schedule; the reported error is the sup over a dense grid
(random points plus the corners of the box in ``d > 1``), beside the construction's on the
same points.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import approx as A
from ..training import train
from ._base import SimConfig, Simulation, register

__all__ = ["ApproxTrainedConfig", "train_family", "train_generic", "GENERIC", "FAMILIES"]

RECIP_A = 0.25


@dataclass(frozen=True, kw_only=True)
class ApproxTrainedConfig(SimConfig):
    seeds: int
    steps: int
    lr: float
    n_train: int
    levels: tuple[int, ...]
    pieces: tuple[int, ...]
    betas: tuple[float, ...]               # relu, max-one-head, max-relu-tree
    anchors: tuple[int, ...]                   # interpolation head
    mul_levels: tuple[int, ...]                # multiply
    newton_steps: tuple[int, ...]              # reciprocal-newton, at newton_levels
    newton_levels: int
    n_train_nd: int                             # random training points in d > 1
    generic_steps: int                          # Adam steps of the six new families


def _init(key, family, size):
    k1, k2, k3 = jax.random.split(key, 3)
    if family == "square":
        m = size
        return {
            "a": 1.0 + 0.5 * jax.random.normal(k1, (m, 3)),
            "b": -jax.random.uniform(k2, (m, 3)),
            "w": 0.5 * jax.random.normal(k3, (m, 3)),
            "c": jnp.zeros((m,)),
            "gamma": jnp.zeros((m,)),
            "alpha": jnp.ones(()),
            "delta": jnp.zeros(()),
        }
    n = size
    # jittered uniform knots, the first just left of the domain (as in the construction)
    h = (1 - RECIP_A) / n
    knots = RECIP_A + h * (jnp.arange(n) + 0.25 * jax.random.normal(k1, (n,)))
    knots = knots.at[0].set(RECIP_A - 0.01)
    return {
        "a": jnp.ones((n,)),
        "b": -knots,
        "w": 0.1 * jax.random.normal(k2, (n,)),
        "c": jnp.array(1.0 / RECIP_A),
    }


def _model(params, x, family, beta):
    if family == "square":
        h, out = x, params["alpha"] * x + params["delta"]
        for s in range(params["a"].shape[0]):
            pre = params["a"][s][:, None] * h[None] + params["b"][s][:, None]
            h = params["w"][s] @ A.relu(pre, beta) + params["c"][s]
            out = out + params["gamma"][s] * h
        return out
    pre = params["a"][:, None] * x[None] + params["b"][:, None]
    return params["w"] @ A.relu(pre, beta) + params["c"]


def _target(x, family):
    return x**2 if family == "square" else 1.0 / x


def _domain(family, n):
    return jnp.linspace(0.0 if family == "square" else RECIP_A, 1.0, n)


def _record_every(steps: int) -> int:
    """About 20 records (progress, checkpoints): the smallest divisor of ``steps`` that is
    at least ``steps // 20``."""
    return next(r for r in range(max(1, steps // 20), steps + 1) if steps % r == 0)


@partial(jax.jit, static_argnames=("family", "n_train", "beta"))
def _train_data(family, n_train, beta):
    """The training grid and targets, in one compiled program."""
    x = _domain(family, n_train)
    return {"x": x, "y": _target(x, family), "beta": jnp.asarray(beta, x.dtype)}


@partial(jax.jit, static_argnames=("family", "beta"))
def _sup_errors(params, family, beta):
    """Per-seed sup error of the trained models on the dense grid of 8193 points, in one
    compiled program."""
    xe = _domain(family, 8193)
    preds = jax.vmap(lambda p: _model(p, xe, family, beta))(params)
    return jnp.max(jnp.abs(preds - _target(xe, family)[None]), axis=1)


def _train(key, family, size, beta, seeds, steps, lr, n_train):
    """``seeds`` models trained at once by :func:`gmtheory.training.train` (batched):
    gradient clipping then Adam with a cosine schedule, full-batch MSE on ``n_train``
    grid points.  Returns the parameters (leading seed axis) and each seed's training MSE
    averaged over the last record (the last twentieth of the steps)."""
    data = _train_data(family, n_train, beta)
    sched = optax.cosine_decay_schedule(lr, steps, alpha=1e-3)
    opt = optax.chain(optax.clip_by_global_norm(10.0), optax.adam(sched))

    def mse(p, d):
        return jnp.mean((_model(p, d["x"], family, d["beta"]) - d["y"]) ** 2)

    # run op by op on purpose: under jit XLA fuses a*b+c into FMAs, which moves the
    # initial parameters by an ulp and (through training) the trained errors by ~1e-3
    keys = jax.random.split(key, seeds)
    p0 = jax.vmap(lambda k: _init(k, family, size))(keys)
    res = train(lambda p, d, _k: mse(p, d), p0, opt, steps=steps, data=data,
                record_every=_record_every(steps), batched=True,
                desc=f"approx-trained {family} {size}", tag=["approx-trained", family, size])
    return res.params, res.loss[-1]


def train_family(key, family: str, size: int, *, seeds=4, steps=3000, lr=1e-2, n_train=513):
    """Train ``seeds`` models of the given family and size; returns per-seed sup errors."""
    if family not in ("square", "reciprocal"):
        raise ValueError(f"family: must be 'square' or 'reciprocal', got {family!r}.")
    if family == "square":
        beta = A.beta_for_levels(size)
        construct = A.square_bound(size)
    else:
        beta = 1e4
        construct = A.reciprocal_pl_bound(RECIP_A, size, beta)
    params, final_mse = _train(key, family, int(size), beta, int(seeds), int(steps), float(lr),
                               int(n_train))
    sup = _sup_errors(params, family, float(beta))
    # the construction op by op: its programs are shared by every size (one grid shape)
    xe = _domain(family, 8193)
    if family == "square":
        constructive = float(jnp.max(jnp.abs(A.square(xe, size)[0] - xe**2)))
    else:
        constructive = float(jnp.max(jnp.abs(A.reciprocal_pl(xe, RECIP_A, size, beta)[0]
                                             - 1.0 / xe)))
    return {"sup": sup, "loss": jnp.asarray(final_mse), "constructive": jnp.asarray(constructive),
            "bound": jnp.asarray(construct), "beta": jnp.asarray(beta)}


# ----------------------------------------------------- the other six targets, same size
# Every family below contains the explicit construction of its target with the same heads,
# layers, beta (and anchors):
# * "relu", "max-relu-tree", "multiply", "reciprocal-newton": an attention-ReLU network of
#   the construction's heads per layer on a state s in R^D (affine maps between layers are
#   free, as in the constructions): s_l = A_l s_{l-1} + M_l R(B_l s_{l-1} + b_l) + c_l,
#   output sum_l gamma_l^T s_l + alpha^T x + delta, every R the two-key head at beta;
# * "interpolation": one head with p trainable anchors a_j and values v_j at the
#   construction's beta (score beta (2 a_j y - a_j^2));
# * "max-one-head": one head, out = v sum_i softmax(u x)_i x_i + c with the score scale
#   u = beta sigmoid(theta) <= beta.
GENERIC = ("relu", "interpolation", "max-one-head", "max-relu-tree", "multiply",
           "reciprocal-newton")
MAX_N = 8


def _spec(family, size, newton_levels):
    """``(d_in, lo, hi, heads per layer, D, beta)`` of a generic family at ``size``."""
    if family == "relu":
        return 1, -1.0, 1.0, (1,), 1, float(size)
    if family == "interpolation":
        h = 2.0 / (int(size) - 1)
        return 1, -1.5, 1.5, (), 1, 20.0 / h**2
    if family == "max-one-head":
        return MAX_N, 0.0, 1.0, (), MAX_N, float(size)
    if family == "max-relu-tree":
        return MAX_N, 0.0, 1.0, (4, 2, 1), MAX_N, float(size)
    if family == "multiply":
        m = int(size)
        return 2, 0.0, 1.0, (9,) * m, 6, A.beta_for_levels(m)
    m = int(newton_levels)
    return 1, RECIP_A, 1.0, (9,) * (2 * m * int(size)), 8, A.beta_for_levels(m)


def _generic_target(x, family):
    if family == "relu":
        return jnp.maximum(x[:, 0], 0.0)
    if family == "interpolation":
        return jnp.clip(x[:, 0], -1.0, 1.0)
    if family.startswith("max"):
        return x.max(1)
    if family == "multiply":
        return x[:, 0] * x[:, 1]
    return 1.0 / x[:, 0]


def _construction(x, family, size, newton_levels):
    """The explicit construction of :mod:`gmtheory.approx` at the same size."""
    beta = _spec(family, size, newton_levels)[-1]
    if family == "relu":
        return A.relu(x[:, 0], beta)
    if family == "interpolation":
        return A.interpolation_head(x[:, 0], -1.0, 1.0, int(size), beta)
    if family == "max-one-head":
        return A.max_one_head(x, beta)
    if family == "max-relu-tree":
        return A.max_relu_tree(x, beta)[0]
    if family == "multiply":
        return A.multiply(x[:, 0], x[:, 1], int(size))[0]
    return A.reciprocal_newton(x[:, 0], RECIP_A, int(size), int(newton_levels))[0]


def _generic_init(key, family, size, newton_levels):
    d, lo, hi, heads, D, beta = _spec(family, size, newton_levels)
    k = jax.random.split(key, 4 + 4 * len(heads))
    if family == "interpolation":
        a = jnp.sort(jax.random.uniform(k[0], (int(size),), minval=lo, maxval=hi))
        return {"a": a, "v": a + 0.1 * jax.random.normal(k[1], a.shape)}
    if family == "max-one-head":
        return {"theta": jax.random.normal(k[0], ()), "v": 1.0 + 0.1 * jax.random.normal(k[1], ()),
                "c": jnp.zeros(())}
    layers = []
    for i, w in enumerate(heads):
        kk = k[4 + 4 * i: 8 + 4 * i]
        layers.append({"A": jnp.eye(D) + 0.1 * jax.random.normal(kk[0], (D, D)),
                       "B": jax.random.normal(kk[1], (w, D)) / jnp.sqrt(D),
                       "b": -jax.random.uniform(kk[2], (w,)),
                       "M": 0.5 * jax.random.normal(kk[3], (D, w)) / jnp.sqrt(w),
                       "c": jnp.zeros((D,)), "gamma": jnp.zeros((D,))})
    return {"layers": layers, "alpha": jnp.zeros((d,)), "delta": jnp.zeros(())}


def _generic_model(params, x, family, size, newton_levels):
    d, lo, hi, heads, D, beta = _spec(family, size, newton_levels)
    if family == "interpolation":
        a, y = params["a"], x[:, 0]
        w = jax.nn.softmax(beta * (2.0 * y[:, None] * a[None] - a[None] ** 2), axis=1)
        return w @ params["v"]
    if family == "max-one-head":
        u = beta * jax.nn.sigmoid(params["theta"])
        return params["v"] * jnp.sum(jax.nn.softmax(u * x, axis=1) * x, axis=1) + params["c"]
    st = jnp.concatenate([x, jnp.zeros((x.shape[0], D - d), x.dtype)], axis=1)
    out = x @ params["alpha"] + params["delta"]
    for lay in params["layers"]:
        r = A.relu(st @ lay["B"].T + lay["b"], beta)
        st = st @ lay["A"].T + r @ lay["M"].T + lay["c"]
        out = out + st @ lay["gamma"]
    return out


def _generic_points(key, family, size, newton_levels, n):
    """``n`` training or evaluation points: a grid in 1-D, uniform points plus the corners
    of the box in higher dimension."""
    d, lo, hi = _spec(family, size, newton_levels)[:3]
    if d == 1:
        return jnp.linspace(lo, hi, n)[:, None]
    corners = jnp.array(np.array(np.meshgrid(*[[lo, hi]] * d)).reshape(d, -1).T)
    return jnp.concatenate([jax.random.uniform(key, (n, d), minval=lo, maxval=hi), corners])


@partial(jax.jit, static_argnames=("family", "size", "newton_levels"))
def _generic_sup(params, xe, family, size, newton_levels):
    """Per-seed sup error of the trained models and the construction's on the evaluation
    points, in one compiled program per family and size (op by op, the evaluation and the
    construction compiled some 350 small programs of a cold run)."""
    ye = _generic_target(xe, family)
    preds = jax.vmap(lambda p: _generic_model(p, xe, family, size, newton_levels))(params)
    con = _construction(xe, family, size, newton_levels)
    return jnp.max(jnp.abs(preds - ye[None]), axis=1), jnp.max(jnp.abs(con - ye))


def train_generic(key, family: str, size, *, seeds=3, steps=500, lr=1e-2, n_train=513,
                  n_train_nd=512, newton_levels=3):
    """Train ``seeds`` models of a :data:`GENERIC` family at the construction's size; the
    sup error over 8193 evaluation points (grid, or random plus corners) beside the
    construction's on the same points."""
    if family not in GENERIC:
        raise ValueError(f"family: must be one of {GENERIC}, got {family!r}.")
    kd, ke, ki = jax.random.split(key, 3)
    d = _spec(family, size, newton_levels)[0]
    xt = _generic_points(kd, family, size, newton_levels, n_train if d == 1 else n_train_nd)
    data = {"x": xt, "y": _generic_target(xt, family)}
    sched = optax.cosine_decay_schedule(lr, steps, alpha=1e-3)
    opt = optax.chain(optax.clip_by_global_norm(10.0), optax.adam(sched))

    def mse(p, dd, _k):
        return jnp.mean((_generic_model(p, dd["x"], family, size, newton_levels) - dd["y"]) ** 2)

    p0 = jax.vmap(lambda k: _generic_init(k, family, size, newton_levels))(
        jax.random.split(ki, seeds))
    res = train(mse, p0, opt, steps=steps, data=data, record_every=_record_every(steps),
                batched=True, desc=f"approx-trained {family} {size}",
                tag=["approx-trained", family, size])
    xe = _generic_points(ke, family, size, newton_levels, 8193)
    sup, constructive = _generic_sup(res.params, xe, family, size, newton_levels)
    return {"sup": sup, "loss": jnp.asarray(res.loss[-1]),
            "constructive": jnp.asarray(constructive)}


FAMILIES = ("relu", "interpolation", "max-one-head", "max-relu-tree", "square", "multiply",
            "reciprocal", "reciprocal-newton")


def _sizes(cfg, fam):
    return {"relu": cfg.betas, "interpolation": cfg.anchors, "max-one-head": cfg.betas,
            "max-relu-tree": cfg.betas, "square": cfg.levels, "multiply": cfg.mul_levels,
            "reciprocal": cfg.pieces, "reciprocal-newton": cfg.newton_steps}[fam]


def _points(cfg):
    return [{"family": fam, "size": float(s) if fam in ("relu", "max-one-head", "max-relu-tree")
             else int(s)} for fam in FAMILIES for s in _sizes(cfg, fam)]


def _run_point(cfg, point, key):
    if point["family"] in GENERIC:
        return train_generic(key, point["family"], point["size"], seeds=cfg.seeds,
                             steps=cfg.generic_steps, lr=cfg.lr, n_train=cfg.n_train,
                             n_train_nd=cfg.n_train_nd, newton_levels=cfg.newton_levels)
    return train_family(key, point["family"], point["size"], seeds=cfg.seeds, steps=cfg.steps,
                        lr=cfg.lr, n_train=cfg.n_train)


def _assemble(cfg, points, results):
    out = {}
    for fam in FAMILIES:
        idx = [i for i, p in enumerate(points) if p["family"] == fam]
        if not idx:
            continue
        out[f"{fam}/size"] = np.array([points[i]["size"] for i in idx], float)
        out[f"{fam}/sup"] = np.stack([results[i]["sup"] for i in idx])
        out[f"{fam}/constructive"] = np.array([float(results[i]["constructive"]) for i in idx])
        if fam in ("square", "reciprocal"):
            out[f"{fam}/bound"] = np.array([float(results[i]["bound"]) for i in idx])
    return out


def _summary(cfg, a):
    lines = [f"{'family':<17} {'size':>7} {'constructive':>13} {'trained best':>13} "
             f"{'trained median':>15} {'seeds reaching construction':>28}"]
    for fam in FAMILIES:
        for i, s in enumerate(a.get(f"{fam}/size", ())):
            sup = a[f"{fam}/sup"][i]
            c = a[f"{fam}/constructive"][i]
            lines.append(f"{fam:<17} {s:7g} {c:13.3g} {sup.min():13.3g} "
                         f"{np.median(sup):15.3g} {int(np.sum(sup <= c)):>14d}/{sup.size}")
    return lines


register(Simulation(
    name="approx-trained",
    description="Trained attention-ReLU networks of the constructions' size vs the constructions.",
    config_cls=ApproxTrainedConfig,
    points=_points,
    run_point=_run_point,
    assemble=_assemble,
    summary=_summary,
))
