"""Linear-attention ICL experiments (docs/topics/icl.md): theory curves with
pretraining simulations (ridge, exact test error, trials sharded over devices).

* ``icl-double-descent``: e_ICL against tau, ridgeless and ridge (divergence at tau = 1).
* ``icl-alpha``: e_ICL against alpha; non-monotone for a finite task pool.
* ``icl-gtask``: g_task against kappa for alpha in {6, 10, 20}, tau = 0.2 alpha, with dMMSE.
* ``icl-equivalence`` (in :mod:`.icl_equivalence`, with the nonlinear targets' helpers
  below): nonlinear single-index targets against the equivalent-linear theory.
* ``icl-finite-d``: simulation - theory against d (signed d x gap, weighted exponent).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import numpy as np

from .. import hermite, icl, stats
from ._base import SimConfig, Simulation, assemble_grid, grid, register

__all__ = ["DoubleDescentConfig", "AlphaConfig", "GtaskConfig", "FiniteDConfig", "EQUIV",
           "equivalent_moments", "effective_sizes", "nonlinear_errors"]


def padded_sizes(d, grid, at=None):
    """``(k_max, n_max)`` over a sweep's ``(alpha, tau, kappa)`` points: one compilation.
    With ``at`` (the point's own ``(alpha, tau, kappa)``), each size is padded only to the
    next power of two (at most to the sweep's largest): a few compilations per d, and a
    point with few prompts no longer solves the largest point's padded system (a sweep over
    tau at d = 32 ran every point with 4096 rows, most of them zeros)."""
    sz = [icl.sizes(d, a, t, k) for a, t, k in grid]
    k_max, n_max = max(s[1] for s in sz), max(s[2] for s in sz)
    if at is None:
        return k_max, n_max
    _, k, n = icl.sizes(d, *at)
    bucket = lambda v, cap: min(cap, 1 << (int(v) - 1).bit_length())   # noqa: E731
    return bucket(k, k_max), bucket(n, n_max)


def trial_errors(key, d, alpha, tau, kappa, rho, lam, trials, f=None, mom=None, pad=None,
                 scale=1.0, target=None):
    """e_ICL (and e_IDG) of ``trials`` pretraining runs, one jitted batch (sharded over
    devices); a nonlinear target ``f`` (or ``target``, the name of one of the equivalence's
    targets: one compilation for all of them) is evaluated with the exact nonlinear formula
    and ``mom`` (docs/topics/icl.md#the-nonlinearity-noise-equivalence)."""
    sel = {} if target is None else {"targets": _JAX_TARGETS, "target": TARGET_INDEX[target]}
    e1, e2, _, G = icl.g_task_trials(key, d, alpha=alpha, tau=tau, kappa=kappa, rho=rho,
                                     lam=lam, trials=trials, f=f, pad_to=pad, scale=scale,
                                     **sel)
    if mom is not None:
        ell = icl.sizes(d, alpha, tau, kappa)[0]
        e1 = nonlinear_errors(G, ell, {k: jax.numpy.asarray(v, float) for k, v in mom.items()
                                        if k in _MOMENTS})
    return {"e_icl": np.asarray(e1), "e_idg": np.asarray(e2)}


_MOMENTS = ("c1", "m2", "Ey2z2", "Ey3z", "Ey4", "c0", "rho_eff")


@partial(jax.jit, static_argnums=1)
def nonlinear_errors(G, ell, mom):
    """:func:`icl.test_error_nonlinear` of every fitted ``Gamma`` (one program per shape,
    the moments as data)."""
    return jax.vmap(lambda g: icl.test_error_nonlinear(g, ell, mom))(G)


# ------------------------------------------------- sweeps at several d (shared helpers) -

#: a simulated point is run only where the protocol's rounding (``l = round(alpha d)``,
#: ``k = floor(kappa d)``, ``n = round(tau d^2 / k) k``) keeps every ratio within this
#: relative distance of its nominal value; elsewhere (e.g. k close to tau d^2) the
#: point would sit at another tau than the curve it is drawn on.
SIZE_TOL = 0.05


def effective_sizes(d: int, alpha: float, tau: float, kappa: float):
    """``(l/d, n/d^2, k/d)`` that the simulator uses at dimension ``d`` (``k/d = inf`` for a
    fresh task per prompt), and whether each is within :data:`SIZE_TOL` of nominal."""
    ell, k, n = icl.sizes(d, alpha, tau, kappa)
    eff = (ell / d, n / d**2, kappa if np.isinf(kappa) else k / d)
    ok = all(np.isinf(v) or abs(e / v - 1) <= SIZE_TOL
             for e, v in zip(eff, (alpha, tau, kappa), strict=True))
    return eff, ok


def sweep_axes(cfg, series_name, series, x_name, xs):
    """The named axes (d, series, x) of a sweep; numbers as floats, names as they are."""
    val = lambda v: v if isinstance(v, str) else float(v)
    return {"d": [int(d) for d in cfg.ds], series_name: [val(s) for s in series],
            x_name: [val(x) for x in xs]}


def _sweep_points(cfg, series_name, series, x_name, xs, abc):
    """Points ``{d, series, x}`` whose sizes are within SIZE_TOL (``abc(s, x)`` gives the
    nominal ``(alpha, tau, kappa)``)."""
    return grid(**sweep_axes(cfg, series_name, series, x_name, xs),
                keep=lambda p: effective_sizes(p["d"], *abc(p[series_name], p[x_name]))[1])


def sweep_grid(cfg, points, res, series_name, series, x_name, xs, field):
    """Trials of ``field`` as an array (d, series, x, trials), NaN where not simulated."""
    return assemble_grid(points, res, sweep_axes(cfg, series_name, series, x_name, xs),
                         (field,), fill=np.nan)[field]


def gap_stats(out, sims, theory_at):
    """Mean, SE and the relative gap (sim - theory) / theory with its SE; the theory is
    evaluated at the simulated sizes (:func:`effective_sizes`)."""
    have = ~np.isnan(sims[..., 0])
    mean = np.full(sims.shape[:-1], np.nan)
    se = np.full(sims.shape[:-1], np.nan)
    mean[have], se[have] = stats.mean_se(sims[have], axis=-1)
    out.update(sim=sims, sim_mean=mean, sim_se=se, theory_at=theory_at,
               rel_gap=(mean - theory_at) / theory_at, rel_se=se / np.abs(theory_at))
    return out


def gap_summary(cfg, a, label):
    """Per d: mean and max |relative gap|, the points within 2 SE, and the ratio of the
    mean |gap| between successive d over the points simulated at both (O(1/d) predicts
    d_2/d_1)."""
    lines = []
    g_all = np.abs(a["rel_gap"])
    for i, d in enumerate(cfg.ds):
        g, se = a["rel_gap"][i], a["rel_se"][i]
        ok = ~np.isnan(g)
        within = int(np.sum(np.abs(g[ok]) <= 2 * se[ok]))
        line = (f"d = {d} ({cfg.trials} trials per point, {int(ok.sum())} points): {label} "
                f"relative gap (sim - theory)/theory mean |.| {np.mean(np.abs(g[ok])):.3f}, "
                f"max |.| {np.max(np.abs(g[ok])):.3f}, signed range "
                f"[{np.min(g[ok]):+.3f}, {np.max(g[ok]):+.3f}]; "
                f"{within}/{int(ok.sum())} within 2 SE of the theory")
        if i:
            both = ~np.isnan(g_all[i - 1]) & ok
            ratio = np.mean(g_all[i - 1][both]) / np.mean(g_all[i][both])
            line += (f"; mean |gap| ratio d = {cfg.ds[i - 1]} / d = {d} over the "
                     f"{int(both.sum())} common points: {ratio:.2f} "
                     f"(O(1/d): {d / cfg.ds[i - 1]:.2f})")
        lines.append(line)
    return lines


def log_distance_grid(lo: float, hi: float, n: int, closest: float = 1e-4):
    """A tau grid on both sides of 1 with log-spaced distances ``closest .. `` from 1, so
    that a divergence at tau = 1 is drawn (not cut at the nearest grid point)."""
    left = 1 - np.geomspace(closest, 1 - lo, n)[::-1]
    right = 1 + np.geomspace(closest, hi - 1, n)
    return np.concatenate([left, right])


# ---------------------------------------------------------------- double descent ------

@dataclass(frozen=True, kw_only=True)
class DoubleDescentConfig(SimConfig):
    ds: tuple[int, ...]
    alpha: float
    kappa: float
    rho: float
    lams: tuple[float, ...]
    taus: tuple[float, ...]
    trials: int


def _dd_abc(cfg):
    return lambda lam, tau: (cfg.alpha, tau, cfg.kappa)


def _dd_points(cfg):
    return _sweep_points(cfg, "lam", cfg.lams, "tau", cfg.taus, _dd_abc(cfg))


def _dd_point(cfg, p, key):
    pad = padded_sizes(p["d"], [(cfg.alpha, t, cfg.kappa) for t in cfg.taus],
                       at=(cfg.alpha, p["tau"], cfg.kappa))
    r = trial_errors(key, p["d"], cfg.alpha, p["tau"], cfg.kappa, cfg.rho, p["lam"], cfg.trials,
                     pad=pad)
    return {"e": r["e_icl"]}


def _dd_assemble(cfg, points, res):
    grid = log_distance_grid(0.1, 6.0, 90)
    out = {"tau_grid": grid, "taus": np.array(cfg.taus), "lams": np.array(cfg.lams),
           "ds": np.array(cfg.ds),
           "ridgeless": np.array([icl.e_icl_ridgeless(cfg.alpha, t, cfg.kappa, cfg.rho)
                                  for t in grid])}
    out["ridge"] = np.array([[icl.e_icl_ridge(cfg.alpha, t, cfg.kappa, cfg.rho, lam)
                              for t in grid] for lam in cfg.lams])
    sims = sweep_grid(cfg, points, res, "lam", cfg.lams, "tau", cfg.taus, "e")
    th = np.array([[[icl.e_icl_ridge(*effective_point(d, cfg.alpha, t, cfg.kappa), cfg.rho, lam)
                     for t in cfg.taus] for lam in cfg.lams] for d in cfg.ds])
    return gap_stats(out, sims, th)


def effective_point(d, alpha, tau, kappa):
    """The effective ``(alpha, tau, kappa)`` of the sizes a run at ``d`` simulates (the
    first of :func:`effective_sizes`), at which the theory is evaluated."""
    return effective_sizes(d, alpha, tau, kappa)[0]


def _dd_summary(cfg, a):
    i = int(np.argmax(a["ridgeless"]))
    g = a["tau_grid"]
    return [f"alpha = {cfg.alpha}, kappa = {cfg.kappa}, rho = {cfg.rho}, d = "
            f"{', '.join(map(str, cfg.ds))}; mean +- 2 SE over {cfg.trials} trials per point",
            f"theory grid: {g.size} taus, closest to tau = 1 at distance "
            f"{np.min(np.abs(g - 1)):.0e}"
            f"; ridgeless theory there: {a['ridgeless'][i]:.3g} (diverges as tau -> 1); ridge "
            + ", ".join(f"lambda = {lam:g}: max {a['ridge'][j].max():.3g} at tau = "
                        f"{g[int(np.argmax(a['ridge'][j]))]:.3f}"
                        for j, lam in enumerate(cfg.lams)),
            *gap_summary(cfg, a, "e_ICL")]


register(Simulation(
    name="icl-double-descent", description="e_ICL against tau: double descent and ridge.",
    config_cls=DoubleDescentConfig, points=_dd_points,
    run_point=_dd_point, assemble=_dd_assemble, summary=_dd_summary))


# ---------------------------------------------------------------- alpha ----------------

@dataclass(frozen=True, kw_only=True)
class AlphaConfig(SimConfig):
    ds: tuple[int, ...]
    tau: float
    kappas: tuple[float, ...]
    rho: float
    lam: float
    alphas: tuple[float, ...]
    trials: int


def _alpha_abc(cfg):
    return lambda kappa, alpha: (alpha, cfg.tau, kappa)


def _alpha_points(cfg):
    return _sweep_points(cfg, "kappa", cfg.kappas, "alpha", cfg.alphas, _alpha_abc(cfg))


def _alpha_point(cfg, p, key):
    # one padding for the sweep (its points differ little in size; bucketing them cost
    # more compilation than it saved: 12.3 against 10.6 s cold on one core)
    pad = padded_sizes(p["d"], [(a, cfg.tau, k) for a in cfg.alphas for k in cfg.kappas])
    return {"e": trial_errors(key, p["d"], p["alpha"], cfg.tau, p["kappa"], cfg.rho, cfg.lam,
                         cfg.trials, pad=pad)["e_icl"]}


def _alpha_assemble(cfg, points, res):
    lo, hi = np.log10(min(cfg.alphas)) - 0.3, np.log10(max(cfg.alphas)) + 0.3
    grid = np.logspace(lo, hi, 120)
    out = {"alpha_grid": grid, "alphas": np.array(cfg.alphas), "kappas": np.array(cfg.kappas),
           "ds": np.array(cfg.ds),
           "theory": np.array([[icl.e_icl_ridge(a, cfg.tau, k, cfg.rho, cfg.lam) for a in grid]
                               for k in cfg.kappas])}
    sims = sweep_grid(cfg, points, res, "kappa", cfg.kappas, "alpha", cfg.alphas, "e")
    th = np.array([[[icl.e_icl_ridge(*effective_point(d, a, cfg.tau, k), cfg.rho, cfg.lam)
                     for a in cfg.alphas] for k in cfg.kappas] for d in cfg.ds])
    return gap_stats(out, sims, th)


def _alpha_summary(cfg, a):
    lines = [f"tau = {cfg.tau}, rho = {cfg.rho}, lambda = {cfg.lam:g}, d = "
             f"{', '.join(map(str, cfg.ds))}; mean +- 2 SE over {cfg.trials} trials per point"]
    for i, k in enumerate(a["kappas"]):
        th = a["theory"][i]
        j = int(np.argmin(th))
        shape = (f"non-monotone: rises by {th[-1] / th[j] - 1:.0%} from its minimum to "
                 f"alpha = {a['alpha_grid'][-1]:.3g}") if np.any(np.diff(th) > 0) else \
            "monotone decreasing"
        sm = a["sim_mean"][:, i]
        sims = "; ".join(
            f"d = {d}: sim minimum at alpha = {a['alphas'][int(np.nanargmin(sm[m]))]:g}, "
            f"last / min = {sm[m, -1] / np.nanmin(sm[m]):.2f}" for m, d in enumerate(cfg.ds))
        lines.append(f"kappa = {k}: theory minimum at alpha = {a['alpha_grid'][j]:.2f} "
                     f"(e = {th[j]:.3f}), {shape}; {sims}")
    return lines + gap_summary(cfg, a, "e_ICL")


register(Simulation(
    name="icl-alpha", description="e_ICL against alpha (non-monotone for finite kappa).",
    config_cls=AlphaConfig, points=_alpha_points,
    run_point=_alpha_point, assemble=_alpha_assemble, summary=_alpha_summary))


# ---------------------------------------------------------------- g_task ---------------

@dataclass(frozen=True, kw_only=True)
class GtaskConfig(SimConfig):
    ds: tuple[int, ...]
    alphas: tuple[float, ...]
    kappas: tuple[float, ...]
    rho: float
    lam: float
    trials: int
    dmmse_draws: int


def _gtask_abc(cfg):
    return lambda alpha, kappa: (alpha, 0.2 * alpha, kappa)


def _gtask_points(cfg):
    return _sweep_points(cfg, "alpha", cfg.alphas, "kappa", cfg.kappas, _gtask_abc(cfg))


def _gtask_point(cfg, p, key):
    d, a, k = p["d"], p["alpha"], p["kappa"]
    pad = padded_sizes(d, [(al, 0.2 * al, kk) for al in cfg.alphas for kk in cfg.kappas
                           if effective_sizes(d, al, 0.2 * al, kk)[1]])
    r = trial_errors(key, d, a, 0.2 * a, k, cfg.rho, cfg.lam, cfg.trials, pad=pad)
    out = {"g": r["e_icl"] - r["e_idg"]}
    if d == max(cfg.ds):   # dMMSE (no d -> inf theory to compare with): the largest d only
        ell, kk, _ = icl.sizes(d, a, 0.2 * a, k)
        pool = icl.sample_pool(jax.random.fold_in(key, 99), d, pad[0])
        e1, s1 = icl.dmmse_error(jax.random.fold_in(key, 100), pool, ell, cfg.rho,
                                 draws=cfg.dmmse_draws, test="icl", k=kk)
        e2, s2 = icl.dmmse_error(jax.random.fold_in(key, 101), pool, ell, cfg.rho,
                                 draws=cfg.dmmse_draws, test="idg", k=kk)
        out["dmmse"] = np.array([e1 - e2, np.hypot(s1, s2)])
    return out


def _gtask_assemble(cfg, points, res):
    lo, hi = np.log10(min(cfg.kappas)) - 0.15, np.log10(max(cfg.kappas)) + 0.3
    grid = np.logspace(lo, hi, 120)
    out = {"kappa_grid": grid, "kappas": np.array(cfg.kappas), "alphas": np.array(cfg.alphas),
           "ds": np.array(cfg.ds),
           "theory": np.array([[icl.g_task_ridgeless(a, 0.2 * a, k, cfg.rho) for k in grid]
                               for a in cfg.alphas])}
    sims = sweep_grid(cfg, points, res, "alpha", cfg.alphas, "kappa", cfg.kappas, "g")
    th = np.array([[[icl.g_task_ridgeless(*effective_point(d, a, 0.2 * a, k), cfg.rho)
                     for k in cfg.kappas] for a in cfg.alphas] for d in cfg.ds])
    dm = np.full((len(cfg.alphas), len(cfg.kappas), 2), np.nan)
    for p, r in zip(points, res, strict=True):
        if "dmmse" in r:
            dm[list(cfg.alphas).index(p["alpha"]), list(cfg.kappas).index(p["kappa"])] = \
                r["dmmse"]
    out.update(dmmse_mean=dm[..., 0], dmmse_se=dm[..., 1], dmmse_d=np.array(max(cfg.ds)))
    return gap_stats(out, sims, th)


def _gtask_summary(cfg, a):
    lines = [f"tau = 0.2 alpha, rho = {cfg.rho}, lambda = {cfg.lam:g}, d = "
             f"{', '.join(map(str, cfg.ds))}; mean +- 2 SE over {cfg.trials} trials per point; "
             f"dMMSE at d = {max(cfg.ds)}, {cfg.dmmse_draws} test prompts each for ICL and IDG"]
    fmt = lambda v: ", ".join("-" if np.isnan(m) else f"{m:.3g}" for m in v)
    for i, al in enumerate(a["alphas"]):
        th = np.interp(np.log(a["kappas"]), np.log(a["kappa_grid"]), a["theory"][i])
        lines.append(f"alpha = {al:g} (kappa = {fmt(a['kappas'])}): theory (d->inf) {fmt(th)}")
        for m, d in enumerate(cfg.ds):
            lines.append(f"    d = {d}: g_task sim {fmt(a['sim_mean'][m, i])}")
        lines.append(f"    dMMSE (d = {max(cfg.ds)}): {fmt(a['dmmse_mean'][i])}")
    skipped = [f"d = {d}, alpha = {al:g}, kappa = {k:g}" for d in cfg.ds for al in cfg.alphas
               for k in cfg.kappas if not effective_sizes(d, al, 0.2 * al, k)[1]]
    if skipped:
        lines.append(f"not simulated (rounding n = round(tau d^2/k) k moves tau or kappa by more "
                     f"than {SIZE_TOL:.0%}): " + "; ".join(skipped))
    return lines + gap_summary(cfg, a, "g_task")


register(Simulation(
    name="icl-gtask", description="Task-generalisation gap against kappa, with dMMSE.",
    config_cls=GtaskConfig, points=_gtask_points,
    run_point=_gtask_point, assemble=_gtask_assemble, summary=_gtask_summary))


# ---------------------------------------------------------------- equivalence ----------

EQUIV = {"relu": ((0.0,), "relu"), "sign": ((0.0,), "sign"), "tanh": (None, "tanh"),
         "erf": (None, "erf")}


_JAX_FS = {"relu": lambda z: jax.numpy.maximum(z, 0.0), "sign": jax.numpy.sign,
           "tanh": jax.numpy.tanh, "erf": jax.scipy.special.erf}


_JAX_TARGETS = tuple(_JAX_FS.values())           # one compiled program for every target
TARGET_INDEX = {name: i for i, name in enumerate(_JAX_FS)}


def _np_and_jax(name):
    from scipy.special import erf

    return {"relu": (lambda z: np.maximum(z, 0.0), _JAX_FS["relu"]),
            "sign": (np.sign, _JAX_FS["sign"]), "tanh": (np.tanh, _JAX_FS["tanh"]),
            "erf": (erf, _JAX_FS["erf"])}[name]


def equivalent_moments(name: str, rho: float) -> dict:
    """Hermite data of ``y = f(z) + eps`` (:func:`gmtheory.hermite.label_moments`)."""
    return hermite.label_moments(_np_and_jax(name)[0], rho, kinks=EQUIV[name][0])


# ---------------------------------------------------------------- finite d -------------

@dataclass(frozen=True, kw_only=True)
class FiniteDConfig(SimConfig):
    ds: tuple[int, ...]
    alpha: float
    tau: float
    kappa: float
    rho: float
    lam: float
    trials: int


def _fd_point(cfg, p, key):
    return {"e": trial_errors(key, p["d"], cfg.alpha, cfg.tau, cfg.kappa, cfg.rho, cfg.lam,
                         cfg.trials)["e_icl"]}


def _fd_assemble(cfg, points, res):
    th = icl.e_icl_ridge(cfg.alpha, cfg.tau, cfg.kappa, cfg.rho, cfg.lam)
    e = np.array([r["e"] for r in res])
    sim_mean, sim_se = stats.mean_se(e, axis=1)
    gap = sim_mean - th                  # signed; the theory is exact, so its SE is sim_se
    ds = np.array(cfg.ds)
    # the exponent of |gap| in d, each point weighted by its Monte Carlo SE (the slope's SE
    # is the one those SEs imply: stats.fit_loglog_weighted)
    fit = stats.fit_loglog_weighted(ds, np.abs(gap), sim_se)
    return {"ds": ds, "theory": np.asarray(th), "sim_mean": sim_mean, "sim_se": sim_se,
            "gap": gap, "d_gap": ds * gap, "d_gap_se": ds * sim_se,
            "slope": np.asarray(fit.slope), "slope_stderr": np.asarray(fit.stderr),
            "slope_r2": np.asarray(fit.r2), "trials": np.asarray(cfg.trials)}


register(Simulation(
    name="icl-finite-d", description="simulation - theory against d: the O(1/d) law.",
    config_cls=FiniteDConfig,
    points=lambda cfg: [{"d": int(d)} for d in cfg.ds],
    run_point=_fd_point, assemble=_fd_assemble,
    summary=lambda cfg, a: [f"alpha = tau = {cfg.alpha}, kappa = {cfg.kappa}, rho = {cfg.rho}, "
                            f"lambda = {cfg.lam:g}; theory {float(a['theory']):.4f}",
                            "sim - theory: " + ", ".join(f"d={d}: {g:+.4f}" for d, g in
                                                          zip(a["ds"], a["gap"], strict=True)),
                            "d (sim - theory): " + ", ".join(
                                f"d={d}: {g:+.3f}+-{s:.3f}" for d, g, s in
                                zip(a["ds"], a["d_gap"], a["d_gap_se"], strict=True)),
                            f"weighted fit of |gap| against d: slope {float(a['slope']):.3f} "
                            f"+- {float(a['slope_stderr']):.3f} (O(1/d) predicts -1)"]))
