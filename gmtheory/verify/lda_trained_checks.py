"""Checks 24 and 25 of attention-based LDA: trained heads beside the bounds that the Bayes
rule proves (docs/topics/lda.md), each on the run its figure draws: lda.24 on the
``lda-sweep`` exploration, lda.25 on the ``lda-finite-prompt`` heads.

R* is the smallest population logistic risk of any predictor (the Bayes log-odds
w*^T x + b* minimises it uniquely), so no trained head lies below it; linear attention's
infinite-prompt predictor is w^T x with no bias, so its best risk min_w L(w) is R* exactly
when b* = 0 and above R* otherwise.  On a finite prompt the tokens are independent of the
query's label given the query, so a head that reads them is still a predictor of the
label from (x, prompt) and its risk is at least R*."""

from __future__ import annotations

import numpy as np

from .. import lda, stats
from ..comparisons import largest, smallest
from ._registry import (
    Outcome,
    count,
    experiment,
    experiment_config,
    lower_bound,
    register_check,
    upper_bound,
)

#: the reference's accuracy for quadrature quantities (as in lda.12 and lda.14): two risks
#: that are equal in exact arithmetic agree to it at the runs' Gauss-Hermite orders
QUAD_TOL = 1e-8


@register_check(
    "lda.24-sweep-bayes-bounds",
    "Over the lda-sweep figure's own grid (m± = ±(s/2) e1 + e2, Γ = I, π₊ in 0.5..0.9, "
    "s in 0.5..3, d = 2 and 5): the best linear attention (no bias path) reaches R* where "
    "b* = 0 (π₊ = 1/2) and lies above it elsewhere, its gap rising with π₊ at every "
    "(d, s); no population-trained softmax head lies below R*.",
    "docs/topics/lda.md#beyond-the-paper-finite-prompts-and-a-sweep",
    experiment="lda-sweep",
)
def check_sweep_bounds():
    a = experiment("lda.24-sweep-bayes-bounds")       # the run the lda-sweep figure draws
    pi = np.asarray(a["pi_pos"], float)
    lin, soft = np.asarray(a["linear_excess"]), np.asarray(a["softmax_excess"])  # (d, s, pi)
    half = pi == 0.5
    at_half = lin[..., half]
    order = np.argsort(pi)
    # each risk is a deterministic quadrature value (accuracy QUAD_TOL): a step counts as
    # a rise only above twice that accuracy
    rising = np.all(np.diff(lin[..., order], axis=-1) > 2 * QUAD_TOL, axis=-1)
    det = {"linear_excess_at_half": at_half.tolist(), "rows_rising": rising.tolist(),
           "smallest_softmax_excess": float(np.min(soft)),
           "smallest_linear_gap_off_half": float(np.min(lin[..., ~half]))}
    return Outcome(
        upper_bound(largest(np.abs(at_half)), QUAD_TOL,
                    "b* = 0 makes the Bayes log-odds w*^T x, which linear attention's limit "
                    "predictor w^T x represents: its best risk is R* (quadrature accuracy, "
                    "the reference's 1e-8)", name="max |linear gap| at pi+ = 1/2",
                    cases=int(at_half.size)),
        lower_bound(smallest(lin[..., ~half]), QUAD_TOL,
                    "b* != 0: no w^T x equals w*^T x + b*, and R* is the unique minimum of "
                    "the population logistic risk, so the gap is positive (above quadrature "
                    "accuracy)", name="min linear gap at pi+ != 1/2",
                    cases=int(lin[..., ~half].size)),
        lower_bound(smallest(soft), -QUAD_TOL,
                    "R* is the smallest population logistic risk of any predictor: a "
                    "trained softmax head's excess is >= 0 up to quadrature accuracy",
                    name="min softmax excess over the grid", cases=int(soft.size)),
        count(int(rising.sum()), int(rising.size),
              "the figure's reading: at every (d, separation) the linear gap rises "
              "with pi+ (with the class imbalance |b*|), each step by more than twice the "
              "quadrature accuracy (the risks are deterministic; their error is that "
              "accuracy)",
              name="(d, separation) rows whose linear gap rises with pi+"),
        details=det)


@register_check(
    "lda.25-finite-prompt-bounds",
    "The lda-finite-prompt figure's own heads (C1, Adam on L-token prompts, every seed): "
    "no trained head lies below R* (the softmax head's infinite-prompt excess >= 0; on fresh "
    "L-token prompts, excess + t SE >= 0), the linear head never below the best linear "
    "attention's gap; the softmax excess falls with L (the mean over seeds of each seed's "
    "log-log slope over the fitted L range, + t SE, is negative) and at the largest L every "
    "softmax seed lies below that gap.",
    "docs/topics/lda.md#beyond-the-paper-finite-prompts-and-a-sweep",
    experiment="lda-finite-prompt",
)
def check_finite_prompt_bounds():
    cid = "lda.25-finite-prompt-bounds"
    a, cfg = experiment(cid), experiment_config(cid)   # the run the figure draws
    prob = lda.config("C1")
    # the theory the figure draws beside the heads, recomputed here
    gap = float(lda.linear_attention_optimum(prob, cfg.order)[1] - lda.bayes_risk(prob))
    Ls = np.asarray(a["Ls"], float)
    soft, lin = np.asarray(a["softmax_excess_inf"]), np.asarray(a["linear_excess_inf"])
    fin = np.stack([a["softmax_excess_finite"], a["linear_excess_finite"]])
    fin_se = np.stack([a["softmax_excess_finite_se"], a["linear_excess_finite_se"]])
    t_fin = stats.bonferroni_t(int(fin.size), cfg.eval_prompts - 1, 0.05)
    fitted = Ls <= cfg.fit_max_L
    slopes = np.array([stats.fit_loglog(Ls[fitted], soft[fitted, j]).slope
                       for j in range(soft.shape[1])])
    m, se = stats.mean_se(slopes)
    t_sl = stats.bonferroni_t(1, slopes.size - 1, 0.05)
    last_m, last_se = stats.mean_se(soft[-1])
    det = {"linear_gap": gap, "t_finite": t_fin, "seed_slopes": slopes.tolist(),
           "slope_mean": float(m), "slope_se": float(se), "t_slope": t_sl,
           "softmax_excess_at_largest_L": float(last_m),
           "softmax_excess_at_largest_L_seed_se": float(last_se)}
    return Outcome(
        lower_bound(smallest(lin - gap), -QUAD_TOL,
                    "the linear head's limit predictor is w^T x: its risk is at least the "
                    "best linear attention's, min_w L(w) (recomputed here at the run's "
                    "order), up to quadrature accuracy",
                    name="min (linear excess - best linear gap)", cases=int(lin.size)),
        lower_bound(smallest(soft), -QUAD_TOL,
                    "R* is the smallest population logistic risk of any predictor: the "
                    "softmax head's infinite-prompt excess is >= 0 up to quadrature accuracy",
                    name="min softmax infinite-prompt excess", cases=int(soft.size)),
        lower_bound(smallest(fin + t_fin * fin_se), 0.0,
                    "on fresh L-token prompts the tokens are independent of the query's label "
                    "given the query, so the head's risk is >= R*: every seed's mean excess "
                    "over its evaluation prompts (paired with the Bayes score on the same "
                    f"queries) + t SE is >= 0, t = {t_fin:.2f} (Bonferroni over every kind, L "
                    "and seed, family-wise 5 %)",
                    name="min (finite-prompt excess + t SE)", cases=int(fin.size)),
        upper_bound(m + t_sl * se, 0.0,
                    "the softmax excess falls with L: each seed's log-log slope of its "
                    f"infinite-prompt excess over L <= {cfg.fit_max_L}, their mean + t SE "
                    f"over the {slopes.size} seeds (t = {t_sl:.2f}, two-sided 5 %) is "
                    "negative", name="mean seed slope + t SE"),
        lower_bound(gap - largest(soft[-1]), QUAD_TOL,
                    f"at the largest L ({int(Ls[-1])}) every softmax seed lies below the best "
                    "linear attention's gap (a bias-free head cannot follow b* != 0), by more "
                    "than the quadrature accuracy that each seed's deterministic excess "
                    f"carries (the seeds' mean {last_m:.4f} +- {last_se:.1e} SE is in the "
                    "details)",
                    name="best linear gap - max softmax excess at the largest L"),
        details=det)
