"""``icl-equivalence``: nonlinear single-index targets ``y = f(x^T w) + eps`` pretrained
beside their equivalent linear targets ``c1 z + N(0, rho_eff)`` (same pools and queries),
against the equivalence's theory ``c1^2 e_ridge(rho_eff / c1^2, lambda / c1^2)``
(:func:`gmtheory.hermite.equivalence_error`), over tau at two d, with a ridge sweep near
tau = 1 for the rescaling of lambda (docs/topics/icl.md#the-nonlinearity-noise-equivalence).
Checks icl.05 and icl.10 read this run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import hermite, stats
from ._base import SimConfig, Simulation, assemble_grid, grid, register
from .icl_sims import (
    TARGET_INDEX,
    effective_point,
    effective_sizes,
    equivalent_moments,
    gap_stats,
    gap_summary,
    log_distance_grid,
    padded_sizes,
    sweep_axes,
    sweep_grid,
    trial_errors,
)

__all__ = ["EquivalenceConfig"]


@dataclass(frozen=True, kw_only=True)
class EquivalenceConfig(SimConfig):
    ds: tuple[int, ...]
    alpha: float
    kappa: float
    rho: float
    lam: float
    taus: tuple[float, ...]
    fs: tuple[str, ...]
    trials: int
    lams: tuple[float, ...]    # the ridge sweep (c1^2 rescaling of lambda)
    lam_tau: float                         # ... at one tau near the peak at tau = 1
    lam_fs: tuple[str, ...]    # ... for these targets, at every d


def _lam_axes(cfg):
    return {"d": [int(d) for d in cfg.ds], "f": list(cfg.lam_fs),
            "lam": [float(v) for v in cfg.lams]}


def _eq_points(cfg):
    unknown = sorted(set(cfg.lam_fs) - set(cfg.fs) - set(TARGET_INDEX))
    if unknown:
        raise ValueError(f"lam_fs: unknown target {unknown[0]!r}; choose from "
                         f"{sorted(TARGET_INDEX)}.")
    if any(not v > 0 for v in cfg.lams) or not (cfg.lam_tau > 0 and cfg.lam_tau != 1):
        raise ValueError(f"lams, lam_tau: the ridge sweep needs lambda > 0 and tau > 0, "
                         f"tau != 1; got lams = {list(cfg.lams)}, lam_tau = {cfg.lam_tau}.")
    main = grid(**sweep_axes(cfg, "f", cfg.fs, "tau", cfg.taus),
                keep=lambda p: effective_sizes(p["d"], cfg.alpha, p["tau"], cfg.kappa)[1])
    # the ridge sweep: one tau near 1, several lambda (points carry "lam")
    ok = lambda p: effective_sizes(p["d"], cfg.alpha, cfg.lam_tau, cfg.kappa)[1]
    return main + [{**p, "tau": float(cfg.lam_tau)} for p in grid(**_lam_axes(cfg), keep=ok)]


def _eq_point(cfg, p, key):
    name, d = p["f"], p["d"]
    mom = equivalent_moments(name, cfg.rho)
    c1 = mom["c1"]
    lin = {"c1": c1, "m2": mom["m2"], "Ey2z2": 3 * c1**2 + mom["rho_eff"],
           "Ey3z": 3 * c1 * mom["m2"], "Ey4": 3 * mom["m2"] ** 2}
    lam = p.get("lam", cfg.lam)
    # one padding per power of two of the prompt count, for the main sweep and the ridge
    # sweep alike: a few programs per d and target kind, no point padded 8x
    pad = padded_sizes(d, [(cfg.alpha, t, cfg.kappa) for t in (*cfg.taus, cfg.lam_tau)],
                       at=(cfg.alpha, p["tau"], cfg.kappa))
    nl = trial_errors(key, d, cfg.alpha, p["tau"], cfg.kappa, cfg.rho, lam, cfg.trials,
                      target=name, mom=mom, pad=pad)["e_icl"]
    # the equivalent linear target c1 z + N(0, rho_eff), sampled exactly (O(1) context)
    eq = trial_errors(key, d, cfg.alpha, p["tau"], cfg.kappa, mom["rho_eff"], lam,
                      cfg.trials, mom=lin, pad=pad, scale=c1)["e_icl"]
    return {"nonlinear": nl, "equivalent": eq}


def _eq_theory(cfg, mom, alpha, tau, lam=None, rescale=True):
    """The equivalence's prediction ``c1^2 e_ridge(alpha, tau, kappa, rho_eff / c1^2,
    lam / c1^2)``: the nonlinear target is ``c1`` times a linear target of noise ``rho'``,
    and its ridge problem is that target's with ``lam / c1^2`` (up to the last column of
    Gamma, an O(1/d) share).  ``rescale=False``: ``lam`` not rescaled, the alternative the
    ridge sweep tests against."""
    lam = cfg.lam if lam is None else lam
    return hermite.equivalence_error(mom, alpha, tau, cfg.kappa, lam, rescale_lam=rescale)


def _lam_sweep(cfg, points, res, ds):
    """The ridge sweep's arrays (d, f, lam[, trials]): simulated errors, the rescaled and
    the unrescaled theory at the simulated sizes, and their d -> inf extrapolations."""
    axes = _lam_axes(cfg)
    if not points:                      # no ridge sweep (lams = [] or no size fits)
        return {}
    sims = assemble_grid(points, res, axes, ("nonlinear", "equivalent"), fill=np.nan)
    moms = [equivalent_moments(name, cfg.rho) for name in cfg.lam_fs]
    eff = [effective_point(d, cfg.alpha, cfg.lam_tau, cfg.kappa)[:2] for d in cfg.ds]
    th = {r: np.array([[[_eq_theory(cfg, m, *e, lam=v, rescale=r) for v in cfg.lams]
                        for m in moms] for e in eff]) for r in (True, False)}
    out = {"lam_values": np.array(cfg.lams), "lam_fs": np.array(cfg.lam_fs),
           "lam_tau": np.asarray(cfg.lam_tau),
           "lam_theory": th[True], "lam_theory_unscaled": th[False]}
    # rescaled / unrescaled theory - 1 at the nominal sizes (d -> inf): where the sweep can
    # tell the two apart, chosen from the theory alone
    out["lam_alt_theory_gap"] = np.array(
        [[_eq_theory(cfg, m, cfg.alpha, cfg.lam_tau, lam=v)
          / _eq_theory(cfg, m, cfg.alpha, cfg.lam_tau, lam=v, rescale=False) - 1
          for v in cfg.lams] for m in moms])
    grid_l = np.geomspace(min(cfg.lams) / 3, max(cfg.lams) * 3, 60)
    out["lam_grid"] = grid_l
    for key, r in (("lam_theory_grid", True), ("lam_theory_grid_unscaled", False)):
        out[key] = np.array([[_eq_theory(cfg, m, cfg.alpha, cfg.lam_tau, lam=v, rescale=r)
                              for v in grid_l] for m in moms])
    nl, eq = sims["nonlinear"], sims["equivalent"]
    with np.errstate(invalid="ignore"):
        out["lam_sim_mean"], out["lam_sim_se"] = stats.mean_se(nl, axis=-1)
        out["lam_eq_mean"], out["lam_eq_se"] = stats.mean_se(eq, axis=-1)
    for tag, t in (("", th[True]), ("_unscaled", th[False])):
        out[f"lam_gap_inf{tag}"], out[f"lam_gap_inf{tag}_se"] = _extrapolated(
            ds, out["lam_sim_mean"] / t - 1, out["lam_sim_se"] / t)
    return out


def _extrapolated(ds, mean, se):
    """Per point (the trailing axes), the d -> inf limit of ``mean`` (d, ...) under an O(1/d)
    bias, fitted through every d (:func:`stats.extrapolate_inverse_each`), and its SE; NaN
    where a point was not simulated at every d."""
    if len(ds) < 2:
        return np.full(mean.shape[1:], np.nan), np.full(mean.shape[1:], np.nan)
    done = np.all(np.isfinite(mean) & np.isfinite(se), axis=0)
    return stats.extrapolate_inverse_each(ds, mean, se, keep=done)


def _eq_assemble(cfg, points, res):
    ds = np.array(cfg.ds, float)
    lam_part = [i for i, p in enumerate(points) if "lam" in p]
    lam_out = _lam_sweep(cfg, [points[i] for i in lam_part], [res[i] for i in lam_part], ds)
    keep = [i for i, p in enumerate(points) if "lam" not in p]
    points, res = [points[i] for i in keep], [res[i] for i in keep]
    grid = log_distance_grid(0.1, 6.0, 60, closest=1e-3)
    moms = [equivalent_moments(name, cfg.rho) for name in cfg.fs]
    out = {"tau_grid": grid, "taus": np.array(cfg.taus), "ds": np.array(cfg.ds),
           "fs": np.array(cfg.fs),
           "theory": np.array([[_eq_theory(cfg, m, cfg.alpha, t) for t in grid] for m in moms]),
           "hermite": np.array([[m["c0"], m["c1"], m["m2"], m["rho_eff"]] for m in moms])}
    th = np.array([[[_eq_theory(cfg, m, *effective_point(d, cfg.alpha, t, cfg.kappa)[:2])
                     for t in cfg.taus] for m in moms] for d in cfg.ds])
    alt = np.array([[[hermite.naive_alternative(m, *effective_point(d, cfg.alpha, t, cfg.kappa)[:2],
                                                cfg.kappa, rho=cfg.rho, lam=cfg.lam)
                      for t in cfg.taus] for m in moms] for d in cfg.ds])
    eq = sweep_grid(cfg, points, res, "f", cfg.fs, "tau", cfg.taus, "equivalent")
    out["eq_mean"], out["eq_se"] = stats.mean_se(eq, axis=-1)
    out["equivalent"] = eq
    nl = sweep_grid(cfg, points, res, "f", cfg.fs, "tau", cfg.taus, "nonlinear")
    out = gap_stats(out, nl, th)
    # the paired ratio nonlinear / equivalent-linear, trial by trial (same pool, same
    # queries), and its d -> inf limit under an O(1/d) bias
    out["ratio_mean"], out["ratio_se"] = stats.mean_se(nl / eq, axis=-1)
    out["ratio_inf"], out["ratio_inf_se"] = _extrapolated(ds, out["ratio_mean"] - 1,
                                                          out["ratio_se"])
    out["gap_inf"], out["gap_inf_se"] = _extrapolated(ds, out["rel_gap"], out["rel_se"])
    # the naive alternative at the same points
    out["alternative_at"] = alt
    out["alt_gap_inf"], out["alt_gap_inf_se"] = _extrapolated(
        ds, out["sim_mean"] / alt - 1, out["sim_se"] / alt)
    # signed: equivalence theory / alternative - 1 at the nominal sizes (d -> inf)
    out["alt_theory_gap"] = np.array(
        [[_eq_theory(cfg, m, cfg.alpha, t)
          / hermite.naive_alternative(m, cfg.alpha, t, cfg.kappa, rho=cfg.rho, lam=cfg.lam) - 1
          for t in cfg.taus] for m in moms])
    return {**out, **lam_out}


def _eq_summary(cfg, a):
    lines = [f"alpha = {cfg.alpha}, kappa = {cfg.kappa}, rho = {cfg.rho}, lambda = "
             f"{cfg.lam:g}, d = {', '.join(map(str, cfg.ds))}; mean +- 2 SE over {cfg.trials} "
             "trials per point"]
    for j, name in enumerate(cfg.fs):
        c0, c1, m2, re = a["hermite"][j]
        parts = []
        for i, d in enumerate(cfg.ds):
            nl, eq = a["sim_mean"][i, j], a["eq_mean"][i, j]
            parts.append(f"d = {d}: nonlinear vs equivalent-linear max rel. gap "
                         f"{np.nanmax(np.abs(nl - eq) / eq):.3f}, nonlinear vs theory "
                         f"{np.nanmax(np.abs(a['rel_gap'][i, j])):.3f}")
        lines.append(f"{name}: c0 = {c0:.3f}, c1 = {c1:.3f}, rho_eff = {re:.3f}; "
                     + "; ".join(parts))
    if len(cfg.ds) > 1:
        r, rse = a["ratio_inf"], a["ratio_inf_se"]
        g, gse = a["gap_inf"], a["gap_inf_se"]
        lines.append(f"d -> inf (a + b/d through d = {', '.join(map(str, cfg.ds))}): paired "
                     f"ratio nonlinear / equivalent - 1 in [{np.nanmin(r):+.3f}, "
                     f"{np.nanmax(r):+.3f}], max |.|/SE {np.nanmax(np.abs(r) / rse):.2f}; "
                     f"nonlinear / theory - 1 in [{np.nanmin(g):+.3f}, {np.nanmax(g):+.3f}], "
                     f"max |.|/SE {np.nanmax(np.abs(g) / gse):.2f}")
    if len(cfg.ds) > 1 and "lam_gap_inf" in a:
        g, gse = a["lam_gap_inf"], a["lam_gap_inf_se"]
        u, use = a["lam_gap_inf_unscaled"], a["lam_gap_inf_unscaled_se"]
        lines.append(f"ridge sweep at tau = {cfg.lam_tau:g}, lambda = "
                     f"{', '.join(f'{v:g}' for v in cfg.lams)} ({', '.join(cfg.lam_fs)}), "
                     f"d -> inf: nonlinear / theory(lambda/c1^2) - 1 in [{np.nanmin(g):+.3f}, "
                     f"{np.nanmax(g):+.3f}] (max |.|/SE {np.nanmax(np.abs(g) / gse):.2f}); "
                     f"against theory(lambda) unrescaled in [{np.nanmin(u):+.3f}, "
                     f"{np.nanmax(u):+.3f}] (max |.|/SE {np.nanmax(np.abs(u) / use):.2f})")
    return lines + gap_summary(cfg, a, "nonlinear e_f")


register(Simulation(
    name="icl-equivalence",
    description="Nonlinear single-index targets vs the equivalent linear model.",
    config_cls=EquivalenceConfig, points=_eq_points,
    run_point=_eq_point, assemble=_eq_assemble, summary=_eq_summary))
