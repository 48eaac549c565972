"""The nonlinearity-noise equivalence of ridge-pretrained linear attention
(docs/topics/icl.md#the-nonlinearity-noise-equivalence): checks icl.05 (nonlinear targets
against their equivalent linear targets and the equivalence's theory, over tau) and
icl.10 (the ridge penalty rescaled by c1^2), both on the icl-equivalence run that the
icl-equivalence and icl-equivalence-ridge figures draw."""

from __future__ import annotations

import numpy as np

from .. import hermite
from ..comparisons import equivalence, largest
from ..simulations.icl_sims import effective_sizes, equivalent_moments
from ..stats import bonferroni_t, extrapolate_inverse_each, inverse_variance_mean
from ._registry import (
    Outcome,
    experiment,
    experiment_config,
    experiment_profile,
    lower_bound,
    register_check,
    upper_bound,
)


def _pooled_side(th_alt, alt_gap, alt_gap_se):
    """The power test against an alternative theory: the points where the theory differs
    from the alternative by >= ALTERNATIVE_MIN_GAP (chosen from the theory alone; ``th_alt``
    = theory / alternative - 1), and there the mean of sign(th_alt) x (sim / alternative
    - 1) at d -> inf with its SE: positive when the data lie on the theory's side."""
    th_alt = np.asarray(th_alt)
    # a NaN theory gap is not dropped as unresolvable: it joins the test and makes it NaN
    resolvable = ~(np.abs(th_alt) < hermite.ALTERNATIVE_MIN_GAP)
    ag = (np.sign(th_alt) * np.asarray(alt_gap))[resolvable]
    agse = np.asarray(alt_gap_se)[resolvable]
    if ag.size == 0:                   # no power: NaN, which the lower bound FAILs
        return resolvable, float("nan"), float("nan")
    return resolvable, float(np.mean(ag)), float(np.sqrt(np.sum(agse**2)) / ag.size)


# icl.05 and icl.10 decide "the simulation equals the equivalence's theory as d -> inf" on
# the inverse-variance pool of every point's d -> inf relative gap, in the equivalence form
# |pooled gap| + t SE <= tol with the power t SE <= tol / 2.  The paper tolerance, 2 %, is
# the resolution every value a figure draws must have (issue 41); the quick run's trials
# at d = 16 and 32 cannot decide 2 % (with 6 trials the pooled t SE of the quick run then
# committed was ~2.2 %: its SEs alone, not its gaps, were read to choose), so its tolerance
# is the smallest round one they decide with power, 5 %.  The quick run has 8 trials since
# the nineteenth session: with 6, another draw of the same law (the perturbation test's
# reflected task pool) failed the power condition t SE <= 2.5 %; the verdict must not hang
# on the draw.
EQUIVALENCE_TOL = {"quick": 0.05, "paper": 0.02}


def _equivalence_theory(cfg, mom, d, tau, lam=None, rescale=True):
    """The equivalence's theory (:func:`hermite.equivalence_error`) at the sizes the run
    simulated at dimension ``d`` (:func:`effective_sizes`), recomputed by the check: a
    committed run is tested against the theory as it is now."""
    (a_eff, t_eff, _), _ = effective_sizes(d, cfg.alpha, tau, cfg.kappa)
    return hermite.equivalence_error(mom, a_eff, t_eff, cfg.kappa,
                                     cfg.lam if lam is None else lam, rescale_lam=rescale)


def _alternative_theory(cfg, mom, d, tau):
    (a_eff, t_eff, _), _ = effective_sizes(d, cfg.alpha, tau, cfg.kappa)
    return hermite.naive_alternative(mom, a_eff, t_eff, cfg.kappa, rho=cfg.rho, lam=cfg.lam)


def _simulated_everywhere(cfg, taus):
    """Which tau the run simulated at every d (the design's size filter, not the data)."""
    return np.array([all(effective_sizes(d, cfg.alpha, t, cfg.kappa)[1] for d in cfg.ds)
                     for t in taus])


def pooled_equivalence(ds, keep, mean, se, tol, t, what, name):
    """Every kept point's d -> inf limit of ``mean`` (its relative gap, shape (d, ...))
    pooled by inverse variance, in the equivalence form; and the limits, for the screen."""
    lim, lim_se = extrapolate_inverse_each(ds, mean, se, keep=keep)
    pooled, pooled_se = inverse_variance_mean(lim[keep], lim_se[keep])
    return lim, lim_se, pooled, pooled_se, equivalence(
        1.0 + pooled, 1.0, pooled_se, tol,
        f"{what}, extrapolated to d -> inf through d = {np.asarray(ds).astype(int).tolist()} "
        f"by a + b/d at each of {int(np.sum(keep))} points and pooled by inverse variance: "
        f"|pooled gap| + t SE <= {tol:.0%} with t SE <= {tol / 2:.0%} (t = {t:.2f})",
        t=t, scale=1.0, name=name)


def screen_points(lim, lim_se, keep, t, what):
    """No single point off by many SEs (a screen beside the pooled equality, which decides
    the claim): the largest |d -> inf gap| / SE under the Bonferroni t of all points."""
    return upper_bound(largest(np.abs(lim[keep]) / lim_se[keep]), t,
                       f"screen for a single outlying point: {what} at every point over its "
                       f"SE, under t = {t:.2f} (Bonferroni over the points, family-wise 5 %); "
                       "equality itself is decided by the pooled comparison",
                       name=f"max |{what}|(d -> inf) / SE")


@register_check(
    "icl.05-nonlinearity-noise-equivalence",
    "For y = f(x^T w) + eps with f in {ReLU, sign, tanh, erf}, pretraining on the nonlinear "
    "target and on the equivalent linear target c1 z + N(0, rho_eff) give the same test "
    "error as d -> inf, and both reach c1^2 e_Lu(rho_eff / c1^2, lambda / c1^2): the "
    "icl-equivalence figure's own run (d = 16 and 32, 3 tau, 8 paired trials), each "
    "O(1/d) finite-size bias extrapolated out by a + b/d and the points pooled: equal within "
    "5 % (|gap| + t SE), decided with power; the data reject the naive alternative "
    "(pretraining that does not see the nonlinearity's extra noise) where it differs by "
    ">= 15 %.",
    "docs/topics/icl.md#the-nonlinearity-noise-equivalence",
    experiment="icl-equivalence",
    paper="d = 32 and 64, 10 tau from 0.3 to 5 (0.9, 1.0 and 1.1 at the interpolation peak), "
    "8 paired trials; equal within 2 % (the resolution a drawn value must have), 7 dof.",
)
def check_equivalence():
    cid = "icl.05-nonlinearity-noise-equivalence"
    a, cfg = experiment(cid), experiment_config(cid)   # the run the figure draws
    tol = EQUIVALENCE_TOL[experiment_profile()]
    ds, trials = np.asarray(cfg.ds, float), int(a["sim"].shape[-1])
    moms = [equivalent_moments(f, cfg.rho) for f in cfg.fs]
    keep = np.broadcast_to(_simulated_everywhere(cfg, cfg.taus), (len(moms), len(cfg.taus)))
    # the theory and the naive alternative at the simulated sizes, recomputed here
    th = np.array([[[_equivalence_theory(cfg, m, d, t) for t in cfg.taus] for m in moms]
                   for d in cfg.ds])
    alt = np.array([[[_alternative_theory(cfg, m, d, t) for t in cfg.taus] for m in moms]
                    for d in cfg.ds])
    th_alt = np.array([[hermite.equivalence_error(m, cfg.alpha, t, cfg.kappa, cfg.lam)
                        / hermite.naive_alternative(m, cfg.alpha, t, cfg.kappa, rho=cfg.rho,
                                                    lam=cfg.lam) - 1
                        for t in cfg.taus] for m in moms])
    sim, sim_se = np.asarray(a["sim_mean"]), np.asarray(a["sim_se"])
    # Bonferroni: the two pooled equalities and the power test (5 % family-wise), and the
    # two screens over every point
    t = bonferroni_t(3, trials - 1, 0.05)
    t_pt = bonferroni_t(2 * int(keep.sum()), trials - 1, 0.05)
    r, rse, rp, rpse, same = pooled_equivalence(
        ds, keep, np.asarray(a["ratio_mean"]) - 1, np.asarray(a["ratio_se"]), tol, t,
        "paired ratio nonlinear / equivalent-linear (same pools, same queries) minus 1",
        "|pooled ratio - 1|(d -> inf) + t SE")
    g, gse, gp, gpse, theory = pooled_equivalence(
        ds, keep, sim / th - 1, sim_se / th, tol, t,
        "nonlinear simulation / the equivalence's theory (at the simulated sizes) minus 1",
        "|pooled sim / theory - 1|(d -> inf) + t SE")
    ag, agse = extrapolate_inverse_each(ds, sim / alt - 1, sim_se / alt, keep=keep)
    resolvable, pooled, pooled_se = _pooled_side(np.where(keep, th_alt, 0.0), ag, agse)
    det = {"ds": ds.tolist(), "trials": trials, "t": t, "t_points": t_pt, "tolerance": tol,
           "fs": list(cfg.fs), "taus": list(cfg.taus),
           "ratio_minus_1_d_inf": r.tolist(), "its_se": rse.tolist(),
           "ratio_minus_1_pooled": rp, "ratio_pooled_se": rpse,
           "sim_over_theory_minus_1_d_inf": g.tolist(), "its_se_": gse.tolist(),
           "sim_over_theory_minus_1_pooled": gp, "sim_pooled_se": gpse,
           "alternative_resolvable": resolvable.tolist(),
           "sim_over_alternative_minus_1_pooled": pooled, "pooled_se": pooled_se}
    return Outcome(
        same, theory,
        lower_bound(pooled - t * pooled_se, 0.0,
                    "power: at the points where the naive alternative (pretraining that sees "
                    "c1 z + N(0, rho) only) differs from the equivalence theory by >= "
                    f"{hermite.ALTERNATIVE_MIN_GAP:.0%} ({int(resolvable.sum())} points, "
                    "chosen from the theory alone), the simulation lies on the equivalence "
                    "theory's side of the alternative: the mean d -> inf gap sign x (sim / "
                    "alternative - 1) minus t x its SE is positive",
                    name="mean (sim / alternative - 1)(d -> inf) - t SE"),
        screen_points(r, rse, keep, t_pt, "ratio - 1"),
        screen_points(g, gse, keep, t_pt, "sim / theory - 1"),
        details=det)


@register_check(
    "icl.10-ridge-rescaling",
    "The equivalence carries the ridge penalty with it: for y = f(x^T w) + eps (ReLU, tanh) "
    "pretrained with ridge lambda near the interpolation peak (tau = 1.25, lambda = 0.01, "
    "0.1, 1), the error is c1^2 e_ridge(rho_eff / c1^2, lambda / c1^2), not the same with "
    "lambda unrescaled: the icl-equivalence figure's own run (d = 16 and 32, 8 trials), "
    "each O(1/d) bias extrapolated out by a + b/d and the points pooled: equal within 5 % "
    "(|gap| + t SE), decided with power.",
    "docs/topics/icl.md#the-nonlinearity-noise-equivalence",
    experiment="icl-equivalence",
    paper="d = 32 and 64, 8 trials; equal within 2 % (the resolution a drawn value must "
    "have), 7 dof.",
)
def check_ridge_rescaling():
    cid = "icl.10-ridge-rescaling"
    a, cfg = experiment(cid), experiment_config(cid)   # the run the figure draws
    tol = EQUIVALENCE_TOL[experiment_profile()]
    ds, trials = np.asarray(cfg.ds, float), int(a["sim"].shape[-1])
    moms = [equivalent_moments(f, cfg.rho) for f in cfg.lam_fs]
    ok = _simulated_everywhere(cfg, [cfg.lam_tau])[0]
    keep = np.full((len(moms), len(cfg.lams)), ok)
    th = {r: np.array([[[_equivalence_theory(cfg, m, d, cfg.lam_tau, lam=v, rescale=r)
                         for v in cfg.lams] for m in moms] for d in cfg.ds])
          for r in (True, False)}
    th_alt = np.array([[hermite.equivalence_error(m, cfg.alpha, cfg.lam_tau, cfg.kappa, v)
                        / hermite.equivalence_error(m, cfg.alpha, cfg.lam_tau, cfg.kappa, v,
                                                    rescale_lam=False) - 1
                        for v in cfg.lams] for m in moms])
    sim, sim_se = np.asarray(a["lam_sim_mean"]), np.asarray(a["lam_sim_se"])
    t = bonferroni_t(2, trials - 1, 0.05)
    t_pt = bonferroni_t(int(keep.sum()), trials - 1, 0.05)
    g, gse, gp, gpse, theory = pooled_equivalence(
        ds, keep, sim / th[True] - 1, sim_se / th[True], tol, t,
        "nonlinear simulation / c1^2 e_ridge(rho', lambda / c1^2) (at the simulated sizes) "
        "minus 1", "|pooled sim / theory - 1|(d -> inf) + t SE")
    u, use = extrapolate_inverse_each(ds, sim / th[False] - 1, sim_se / th[False], keep=keep)
    resolvable, pooled, pooled_se = _pooled_side(np.where(keep, th_alt, 0.0), u, use)
    det = {"ds": ds.tolist(), "trials": trials, "t": t, "t_points": t_pt, "tolerance": tol,
           "tau": float(cfg.lam_tau), "lams": list(cfg.lams), "fs": list(cfg.lam_fs),
           "sim_over_theory_minus_1_d_inf": g.tolist(), "its_se": gse.tolist(),
           "sim_over_theory_minus_1_pooled": gp, "pooled_se_": gpse,
           "theory_rescaled_over_unrescaled_minus_1": th_alt.tolist(),
           "sim_over_unrescaled_minus_1_d_inf": u.tolist(),
           "pooled": pooled, "pooled_se": pooled_se}
    return Outcome(
        theory,
        lower_bound(pooled - t * pooled_se, 0.0,
                    "power: at the (f, lambda) where the unrescaled theory c1^2 e_ridge(rho', "
                    f"lambda) differs from the rescaled one by >= "
                    f"{hermite.ALTERNATIVE_MIN_GAP:.0%} ({int(resolvable.sum())} of "
                    f"{keep.size}, chosen from the theory alone), the simulation lies on the "
                    "rescaled theory's side: the mean d -> inf gap sign x (sim / unrescaled - "
                    "1) minus t x its SE is positive",
                    name="mean (sim / unrescaled - 1)(d -> inf) - t SE"),
        screen_points(g, gse, keep, t_pt, "sim / theory - 1"),
        details=det)
