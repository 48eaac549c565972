"""Finite-prompt convergence of softmax and linear attention to their limits.

Theory: docs/topics/operator.md#finite-prompts-rate-and-effective-sample-size (checks
``operator.05b`` and ``operator.06`` read this run).  For a random 3-component
heteroscedastic mixture in d = 3 (the protocol of check ``operator.01a``), sample ``reps``
independent prompts of ``L`` tokens and record the squared error of the finite-
prompt operator against the closed form (Prop. 2.1 for softmax, Lemma C.7 for linear).
A second sweep fixes ``L`` and grows ``u^T Gamma u``; the error there is predicted by
the delta-method variance (:func:`gmtheory.finite_prompt_variance`), i.e. by the ESS.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import stats
from ..operators import effective_sample_size, finite_prompt_variance
from ..problems import make_problem, prompt_sq_errors, scale_to_quad
from ._base import SimConfig, Simulation, register

__all__ = ["PromptConvergenceConfig"]


@dataclass(frozen=True, kw_only=True)
class PromptConvergenceConfig(SimConfig):
    d: int
    n_components: int
    n_queries: int
    max_quad: float
    Ls: tuple[int, ...]
    reps: int
    quad_levels: tuple[float, ...]
    L_ess: int
    reps_ess: int


def _points(cfg):
    pts = [{"kind": "L", "L": int(L)} for L in cfg.Ls]
    pts += [{"kind": "ess", "q": float(q)} for q in cfg.quad_levels]
    return pts


def _run_point(cfg, point, key):
    mix, U, V, z = make_problem(cfg.seed, cfg.d, cfg.n_components, cfg.n_queries, cfg.max_quad)
    if point["kind"] == "L":
        L = point["L"]
        ks, kl = jax.random.split(key)
        return {
            "soft": prompt_sq_errors(ks, mix, U, V, z, L=L, reps=cfg.reps, kind="softmax"),
            "lin": prompt_sq_errors(kl, mix, U, V, z, L=L, reps=cfg.reps, kind="linear"),
        }
    q = point["q"]
    zq = z[:1]
    Uq = scale_to_quad(mix, U, zq, q)
    errs = prompt_sq_errors(key, mix, Uq, V, zq, L=cfg.L_ess, reps=cfg.reps_ess,
                            kind="softmax")
    return {
        "errs": errs[:, 0],
        "pred": jnp.sum(finite_prompt_variance(mix, Uq, V, zq)),
        "ess_frac": effective_sample_size(mix, Uq, zq, 1.0)[0],
    }


def _assemble(cfg, points, results):
    mix, U, V, z = make_problem(cfg.seed, cfg.d, cfg.n_components, cfg.n_queries, cfg.max_quad)
    nL = len(cfg.Ls)
    Ls = np.array(cfg.Ls, float)
    soft = np.stack([r["soft"] for r in results[:nL]])  # (nL, reps, n)
    lin = np.stack([r["lin"] for r in results[:nL]])
    ess_res = results[nL:]
    lvar = np.asarray(jnp.sum(finite_prompt_variance(mix, U, V, z), axis=-1))  # (n,)
    ess_errs = np.stack([np.asarray(r["errs"]) for r in ess_res], axis=1)  # (reps_ess, levels)
    lmse, lmse_se = (cfg.L_ess * v for v in stats.mean_se(ess_errs, axis=0))
    mse_soft, mse_soft_se = stats.mean_se(soft, axis=1)
    # per L: each prompt's squared error averaged over the queries, then its mean and Monte
    # Carlo SE over the independent prompts (the rates checks operator.05b/06 fit)
    qsoft, qsoft_se = stats.mean_se(soft.mean(2), axis=1)
    qlin, qlin_se = stats.mean_se(lin.mean(2), axis=1)
    return {
        "qmse_soft": qsoft, "qmse_soft_se": qsoft_se, "qmse_lin": qlin, "qmse_lin_se": qlin_se,
        "Ls": Ls,
        "mse_soft": mse_soft,  # (nL, n)
        "mse_lin": lin.mean(axis=1),
        "mse_soft_se": mse_soft_se,
        "pred_mse_soft": lvar[None] / Ls[:, None],
        "ess_frac": np.asarray(effective_sample_size(mix, U, z, 1.0)),
        "quad": np.asarray(jnp.einsum("ni,kij,nj->nk", z @ U.T, mix.covs, z @ U.T).max(1)),
        "quad_levels": np.array(cfg.quad_levels, float),
        "lmse": lmse,
        "lmse_se": lmse_se,
        "lmse_pred": np.array([float(r["pred"]) for r in ess_res]),
        "ess_frac_levels": np.array([float(r["ess_frac"]) for r in ess_res]),
    }


def _summary(cfg, a):
    # the weighted fit that the figure draws and checks operator.05b and operator.06 test:
    # each L's RMS error with its Monte Carlo SE (delta method: SE(mse) / (2 rms))
    fits = {}
    for kind in ("soft", "lin"):
        rms = np.sqrt(a[f"qmse_{kind}"])
        fits[kind] = stats.fit_loglog_weighted(a["Ls"], rms, a[f"qmse_{kind}_se"] / (2 * rms))
    lines = [
        f"RMSE slope vs L (weighted by each L's Monte Carlo SE): softmax "
        f"{fits['soft'].slope:.3f} +- {fits['soft'].stderr:.3f}, linear "
        f"{fits['lin'].slope:.3f} +- {fits['lin'].stderr:.3f} (theory -0.5)",
        "u^T Gamma u   L*MSE (measured +- se)   L*MSE (delta method)   ESS/L",
    ]
    for q, m, se, p, e in zip(a["quad_levels"], a["lmse"], a["lmse_se"], a["lmse_pred"],
                              a["ess_frac_levels"], strict=True):
        lines.append(f"{q:10.2f}   {m:10.4g} +- {se:8.2g}   {p:18.4g}   {e:8.3f}")
    return lines


register(
    Simulation(
        name="prompt-convergence",
        description="Finite-prompt softmax/linear attention vs their infinite-prompt limits.",
        config_cls=PromptConvergenceConfig,
        points=_points,
        run_point=_run_point,
        assemble=_assemble,
        summary=_summary,
    )
)
