"""The nonlinearity–noise equivalence across task diversity
(docs/topics/icl.md#the-nonlinearity-noise-equivalence; issue #19): g_task of
ridge-pretrained linear attention on ``y = f(x^T w) + eps`` against its equivalent linear
target and the scaled d -> infinity theory, below and above the memorisation ->
in-context-learning transition in kappa."""

from __future__ import annotations

import numpy as np

from ..problems import stream_key
from ..simulations import icl_nonlinear_kappa as nk
from ..stats import bonferroni_t, mean_se
from ._registry import Outcome, agreement, register_check, upper_bound

SEED = 20261219
ALPHA, TAU, RHO, LAM = 10.0, 2.0, 0.01, 1e-6
KAPPAS = (0.2, 3.0)          # theory kappa_1/2 ~ 0.6: one point on each side
FS = ("relu", "sign", "erf", "abs")
DS, TRIALS = (24, 48), 6
# The reference: nonlinear and equivalent-linear errors agree "within a few percent at
# d = 40" (5 %, as icl.05) and O(1/d) closer beyond, so each of e_ICL, e_IDG within
# 0.05 (40/d) relative and g_task = e_ICL - e_IDG within 0.05 (40/d) (e_ICL + e_IDG)
REF_REL, REF_D = 0.05, 40
# icl.04 accepts a finite-d gap exponent in [-1.6, -0.6] (measured -1.3): doubling d must
# shrink the gap to theory by at least 2^-0.6
SLOWEST_DECAY = 2.0 ** -0.6


def _run():
    """Per (f, kappa, d): g_task means and SEs of both targets, the paired difference, the
    error scale e_ICL + e_IDG, and the theory at the simulated sizes."""
    rows = {}
    for d in DS:
        sz = [nk.icl.sizes(d, ALPHA, TAU, k) for k in KAPPAS]
        pad = (max(s[1] for s in sz), max(s[2] for s in sz))
        for f in FS:
            for kappa, (ell, k, n) in zip(KAPPAS, sz, strict=True):
                r = nk.paired_trials(stream_key(SEED, f"nlk-{f}-{d}-{kappa}"), d, ALPHA, TAU,
                                     kappa, f, RHO, LAM, TRIALS, pad_to=pad)
                g_nl = r["nonlinear_icl"] - r["nonlinear_idg"]
                g_eq = r["equivalent_icl"] - r["equivalent_idg"]
                th = nk.theory(f, ell / d, n / d**2, k / d, RHO)
                row = {"k": k, "n": n, "theory_g": th[0] - th[1], "theory_icl": th[0],
                       "residual": float(np.max(r["residual"])),
                       "scale": float(np.mean(r["nonlinear_icl"] + r["nonlinear_idg"]))}
                for name, v in (("nonlinear", g_nl), ("equivalent", g_eq),
                                ("diff", g_nl - g_eq)):
                    m, se = mean_se(v)
                    row[name] = [float(m), float(se)]
                rows[(f, kappa, d)] = row
    return rows


@register_check(
    "icl.08-nonlinear-kappa-equivalence",
    "Across task diversity, pretraining on y = f(x^T w) + eps (ReLU, sign, erf, |z|) and on "
    "the equivalent linear target c1 z + N(0, rho_eff) with the same pools gives the same "
    "g_task = e_ICL - e_IDG at kappa = 0.2 and 3 (below and above the transition) within "
    "the combined SE plus the reference's finite-d tolerance at d = 48; from d = 24 to 48 "
    "both approach the d -> infinity theory c1^2 g_Lu(rho_eff/c1^2) (0 for c1 = 0) at least "
    "as fast as d^-0.6 (alpha = 10, tau = 2, rho = 0.01, lambda = 1e-6, 6 runs each).",
    "docs/topics/icl.md#the-nonlinearity-noise-equivalence",
)
def check_nonlinear_kappa():
    rows = _run()
    cases = [(f, kappa) for f in FS for kappa in KAPPAS]
    m = len(cases)
    # two-sided 5 % family-wise over the m cases of each comparison; SEs from TRIALS runs
    t = bonferroni_t(m, TRIALS - 1, 0.05)
    small, big = DS
    tol = REF_REL * REF_D / big
    det = {"alpha": ALPHA, "tau": TAU, "rho": RHO, "lambda": LAM, "trials": TRIALS,
           "bonferroni_t": t, "tolerance_d48": tol, "cases": {}}
    agree, approach_nl, approach_eq, agree_small, closer, equiv = [], [], [], [], [], []
    for f, kappa in cases:
        r48, r24 = rows[(f, kappa, big)], rows[(f, kappa, small)]
        diff, se = r48["diff"]
        agree.append((abs(diff) - t * se) / r48["scale"])
        # the equivalence form |diff| + t SE (issue 26 item 3): reported, not yet compared;
        # with 6 runs the SE alone exceeds the tolerance at kappa = 0.2
        equiv.append((abs(diff) + t * se) / r48["scale"])
        agree_small.append(abs(r24["diff"][0]) / r24["scale"])
        se_c = np.hypot(se, SLOWEST_DECAY * r24["diff"][1])
        closer.append((abs(diff) - SLOWEST_DECAY * abs(r24["diff"][0]) - t * se_c)
                      / r48["scale"])
        for which, out in (("nonlinear", approach_nl), ("equivalent", approach_eq)):
            if which == "equivalent" and nk.target_moments(f, RHO)["c1"] == 0:
                continue     # pure-noise labels: g_task = 0 = theory identically (b1 = b2 = 0)
            gap48 = r48[which][0] - r48["theory_g"]
            gap24 = r24[which][0] - r24["theory_g"]
            se_c = np.hypot(r48[which][1], SLOWEST_DECAY * r24[which][1])
            out.append((abs(gap48) - SLOWEST_DECAY * abs(gap24) - t * se_c) / r48["scale"])
        det["cases"][f"{f}_kappa{kappa:g}"] = {
            f"d{d}": rows[(f, kappa, d)] for d in DS}
    residual = max(r["residual"] for r in rows.values())
    det["nonlinear_minus_equivalent_over_scale"] = {f"d{small}": max(agree_small),
                                                   f"d{big}": max(abs(rows[(f, k, big)]["diff"][0])
                                                                  / rows[(f, k, big)]["scale"]
                                                                  for f, k in cases)}
    det["equivalence_form_over_scale"] = {f"{f}_kappa{k:g}": e
                                          for (f, k), e in zip(cases, equiv, strict=True)}
    i = int(np.argmax(agree))
    return Outcome(
        agreement(max(agree), tol,
                  f"(|g_nl - g_eq| - t SE) / (e_ICL + e_IDG) at d = {big}, paired runs (same "
                  f"pools and queries), t = {t:.2f} (Bonferroni over {m} cases, 5 %, "
                  f"{TRIALS - 1} dof); tolerance: the reference's 'a few percent at d = 40' "
                  f"(5 %) scaled by 40/d, on each error hence on their difference",
                  name=f"nonlinear vs equivalent-linear g_task, d = {big} (worst: "
                       f"{cases[i][0]}, kappa = {cases[i][1]:g})"),
        upper_bound(max(closer), 0.0,
                    f"(|diff_{big}| - 2^-0.6 |diff_{small}| - t SE) / (e_ICL + e_IDG), diff = "
                    "g_nl - g_eq (paired): the reference expects the two targets 'closer at "
                    "d = 80' than at 40, i.e. a gap that decays with d; the slowest decay "
                    "icl.04 accepts is d^-0.6",
                    name="nonlinear - equivalent-linear gap, d = 24 -> 48"),
        upper_bound(max(approach_nl), 0.0,
                    f"(|gap_{big}| - 2^-0.6 |gap_{small}| - t SE) / (e_ICL + e_IDG) with gap = "
                    "nonlinear g_task - theory at the simulated sizes: the finite-d gap "
                    "shrinks at least as fast as the slowest decay icl.04 accepts (d^-0.6)",
                    name="nonlinear target: gap to theory, d = 24 -> 48"),
        upper_bound(max(approach_eq), 0.0,
                    "the same decay for the equivalent linear target against the Lu et al. "
                    "theory, which icl.04 and icl.07 establish for linear targets",
                    name="equivalent linear target: gap to theory, d = 24 -> 48"),
        upper_bound(residual, 1e-8, "ridge solves converged: CG to a relative residual of "
                    "1e-10 (1e-8 allows the final residual evaluation's round-off)",
                    name="max relative CG residual"),
        details=det)
