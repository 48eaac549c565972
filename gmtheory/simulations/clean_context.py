"""Clean-context in-context denoising (Smart, Bietti & Sengupta 2025;
docs/topics/denoising.md#clean-context-denoising-smart-bietti-and-sengupta).

Each prompt: 8 centres uniform on the unit sphere of R^16 (equal weights), L = 500
**clean** context tokens ``X_i ~ N(mu_c, s0^2 I)`` with ``s0^2 = 0.02``; the query is a
fresh clean point plus ``N(0, sZ^2 I)`` noise, ``sZ^2 = 0.1``; the target is the clean
point; the loss is the per-coordinate MSE.

Model: one softmax head without residual, query excluded from the keys,
``f = W_PV X softmax(X^T W_KQ x~)`` — :func:`gmtheory.softmax_attention` with
``U = W_KQ``, ``V = W_PV`` — and its linear variant (:func:`gmtheory.linear_attention`).
Their protocol: Adam 1e-2, batch 80, 100 epochs of 800 prompts (1000 steps),
initialisation ``U[-1/sqrt(d), 1/sqrt(d)]``.  Modes: ``fresh`` (new prompts every step)
and ``pool`` (a fixed pool of 800 training prompts, to show overfitting).

The Bayes predictor with known centres is eq. (10) with ``Gamma = s0^2 I`` and
``xi = sZ`` (:func:`gmtheory.denoising.bayes_denoiser`).  The best isotropic single head
in the infinite-prompt limit (``U = b I``, ``V = v I``) is found by L-BFGS
(:func:`gmtheory.training.minimize_lbfgs`) on a Monte Carlo objective over tasks and
queries.  Training runs through :func:`gmtheory.training.train`, the seeds batched in one
compiled program; in ``pool`` mode each seed's pool of prompts is passed as data.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import denoising as D
from ..mixture import GaussianMixture
from ..operators import linear_attention, softmax_attention, softmax_attention_limit
from ..problems import stream_key
from ..training import hyper, minimize_lbfgs, train
from ._base import SimConfig, Simulation, register

__all__ = ["CleanContextConfig", "clean_prompts"]


@dataclass(frozen=True, kw_only=True)
class CleanContextConfig(SimConfig):
    d: int
    centres: int
    L: int
    s0_sq: float
    sz_sq: float
    steps: int
    batch: int
    lr: float
    pool: int
    test: int
    seeds: int


def _mixture(key, cfg):
    c = jax.random.normal(key, (cfg.centres, cfg.d))
    c = c / jnp.linalg.norm(c, axis=1, keepdims=True)
    w = jnp.full((cfg.centres,), 1.0 / cfg.centres)
    covs = jnp.broadcast_to(cfg.s0_sq * jnp.eye(cfg.d), (cfg.centres, cfg.d, cfg.d))
    return GaussianMixture.tree_unflatten(None, (w, c, covs))


@partial(jax.jit, static_argnames=("n", "cfg"))
def clean_prompts(key, n, cfg):
    """``n`` prompts: tokens ``(n, L, d)``, noisy query ``(n, 1, d)``, clean target, oracle."""

    def one(k):
        kt, kx, kq, ke = jax.random.split(k, 4)
        mix = _mixture(kt, cfg)
        toks, _ = mix.sample(kx, cfg.L)
        xq, _ = mix.sample(kq, 1)
        zq = xq + jnp.sqrt(cfg.sz_sq) * jax.random.normal(ke, xq.shape)
        return toks, zq, xq, D.bayes_denoiser(mix, jnp.sqrt(cfg.sz_sq), zq)

    return jax.vmap(one)(jax.random.split(key, n))


def _apply(p, toks, zq, kind):
    op = softmax_attention if kind == "softmax" else linear_attention
    return op(toks, p["U"], p["V"], zq)


def _record_every(steps: int, at_most: int = 50) -> int:
    """Largest divisor of ``steps`` that is at most ``at_most`` (one training record)."""
    return max(r for r in range(1, min(at_most, steps) + 1) if steps % r == 0)


@dataclass(frozen=True)
class _Task:
    """The fields of a config that :func:`clean_prompts` reads (a loss holds these, not the
    config, so that another learning rate or step count keeps its compiled program)."""

    d: int
    centres: int
    L: int
    s0_sq: float
    sz_sq: float


def _task(cfg) -> _Task:
    return _Task(int(cfg.d), int(cfg.centres), int(cfg.L), float(cfg.s0_sq), float(cfg.sz_sq))


class CleanLoss(eqx.Module):
    """Per-coordinate MSE of one head (``kind``) on ``batch`` prompts: fresh ones drawn from
    the step's key (``pool = 0``), or drawn without replacement from the seed's pool of
    ``pool`` prompts passed as data."""

    task: _Task = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    batch: int = eqx.field(static=True)
    pool: int = eqx.field(static=True)

    def __call__(self, p, data, k):
        if self.pool:
            idx = jax.random.choice(k, self.pool, (self.batch,), replace=False)
            toks, zq, xq = data[0][idx], data[1][idx], data[2][idx]
        else:
            toks, zq, xq, _ = clean_prompts(k, self.batch, self.task)
        return _mse(p, toks, zq, xq, self.kind)


def _mse(p, toks, zq, xq, kind):
    return jnp.mean((_apply(p, toks, zq, kind) - xq) ** 2)


@partial(jax.jit, static_argnames="kind")
def _pool_mse(params, toks, zq, xq, *, kind):
    """Each seed's training MSE over its whole pool (leading seed axis everywhere)."""
    return jax.vmap(lambda p, t, z, x: _mse(p, t, z, x, kind))(params, toks, zq, xq)


def _train(key, kind, mode, cfg):
    """Train ``len(key)`` seeds at once.  Seed ``s``: ``k_init, k_data = split(key[s])``;
    step ``t`` draws its batch from ``fold_in(k_data, t)`` (fresh prompts, or indices into
    the seed's pool drawn from ``fold_in(k_data, 10**6)``).  Returns the parameters and
    the training MSE: over the whole pool (``pool``), or the mean loss of the last
    record of steps (``fresh``; 50 steps when 50 divides ``steps``).  The loss is a
    :class:`CleanLoss` and Adam's learning rate is data (``training.hyper``): runs that
    differ only in ``lr`` or ``steps`` share their compiled programs."""
    k_init, k_data = jax.vmap(jax.random.split, out_axes=1)(key)
    lim = 1.0 / np.sqrt(cfg.d)

    def init(k):
        ku, kv = jax.random.split(k)
        return {"U": jax.random.uniform(ku, (cfg.d, cfg.d), minval=-lim, maxval=lim),
                "V": jax.random.uniform(kv, (cfg.d, cfg.d), minval=-lim, maxval=lim)}

    p0 = jax.vmap(init)(k_init)
    task = _task(cfg)
    pool = None
    if mode == "pool":
        pool = jax.vmap(lambda k: clean_prompts(jax.random.fold_in(k, 10**6), cfg.pool,
                                                task)[:3])(k_data)
    loss = CleanLoss(task, kind, int(cfg.batch), int(cfg.pool) if mode == "pool" else 0)
    res = train(loss, p0, hyper(optax.adam, learning_rate=float(cfg.lr)), steps=cfg.steps,
                key=k_data, data=pool, record_every=_record_every(cfg.steps), batched=True,
                batched_data=mode == "pool", desc=f"clean-context {kind}-{mode}",
                tag=["clean-context", kind, mode, cfg.lr, cfg.batch])
    if mode == "pool":
        train_mse = _pool_mse(res.params, *pool, kind=kind)
    else:
        train_mse = res.loss[-1]
    return res.params, train_mse


def best_isotropic_head(cfg, n_tasks=64, n_queries=64, key=None):
    """Best ``U = b I``, ``V = v I`` single head on the infinite clean prompt (per-coordinate
    MSE excess over the Bayes predictor), by L-BFGS on a fixed Monte Carlo sample."""
    key = stream_key(cfg.seed, "clean-iso") if key is None else key
    sz = float(np.sqrt(cfg.sz_sq))
    mixes, zs, fs = [], [], []
    for i in range(n_tasks):
        k = jax.random.fold_in(key, i)
        mix = _mixture(k, cfg)
        x, _ = mix.sample(jax.random.fold_in(k, 1), n_queries)
        z = x + sz * jax.random.normal(jax.random.fold_in(k, 2), x.shape)
        mixes.append(mix)
        zs.append(z)
        fs.append(D.bayes_denoiser(mix, sz, z))
    means = jnp.stack([m.means for m in mixes])
    Z, F = jnp.stack(zs), jnp.stack(fs)
    covs = mixes[0].covs
    w = mixes[0].weights

    x0s = [jnp.array([b0, 1.0]) for b0 in (1.0 / cfg.sz_sq, 0.5 / cfg.sz_sq, 2.0 / cfg.sz_sq)]
    best = minimize_lbfgs(_iso_objective, x0s[0], (means, Z, F, covs, w), starts=x0s[1:])
    return float(best.fun), float(best.x[0]), float(best.x[1])


def _iso_objective(t, data):
    """Mean squared distance of the head ``U = t[0] I``, ``V = t[1] I`` on the infinite
    clean prompt to the Bayes denoiser, over the tasks and queries of ``data`` (a
    module-level function: L-BFGS compiles it once for every config)."""
    means, Z, F, covs, w = data
    eye = jnp.eye(covs.shape[-1])

    def per_task(m, z, f):
        mix = GaussianMixture.tree_unflatten(None, (w, m, covs))
        out = softmax_attention_limit(mix, t[0] * eye, t[1] * eye, z)
        return jnp.mean((out - f) ** 2)

    return jnp.mean(jax.vmap(per_task)(means, Z, F))


def _run_point(cfg, point, key):
    kind, mode = point["kind"], point["mode"]
    t0 = time.perf_counter()
    params, train_mse = _train(jax.random.split(key, cfg.seeds), kind, mode, cfg)
    jax.block_until_ready(params)
    wall = time.perf_counter() - t0
    toks, zq, xq, fstar = clean_prompts(stream_key(cfg.seed, "clean-test"), cfg.test,
                                        _task(cfg))
    pred = jax.vmap(lambda p: _apply(p, toks, zq, kind))(params)
    test = jnp.mean((pred - xq[None]) ** 2, axis=(1, 2, 3))
    bayes = jnp.mean((fstar - xq) ** 2)
    excess = jnp.mean((pred - fstar[None]) ** 2, axis=(1, 2, 3))
    return {"test_mse": test, "train_mse": train_mse, "bayes_mse": bayes, "excess": excess,
            "inv_temp": jnp.trace(params["U"], axis1=1, axis2=2) / cfg.d,
            "value_scale": jnp.trace(params["V"], axis1=1, axis2=2) / cfg.d,
            "wall_s": jnp.asarray(wall)}


def _points(cfg):
    return [{"kind": k, "mode": m} for k in ("softmax", "linear") for m in ("fresh", "pool")]


def _assemble(cfg, points, results):
    out = {}
    for p, r in zip(points, results, strict=True):
        for k, v in r.items():
            out[f"{p['kind']}-{p['mode']}/{k}"] = np.asarray(v)
    exc, b, v = best_isotropic_head(cfg)
    out["iso_head_excess"], out["iso_head_b"], out["iso_head_v"] = (np.array(exc), np.array(b),
                                                                      np.array(v))
    return out


def _summary(cfg, a):
    lines = [f"clean context: d={cfg.d}, {cfg.centres} centres, L={cfg.L}, s0^2={cfg.s0_sq}, "
             f"sZ^2={cfg.sz_sq}; {cfg.steps} Adam steps of batch {cfg.batch}, {cfg.seeds} seeds",
             f"{'model':<16} {'train MSE':>10} {'test MSE':>10} {'Bayes MSE':>10} "
             f"{'excess':>10} {'tr(W_KQ)/d':>11} {'tr(W_PV)/d':>11} {'wall s':>7}"]
    for kind in ("softmax", "linear"):
        for mode in ("fresh", "pool"):
            p = f"{kind}-{mode}/"
            lines.append(f"{kind + '-' + mode:<16} {np.mean(a[p + 'train_mse']):10.4g} "
                         f"{np.mean(a[p + 'test_mse']):10.4g} {float(a[p + 'bayes_mse']):10.4g} "
                         f"{np.mean(a[p + 'excess']):10.4g} {np.mean(a[p + 'inv_temp']):11.4g} "
                         f"{np.mean(a[p + 'value_scale']):11.4g} {float(a[p + 'wall_s']):7.1f}")
    lines.append(f"1/sZ^2 = {1 / cfg.sz_sq:.4g}; best isotropic head at infinite L: "
                 f"W_KQ = {float(a['iso_head_b']):.4g} I, W_PV = {float(a['iso_head_v']):.4g} I, "
                 f"excess {float(a['iso_head_excess']):.4g} (per coordinate)")
    return lines


register(Simulation(
    name="clean-context",
    description="Clean-context in-context denoising (Smart, Bietti & Sengupta 2025 setup).",
    config_cls=CleanContextConfig,
    points=_points,
    run_point=_run_point,
    assemble=_assemble,
    summary=_summary,
))
