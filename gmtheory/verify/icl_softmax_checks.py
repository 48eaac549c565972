"""Softmax attention on the in-context regression task
(docs/topics/icl.md#softmax-attention-on-the-regression-task): the infinite-prompt limit by
Prop. 2.1, the derived finite-prompt optimum against Monte Carlo, and trained heads (the
``icl-softmax`` simulation, the figure's cached run) against both."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import icl
from .. import icl_softmax as S
from ..comparisons import largest
from ..mixture import GaussianMixture
from ..operators import softmax_attention_limit
from ..problems import stream_key
from ..stats import bonferroni_t
from ._registry import Outcome, agreement, experiment, register_check, upper_bound

SEED = 20261204
SIMULATION = "icl-softmax"
#: training is asked to come within this fraction of the excess error over the noise floor
#: of the optimum it is compared with (stated before the runs; an optimisation target, not
#: a theorem: Adam with a cosine schedule on fresh prompts for the profile's steps)
TRAIN_FRACTION = 0.05


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
    "linear map (Prop. 2.1) that reaches the noise floor like linear attention; at finite "
    "prompts its best error is the derived rho + V*/(1 + V*) (linear attention's at prompt "
    "length l/e as d -> inf), which Monte Carlo confirms and trained heads reach but do not "
    "beat; trained linear attention reaches its exact finite-d optimum.",
    "docs/topics/icl.md#softmax-attention-on-the-regression-task",
    experiment=SIMULATION,
)
def check_softmax_regression():
    a = experiment("icl.09-softmax-regression")      # the run the icl-softmax figure draws
    rho = float(a["rho"])
    ds, alphas = a["ds"], a["alphas"]
    m = len(ds) * len(alphas)
    t = bonferroni_t(m, 10**6)      # n_eval prompts per SE: normal quantiles
    det = {"t_multiplier": t, "points": {}}
    mc_worst = floor_worst = reach_worst = lin_worst = largest()
    for i, d in enumerate(ds):
        for j, al in enumerate(alphas):
            ell = int(a["ell"][i, j])
            pred, V, tt, g = (float(a[k][i, j]) for k in ("iso_pred", "V", "t", "g"))
            # 1. delta method against Monte Carlo of the same head
            allow = 3 * g * g * V * np.exp(tt) / ell
            mc_worst = largest(mc_worst, (abs(float(a["iso_mc"][i, j]) - pred)
                                      - t * float(a["iso_se"][i, j])) / allow)
            # 2./3. trained heads against the isotropic head on the same prompts (paired)
            dif = a["soft_minus_iso"][i, j]
            # seeds share the evaluation prompts: the mean of their SEs bounds the SE of
            # their mean under any correlation
            dse = float(np.mean(a["soft_minus_iso_se"][i, j]))
            dm = float(np.mean(dif))
            floor_worst = largest(floor_worst, (-dm - t * dse) / allow)
            reach_worst = largest(reach_worst, (dm - t * dse) / (pred - rho))
            # 4. trained linear attention against its exact finite-d optimum
            gam = jnp.zeros((int(d), int(d) + 1)).at[:, :int(d)].set(
                jnp.eye(int(d)) / ((1 + rho) * int(d) / ell + 1 + 1 / ell))
            lin_opt = float(icl.test_error(gam, ell, rho))
            lin_worst = largest(lin_worst, (float(np.mean(a["lin_exact"][i, j])) - lin_opt)
                            / (lin_opt - rho))
            det["points"][f"d{int(d)}_alpha{al:g}"] = {
                "l": ell, "t*": tt, "g*": g, "derived": pred,
                "isotropic_mc": float(a["iso_mc"][i, j]),
                "isotropic_se": float(a["iso_se"][i, j]),
                "trained_softmax": float(a["soft_mean"][i, j]),
                "trained_minus_isotropic": dm, "its_se": dse, "trained_linear": float(
                    np.mean(a["lin_exact"][i, j])), "linear_optimum": lin_opt,
                "lu_et_al_limit": float(a["lu_theory"][i, j]),
                "softmax_minus_linear": float(np.mean(a["soft_minus_lin"][i, j])),
                "excess_ratio": (float(a["soft_mean"][i, j]) - rho)
                / (float(np.mean(a["lin_exact"][i, j])) - rho)}
    return Outcome(
        _limit_comparison(),
        upper_bound(mc_worst, 1.0,
                    "derived optimum rho + V/(1+V) (delta method, leading order in 1/l) "
                    "against Monte Carlo of the isotropic head at (t*, g*) on n_eval prompts: "
                    f"|MC - derived| <= t SE + 3 g^2 V e^t / l, t = {t:.2f} (Bonferroni over "
                    f"{m} points, 1 %); the second term bounds the next order of the delta "
                    "method, O(1/ESS) relative with ESS = l e^-t (constant 3 chosen after a "
                    "NumPy pilot showed |MC - derived| <= 2.1 SE at l >= 16)",
                    name="max (|MC - derived| - t SE) / allowance"),
        upper_bound(floor_worst, 1.0,
                    "trained heads (every parameter of A, b, c, e free) do not beat the "
                    "isotropic head at the derived optimum by more than the delta method's "
                    "next order: paired difference on the same prompts >= -(t SE + 3 g^2 V "
                    "e^t / l). (A first version allowed t SE only and failed by 0.047 at "
                    "d = 8, l = 8: at a few effective tokens the finite-l optimum lies below "
                    "the leading-order one, as the Monte Carlo comparison already allows.)",
                    name="max ((isotropic - trained) - t SE) / allowance"),
        upper_bound(reach_worst, TRAIN_FRACTION,
                    "trained heads reach the derived optimum: paired excess (trained - "
                    "isotropic) - t SE within 5 % of the optimum's excess over rho (an "
                    "optimisation target stated before the runs)",
                    name="max ((trained - isotropic) - t SE) / (derived - rho)"),
        upper_bound(lin_worst, TRAIN_FRACTION,
                    "trained linear attention (exact error, icl.test_error) within 5 % of the "
                    "excess of its exact finite-d optimum Gamma* = [I/((1+rho)/alpha + 1 + "
                    "1/l), 0] (same optimisation target)",
                    name="max (linear trained - optimum) / (optimum - rho)"),
        details=det)
