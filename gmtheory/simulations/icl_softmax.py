"""``icl-softmax``: one softmax head against linear attention on in-context regression
(docs/topics/icl.md#softmax-attention-on-the-regression-task).

Per point ``(d, alpha)``, ``seeds`` softmax heads (:func:`gmtheory.icl_softmax.softmax_head`,
every parameter free: ``A``, ``b``, ``c``, ``e``) and ``seeds`` linear-attention heads (the
reduced form ``x_q^T Gamma h`` of Lu et al.) are trained at once by
:func:`gmtheory.training.train`, all on the same fresh prompts at every step (a fresh task
per prompt: ``tau, kappa = inf``), AdamW with a cosine schedule and weight decay on the
parts of a head that vanish at the symmetric optimum (:data:`DECAYED`; for linear
attention, ``Gamma``'s part off ``g [I, 0]``), for ``decay_until`` of the steps.
Evaluation, on ``n_eval`` fresh prompts shared by every head (paired), with Gaussian
tasks, the law under which :func:`gmtheory.icl.test_error` scores linear attention
exactly, so that linear attention serves as a control variate (a softmax model's error =
the trained linear head's exact error + their paired Monte Carlo difference,
``soft_est``, ``pair_est``):

* the trained softmax heads, by Monte Carlo (mean and SE per seed);
* the best isotropic head ``(t*, g*)`` at this ``(l, d)``, exactly
  (:func:`gmtheory.icl_softmax.finite_prompt_optimum`) and by Monte Carlo on the same
  prompts (the paired reference of the trained heads);
* the trained linear heads, exactly, by :func:`gmtheory.icl.test_error` (and by Monte
  Carlo on the same prompts, for the paired softmax - linear difference);

beside the theory: Lu et al.'s ``rho + (1 + rho)/(alpha + 1 + rho)``, the delta method's
softmax optimum at this ``d`` (``iso_delta``, leading order in ``1/l``) and as
``d -> inf``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import icl, stats
from .. import icl_softmax as S
from .._xla import jit_long
from ..training import train
from ._base import SimConfig, Simulation, register

__all__ = ["ICLSoftmaxConfig"]


@dataclass(frozen=True, kw_only=True)
class ICLSoftmaxConfig(SimConfig):
    ds: tuple[int, ...]
    alphas: tuple[float, ...]
    rho: float
    seeds: int
    steps: int
    batch: int
    lr: float
    decay: float        # AdamW weight decay on the symmetry-breaking parts
    decay_until: float  # fraction of the steps with that decay; the rest run free
    n_eval: int


def _ell(d, alpha):
    return max(2, int(round(alpha * d)))


def _records(steps):
    return next(r for r in range(max(1, steps // 10), steps + 1) if steps % r == 0)


def _units(q, d):
    """Training parameters to head parameters: ``A = sqrt(d) (a I + O)`` and ``e =
    sqrt(d) e'``.  The optima are O(1) in these units at every ``d`` (the best single head
    has ``A = sqrt(t d) I``, ``e = g sqrt(d/t)``), so one learning rate suits every
    parameter at every ``d``; ``O`` is ``A``'s part off the identity, which the weight decay
    acts on (:data:`DECAYED`)."""
    eye = jnp.eye(d, dtype=q["O"].dtype)
    return {"A": math.sqrt(d) * (q["a"][..., None, None] * eye + q["O"]), "b": q["b"],
            "c": q["c"], "e": math.sqrt(d) * q["e"]}


def _training_units(h, d):
    """Head parameters to training parameters (the inverse of :func:`_units`)."""
    a = jnp.trace(h["A"], axis1=-2, axis2=-1) / d / math.sqrt(d)
    O = h["A"] / math.sqrt(d) - a[..., None, None] * jnp.eye(d, dtype=h["A"].dtype)
    return {"a": a, "O": O, "b": h["b"], "c": h["c"], "e": h["e"] / math.sqrt(d)}


#: the parts of a head that vanish at the rotation-symmetric optimum (A's part off the
#: identity, b and c): Adam moves coordinates whose gradient is pure noise by ~lr a step
#: whatever the batch, and these d^2 + 2d coordinates have almost no curvature, so without
#: decay they drift (measured at d = 16: the off-identity part reached 0.3-0.7 of A's
#: diagonal and the heads sat 1.2-2.4 % above the best isotropic head). With decay for 95 %
#: of the steps (``decay_until``) and none after: 0.1-0.4 % at d = 32 after 1000 steps; a
#: free last 20 % let them drift back to 0.4-1.5 %.
DECAYED = {"a": False, "O": True, "b": True, "c": True, "e": False}


def _gamma(q, d):
    """Linear attention's training parameters to ``Gamma = g [I, 0] + G`` (d, d + 1): the
    optimum is ``g* [I, 0]`` (``G = 0``), so the decay acts on ``G``, whose d(d + 1)
    coordinates would otherwise drift like the softmax head's (measured at d = 64 without
    decay: 7-18 % of the excess above the optimum after 2000 steps)."""
    E = jnp.eye(d, d + 1, dtype=q["G"].dtype)
    return q["g"][..., None, None] * E + q["G"]


def two_heads(params, X, y, xq, ell=None):
    """The sum of two softmax heads; ``params`` leaves have a leading axis of 2."""
    return jnp.sum(jax.vmap(lambda q: S.softmax_head(q, X, y, xq, ell))(params), axis=0)


def _fit(key, d, ells, rho, seeds, steps, batch, lr, decay, decay_until):
    """``seeds`` independent runs, each training one softmax head, a pair of softmax heads
    and one linear-attention head per prompt length in ``ells``, all on the same fresh
    prompts at every step (padded to the longest length; each model reads its own first
    ``l`` tokens).  The models do not interact: the loss is a sum of their losses, and Adam
    and elementwise clipping act per parameter, so each trains as it would alone, and the
    comparisons are paired from the first step.  The pair starts as a random head plus the
    mean head (``A = 0``) with the opposite value scale; linear attention starts at 0.
    Returns ``(softmax, pair, linear)`` parameters with leading axes (length, seed)."""
    A_ = len(ells)
    keys = jax.random.split(key, 3 * seeds * A_ + 1)
    n = seeds * A_
    init = jax.vmap(lambda k: S.init_softmax_head(k, d))
    soft = init(keys[1:n + 1])
    h1 = init(keys[n + 1:2 * n + 1])
    # the second head starts as the mean head with the opposite value scale (A = b = c = 0,
    # e2 = -e1): the pair starts in the family of its optimum, e1 (softmax - 1/l) y
    h2 = {"A": jnp.zeros_like(h1["A"]), "b": jnp.zeros_like(h1["b"]),
          "c": jnp.zeros_like(h1["c"]), "e": -h1["e"]}
    pair = jax.tree.map(lambda a, b: jnp.stack([a, b], axis=1), h1, h2)
    shape = lambda x: x.reshape(seeds, A_, *x.shape[1:])
    p0 = {"softmax": jax.tree.map(shape, _training_units(soft, d)),
          "pair": jax.tree.map(shape, _training_units(pair, d)),
          "linear": {"g": jnp.zeros((seeds, A_)), "G": jnp.zeros((seeds, A_, d, d + 1))}}
    L = max(ells)
    ell = jnp.asarray(ells)

    def loss(p, _data, k):
        b = S.sample_prompts(k, d, L, rho, batch, fast=True)
        args = (b["X"], b["y"], b["xq"])
        mse = lambda yh: jnp.mean((b["yq"] - yh) ** 2)
        es = jax.vmap(lambda q, l: mse(S.softmax_head(_units(q, d), *args, l)))(
            p["softmax"], ell)
        ep = jax.vmap(lambda q, l: mse(two_heads(_units(q, d), *args, l)))(p["pair"], ell)
        el = jax.vmap(lambda g, l: mse(S.linear_head(_gamma(g, d), *args, l)))(
            p["linear"], ell)
        return jnp.sum(es) + jnp.sum(ep) + jnp.sum(el)

    sched = optax.cosine_decay_schedule(lr, steps, alpha=1e-2)
    wd = optax.piecewise_constant_schedule(decay, {int(decay_until * steps): 0.0})
    mask = {"softmax": DECAYED, "pair": DECAYED, "linear": {"g": False, "G": True}}
    opt = optax.chain(optax.clip(1.0), optax.inject_hyperparams(optax.adamw)(
        learning_rate=sched, weight_decay=wd, mask=mask))
    res = train(loss, p0, opt, steps=steps, key=jax.random.split(keys[0], seeds),
                record_every=_records(steps), batched=True, desc=f"icl-softmax d={d}",
                tag=["icl-softmax", d, list(ells), rho, batch, lr, decay, decay_until, "pair"])
    out = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1).reshape(A_ * seeds, *x.shape[2:]),
                       res.params)
    return _units(out["softmax"], d), _units(out["pair"], d), _gamma(out["linear"], d)


@partial(jit_long, static_argnames=("d", "L", "n", "chunk"))
def _evaluate(key, soft, pair, gam, iso, ell_m, ell_a, rho, d, L, n, chunk=512):
    """Squared errors on ``n`` fresh prompts (in chunks) shared by every model: trained
    softmax (models, n), trained pairs (models, n), isotropic heads (lengths, n), trained
    linear (models, n).  Every model reads every prompt: compiled to run fast."""
    def one(k):
        b = S.sample_prompts(k, d, L, rho, chunk)
        sq = lambda yh: (b["yq"] - yh) ** 2
        args = (b["X"], b["y"], b["xq"])
        es = jax.vmap(lambda p, l: sq(S.softmax_head(p, *args, l)))(soft, ell_m)
        ep = jax.vmap(lambda p, l: sq(two_heads(p, *args, l)))(pair, ell_m)
        ei = jax.vmap(lambda p, l: sq(S.softmax_head(p, *args, l)))(iso, ell_a)
        el = jax.vmap(lambda g, l: sq(S.linear_head(g, *args, l)))(gam, ell_m)
        return es, ep, ei, el
    out = jax.lax.map(one, jax.random.split(key, n // chunk))
    return tuple(jnp.moveaxis(o, 0, 1).reshape(o.shape[1], -1) for o in out)


def _point(cfg, p, key):
    """Every ``alpha`` and seed at one ``d``: two training programs and one evaluation."""
    d = int(p["d"])
    ells = [_ell(d, a) for a in cfg.alphas]
    S_, A_ = int(cfg.seeds), len(ells)
    kf, ke = jax.random.split(key)
    soft, pair, gam = _fit(kf, d, ells, cfg.rho, S_, cfg.steps, cfg.batch, cfg.lr,
                           cfg.decay, cfg.decay_until)
    opts = [S.finite_prompt_optimum(ell, cfg.rho, d) for ell in ells]
    pairs = [S.two_head_optimum(ell, cfg.rho, d) for ell in ells]
    iso = jax.tree.map(lambda *x: jnp.stack(x),
                       *[S.isotropic_params(d, o["t"], o["g"]) for o in opts])
    n = max(512, cfg.n_eval // 512 * 512)
    ell_m = jnp.repeat(jnp.asarray(ells), S_)
    es, ep, ei, el = _evaluate(ke, soft, pair, gam, iso, ell_m, jnp.asarray(ells), cfg.rho,
                               d, max(ells), n)
    es, el = np.asarray(es).reshape(A_, S_, n), np.asarray(el).reshape(A_, S_, n)
    ep = np.asarray(ep).reshape(A_, S_, n)
    ei = np.asarray(ei)
    exact_lin = np.array([float(icl.test_error(g, int(l), cfg.rho))
                          for g, l in zip(gam, ell_m, strict=True)]).reshape(A_, S_)
    out = {"ell": np.array(ells), "iso_pred": np.array([o["error"] for o in opts]),
           "t": np.array([o["t"] for o in opts]), "g": np.array([o["g"] for o in opts]),
           "iso_delta": np.array([S.softmax_head_optimum(ell / d, cfg.rho, d)["error"]
                                  for ell in ells]), "lin_exact": exact_lin,
           "pair_theory": np.array([o["error"] for o in pairs]),
           "pair_t": np.array([o["t"] for o in pairs]),
           "pair_e": np.array([o["e"] for o in pairs])}
    out["soft_mc"], out["soft_se"] = stats.mean_se(es, axis=-1)
    out["iso_mc"], out["iso_se"] = stats.mean_se(ei, axis=-1)
    out["lin_mc"], out["lin_se"] = stats.mean_se(el, axis=-1)
    out["soft_minus_lin"], out["soft_minus_lin_se"] = stats.mean_se(es - el, axis=-1)
    out["soft_minus_iso"], out["soft_minus_iso_se"] = stats.mean_se(es - ei[:, None], axis=-1)
    # the pair's error as trained linear attention's exact error plus the paired
    # difference on the same prompts (linear attention as a control variate)
    out["pair_minus_lin"], out["pair_minus_lin_se"] = stats.mean_se(ep - el, axis=-1)
    out["pair_est"] = exact_lin + out["pair_minus_lin"]
    out["soft_est"] = exact_lin + out["soft_minus_lin"]      # the same for the single head
    A = np.asarray(soft["A"]).reshape(A_, S_, d, d)
    out["soft_A_iso"] = np.trace(A, axis1=2, axis2=3) / d
    out["soft_e"] = np.asarray(soft["e"]).reshape(A_, S_)
    return out


def _points(cfg):
    return [{"d": int(d)} for d in cfg.ds]


def _assemble(cfg, points, res):
    out = {k: np.stack([r[k] for r in res]) for k in res[0]}   # (d, alpha[, seed])
    alpha_eff = out["ell"] / np.array(cfg.ds)[:, None]
    out.update(ds=np.array(cfg.ds), alphas=np.array(cfg.alphas, float), alpha_eff=alpha_eff,
               rho=np.asarray(cfg.rho),
               lu_theory=np.vectorize(lambda a: icl.limit_large(a, cfg.rho))(alpha_eff),
               soft_dinf=np.vectorize(
                   lambda a: S.softmax_head_optimum(a, cfg.rho)["error"])(alpha_eff))
    out["soft_mean"], out["soft_mean_se"] = stats.mean_se(out["soft_mc"], axis=2)
    out["lin_mean"], out["lin_mean_se"] = stats.mean_se(out["lin_exact"], axis=2)
    # the evaluation's Monte Carlo SE (seeds share the prompts: the mean of their SEs
    # bounds the SE of their mean under any correlation)
    out["pair_mean"] = np.mean(out["pair_est"], axis=2)
    out["pair_mean_se"] = np.mean(out["pair_minus_lin_se"], axis=2)
    out["soft_eval"] = np.mean(out["soft_est"], axis=2)
    out["soft_eval_se"] = np.mean(out["soft_minus_lin_se"], axis=2)
    return out


def softmax_estimate(a):
    """The trained single heads' error and its SE, per (d, alpha): the best isotropic head's
    exact error (checked against Monte Carlo by icl.11) plus the paired Monte Carlo
    difference on the same prompts, the mean over seeds (the seeds share the prompts: the
    mean of their SEs bounds the SE of their mean).  With the isotropic head as the
    control variate the SE is 0.03-0.2 % of the error, against 1.6-2.3 % with linear
    attention as the control variate (quick run; ``soft_eval``)."""
    return (a["iso_pred"] + np.mean(a["soft_minus_iso"], axis=-1),
            np.mean(a["soft_minus_iso_se"], axis=-1))


def _summary(cfg, a):
    lines = [f"rho = {cfg.rho}; fresh task per prompt; {cfg.seeds} seeds, {cfg.steps} steps",
             f"{'d':>3} {'alpha':>5} {'softmax trained':>16} {'softmax theory':>14} "
             f"{'linear trained':>15} {'linear best':>11} {'Lu et al.':>9} "
             f"{'excess ratio':>12} {'derived':>7} {'pair trained':>15} {'pair theory':>11}"]
    # softmax trained: the paired estimate the figure draws (softmax_estimate); softmax
    # theory: the best isotropic head's exact error at this (l, d)
    soft, soft_se = softmax_estimate(a)
    for i, d in enumerate(a["ds"]):
        for j, al in enumerate(a["alphas"]):
            sm, sse = soft[i, j], soft_se[i, j]
            ratio = (sm - cfg.rho) / (a["lin_mean"][i, j] - cfg.rho)
            best = icl.optimum_error(int(a["ell"][i, j]), int(d), cfg.rho)
            derived = (float(a["iso_pred"][i, j]) - cfg.rho) / (best - cfg.rho)
            lines.append(f"{int(d):3d} {al:5g} {sm:9.4f}+-{sse:.4f}"
                         f" {float(a['iso_pred'][i, j]):14.4f} "
                         f"{a['lin_mean'][i, j]:8.4f}+-{a['lin_mean_se'][i, j]:.4f} "
                         f"{best:11.4f} {float(a['lu_theory'][i, j]):9.4f} {ratio:12.2f} "
                         f"{derived:7.3f} "
                         f"{a['pair_mean'][i, j]:8.4f}+-{a['pair_mean_se'][i, j]:.4f} "
                         f"{a['pair_theory'][i, j]:11.4f}")
    lines.append("softmax trained: the best isotropic head's exact error plus the trained heads' "
                 "paired Monte Carlo difference from it on the same prompts (softmax_estimate); "
                 "excess ratio = (softmax - rho) / (linear - rho), trained; derived: the same "
                 "for the two exact optima at this (l, d) (softmax theory, linear best); the "
                 "derived d -> inf value tends to e = 2.718 as alpha grows; pair: two softmax "
                 "heads (theory: the isotropic head plus a mean head, its infimum as t -> 0)")
    return lines


register(Simulation(
    name="icl-softmax",
    description="One softmax head vs linear attention on in-context regression, with theory.",
    config_cls=ICLSoftmaxConfig, points=_points, run_point=_point, assemble=_assemble,
    summary=_summary))
