"""Does training find the constructive error?  Trained attention of the same resources.

Two families, each containing the explicit construction of :mod:`gmtheory.approx`:

* ``square``: ``m`` layers of three attention-ReLU heads (same ``beta`` as the
  construction).  Layer ``s`` maps a carried scalar ``h`` to
  ``h_s = sum_j w_sj R(a_sj h + b_sj) + c_s``; the output is ``alpha x + sum_s gamma_s h_s
  + delta``.  Yarotsky's sawtooth is one point of this family (error ``4^{-(m+1)}``).
* ``reciprocal``: one layer of ``n`` attention-ReLU heads, output
  ``sum_j w_j R(a_j x + b_j) + c`` — contains the uniform piecewise-linear interpolant
  of ``1/x`` on ``[1/4, 1]``.  Knots start at jittered uniform positions (the first
  just left of the domain), weights at random.

Every head is :func:`gmtheory.approx.relu` (the two-key softmax head).  All seeds are
trained at once (``batched=True``) by :func:`gmtheory.training.train`: gradient clipping
then optax Adam with a cosine schedule; the reported error is the sup over a dense grid.
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

__all__ = ["ApproxTrainedConfig", "train_family"]

RECIP_A = 0.25


@dataclass(frozen=True)
class ApproxTrainedConfig(SimConfig):
    seeds: int = 3
    steps: int = 1500
    lr: float = 1e-2
    n_train: int = 513
    levels: tuple[int, ...] = (1, 2, 3)
    pieces: tuple[int, ...] = (4, 8, 16)


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


def _points(cfg):
    return ([{"family": "square", "size": int(m)} for m in cfg.levels]
            + [{"family": "reciprocal", "size": int(n)} for n in cfg.pieces])


def _run_point(cfg, point, key):
    return train_family(key, point["family"], point["size"], seeds=cfg.seeds, steps=cfg.steps,
                        lr=cfg.lr, n_train=cfg.n_train)


def _assemble(cfg, points, results):
    out = {}
    for fam in ("square", "reciprocal"):
        idx = [i for i, p in enumerate(points) if p["family"] == fam]
        out[f"{fam}/size"] = np.array([points[i]["size"] for i in idx], float)
        out[f"{fam}/sup"] = np.stack([results[i]["sup"] for i in idx])
        out[f"{fam}/constructive"] = np.array([float(results[i]["constructive"]) for i in idx])
        out[f"{fam}/bound"] = np.array([float(results[i]["bound"]) for i in idx])
    return out


def _summary(cfg, a):
    lines = [f"{'family':<11} {'size':>5} {'constructive':>13} {'trained best':>13} "
             f"{'trained median':>15} {'seeds reaching construction':>28}"]
    for fam in ("square", "reciprocal"):
        for i, s in enumerate(a[f"{fam}/size"]):
            sup = a[f"{fam}/sup"][i]
            c = a[f"{fam}/constructive"][i]
            lines.append(f"{fam:<11} {int(s):5d} {c:13.3g} {sup.min():13.3g} "
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
