"""Denoising experiments: Figure 2 (two-head SGD), Figure 3 and the transition (Prop. 4.3).

* ``denoise-fig2`` — two population heads ``sum_h T_{U_h,V_h}[mu_Z]`` trained by online SGD
  (step 2e-3, gradient-norm clipping at 10, batch of fresh ``Z ~ mu_Z`` per step) on
  ``|f(Z) - f*(Z)|^2`` at the Figure 2 parameters (:data:`gmtheory.denoising.FIG2`:
  ``m1 = (3,0)``, ``m2 = (0,3)``, ``gamma = 1``, ``xi = 2``, ``pi = 1/2``), by
  :func:`gmtheory.denoising.train_heads`.  The excess risk is tracked by Gauss–Hermite.
  Not reported by the paper, chosen here: initialisation ``N(0, init_scale^2)`` per entry,
  batch size, number of steps, GH order, seeds.
* ``denoise-iterates`` — trajectories of ``z_{n+1} = f*(z_n)`` for ``gamma = 0``,
  ``m1 = -m2 = (0, 3)`` at a strong and a weak separation, and ``u_lambda`` against
  ``lambda`` with the ``sqrt(3/(2n))`` law at ``lambda = 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import denoising as D
from ..mixture import GaussianMixture
from ..problems import stream_key
from ._base import SimConfig, Simulation, assemble_grid, grid, register

__all__ = ["Fig2Config", "IteratesConfig", "SweepConfig", "fig2_problem", "PHASE_FLOOR"]


fig2_problem = D.figure2_mixture


@dataclass(frozen=True, kw_only=True)
class Fig2Config(SimConfig):
    seeds: int
    steps: int
    lr: float
    clip: float
    batch: int
    init_scale: float
    eval_every: int
    gh_order: int
    single_head_starts: int


def _fig2_run(cfg, point, key):
    mix, xi = fig2_problem()
    run = D.train_heads(mix, xi, key, seeds=cfg.seeds, steps=cfg.steps, lr=cfg.lr,
                        clip=cfg.clip, batch=cfg.batch, init_scale=cfg.init_scale,
                        eval_every=cfg.eval_every, order=cfg.gh_order)
    gap = D.linear_gap(mix, xi)[0]
    best_single = D.single_head_search(mix, xi, cfg.single_head_starts,
                                       stream_key(cfg.seed, "fig2-single"), order=cfg.gh_order)
    x, _ = mix.sample(stream_key(cfg.seed, "fig2-samples"), 400)
    zs = x + xi * jax.random.normal(stream_key(cfg.seed, "fig2-noise"), x.shape)
    return {"excess": run.excess, "steps": run.steps,
            "linear_gap": gap, "best_single_head": jnp.asarray(best_single.excess),
            "U": run.U, "V": run.V, "x": x, "z": zs}


def _fig2_summary(cfg, a):
    tail = min(10, a["excess"].shape[1] - 1)  # tail average over the last evaluations
    final = a["excess"][:, -tail:].mean(1)
    return [
        f"linear gap R(A*) - R(f*) = {float(a['linear_gap']):.6g}",
        f"best single-head excess ({cfg.single_head_starts} L-BFGS starts) = "
        f"{float(a['best_single_head']):.4g}",
        f"two heads, {cfg.steps} SGD steps: excess per seed (mean of the last {tail} "
        f"evaluations, {tail * cfg.eval_every} steps) = "
        + ", ".join(f"{v:.3g}" for v in final),
        f"seeds below the best single head: {int(np.sum(final < a['best_single_head']))}"
        f"/{final.size}; below 1e-3: {int(np.sum(final < 1e-3))}/{final.size}",
    ]


register(Simulation(
    name="denoise-fig2",
    description="Figure 2: two population heads trained by online SGD to the Bayes denoiser.",
    config_cls=Fig2Config,
    points=lambda cfg: [{"run": "sgd"}],
    run_point=_fig2_run,
    assemble=lambda cfg, pts, res: res[0],
    summary=_fig2_summary,
))


@dataclass(frozen=True, kw_only=True)
class IteratesConfig(SimConfig):
    xi_strong: float
    xi_weak: float
    n_starts: int
    n_iter: int
    n_lambda: int
    n_critical: int
    # the strong-separation limits that check denoising.31 reads: the same starts iterated
    # n_limit times at each lambda > 1 (the contraction lambda^2 (1 - u^2) <= 0.85 there, so
    # 2000 steps leave them at round-off from +-u_lambda (0, 3))
    limit_lambdas: tuple[float, ...]
    n_limit: int
    lambda_sub: float        # the geometric collapse below lambda = 1


def _iterates_run(cfg, point, key):
    m = jnp.array([[0.0, 3.0], [0.0, -3.0]])
    mix = GaussianMixture.shared([0.5, 0.5], m, jnp.zeros((2, 2)))
    z0 = jax.random.uniform(key, (cfg.n_starts, 2), minval=-6.0, maxval=6.0)
    g = jnp.linspace(-6, 6, 121)
    grid = jnp.stack(jnp.meshgrid(g, g, indexing="xy"), -1).reshape(-1, 2)
    out = {"z0": z0, "grid": g}
    for name, xi in (("strong", cfg.xi_strong), ("weak", cfg.xi_weak)):
        out[f"{name}/traj"] = D.iterate_denoiser(mix, xi, z0, cfg.n_iter)
        out[f"{name}/posterior"] = D.posterior_weights(mix, xi, grid)[:, 0].reshape(121, 121)
        out[f"{name}/lambda"] = jnp.asarray(3.0 / xi)
    lams = np.linspace(0.3, 3.0, cfg.n_lambda)
    out["lambdas"] = lams
    out["u_lambda"] = np.array([D.u_lambda(v) for v in lams])
    crit = D.iterate_denoiser(mix, 3.0, jnp.array([[0.0, 2.0]]), cfg.n_critical)
    idx = np.unique(np.logspace(0, np.log10(cfg.n_critical), 200).astype(int))
    out["critical_n"] = idx
    out["critical_u"] = np.abs(np.asarray(crit[idx, 0, 1])) / 3.0
    sub = D.iterate_denoiser(mix, 3.0 / cfg.lambda_sub, jnp.array([[0.0, 2.0]]), 200)
    out["sub_u"] = np.abs(np.asarray(sub[:, 0, 1])) / 3.0
    out["lambda_sub"] = np.asarray(cfg.lambda_sub)
    # every start after 200 steps below lambda = 1: collapsed to the midpoint
    out["sub_final"] = np.asarray(D.iterate_denoiser(mix, 3.0 / cfg.lambda_sub, z0, 200)[-1])
    # above lambda = 1: where each start ends, how far any iterate after the first step
    # lies off the axis z_1 = 0, and the largest |u_n| = |z_2| / 3 after the first step
    fin, off, umax = [], [], []
    for lam in cfg.limit_lambdas:
        tr = D.iterate_denoiser(mix, 3.0 / lam, z0, cfg.n_limit)
        fin.append(np.asarray(tr[-1]))
        off.append(float(jnp.max(jnp.abs(tr[1:, :, 0]))))
        # divided by 3 in NumPy: XLA may divide by a constant through its reciprocal
        umax.append(float(np.max(np.abs(np.asarray(tr[1:, :, 1]))) / 3.0))
    out.update(limit_lambdas=np.array(cfg.limit_lambdas, float), limit_final=np.array(fin),
               limit_off_axis=np.array(off), limit_max_u=np.array(umax),
               n_limit=np.asarray(cfg.n_limit))
    return out


register(Simulation(
    name="denoise-iterates",
    description="Figure 3 trajectories and the clustering transition u_lambda (Prop. 4.3).",
    config_cls=IteratesConfig,
    points=lambda cfg: [{"run": "iterates"}],
    run_point=_iterates_run,
    assemble=lambda cfg, pts, res: res[0],
    summary=lambda cfg, a: [
        f"strong separation lambda = {float(a['strong/lambda']):.2f}: u_lambda = "
        f"{D.u_lambda(float(a['strong/lambda'])):.6f}",
        f"weak separation lambda = {float(a['weak/lambda']):.2f}: collapse to the midpoint",
        f"lambda = 1 after {cfg.n_critical} steps: |u_n| / sqrt(3/(2n)) = "
        f"{a['critical_u'][-1] / np.sqrt(1.5 / a['critical_n'][-1]):.6f}",
    ],
))


#: floor of the phase diagram's colour scale: float64 round-off of f - f* (~1e-16 of O(1)
#: values) squares to ~1e-32, and the cells at round-off (two heads; one head at
#: gamma = xi) lie at 1e-32..1e-27, while the smallest excess above round-off in the quick
#: sweep is 6e-10; 1e-12 separates the two without hiding either.
PHASE_FLOOR = 1e-12


@dataclass(frozen=True, kw_only=True)
class SweepConfig(SimConfig):
    """Phase diagram over (xi/gamma, |m1 - m2|/xi) with gamma = 1, d = 2.

    Means ``m_{1,2} = (±D/2, 1)`` (equal norms, non-collinear), ``D = sep * xi``, pi = 1/2.
    """

    ratios: tuple[float, ...]
    seps: tuple[float, ...]
    starts: int
    gh_order: int


def sweep_problem(ratio: float, sep: float):
    xi = float(ratio)
    D_ = sep * xi
    m = jnp.array([[D_ / 2, 1.0], [-D_ / 2, 1.0]])
    return GaussianMixture.shared([0.5, 0.5], m, jnp.eye(2)), xi


def _sweep_point(cfg, point, key):
    mix, xi = sweep_problem(point["ratio"], point["sep"])
    s = 1.0 + xi**2
    init = (jnp.eye(2) / s, 0.5 * jnp.eye(2))  # the gamma = xi single head, as a start
    best = D.single_head_search(mix, xi, cfg.starts, key, order=cfg.gh_order, init=init).excess
    heads = D.two_head_construction(mix.means[0], mix.means[1], 1.0, xi)
    mz = D.noisy_mixture(mix, xi)
    two = D.excess_risk(lambda q: D.heads_output(mz, heads, q), mix, xi, cfg.gh_order)
    gap = D.linear_gap(mix, xi, order=cfg.gh_order)[0]
    return {"single": jnp.asarray(best), "two": two, "linear": gap}


def _sweep_axes(cfg):
    return {"ratio": [float(r) for r in cfg.ratios], "sep": [float(s) for s in cfg.seps]}


def _sweep_assemble(cfg, points, results):
    out = {"ratios": np.array(cfg.ratios), "seps": np.array(cfg.seps)}
    out.update(assemble_grid(points, results, _sweep_axes(cfg), ("single", "two", "linear")))
    return out


def _sweep_summary(cfg, a):
    i1 = int(np.argmin(np.abs(a["ratios"] - 1.0)))
    return [
        f"grid {len(cfg.ratios)} x {len(cfg.seps)} over xi/gamma in [{min(cfg.ratios)}, "
        f"{max(cfg.ratios)}], |m1-m2|/xi in [{min(cfg.seps)}, {max(cfg.seps)}]",
        f"two-head construction: max excess {a['two'].max():.2e}",
        f"best single head ({cfg.starts} random L-BFGS starts and the gamma = xi head): "
        f"max excess {a['single'].max():.3g}; on the gamma = xi row: "
        f"max {a['single'][i1].max():.2e}",
        f"linear attention gap: min {a['linear'].min():.3g}, max {a['linear'].max():.3g}",
        f"cells below the figure's floor {PHASE_FLOOR:.0e} (round-off): "
        + ", ".join(f"{k} {int(np.sum(a[k] < PHASE_FLOOR))}/{a[k].size}"
                    for k in ("single", "two", "linear"))
        + "; smallest value above it: "
        + f"{min(a[k][a[k] >= PHASE_FLOOR].min() for k in ('single', 'linear')):.2g}",
    ]


register(Simulation(
    name="denoise-sweep",
    description="Phase diagram: best single head, two heads and linear attention vs (xi/gamma, "
                "separation).",
    config_cls=SweepConfig,
    points=lambda cfg: grid(**_sweep_axes(cfg)),
    run_point=_sweep_point,
    assemble=_sweep_assemble,
    summary=_sweep_summary,
))
