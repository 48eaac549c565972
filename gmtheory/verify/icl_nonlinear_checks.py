"""The nonlinearity–noise equivalence across task diversity
(docs/topics/icl.md#the-nonlinearity-noise-equivalence; issue #19): g_task of
ridge-pretrained linear attention on ``y = f(x^T w) + eps`` against its equivalent linear
target and the scaled d -> infinity theory, below and above the memorisation ->
in-context-learning transition in kappa."""

from __future__ import annotations

import numpy as np

from ..comparisons import equivalence, largest
from ..simulations import icl_nonlinear_kappa as nk
from ..stats import bonferroni_t, inverse_variance_mean
from ._registry import Outcome, experiment, register_check, upper_bound

SIMULATION = "icl-nonlinear-kappa"    # the run the icl-nonlinear-kappa figure draws
# one point on each side of the transition (theory kappa_1/2 ~ 0.6) at the first
# (alpha, tau) of the run (alpha = 10, tau = 2); chosen before the check read the run
KAPPAS = (0.215, 2.15)
# The reference: nonlinear and equivalent-linear errors agree "within a few percent at
# d = 40" (5 %) and O(1/d) closer beyond, so each of e_ICL, e_IDG within
# 0.05 (40/d) relative and g_task = e_ICL - e_IDG within 0.05 (40/d) (e_ICL + e_IDG)
REF_REL, REF_D = 0.05, 40
# icl.04 accepts a finite-d gap exponent in [-1.6, -0.6] (measured -1.3): from the run's
# smaller d to its larger one the gap must shrink at least like d^-0.6
SLOWEST_EXPONENT = -0.6


@register_check(
    "icl.08-nonlinear-kappa-equivalence",
    "Across task diversity (the icl-nonlinear-kappa figure's own run), pretraining on "
    "y = f(x^T w) + eps (ReLU, sign, tanh, erf, |z|) and on the equivalent linear target "
    "c1 z + N(0, rho_eff) with the same pools gives the same g_task = e_ICL - e_IDG at "
    "kappa = 0.215 and 2.15 (below and above the transition): at the run's largest d, the "
    "inverse-variance mean over the targets with c1 != 0 of the paired differences over "
    "(e_ICL + e_IDG), at each kappa, is zero within the reference's finite-d tolerance (5 % at "
    "d = 40, scaled by 40/d), decided with power (|pooled| + t SE <= tol, t SE <= tol/2); "
    "from its smaller d to its larger both targets approach the d -> infinity theory "
    "c1^2 g_Lu(rho_eff/c1^2) (0 for c1 = 0) at least as fast as d^-0.6 (alpha = 10, tau = "
    "2, rho = 0.01, lambda = 1e-6; quick: d = 16 and 24, 12 paired trials).",
    "docs/topics/icl.md#the-nonlinearity-noise-equivalence",
    experiment=SIMULATION,
    paper="d = 32 and 64, 12 paired trials: tolerance 5 % x 40/64 = 3.1 %.",
)
def check_nonlinear_kappa():
    a = experiment("icl.08-nonlinear-kappa-equivalence")   # the figure's run
    ds = [int(d) for d in a["ds"]]
    small, big, j = 0, len(ds) - 1, 0          # the run's smallest and largest d, first pair
    fs = [str(f) for f in a["fs"]]
    ks = [int(np.argmin(np.abs(np.asarray(a["kappas"]) - k))) for k in KAPPAS]
    trials = int(a["trials"])
    decay = (ds[big] / ds[small]) ** SLOWEST_EXPONENT
    tau_j, kap = float(a["taus"][j]), [float(k) for k in a["kappas"]]
    # every target at both kappas is a case; a kappa that the design does not simulate at
    # both sizes (nk.simulated: fewer than 2 tasks or 2 prompts per task) is not, and none
    # of KAPPAS is such a kappa at the quick or paper sizes.  A NaN in a simulated cell is
    # not dropped: it makes the comparisons fail (the pooled mean raises: an ERROR).
    cases = [(fi, ki) for fi in range(len(fs)) for ki in ks
             if all(nk.simulated(ds[di], tau_j, kap[ki]) for di in (small, big))]
    m = len(cases)
    # two-sided 5 % family-wise over the m cases of each bound (SEs from `trials` runs)
    t = bonferroni_t(m, trials - 1, 0.05)
    tol = REF_REL * REF_D / ds[big]
    c1 = {f: nk.target_moments(f, float(a["rho"]))["c1"] for f in fs}

    def at(name, di, fi, ki):
        return float(a[name][di, j, fi, ki])

    approach_nl, approach_eq, closer, det, zs, alone = [], [], [], {}, [], []
    rel = {ki: ([], []) for ki in ks}           # per kappa: diff / scale and its SE
    for fi, ki in cases:
        scale = at("nonlinear_icl_mean", big, fi, ki) + at("nonlinear_idg_mean", big, fi, ki)
        diff, se = at("g_diff_mean", big, fi, ki), at("g_diff_se", big, fi, ki)
        d0, se0 = at("g_diff_mean", small, fi, ki), at("g_diff_se", small, fi, ki)
        if c1[fs[fi]] != 0:     # pooled per kappa; c1 = 0 (pure-noise labels) on its own
            zs.append(abs(diff) / se)
            rel[ki][0].append(diff / scale)
            rel[ki][1].append(se / scale)
        else:
            alone.append((diff / scale, se / scale))
        closer.append((abs(diff) - decay * abs(d0) - t * np.hypot(se, decay * se0)) / scale)
        for which, out in (("nonlinear", approach_nl), ("equivalent", approach_eq)):
            if which == "equivalent" and nk.target_moments(fs[fi], float(a["rho"]))["c1"] == 0:
                continue     # pure-noise labels: g_task = 0 = theory identically (b1 = b2 = 0)
            gap = [at(f"{which}_g_mean", di, fi, ki) - at("theory_at_sizes_g", di, fi, ki)
                   for di in (small, big)]
            se_c = np.hypot(at(f"{which}_g_se", big, fi, ki),
                            decay * at(f"{which}_g_se", small, fi, ki))
            out.append((abs(gap[1]) - decay * abs(gap[0]) - t * se_c) / scale)
        det[f"{fs[fi]}_kappa{float(a['kappas'][ki]):g}"] = {
            f"d{ds[di]}": {"g_nonlinear": at("nonlinear_g_mean", di, fi, ki),
                           "g_equivalent": at("equivalent_g_mean", di, fi, ki),
                           "diff": at("g_diff_mean", di, fi, ki),
                           "diff_se": at("g_diff_se", di, fi, ki),
                           "theory_g": at("theory_at_sizes_g", di, fi, ki)}
            for di in (small, big)}
    sim_cells = [(di, jj, ki) for di in range(len(ds)) for jj in range(len(a["taus"]))
                 for ki in range(len(kap)) if nk.simulated(ds[di], float(a["taus"][jj]), kap[ki])]
    residual = largest(a["residual"][di, jj, :, ki] for di, jj, ki in sim_cells)
    # the rows of the equality: each kappa's pool over the targets with c1 != 0, and each
    # c1 = 0 case on its own (their paired SE is far smaller: pooled, they would decide it)
    rows = [inverse_variance_mean(np.asarray(rel[ki][0]), np.asarray(rel[ki][1]))
            for ki in ks] + alone
    t_pool = bonferroni_t(len(rows), trials - 1, 0.05)
    t_screen = bonferroni_t(len(zs), trials - 1, 0.05)
    span = f"d = {ds[small]} -> {ds[big]}"
    return Outcome(
        equivalence(1.0 + np.array([r[0] for r in rows]), 1.0,
                    np.array([r[1] for r in rows]), tol,
                    f"(g_nl - g_eq) / (e_ICL + e_IDG) at d = {ds[big]}, paired runs (same "
                    "pools and queries), their inverse-variance mean over the targets with "
                    f"c1 != 0 at each kappa, and each c1 = 0 target alone: |gap| + t SE <= "
                    f"{tol:.1%} with t SE <= {tol / 2:.1%}, t = {t_pool:.2f} (Bonferroni "
                    f"over {len(rows)} rows, 5 %, {trials - 1} dof); tolerance: the "
                    "reference's 'a few percent at d = 40' (5 %) scaled by 40/d, on each "
                    "error hence on their difference",
                    t=t_pool, scale=1.0,
                    name=f"nonlinear vs equivalent-linear g_task, d = {ds[big]}, pooled per "
                    "kappa"),
        upper_bound(largest(zs), t_screen,
                    "screen for a single outlying case among the pooled ones: |g_nl - g_eq| "
                    f"/ SE at every target with c1 != 0 and kappa, under t = {t_screen:.2f} "
                    f"(Bonferroni over {len(zs)} cases, 5 %; |z|, c1 = 0, is left out: its "
                    "paired SE is tiny and its finite-d g_task of the nonlinear target, "
                    "which the equivalent model lacks, is many SE yet far inside the "
                    "tolerance, its own row of the equality); equality is decided on the "
                    "mean over the targets by the pooled comparison, each target alone only "
                    "by this screen",
                    name=f"max |g_nl - g_eq| / SE, d = {ds[big]}"),
        upper_bound(largest(closer), 0.0,
                    "(|diff_big| - (d_big/d_small)^-0.6 |diff_small| - t SE) / (e_ICL + "
                    "e_IDG), diff = g_nl - g_eq (paired): the reference expects the two "
                    "targets closer at larger d, i.e. a gap that decays with d; the slowest "
                    "decay icl.04 accepts is d^-0.6",
                    name=f"nonlinear - equivalent-linear gap, {span}"),
        upper_bound(largest(approach_nl), 0.0,
                    "(|gap_big| - (d_big/d_small)^-0.6 |gap_small| - t SE) / (e_ICL + e_IDG) "
                    "with gap = nonlinear g_task - theory at the simulated sizes: the "
                    "finite-d gap shrinks at least as fast as the slowest decay icl.04 "
                    "accepts (d^-0.6)",
                    name=f"nonlinear target: gap to theory, {span}"),
        upper_bound(largest(approach_eq), 0.0,
                    "the same decay for the equivalent linear target against the Lu et al. "
                    "theory, which icl.04 and icl.07 establish for linear targets",
                    name=f"equivalent linear target: gap to theory, {span}"),
        upper_bound(residual, 1e-8, "ridge solves converged: CG to a relative residual of "
                    "1e-10 (1e-8 allows the final residual evaluation's round-off)",
                    name="max relative CG residual"),
        details={"ds": ds, "alpha": float(a["alphas"][j]), "tau": float(a["taus"][j]),
                 "trials": trials, "bonferroni_t": t, "tolerance": tol, "cases": det,
                 "equality_rows": {"gap_over_scale": [r[0] for r in rows],
                                   "se_over_scale": [r[1] for r in rows],
                                   "t": t_pool}})
