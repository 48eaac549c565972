"""Linear-attention ICL experiments (``linear-attention-icl.md``): theory curves with
pretraining simulations (ridge, exact test error, trials sharded over devices).

* ``icl-double-descent``: e_ICL against tau, ridgeless and ridge (divergence at tau = 1).
* ``icl-alpha``: e_ICL against alpha; non-monotone for a finite task pool.
* ``icl-gtask``: g_task against kappa for alpha in {6, 10, 20}, tau = 0.2 alpha, with dMMSE.
* ``icl-equivalence``: nonlinear single-index targets against the equivalent-linear theory.
* ``icl-finite-d``: |simulation - theory| against d.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import numpy as np

from .. import hermite, icl, stats
from ._base import Simulation, register

__all__ = ["DoubleDescentConfig", "AlphaConfig", "GtaskConfig", "EquivalenceConfig",
           "FiniteDConfig", "EQUIV"]


def _pad(d, grid):
    """``(k_max, n_max)`` over a sweep's ``(alpha, tau, kappa)`` points: one compilation."""
    sz = [icl.sizes(d, a, t, k) for a, t, k in grid]
    return max(s[1] for s in sz), max(s[2] for s in sz)


def _trials(key, d, alpha, tau, kappa, rho, lam, trials, f=None, mom=None, pad=None,
            scale=1.0):
    """e_ICL (and e_IDG) of ``trials`` pretraining runs, one jitted batch (sharded over
    devices); a nonlinear target ``f`` is evaluated with the §5 formula and ``mom``."""
    e1, e2, _, G = icl.g_task_trials(key, d, alpha, tau, kappa, rho, lam, trials, f=f,
                                     pad_to=pad, scale=scale)
    if mom is not None:
        ell = icl.sizes(d, alpha, tau, kappa)[0]
        e1 = jax.vmap(lambda g: icl.test_error_nonlinear(g, ell, mom))(G)
    return {"e_icl": np.asarray(e1), "e_idg": np.asarray(e2)}


# ---------------------------------------------------------------- double descent ------

@dataclass(frozen=True)
class DoubleDescentConfig:
    seed: int = 0
    d: int = 16
    alpha: float = 1.0
    kappa: float = float("inf")
    rho: float = 0.1
    lams: tuple[float, ...] = (1e-4, 1e-2, 1e-1)
    taus: tuple[float, ...] = (0.25, 0.5, 0.8, 1.25, 2.0, 4.0)
    trials: int = 4

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def paper(cls):
        return cls(d=48, trials=10, taus=(0.2, 0.4, 0.6, 0.8, 0.9, 1.1, 1.25, 1.5, 2, 3, 5))


def _dd_point(cfg, p, key):
    pad = _pad(cfg.d, [(cfg.alpha, t, cfg.kappa) for t in cfg.taus])
    r = _trials(key, cfg.d, cfg.alpha, p["tau"], cfg.kappa, cfg.rho, p["lam"], cfg.trials,
                pad=pad)
    return {"e": r["e_icl"]}


def _dd_assemble(cfg, points, res):
    grid = np.concatenate([np.linspace(0.05, 0.97, 60), np.linspace(1.03, 6, 80)])
    out = {"tau_grid": grid, "taus": np.array(cfg.taus), "lams": np.array(cfg.lams),
           "ridgeless": np.array([icl.e_icl_ridgeless(cfg.alpha, t, cfg.kappa, cfg.rho)
                                  for t in grid])}
    out["ridge"] = np.array([[icl.e_icl_ridge(cfg.alpha, t, cfg.kappa, cfg.rho, lam)
                              for t in grid] for lam in cfg.lams])
    sims = np.array([r["e"] for r in res]).reshape(len(cfg.lams), len(cfg.taus), -1)
    out["sim_mean"], out["sim_se"] = stats.mean_se(sims, axis=-1)
    return out


def _dd_summary(cfg, a):
    i = int(np.argmax(a["ridgeless"]))
    return [f"alpha = {cfg.alpha}, kappa = {cfg.kappa}, rho = {cfg.rho}, d = {cfg.d}, "
            f"{cfg.trials} trials per point",
            f"ridgeless theory peaks at tau = {a['tau_grid'][i]:.2f} "
            f"(e = {a['ridgeless'][i]:.3g}); "
            f"ridge lambda = {cfg.lams[-1]:g} max e = {a['ridge'][-1].max():.3g}",
            "max |sim - ridge theory| / theory over points: "
            f"{np.max(np.abs(a['sim_mean'] - _at(a, 'ridge')) / _at(a, 'ridge')):.3f}"]


def _at(a, name):
    """Theory of ``name`` at the simulated taus (one row per lambda)."""
    cfg_l = a["lams"]
    return np.array([np.interp(a["taus"], a["tau_grid"], a[name][i]) for i in range(len(cfg_l))])


register(Simulation(
    name="icl-double-descent", description="e_ICL against tau: double descent and ridge.",
    config_cls=DoubleDescentConfig,
    points=lambda cfg: [{"lam": float(lam), "tau": float(t)} for lam in cfg.lams
                        for t in cfg.taus],
    run_point=_dd_point, assemble=_dd_assemble, summary=_dd_summary))


# ---------------------------------------------------------------- alpha ----------------

@dataclass(frozen=True)
class AlphaConfig:
    seed: int = 0
    d: int = 16
    tau: float = 1.5
    kappas: tuple[float, ...] = (0.5, float("inf"))
    rho: float = 0.1
    lam: float = 1e-4
    alphas: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    trials: int = 4

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def paper(cls):
        return cls(d=48, trials=10, alphas=(0.1, 0.2, 0.4, 0.7, 1, 1.5, 2, 3, 4, 6, 8, 12))


def _alpha_point(cfg, p, key):
    pad = _pad(cfg.d, [(a, cfg.tau, k) for a in cfg.alphas for k in cfg.kappas])
    return {"e": _trials(key, cfg.d, p["alpha"], cfg.tau, p["kappa"], cfg.rho, cfg.lam,
                         cfg.trials, pad=pad)["e_icl"]}


def _alpha_assemble(cfg, points, res):
    grid = np.logspace(-1.3, 1.2, 80)
    sims = np.array([r["e"] for r in res]).reshape(len(cfg.kappas), len(cfg.alphas), -1)
    sim_mean, sim_se = stats.mean_se(sims, axis=-1)
    return {"alpha_grid": grid, "alphas": np.array(cfg.alphas), "kappas": np.array(cfg.kappas),
            "theory": np.array([[icl.e_icl_ridge(a, cfg.tau, k, cfg.rho, cfg.lam) for a in grid]
                                for k in cfg.kappas]),
            "sim_mean": sim_mean, "sim_se": sim_se}


def _alpha_summary(cfg, a):
    lines = [f"tau = {cfg.tau}, rho = {cfg.rho}, lambda = {cfg.lam:g}, d = {cfg.d}"]
    for i, k in enumerate(a["kappas"]):
        th = a["theory"][i]
        j = int(np.argmin(th))
        shape = "non-monotone" if np.any(np.diff(th) > 0) else "monotone"
        lines.append(f"kappa = {k}: theory minimum at alpha = {a['alpha_grid'][j]:.2f} "
                     f"(e = {th[j]:.3f}); {shape}")
    return lines


register(Simulation(
    name="icl-alpha", description="e_ICL against alpha (non-monotone for finite kappa).",
    config_cls=AlphaConfig,
    points=lambda cfg: [{"kappa": float(k), "alpha": float(a)} for k in cfg.kappas
                        for a in cfg.alphas],
    run_point=_alpha_point, assemble=_alpha_assemble, summary=_alpha_summary))


# ---------------------------------------------------------------- g_task ---------------

@dataclass(frozen=True)
class GtaskConfig:
    seed: int = 0
    d: int = 10
    alphas: tuple[float, ...] = (6.0, 10.0, 20.0)
    kappas: tuple[float, ...] = (0.2, 0.5, 1.0, 2.0, 4.0, 16.0)
    rho: float = 0.01
    lam: float = 1e-6
    trials: int = 6
    dmmse_draws: int = 400

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def paper(cls):
        return cls(d=32, trials=20, dmmse_draws=1000,
                   kappas=(0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.6, 2.0, 4.0, 8.0, 16.0, 32.0))


def _gtask_point(cfg, p, key):
    a, k = p["alpha"], p["kappa"]
    pad = _pad(cfg.d, [(al, 0.2 * al, kk) for al in cfg.alphas for kk in cfg.kappas])
    r = _trials(key, cfg.d, a, 0.2 * a, k, cfg.rho, cfg.lam, cfg.trials, pad=pad)
    ell, kk, _ = icl.sizes(cfg.d, a, 0.2 * a, k)
    pool = icl.sample_pool(jax.random.fold_in(key, 99), cfg.d, pad[0])
    e1, s1 = icl.dmmse_error(jax.random.fold_in(key, 100), pool, ell, cfg.rho,
                             cfg.dmmse_draws, "icl", kk)
    e2, s2 = icl.dmmse_error(jax.random.fold_in(key, 101), pool, ell, cfg.rho,
                             cfg.dmmse_draws, "idg", kk)
    return {"g": r["e_icl"] - r["e_idg"], "dmmse": np.array([e1 - e2, np.hypot(s1, s2)])}


def _gtask_assemble(cfg, points, res):
    grid = np.logspace(-0.8, 1.6, 60)
    shape = (len(cfg.alphas), len(cfg.kappas))
    g = np.array([r["g"] for r in res]).reshape(*shape, -1)
    dm = np.array([r["dmmse"] for r in res]).reshape(*shape, 2)
    sim_mean, sim_se = stats.mean_se(g, axis=-1)
    return {"kappa_grid": grid, "kappas": np.array(cfg.kappas), "alphas": np.array(cfg.alphas),
            "theory": np.array([[icl.g_task_ridgeless(a, 0.2 * a, k, cfg.rho) for k in grid]
                                for a in cfg.alphas]),
            "sim_mean": sim_mean, "sim_se": sim_se,
            "dmmse_mean": dm[..., 0], "dmmse_se": dm[..., 1]}


def _gtask_summary(cfg, a):
    lines = [f"tau = 0.2 alpha, rho = {cfg.rho}, lambda = {cfg.lam:g}, d = {cfg.d}, "
             f"{cfg.trials} trials; dMMSE {cfg.dmmse_draws} draws"]
    for i, al in enumerate(a["alphas"]):
        th = np.interp(np.log(a["kappas"]), np.log(a["kappa_grid"]), a["theory"][i])
        fmt = lambda v: ", ".join(f"{m:.3g}" for m in v)
        lines.append(f"alpha = {al:g}: g_task sim {fmt(a['sim_mean'][i])} | theory (d->inf) "
                     f"{fmt(th)} | dMMSE {fmt(a['dmmse_mean'][i])}")
    return lines


register(Simulation(
    name="icl-gtask", description="Task-generalisation gap against kappa, with dMMSE.",
    config_cls=GtaskConfig,
    points=lambda cfg: [{"alpha": float(a), "kappa": float(k)} for a in cfg.alphas
                        for k in cfg.kappas],
    run_point=_gtask_point, assemble=_gtask_assemble, summary=_gtask_summary))


# ---------------------------------------------------------------- equivalence ----------

EQUIV = {"relu": ((0.0,), "relu"), "sign": ((0.0,), "sign"), "tanh": (None, "tanh"),
         "erf": (None, "erf")}


_JAX_FS = {"relu": lambda z: jax.numpy.maximum(z, 0.0), "sign": jax.numpy.sign,
           "tanh": jax.numpy.tanh, "erf": jax.scipy.special.erf}


def _np_and_jax(name):
    from scipy.special import erf

    return {"relu": (lambda z: np.maximum(z, 0.0), _JAX_FS["relu"]),
            "sign": (np.sign, _JAX_FS["sign"]), "tanh": (np.tanh, _JAX_FS["tanh"]),
            "erf": (erf, _JAX_FS["erf"])}[name]


def equivalent_moments(name: str, rho: float) -> dict:
    """Hermite data of ``y = f(z) + eps`` (:func:`gmtheory.hermite.label_moments`)."""
    return hermite.label_moments(_np_and_jax(name)[0], rho, kinks=EQUIV[name][0])


@dataclass(frozen=True)
class EquivalenceConfig:
    seed: int = 0
    d: int = 24
    alpha: float = 2.0
    kappa: float = float("inf")
    rho: float = 0.1
    lam: float = 1e-3
    taus: tuple[float, ...] = (0.5, 2.0, 4.0)
    fs: tuple[str, ...] = ("relu", "sign", "tanh", "erf")
    trials: int = 3

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def paper(cls):
        return cls(d=64, trials=8, taus=(0.3, 0.6, 0.8, 1.5, 2.0, 3.0, 5.0))


def _eq_point(cfg, p, key):
    name = p["f"]
    mom = equivalent_moments(name, cfg.rho)
    _, fj = _np_and_jax(name)
    c1 = mom["c1"]
    lin = {"c1": c1, "m2": mom["m2"], "Ey2z2": 3 * c1**2 + mom["rho_eff"],
           "Ey3z": 3 * c1 * mom["m2"], "Ey4": 3 * mom["m2"] ** 2}
    pad = _pad(cfg.d, [(cfg.alpha, t, cfg.kappa) for t in cfg.taus])
    nl = _trials(key, cfg.d, cfg.alpha, p["tau"], cfg.kappa, cfg.rho, cfg.lam, cfg.trials,
                 f=fj, mom=mom, pad=pad)["e_icl"]
    # the equivalent linear target c1 z + N(0, rho_eff), sampled exactly (O(1) context)
    eq = _trials(key, cfg.d, cfg.alpha, p["tau"], cfg.kappa, mom["rho_eff"], cfg.lam,
                 cfg.trials, mom=lin, pad=pad, scale=c1)["e_icl"]
    return {"nonlinear": nl, "equivalent": eq}


def _eq_assemble(cfg, points, res):
    grid = np.concatenate([np.linspace(0.1, 0.95, 40), np.linspace(1.05, 5.5, 60)])
    out = {"tau_grid": grid, "taus": np.array(cfg.taus)}
    for i, name in enumerate(cfg.fs):
        mom = equivalent_moments(name, cfg.rho)
        c1 = mom["c1"]
        out[f"{name}_theory"] = np.array([c1**2 * icl.e_icl_ridge(
            cfg.alpha, t, cfg.kappa, mom["rho_eff"] / c1**2, cfg.lam / c1**2) for t in grid])
        out[f"{name}_hermite"] = np.array([mom["c0"], c1, mom["m2"], mom["rho_eff"]])
        rows = res[i * len(cfg.taus):(i + 1) * len(cfg.taus)]
        for k in ("nonlinear", "equivalent"):
            v = np.array([r[k] for r in rows])
            out[f"{name}_{k}_mean"], out[f"{name}_{k}_se"] = stats.mean_se(v, axis=1)
    return out


def _eq_summary(cfg, a):
    lines = [f"alpha = {cfg.alpha}, kappa = {cfg.kappa}, rho = {cfg.rho}, lambda = "
             f"{cfg.lam:g}, d = {cfg.d}, {cfg.trials} trials"]
    for name in cfg.fs:
        c0, c1, m2, re = a[f"{name}_hermite"]
        th = np.interp(a["taus"], a["tau_grid"], a[f"{name}_theory"])
        gap = np.abs(a[f"{name}_nonlinear_mean"] - a[f"{name}_equivalent_mean"]) / \
            a[f"{name}_equivalent_mean"]
        lines.append(f"{name}: c0 = {c0:.3f}, c1 = {c1:.3f}, rho_eff = {re:.3f}; nonlinear vs "
                     f"equivalent-linear sim: max rel. gap {gap.max():.3f}; nonlinear vs "
                     f"theory: max rel. gap "
                     f"{np.max(np.abs(a[f'{name}_nonlinear_mean'] - th) / th):.3f}")
    return lines


register(Simulation(
    name="icl-equivalence",
    description="Nonlinear single-index targets vs the equivalent linear model.",
    config_cls=EquivalenceConfig,
    points=lambda cfg: [{"f": f, "tau": float(t)} for f in cfg.fs for t in cfg.taus],
    run_point=_eq_point, assemble=_eq_assemble, summary=_eq_summary))


# ---------------------------------------------------------------- finite d -------------

@dataclass(frozen=True)
class FiniteDConfig:
    seed: int = 0
    ds: tuple[int, ...] = (8, 16, 32)
    alpha: float = 2.0
    tau: float = 2.0
    kappa: float = 1.0
    rho: float = 0.1
    lam: float = 1e-3
    trials: int = 8

    @classmethod
    def quick(cls):
        return cls()

    @classmethod
    def paper(cls):
        return cls(ds=(8, 16, 32, 64, 96), trials=16)


def _fd_point(cfg, p, key):
    return {"e": _trials(key, p["d"], cfg.alpha, cfg.tau, cfg.kappa, cfg.rho, cfg.lam,
                         cfg.trials)["e_icl"]}


def _fd_assemble(cfg, points, res):
    th = icl.e_icl_ridge(cfg.alpha, cfg.tau, cfg.kappa, cfg.rho, cfg.lam)
    e = np.array([r["e"] for r in res])
    sim_mean, sim_se = stats.mean_se(e, axis=1)
    gap = sim_mean - th
    fit = stats.fit_loglog(cfg.ds, np.abs(gap))
    return {"ds": np.array(cfg.ds), "theory": np.asarray(th), "sim_mean": sim_mean,
            "sim_se": sim_se, "gap": gap, "slope": np.asarray(fit.slope),
            "slope_stderr": np.asarray(fit.stderr), "slope_r2": np.asarray(fit.r2)}


register(Simulation(
    name="icl-finite-d", description="|simulation - theory| against d.",
    config_cls=FiniteDConfig,
    points=lambda cfg: [{"d": int(d)} for d in cfg.ds],
    run_point=_fd_point, assemble=_fd_assemble,
    summary=lambda cfg, a: [f"alpha = tau = {cfg.alpha}, kappa = {cfg.kappa}, rho = {cfg.rho}, "
                            f"lambda = {cfg.lam:g}; theory {float(a['theory']):.4f}",
                            "sim - theory: " + ", ".join(f"d={d}: {g:+.4f}" for d, g in
                                                          zip(a["ds"], a["gap"], strict=True)),
                            f"fitted slope of |gap| against d: {float(a['slope']):.2f} "
                            f"+- {float(a.get('slope_stderr', np.nan)):.2f} "
                            "(O(1/d) predicts -1)"]))
