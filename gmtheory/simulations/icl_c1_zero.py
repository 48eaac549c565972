"""``icl-c1-zero``: linear attention learns nothing from a target with no linear part
(docs/topics/icl.md#nothing-learnable-when-c1-0; check icl.06).

For an even ``f`` (|z|, z^2) the first Hermite coefficient ``c1 = E f(z) z`` is zero, and
the equivalence leaves pure noise of variance ``m2 = E f(z)^2 + rho``: the near-ridgeless
pretrained model fits that noise, with test error ``m2 tau / (tau - 1)`` for ``tau > 1``
and ``m2 / (1 - tau)`` for ``tau < 1`` as d -> infinity (a fresh task per prompt, kappa =
inf).  Per (f, tau) and d: ``trials`` ridge pretraining runs on ``y = f(x^T w) + eps``
(:func:`gmtheory.icl.g_task_trials`, the batched simulator), each scored by the exact
finite-d error of its Gamma (:func:`gmtheory.icl.test_error_nonlinear`); the relative gap
to the formula, extrapolated to d -> infinity by ``a + b/d``
(:func:`gmtheory.stats.extrapolate_inverse_each`), with its SE.  One compiled batch per
(d, tau): the target is a traced index into :data:`TARGETS`.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .. import hermite, icl, stats
from ._base import SimConfig, Simulation, assemble_grid, grid, register
from .icl_sims import nonlinear_errors

__all__ = ["C1ZeroConfig", "TARGETS", "even_moments", "predicted"]

#: the even targets: name -> (numpy f, its kinks for quadrature)
TARGETS = {"abs": (np.abs, (0.0,)), "z2": (np.square, None)}
_JAX_TARGETS = (jnp.abs, jnp.square)         # one compiled batch serves both (traced index)


def even_moments(name: str, rho: float) -> dict:
    """Hermite data of ``y = f(z) + eps`` for an even target, by quadrature
    (:func:`gmtheory.hermite.label_moments`), with the moments that vanish by symmetry
    (``c1 = E f(z) z`` and ``E y^3 z``) set to exactly 0 (quadrature leaves ~1e-17)."""
    if name not in TARGETS:
        raise ValueError(f"f: one of {sorted(TARGETS)} (an even target), got {name!r}.")
    if not (rho >= 0 and np.isfinite(rho)):
        raise ValueError(f"rho: the label noise variance must be finite and >= 0, got {rho!r}.")
    fn, kinks = TARGETS[name]
    mom = dict(hermite.label_moments(fn, rho, kinks=kinks))
    mom["c1"], mom["Ey3z"] = 0.0, 0.0
    return mom


def predicted(m2: float, tau: float) -> float:
    """The d -> infinity near-ridgeless error when nothing is learnable:
    ``m2 tau / (tau - 1)`` (``tau > 1``), ``m2 / (1 - tau)`` (``tau < 1``)."""
    if tau == 1.0 or tau <= 0:
        raise ValueError(f"tau: positive and not 1 (the interpolation peak), got {tau}.")
    return m2 * tau / (tau - 1) if tau > 1 else m2 / (1 - tau)


@dataclass(frozen=True, kw_only=True)
class C1ZeroConfig(SimConfig):
    ds: tuple[int, ...]
    fs: tuple[str, ...]
    taus: tuple[float, ...]
    alpha: float
    rho: float
    lam: float
    trials: int

    def __post_init__(self):
        bad = [f for f in self.fs if f not in TARGETS]
        if bad or not self.fs:
            raise ValueError(f"fs: even targets from {sorted(TARGETS)}, got {list(self.fs)}.")
        if any(t <= 0 or t == 1.0 for t in self.taus) or not self.taus:
            raise ValueError(f"taus: positive and not 1, got {list(self.taus)}.")
        if len(set(self.ds)) < 2:
            raise ValueError(f"ds: the extrapolation a + b/d needs two distinct d, got "
                             f"{list(self.ds)}.")
        for name in ("alpha", "lam"):
            v = getattr(self, name)
            if not (v > 0 and np.isfinite(v)):
                raise ValueError(f"{name}: must be finite and > 0, got {v!r}.")
        if not (self.rho >= 0 and np.isfinite(self.rho)):
            raise ValueError(f"rho: the label noise variance must be finite and >= 0, got "
                             f"{self.rho!r}.")
        if self.trials < 2:
            raise ValueError(f"trials: need at least 2 for an SE, got {self.trials}.")


def _axes(cfg):
    return {"d": [int(d) for d in cfg.ds], "f": list(cfg.fs),
            "tau": [float(t) for t in cfg.taus]}


def _point(cfg, p, key):
    d, tau = int(p["d"]), float(p["tau"])
    _, _, _, G = icl.g_task_trials(key, d, alpha=cfg.alpha, tau=tau, kappa=np.inf,
                                   rho=cfg.rho, lam=cfg.lam, trials=int(cfg.trials),
                                   targets=_JAX_TARGETS, target=list(TARGETS).index(p["f"]))
    ell = icl.sizes(d, cfg.alpha, tau, np.inf)[0]
    mom = {k: jnp.asarray(v, float) for k, v in even_moments(p["f"], cfg.rho).items()
           if k in ("c1", "m2", "Ey2z2", "Ey3z", "Ey4")}
    return {"e": np.asarray(nonlinear_errors(G, ell, mom))}


def _assemble(cfg, points, res):
    e = assemble_grid(points, res, _axes(cfg), ("e",))["e"]           # (d, f, tau, trials)
    mean, se = stats.mean_se(e, axis=-1)
    m2 = np.array([even_moments(f, cfg.rho)["m2"] for f in cfg.fs])
    pred = np.array([[predicted(m, t) for t in cfg.taus] for m in m2])  # (f, tau)
    gap, gap_se = mean / pred - 1, se / pred
    lim, lim_se = stats.extrapolate_inverse_each(np.array(cfg.ds, float), gap, gap_se)
    return {"ds": np.array(cfg.ds), "fs": np.array(cfg.fs), "taus": np.array(cfg.taus),
            "errors": e, "mean": mean, "se": se, "m2": m2, "predicted": pred,
            "rel_gap": gap, "rel_gap_se": gap_se, "rel_gap_limit": lim,
            "rel_gap_limit_se": lim_se, "trials": np.asarray(cfg.trials)}


def _summary(cfg, a):
    lines = [f"alpha = {cfg.alpha:g}, kappa = inf, rho = {cfg.rho:g}, lambda = {cfg.lam:g}; "
             f"{cfg.trials} trials per (d, f, tau); predicted m2 tau/(tau-1) or m2/(1-tau)"]
    for i, f in enumerate(cfg.fs):
        for j, t in enumerate(cfg.taus):
            per_d = ", ".join(f"d={d}: {a['mean'][k, i, j]:.4f}+-{a['se'][k, i, j]:.4f}"
                              for k, d in enumerate(cfg.ds))
            lines.append(f"{f:>4} tau={t:g}: predicted {a['predicted'][i, j]:.4f}; {per_d}; "
                         f"sim/predicted - 1 at d -> inf {a['rel_gap_limit'][i, j]:+.4f} +- "
                         f"{a['rel_gap_limit_se'][i, j]:.4f}")
    return lines


register(Simulation(
    name="icl-c1-zero",
    description="Nothing learnable when c1 = 0: pretrained error against m2 tau/(tau-1), "
                "m2/(1-tau).",
    config_cls=C1ZeroConfig, points=lambda cfg: grid(**_axes(cfg)),
    run_point=_point, assemble=_assemble, summary=_summary))
