"""``icl-authors``: the authors' quick-figure protocol of Lu et al. (2025) rerun with this
package's sampler and solver (:func:`gmtheory.icl.quick_figure`), beside their own saved
means (:mod:`gmtheory.data`; docs/topics/icl.md#the-authors-quick-figure).

Per dimension ``d``: g_task = e_ICL - e_IDG of the ridge-pretrained model at their 12 kappas
(alpha = tau = 10, rho = 0.01, lambda = 1e-6; ``trials`` pretraining runs per kappa, exact
test errors), the dMMSE gap (``draws`` test prompts each for ICL and IDG), the ridgeless
theory at their parameters and, where they saved data (d = 10, 32, 64), their means with
their SE ``std / sqrt(trials)`` and the z-scores of ours against theirs.  Check icl.07 reads
the quick run (d = 10) and its paper variant the committed paper run (d = 32, 64): the
figure ``icl-authors`` draws the same runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import icl
from ._base import SimConfig, Simulation, register

__all__ = ["AuthorsConfig"]

#: the dimensions at which the authors saved their quick figure
AUTHORS_DS = (10, 32, 64)


@dataclass(frozen=True, kw_only=True)
class AuthorsConfig(SimConfig):
    ds: tuple[int, ...]
    trials: int
    draws: int

    def __post_init__(self):
        bad = [d for d in self.ds if d not in AUTHORS_DS]
        if bad or not self.ds:
            raise ValueError(f"ds: the authors saved their quick figure at d = {AUTHORS_DS}; "
                             f"got {list(self.ds)}.")
        if self.trials < 2 or self.draws < 2:
            raise ValueError(f"trials, draws: need at least 2 each for an SE, got "
                             f"{self.trials}, {self.draws}.")


_KEYS = ("g_task", "g_task_se", "dmmse_gap", "dmmse_gap_se", "theory_g_task_ridgeless",
         "authors_g_task", "authors_g_task_se", "authors_dmmse_gap", "z_vs_authors",
         "z_dmmse_vs_authors")


def _point(cfg, p, key):
    d = int(p["d"])
    # quick_figure draws from key(seed): one recorded seed per (config seed, d)
    row = icl.quick_figure(d, trials=int(cfg.trials), draws=int(cfg.draws),
                           seed=int(cfg.seed) * 1000 + d)
    out = {k: np.asarray(row[k], float) for k in _KEYS}
    out["max_cg_residual"] = np.asarray(row["max_cg_residual"])
    return out


def _assemble(cfg, points, res):
    out = {k: np.stack([r[k] for r in res]) for k in res[0]}      # (d, kappa)
    q = icl.QUICK_FIGURE
    grid = np.geomspace(min(q["kappas"]) / 1.5, max(q["kappas"]) * 1.5, 100)
    out.update(ds=np.array(cfg.ds), kappas=np.array(q["kappas"]),
               trials=np.asarray(cfg.trials), kappa_grid=grid,
               theory_grid=np.array([icl.g_task_ridgeless(q["alpha"], q["tau"], k, q["rho"])
                                     for k in grid]))
    return out


def _summary(cfg, a):
    q = icl.QUICK_FIGURE
    lines = [f"alpha = {q['alpha']:g}, tau = {q['tau']:g}, rho = {q['rho']:g}, lambda = "
             f"{q['lam']:g}; {cfg.trials} trials per kappa (the authors saved 20)",
             f"{'d':>3} {'kappa':>6} {'ours':>16} {'authors':>16} {'z':>6} {'theory d->inf':>13}"]
    for i, d in enumerate(a["ds"]):
        for j, k in enumerate(a["kappas"]):
            lines.append(f"{int(d):3d} {k:6g} {a['g_task'][i, j]:9.4f}+-{a['g_task_se'][i, j]:.4f}"
                         f" {a['authors_g_task'][i, j]:9.4f}+-{a['authors_g_task_se'][i, j]:.4f}"
                         f" {a['z_vs_authors'][i, j]:6.2f}"
                         f" {a['theory_g_task_ridgeless'][i, j]:13.4f}")
    return lines


register(Simulation(
    name="icl-authors",
    description="The authors' quick-figure protocol (Lu et al.) rerun beside their saved means.",
    config_cls=AuthorsConfig, points=lambda cfg: [{"d": int(d)} for d in cfg.ds],
    run_point=_point, assemble=_assemble, summary=_summary))
