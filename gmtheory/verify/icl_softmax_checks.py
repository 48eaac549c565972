"""Softmax attention on the in-context regression task
(docs/topics/icl.md#softmax-attention-on-the-regression-task): the infinite-prompt limit by
Prop. 2.1, the derived finite-prompt optimum against Monte Carlo, and trained heads (the
``icl-softmax`` simulation, the figure's cached run) against both."""

from __future__ import annotations

from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np

from .. import icl
from .. import icl_softmax as S
from ..comparisons import equivalence, largest, smallest
from ..mixture import GaussianMixture
from ..operators import softmax_attention_limit
from ..problems import stream_key
from ..stats import bonferroni_t
from ._registry import (
    Outcome,
    agreement,
    experiment,
    experiment_profile,
    lower_bound,
    register_check,
    upper_bound,
)

SEED = 20261204
SIMULATION = "icl-softmax"
#: training is asked to come within this fraction of the excess error over the noise floor
#: of the optimum it is compared with (stated before the runs; an optimisation target, not
#: a theorem: AdamW with a cosine schedule and decay on the symmetry-breaking parts, on
#: fresh prompts for the profile's steps: gmtheory/simulations/icl_softmax.py)
TRAIN_FRACTION = 0.05
#: the paper profile's target (4000 steps, d = 32 and 64; issue 42): trained single heads
#: and linear attention within 1 % of their optimum's *error* (t SE included), stated
#: before its rerun
PAPER_ERROR_FRACTION = 0.01


def _targets(best, lin_opt, rho):
    """``(single, linear)`` targets on the excess-normalised scale of the check's
    comparisons, for the profile being read: the quick run's ``TRAIN_FRACTION`` of the
    excess, or the paper run's ``PAPER_ERROR_FRACTION`` of the error."""
    if experiment_profile() == "quick":
        return TRAIN_FRACTION, TRAIN_FRACTION
    return (PAPER_ERROR_FRACTION * best / (best - rho),
            PAPER_ERROR_FRACTION * lin_opt / (lin_opt - rho))


def _limit_closed_form(params, w, xq, rho):
    """The Gaussian-prompt limit of the head written out by hand: the tilt by ``U z_q``
    moves the token mean to ``Sigma_w U z_q``, so the output is
    ``(c + e w)^T A^T x_q / d + e (|w|^2/d + rho) b^T x_q`` (docstring of
    :mod:`gmtheory.icl_softmax`)."""
    A, b, c, e = params["A"], params["b"], params["c"], params["e"]
    d = A.shape[0]
    u = A.T @ xq
    return ((c + e * w) @ u) / d + (c @ w / d + e * (w @ w / d + rho)) * (b @ xq)


def _limit_comparison():
    d, rho = 6, 0.3
    worst = largest()
    for i in range(4):
        k = stream_key(SEED, f"limit{i}")
        kp, kw, kq = jax.random.split(k, 3)
        p = S.init_softmax_head(kp, d, scale=0.7)
        w = jax.random.normal(kw, (d,))
        xq = jax.random.normal(kq, (5, d)) / jnp.sqrt(d)
        cov = jnp.block([[jnp.eye(d) / d, w[:, None] / d],
                         [w[None] / d, jnp.full((1, 1), w @ w / d + rho)]])
        mix = GaussianMixture(jnp.ones(1), jnp.zeros((1, d + 1)), cov[None])
        U, V = S.softmax_limit_matrices(p)
        z = jnp.concatenate([xq, jnp.zeros((5, 1))], axis=1)
        op = softmax_attention_limit(mix, U, V, z)[:, 0]
        by_hand = jax.vmap(lambda x: _limit_closed_form(p, w, x, rho))(xq)
        worst = largest(worst, jnp.abs(op - by_hand) / (1 + jnp.abs(by_hand)))
    # the Bayes head of the docstring: A = (d / e) I, b = c = 0 gives w^T x_q exactly
    return agreement(worst, 1e-10, "Prop. 2.1 (operators.softmax_attention_limit on the "
                     "one-component mixture N(0, Sigma_w) in R^{d+1}) against the tilt written "
                     "by hand, 4 random heads and tasks, d = 6: float64 round-off of O(1) "
                     "sums, ~1e2 eps", name="limit: max rel |Prop. 2.1 - closed form|",
                     relative=True)


@register_check(
    "icl.09-softmax-regression",
    "One softmax head on Lu et al.'s in-context regression: its infinite-prompt limit is a "
    "linear map (Prop. 2.1) that reaches the noise floor like linear attention; trained "
    "heads (every parameter free) reach the best isotropic head's error at this (l, d) "
    "(exact, icl.11) but do not beat it; trained pairs of heads beat the single head and do "
    "not beat the best isotropic head plus a mean head (exact); trained linear attention "
    "reaches its exact finite-d optimum.",
    "docs/topics/icl.md#softmax-attention-on-the-regression-task",
    experiment=SIMULATION,
    paper="d = 32 and 64, alpha 1-16, 4 seeds, 4000 steps, 32768 evaluation prompts; the "
          "single heads and every linear head within 1 % of their optimum's error (t SE "
          "included; the quick run's 5 % of the excess), stated before the run.",
)
def check_softmax_regression():
    a = experiment("icl.09-softmax-regression")      # the run the icl-softmax figure draws
    rho = float(a["rho"])
    ds, alphas = a["ds"], a["alphas"]
    m = len(ds) * len(alphas)
    t = bonferroni_t(m, 10**6)      # n_eval prompts per SE: normal quantiles
    det = {"t_multiplier": t, "points": {}}
    floor_worst = reach_worst = reach_power = lin_worst = pair_floor = largest()
    pair_gain = smallest()
    for i, d in enumerate(ds):
        for j, al in enumerate(alphas):
            ell = int(a["ell"][i, j])
            tt, g = float(a["t"][i, j]), float(a["g"][i, j])
            best = S.finite_prompt_error(tt, g, ell, rho, int(d))   # at the head evaluated
            lin_opt = float(icl.optimum_error(ell, int(d), rho))  # linear attention's best
            tgt, tgt_lin = _targets(best, lin_opt, rho)
            # trained heads against the best isotropic head on the same prompts (paired);
            # seeds share the evaluation prompts: the mean of their SEs bounds the SE of
            # their mean under any correlation
            dse = float(np.mean(a["soft_minus_iso_se"][i, j]))
            dm = float(np.mean(a["soft_minus_iso"][i, j]))
            floor_worst = largest(floor_worst, (-dm - t * dse) / (best - rho))
            # the equivalence form: |trained - isotropic| + t SE within the target, and the
            # comparison able to decide it (t SE at most half the target)
            reach_worst = largest(reach_worst, (abs(dm) + t * dse) / (best - rho) / tgt)
            reach_power = largest(reach_power, t * dse / (best - rho) / tgt)
            # trained pairs of heads against the best isotropic head plus a mean head
            # (exact, at the tilt where the search ended; the infimum lies at t -> 0)
            pair = S.two_head_error(float(a["pair_t"][i, j]), a["pair_e"][i, j], ell, rho,
                                    int(d))
            pm, pse = float(a["pair_mean"][i, j]), float(a["pair_mean_se"][i, j])
            pair_floor = largest(pair_floor, (pair - pm - t * pse) / (pair - rho))
            # the pair against the single trained head, on the same prompts: both minus
            # linear attention, paired; the sum of the two SEs bounds their difference's
            gain_se = pse + float(np.mean(a["soft_minus_lin_se"][i, j]))
            gain = float(np.mean(a["soft_minus_lin"][i, j]) - np.mean(a["pair_minus_lin"][i, j]))
            pair_gain = smallest(pair_gain, (gain - t * gain_se) / (best - rho))
            # trained linear attention (exact) against its exact finite-d optimum, every seed
            lin_worst = largest(lin_worst, (np.asarray(a["lin_exact"][i, j]) - lin_opt)
                                / (lin_opt - rho) / tgt_lin)
            det["points"][f"d{int(d)}_alpha{al:g}"] = {
                "l": ell, "t*": tt, "g*": g, "best_isotropic_exact": best,
                "delta_method": float(a["iso_delta"][i, j]),
                "isotropic_mc": float(a["iso_mc"][i, j]),
                "isotropic_se": float(a["iso_se"][i, j]),
                "trained_softmax": float(a["soft_eval"][i, j]),
                "trained_softmax_se": float(a["soft_eval_se"][i, j]),
                "trained_minus_isotropic": dm, "its_se": dse, "trained_linear": float(
                    np.mean(a["lin_exact"][i, j])), "linear_optimum": lin_opt,
                "lu_et_al_limit": float(a["lu_theory"][i, j]),
                "softmax_minus_linear": float(np.mean(a["soft_minus_lin"][i, j])),
                "excess_ratio": (float(a["soft_eval"][i, j]) - rho)
                / (float(np.mean(a["lin_exact"][i, j])) - rho),
                "pair_theory": pair, "pair_trained": pm, "pair_se": pse,
                "pair_share_of_gap_closed": (float(a["soft_eval"][i, j]) - pm)
                / (float(a["soft_eval"][i, j]) - lin_opt)}
    target = (f"{TRAIN_FRACTION:.0%} of the optimum's excess over rho"
              if experiment_profile() == "quick" else
              f"{PAPER_ERROR_FRACTION:.0%} of the optimum's error (the paper profile's)")
    return Outcome(
        _limit_comparison(),
        upper_bound(floor_worst, 0.0,
                    "trained heads (every parameter of A, b, c, e free) do not beat the best "
                    "isotropic head (exact optimum at this l, d): paired difference on the "
                    f"same prompts >= -t SE, t = {t:.2f} (Bonferroni over {m} points, 1 %). "
                    "The best head is isotropic by the task's rotation symmetry if the "
                    "optimum is unique; a failure would be a better, anisotropic head",
                    name="max ((isotropic - trained) - t SE) / (best - rho)"),
        upper_bound(reach_worst, 1.0,
                    "trained heads reach the best isotropic head: |trained - isotropic| + t "
                    f"SE (paired, on the same prompts) within the target: {target} (an "
                    "optimisation target stated before the runs)",
                    name="max (|trained - isotropic| + t SE) / target"),
        upper_bound(reach_power, 0.5,
                    "power: the paired evaluation decides that target, t SE at most half of "
                    "it", name="max t SE / target, trained vs isotropic"),
        upper_bound(pair_floor, 0.0,
                    "trained pairs of softmax heads (every parameter free) do not beat the "
                    "best isotropic head plus a mean head (two_head_optimum, exact): "
                    "trained - theory >= -t SE, the trained pair's error estimated as trained "
                    "linear attention's exact error plus their paired Monte Carlo difference",
                    name="max ((pair theory - trained) - t SE) / (theory - rho)"),
        lower_bound(pair_gain, 0.0,
                    "a second head that can output the prompt's mean label helps: the single "
                    "trained head minus the trained pair, paired on the same prompts, > t SE "
                    "(the pair's theory lies far below the single head's: details). Not "
                    "tested on the quick run: that the pairs reach their infimum, which lies "
                    "at t -> 0 with e -> inf, a boundary no finite head reaches (the trained "
                    "pairs stand 0.2-7 % of its excess above it after the quick run's 1000 "
                    "steps, 1-11 % after the paper run's 4000; issue #42)",
                    name="min ((single - pair) - t SE) / (best single - rho)"),
        upper_bound(lin_worst, 1.0,
                    "every trained linear attention head (exact error, icl.test_error) within "
                    "the same target of its exact finite-d optimum (icl.optimum_error, Gamma* = "
                    "[I/((1+rho)/alpha + 1 + 1/l), 0])",
                    name="max (linear trained - optimum) / target"),
        details=det)


EXACT_SIMULATION = "icl-softmax-exact"


def _delta_method_is_leading_order(rho):
    """Relative gap between the delta method's V and the exact one at the delta method's
    head, at l = 2^10..2^16 for alpha = 1, 4: its fitted log-log slope and its size
    against 3 e^t / l."""
    from ..stats import fit_loglog

    out = {"worst_slope_error": largest(), "worst_level": largest(), "gaps": {}}
    ells = [2**10, 2**12, 2**14, 2**16]
    for al in (1.0, 4.0):
        gaps = []
        for ell in ells:
            d = int(ell / al)
            o = S.softmax_head_optimum(al, rho, d)
            v_delta = S.isotropic_variance(o["t"], al, rho, d)
            err = S.finite_prompt_error(o["t"], o["g"], ell, rho, d)
            v_exact = (err - rho - (1 - o["g"]) ** 2) / o["g"] ** 2
            gap = abs(v_exact / v_delta - 1)
            gaps.append(gap)
            out["worst_level"] = largest(out["worst_level"], gap * ell / (3 * np.exp(o["t"])))
        fit = fit_loglog(np.array(ells, float), np.array(gaps))
        out["worst_slope_error"] = largest(out["worst_slope_error"], abs(fit.slope + 1))
        out["gaps"][f"alpha{al:g}"] = {"l": ells, "gap": gaps, "slope": fit.slope}
    return out


def _optima_at_their_heads(rho):
    """The optimisers against the error functions at the heads they return: the relative
    difference between each reported error and the error function there (the same formula
    evaluated once more), and the largest drop of the error under a 1 % step of one
    returned gain, tilt or value scale (a minimum has none).  softmax_head_optimum at
    (alpha, d) = (1, 16), (4, 64); two_head_optimum at (l, d) = (16, 8), (64, 16), its value
    scales only (its tilt ends on the search's lower bound, where the error still falls)."""
    value, drop, heads = largest(), largest(), {}
    for al, d in ((1.0, 16), (4.0, 64)):
        o = S.softmax_head_optimum(al, rho, d)
        e = S.isotropic_error(o["t"], o["g"], al, rho, d)
        scale = abs(o["error"])                       # an error is positive: the reported one
        value = largest(value, abs(o["error"] - e) / scale)
        for dt, dg in ((0.01, 0.0), (-0.01, 0.0), (0.0, 0.01), (0.0, -0.01)):
            step = S.isotropic_error(o["t"] * (1 + dt), o["g"] * (1 + dg), al, rho, d)
            drop = largest(drop, (e - step) / scale)
    for ell, d in ((16, 8), (64, 16)):
        o = S.two_head_optimum(ell, rho, d)
        e = S.two_head_error(o["t"], o["e"], ell, rho, d)
        scale = abs(o["error"])
        value = largest(value, abs(o["error"] - e) / scale)
        for k in (0, 1):
            for s in (0.01, -0.01):
                ek = np.array(o["e"], float)
                ek[k] *= 1 + s
                drop = largest(drop, (e - S.two_head_error(o["t"], ek, ell, rho, d)) / scale)
        heads[f"l{ell}_d{d}"] = {"t": o["t"], "e": np.asarray(o["e"]).tolist()}
    return value, drop, heads


#: icl.11's tolerance, relative to the error (stated before the run): the delta method's
#: head errs by 2-13 % at l <= 16 (issue #42), so a theory that cannot tell 2 % apart
#: could not tell the exact optimum from it; the run is sized for t SE <= 1 %
EXACT_TOL = 0.02


@register_check(
    "icl.11-softmax-every-prompt-length",
    "The isotropic softmax head's exact error at every prompt length (its tokens read "
    "through their projections on x_q, the softmax moments as one-dimensional integrals) "
    "equals a Monte Carlo of the d-dimensional head, at the exact optimum and at the delta "
    "method's head, and so does the paired difference between the two heads; the delta "
    "method's optimum and the two-head optimum report the errors of the heads they return "
    "(their bookkeeping; V, b and H themselves are tested by the comparisons above), the "
    "single head's (t, g) is a local minimum and the two heads' value scales minimise the "
    "error at their tilt (which ends on the search's lower bound, where the error still "
    "falls).",
    "docs/topics/icl.md#the-isotropic-head-at-every-prompt-length",
    experiment=EXACT_SIMULATION,
    paper="l = 8, 16, 32, 64, 128 and 1024 at alpha = 1, 2, 4 and 8 (d = 1 to 1024), the "
    "same tolerances.",
)
def check_softmax_every_prompt_length():
    a = experiment("icl.11-softmax-every-prompt-length")   # the figure's run
    rho = float(a["rho"])
    cells = [(i, j) for i in range(len(a["ells"])) for j in range(len(a["alphas"]))
             if np.isfinite(a["t"][i, j])]
    dcells = [c for c in cells if a["has_delta"][c]]
    t = bonferroni_t(len(cells) + 2 * len(dcells), 10**4)   # >= 512 token sets each
    # the exact errors the figure draws, as the run stored them (finite_prompt_optimum's
    # error at t*, finite_prompt_error at the delta method's head)
    pick = lambda k, cs: np.array([a[k][c] for c in cs])
    opt, dlt, opt_d = pick("exact", cells), pick("delta_exact", dcells), pick("exact", dcells)
    det = {"t_multiplier": t, "cells": {
        f"l{int(a['ells'][c[0]])}_alpha{a['alphas'][c[1]]:g}": {
            "d": int(a["d"][c]), "t*": float(a["t"][c]), "exact": float(opt[k]),
            "monte_carlo": float(a["mc"][c]), "se": float(a["mc_se"][c]),
            "token_sets": int(a["sets"][c])} for k, c in enumerate(cells)}}
    lead = _delta_method_is_leading_order(rho)
    det["delta_method_leading_order"] = lead
    opt_value, opt_drop, det["two_head_optima"] = _optima_at_their_heads(rho)
    det["optimum_value_vs_function"], det["optimum_largest_drop"] = opt_value, opt_drop
    why = (f"t = {t:.2f} (Bonferroni over {len(cells) + 2 * len(dcells)} cases, 1 %); tol "
           f"{EXACT_TOL:.0%} of the error, fixed before the run (the delta method's head "
           "errs by 2-13 % at l <= 16); the quadrature error (< 1e-6) is negligible")
    return Outcome(
        equivalence(pick("mc", cells), opt, pick("mc_se", cells), EXACT_TOL,
                    "exact error at the exact optimum (t*, g*) vs Monte Carlo of "
                    "softmax_head on d-dimensional prompts: " + why, t=t,
                    name="optimum: max (|MC - exact| + t SE) / exact"),
        equivalence(pick("delta_mc", dcells), dlt, pick("delta_mc_se", dcells), EXACT_TOL,
                    "exact error at the delta method's (t, g) vs Monte Carlo: " + why, t=t,
                    name="delta head: max (|MC - exact| + t SE) / exact"),
        # a difference of two theory values: its resolution is not a relative error of
        # either, so it states none (the two comparisons above state the check's)
        replace(equivalence(pick("gap_mc", dcells), dlt - opt_d, pick("gap_se", dcells),
                            EXACT_TOL, "paired Monte Carlo difference (delta head - optimum) "
                            "on the same prompts vs the exact difference, scaled by the "
                            "optimum's error: " + why, t=t, scale=opt_d,
                            name="gap: max (|MC - exact| + t SE) / error"), resolution=None),
        agreement(lead["worst_slope_error"], 0.1,
                  "the delta method (isotropic_variance) is the exact theory's leading order "
                  "in 1/l: the relative gap of V = (error - rho - (1-g)^2)/g^2 at the delta "
                  "method's (t, g) falls as 1/l, fitted slope of log |gap| on log l at l = "
                  "2^10..2^16 (alpha = 1, 4; d = l/alpha) within 0.1 of -1 (the next order, "
                  "O(1/l^2), moves it by < 0.01 there; deterministic, quadrature < 1e-9)",
                  name="|slope + 1| of the delta method's gap"),
        upper_bound(lead["worst_level"], 1.0,
                    "and its size is the next order's, below 3 e^t / l, the O(1/ESS) bound "
                    "with ESS = l e^-t that icl.09 used as its allowance; at l = 2^16 that "
                    "is ~1e-4, so a 2 % error in either formula fails",
                    name="max |gap| l / (3 e^t)"),
        agreement(opt_value, 1e-10, "the optimisers' reported errors (softmax_head_optimum, "
                  "two_head_optimum) equal the error functions at the heads they return "
                  "(isotropic_error, two_head_error): float64 round-off of a scalar formula "
                  "and of a 2 x 2 solve's quadratic form",
                  name="max |reported - error function at the head| / error", relative=True),
        upper_bound(opt_drop, 1e-12, "no 1 % step of the single head's returned tilt or "
                    "gain, nor of the two heads' value scales at their tilt, lowers the error "
                    "(beyond round-off); the two heads' tilt is not stepped: it ends on the "
                    "search's lower bound, where the error still falls",
                    name="max (error at head - error after a 1 % step) / error"),
        details=det)
