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

import jax
import jax.numpy as jnp
import numpy as np

from .. import lda, operators, stats
from ..comparisons import largest, smallest
from ._registry import (
    Outcome,
    agreement,
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
#: two float64 evaluations of the same attention output, each a sum over the prompt's 64
#: tokens of products of the trained heads' O(1) weights with O(1) tokens (scores, values),
#: compared relative to 1 + |output|: ~1e2 eps of round-off, stated with a margin of 1e4
#: (which covers heads whose weights are some ten times larger)
ROUNDOFF_TOL = 1e-10
#: the prompt (tokens) and the queries on which lda.25 evaluates the trained heads twice
READ_TOKENS, READ_QUERIES = 64, 8


def _augmented(theta: lda.LDAParams):
    """Lemma B.1's parametrisation of a head as attention on the label-augmented tokens
    ``z_i = (x_i, y_i)`` with the query ``(x, 0)``: ``U = [[U11^T, 0], [u12^T, 0]]``, ``V =
    [v21, v22]`` (built independently of lda.prompt_predictor's einsums)."""
    d = theta.U11.shape[0]
    U = jnp.zeros((d + 1, d + 1)).at[:d, :d].set(theta.U11.T).at[d, :d].set(theta.u12)
    return U, jnp.concatenate([theta.v21, theta.v22[None]])[None]


def read_heads_twice(a, prob: lda.LDAProblem, seed: int) -> dict:
    """The run's trained heads (every kind, L and seed) evaluated twice on one fresh
    prompt of :data:`READ_TOKENS` tokens and :data:`READ_QUERIES` queries (key
    ``fold_in(key(seed), 25)``): lda.prompt_predictor against operators.softmax_attention
    or operators.linear_attention on the label-augmented tokens, and the linear heads'
    limit weight (lda.linear_limit_weight) against operators.linear_attention_limit on the
    label-augmented mixture (lda.label_augmented_mixture).  Returns the two worst relative
    differences (aggregates that count their cases)."""
    kt, kq = jax.random.split(jax.random.fold_in(jax.random.key(seed), 25))
    X, Y = lda.sample(prob, kt, READ_TOKENS)
    x, _ = lda.sample(prob, kq, READ_QUERIES)
    tokens = jnp.concatenate([X, Y[:, None]], 1)
    queries = jnp.concatenate([x, jnp.zeros((READ_QUERIES, 1))], 1)
    like = lda.LDAParams(jnp.zeros((prob.d, prob.d)), jnp.zeros(prob.d), jnp.zeros(prob.d),
                         jnp.zeros(()))
    mix = lda.label_augmented_mixture(prob)
    rel = lambda u, v: jnp.abs(u - v) / (1 + jnp.abs(v))
    prompt = limit = largest()
    for kind, attend in (("softmax", operators.softmax_attention),
                         ("linear", operators.linear_attention)):
        flat = np.asarray(a[f"{kind}_theta"])
        for vec in flat.reshape(-1, flat.shape[-1]):
            th = lda.unflatten(like, jnp.asarray(vec))
            U, V = _augmented(th)
            ours = lda.prompt_predictor(th, X, Y, x, kind)
            prompt = largest(prompt, rel(ours, attend(tokens, U, V, queries)[:, 0]))
            if kind == "linear":
                w = x @ lda.linear_limit_weight(prob, th)
                limit = largest(limit, rel(w, operators.linear_attention_limit(
                    mix, U, V, queries)[:, 0]))
    return {"prompt": prompt, "limit": limit}


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
    "softmax seed lies below that gap; every trained head's predictor and the linear heads' "
    "limit weight equal attention on the label-augmented tokens (x, y) and its limit on "
    "their mixture (operators) to round-off.",
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
    twice = read_heads_twice(a, prob, cfg.seed)
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
        agreement(twice["prompt"], ROUNDOFF_TOL,
                  "every trained head of the run (both kinds, every L and seed) on one fresh "
                  f"{READ_TOKENS}-token prompt and {READ_QUERIES} queries: the figure's "
                  "predictor (lda.prompt_predictor) against operators.softmax_attention or "
                  "operators.linear_attention on the label-augmented tokens (x_i, y_i) with "
                  "query (x, 0), Lemma B.1's U and V; float64 round-off of O(100)-term sums",
                  name="max rel |prompt predictor - attention on (x, y) tokens|",
                  relative=True),
        agreement(twice["limit"], ROUNDOFF_TOL,
                  "every trained linear head: its infinite-prompt predictor w^T x with w from "
                  "lda.linear_limit_weight (the class moments written out) against "
                  "operators.linear_attention_limit (V E[z z^T] U z) on the label-augmented "
                  "mixture of (x, y), at the same queries; float64 round-off",
                  name="max rel |w^T x - linear attention limit on (x, y)|",
                  relative=True),
        details=det)
