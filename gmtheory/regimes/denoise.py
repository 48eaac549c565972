"""Denoising regimes of one problem: Bayes, linear attention and softmax heads.

For ``X`` from any Gaussian mixture and ``Z = X + xi eps`` (docs/explore.md#denoising):

* ``bayes_risk`` — the MMSE ``E|f*(Z) - X|^2`` with ``f*`` the posterior mean. Shared
  covariance: :func:`gmtheory.denoising.bayes_risk` (Gauss–Hermite on the few directions
  ``f*`` depends on, any ``d``).  Otherwise the mean of the closed-form posterior trace
  ``tr Cov(X | Z)`` over a GH grid (``d <= gh_max_dim``) or Monte Carlo samples (SE).
* ``linear_risk`` — the best linear map ``A* z``, which is linear attention's
  infinite-prompt limit (Lemma C.7), in closed form (:func:`gmtheory.denoising.linear_risk`).
* ``head<M>_risk`` — the best sum of ``M`` softmax heads on ``mu_Z`` (Prop. 2.1), by
  L-BFGS from random and structured starts on a fixed grid or sample; its excess
  ``E|T(Z) - f*(Z)|^2`` evaluated on the grid or on fresh samples (SE), and the spread of
  the excess over starts.  ``risk = bayes_risk + excess`` (orthogonality of ``f*``).
* ``construction_excess`` — the two-head (App. C.6) or one-head construction, where the
  theory gives one (two components, shared ``gamma^2 I``, equal-norm means).

Every point also runs comparisons of the kinds of ``gmtheory verify``
(:mod:`gmtheory.verify`): closed form against quadrature against Monte Carlo.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import denoising as D
from ..comparisons import agreement, upper_bound
from ..operators import (
    effective_sample_size,
    finite_prompt_variance,
    softmax_attention,
    softmax_attention_limit,
)
from ..training import minimize_lbfgs
from ._nodes import (
    adaptive_means,
    combined_z,
    mc_mean_se,
    nodes,
    resolved_agreement,
    seeds_mean_se,
    train_on_prompts,
)

Z_SE = 4.0  # agreement of two Monte Carlo estimates: within 4 combined standard errors
QUAD_TOL = 0.25  # the adaptive quadrature stops when its change is below this x the MC SE


# compiled once per shape: run op by op, every primitive is lowered anew for each chunk
_tweedie = jax.jit(D.tweedie_denoiser)
_posterior_mean = jax.jit(D.posterior_mean)


def _heads_out(mix_z, theta, z):
    U, V = theta["U"], theta["V"]
    return sum(softmax_attention_limit(mix_z, U[h], V[h], z) for h in range(U.shape[0]))


_heads_out_jit = jax.jit(_heads_out)


def _heads_excess(theta, data):
    """Weighted mean of ``|sum_h T_h(z) - f*(z)|^2`` over fixed nodes (the search objective)."""
    mix_z, z, w, fstar = data
    return jnp.sum(w * jnp.sum((_heads_out(mix_z, theta, z) - fstar) ** 2, -1))


def _iso_construction(mix, xi):
    """The heads that realise ``f*`` exactly, where the theory gives them; else None."""
    if mix.n_components != 2 or not mix.is_shared():
        return None
    G = np.asarray(mix.covs[0])
    d = mix.dim
    g2 = float(G[0, 0])
    if not np.allclose(G, g2 * np.eye(d), rtol=0, atol=1e-12 * max(1.0, g2)):
        return None
    m1, m2 = np.asarray(mix.means)
    if abs(np.linalg.norm(m1) - np.linalg.norm(m2)) > 1e-10 * max(1.0, np.linalg.norm(m1)):
        return None
    if np.allclose(m1, m2) or d < 2:
        return None
    gamma = np.sqrt(g2)
    if np.isclose(g2, xi**2, rtol=1e-12):
        return "one head (gamma^2 = xi^2, Thm 4.1 (ii))", D.single_head_construction(gamma, xi, d)
    if gamma > 0:
        return "two heads (App. C.6)", D.two_head_construction(m1, m2, gamma, xi)
    return "degenerate (gamma = 0, Prop. C.3)", D.degenerate_construction(m1, m2, xi)


def _search(mix, xi, M, fit, key, opts, init_heads):
    """Best sum of ``M`` heads on the fit nodes: returns (theta, excess per start)."""
    d = mix.dim
    mz = D.noisy_mixture(mix, xi)
    fstar = _posterior_mean(mix, xi, fit.x)
    data = (mz, fit.x, fit.w, fstar)
    starts = [{"U": 0.5 * jax.random.normal(jax.random.fold_in(key, 2 * i), (M, d, d)),
               "V": 0.5 * jax.random.normal(jax.random.fold_in(key, 2 * i + 1), (M, d, d))}
              for i in range(opts.starts)]
    # structured start: the one-head form U = I / (gamma^2 + xi^2), V = I / 2 with the mean
    # variance as gamma^2 (exact when gamma^2 = xi^2), split over M heads
    g2 = float(jnp.mean(jnp.trace(mix.covs, axis1=1, axis2=2))) / d
    U0 = jnp.eye(d) / (g2 + xi**2)
    starts.append({"U": jnp.stack([U0] * M), "V": jnp.stack([0.5 * jnp.eye(d) / M] * M)})
    # linear start: head 1 with a small U = eps I and V = A* M_Z^-1 / eps is linear
    # attention's best map A* z up to O(eps), plus the constant V m_bar; a second head with
    # U = 0 and the opposite V cancels that constant (report.HEAD_FAMILY).  So the search
    # starts no worse than linear attention (exactly so when m_bar = 0 or M >= 2).
    A = D.linear_optimum(mix, xi)
    Mz = mz.second_moment()
    eps = 1e-2 / float(jnp.sqrt(jnp.trace(Mz) / d))
    V1 = A @ jnp.linalg.inv(Mz) / eps
    lin_U = [eps * jnp.eye(d)] + [jnp.zeros((d, d))] * (M - 1)
    lin_V = [V1] + ([-V1] if M >= 2 else []) + [jnp.zeros((d, d))] * (M - 2)
    starts.append({"U": jnp.stack(lin_U), "V": jnp.stack(lin_V)})
    for heads in init_heads:
        if len(heads) == M:
            starts.append({"U": jnp.stack([h[0] for h in heads]),
                           "V": jnp.stack([h[1] for h in heads])})
    res = minimize_lbfgs(_heads_excess, starts[0], data, starts=starts[1:],
                         maxiter=opts.maxiter)
    return res.x, np.asarray(res.funs)


def denoising_point(prob, key) -> tuple[dict, list]:
    """Every quantity of one denoising point; returns ``(values, comparisons)``."""
    out, cmp = denoising_limit(prob, key)
    if prob.L is not None:
        out = {**out, **denoising_prompt(prob, out, jax.random.fold_in(key, prob.L))}
    return out, cmp


def denoising_limit(prob, key) -> tuple[dict, list]:
    """The infinite-prompt quantities of one point (independent of ``prob.L``)."""
    opts = prob.options
    mix = prob.mixture()
    xi = float(prob.noise)
    mz = D.noisy_mixture(mix, xi)
    d = mix.dim
    k_eval, k_fit, k_mc, k_search = jax.random.split(key, 4)
    out: dict = {"d": d, "components": mix.n_components, "noise": xi}
    cmp = []

    # ---- Bayes (MMSE)
    # independent: |f_Tweedie(Z) - X|^2 on fresh (X, Z) pairs (first: its SE sets the
    # quadrature's tolerance)
    kx, ke = jax.random.split(k_mc)
    x, _ = mix.sample(kx, opts.mc_samples)
    z = x + xi * jax.random.normal(ke, x.shape, dtype=x.dtype)
    chunk = 20_000
    tw = jnp.concatenate([_tweedie(mix, xi, z[i:i + chunk])
                          for i in range(0, z.shape[0], chunk)])
    mc_b, mc_b_se = mc_mean_se(jnp.sum((tw - x) ** 2, -1))
    out["bayes_risk_mc"], out["bayes_risk_mc_se"] = mc_b, mc_b_se
    if mix.is_shared():
        out["bayes_risk"] = float(D.bayes_risk(mix, xi))
        out["bayes_risk_se"] = 0.0
        out["bayes_risk_error_kind"] = "exact (closed form; GH on a few directions)"
        out["bayes_method"] = "closed form + Gauss-Hermite on the span of S^-1 m_k (eq. (10))"
    else:
        est = adaptive_means(lambda q: (D.posterior_trace(mix, xi, q),), mz, k_eval,
                             order=opts.order, max_order=opts.max_order,
                             tols=(QUAD_TOL * mc_b_se,), gh_max_dim=opts.gh_max_dim,
                             n_samples=opts.mc_samples, names=("bayes_risk",))
        out["bayes_risk"], out["bayes_risk_se"] = est.values[0], est.errors[0]
        out["bayes_risk_error_kind"] = est.kinds[0]
        out["bayes_order_capped"] = est.capped
        if est.order is not None:
            out["bayes_order"] = est.order
        out["bayes_method"] = f"posterior trace, {est.method}"
    cmp.append(resolved_agreement(
        out["bayes_risk"], out["bayes_risk_se"], mc_b, mc_b_se, Z_SE,
        why="bayes_risk against an independent Monte Carlo of |f(Z) - X|^2 with the Tweedie "
        "denoiser (autodiff of log p_Z) on fresh samples: within 4 combined errors (the "
        "MC SE and the quadrature's measured error)",
        name="MMSE |z| (bayes_risk vs Tweedie MC)"))
    fz = _posterior_mean(mix, xi, z[:2000])
    scale = float(jnp.max(jnp.abs(tw[:2000]))) + 1e-300
    cmp.append(agreement(
        float(jnp.max(jnp.abs(fz - tw[:2000]))) / scale, 1e-9,
        "closed-form posterior mean against the Tweedie form z + xi^2 grad log p_Z(z) "
        "(autodiff): float64 round-off of a d x d solve and a log-sum-exp, far below 1e-9",
        name="posterior mean: closed form vs Tweedie (rel.)"))

    # ---- best linear map = linear attention's limit
    A = D.linear_optimum(mix, xi)
    out["linear_risk"] = float(D.linear_risk(mix, xi, A))
    # independent: quadrature of |(A - I) x|^2 (order 2 per dimension is exact for a
    # quadratic) + xi^2 |A|_F^2, with A read off linear attention's limit (Lemma C.7)
    from ..operators import linear_attention_limit
    Mz = mz.second_moment()
    A_att = linear_attention_limit(mz, jnp.eye(d), A @ jnp.linalg.inv(Mz), jnp.eye(d)).T
    q2 = nodes(mix, k_eval, n_samples=2, order=2, gh_max_dim=min(d, 14))
    if not q2.mc:
        lin_q = float(jnp.sum(q2.w * jnp.sum((q2.x @ (A_att - jnp.eye(d)).T) ** 2, -1))
                      + xi**2 * jnp.sum(A_att**2))
        cmp.append(agreement(
            abs(lin_q - out["linear_risk"]) / out["linear_risk"], 1e-10,
            "closed form tr((I-A) Sigma_X (I-A)^T) + xi^2 |A|_F^2 against order-2 "
            "Gauss-Hermite (exact for quadratics) of the map read off linear attention's "
            "limit: float64 round-off", name="linear_risk: closed form vs quadrature (rel.)"))
    lin_mc, lin_mc_se = mc_mean_se(jnp.sum((z @ A.T - x) ** 2, -1))
    out["linear_risk_mc"], out["linear_risk_mc_se"] = lin_mc, lin_mc_se
    cmp.append(agreement(
        combined_z(out["linear_risk"], 0.0, lin_mc, lin_mc_se), Z_SE,
        "closed-form linear_risk against Monte Carlo of |A* Z - X|^2 on fresh samples: within "
        "4 standard errors", name="linear_risk |z| (closed form vs MC)"))
    out["linear_risk_se"], out["linear_risk_error_kind"] = 0.0, "exact (closed form)"
    out["linear_gap"] = out["linear_risk"] - out["bayes_risk"]
    out["linear_gap_se"] = out["bayes_risk_se"]          # the linear risk is exact
    cmp.append(upper_bound(
        out["bayes_risk"] - out["linear_risk"],
        Z_SE * out["bayes_risk_se"] + 1e-10 * out["linear_risk"],
        "the MMSE is the smallest risk of any map, so bayes_risk <= linear_risk (up to 4 SE "
        "of an MC estimate and round-off)", name="bayes_risk - linear_risk"))

    # ---- softmax heads
    # the searches minimise a fixed-sample average: a coarse quadrature grid can be gamed
    # by sharp gates (small at the nodes, large between them); the result is then
    # evaluated on the fresh pairs (x, z) above
    fit = nodes(mz, k_fit, n_samples=opts.fit_samples, order=opts.fit_order, gh_max_dim=0)
    cons = _iso_construction(mix, xi)
    init_heads = []
    if cons is not None:
        label, heads = cons
        init_heads.append(heads)
        hz = sum(softmax_attention_limit(mz, U, V, z[:2000]) for U, V in heads)
        ref = D.bayes_denoiser(mix, xi, z[:2000])
        err = float(jnp.max(jnp.abs(hz - ref))) / (float(jnp.max(jnp.abs(ref))) + 1e-300)
        out["construction"] = label
        out["construction_heads"] = len(heads)
        out["construction_excess"], out["construction_excess_se"] = mc_mean_se(
            jnp.sum((hz - ref) ** 2, -1))
        cmp.append(agreement(
            err, 1e-8, f"the {label} construction against eq. (10)'s Bayes denoiser, point "
            "by point: both closed forms, equal up to float64 round-off in the gates",
            name="construction vs f* (max rel.)"))
    best_prev = None
    fstar_mc = jnp.concatenate([_posterior_mean(mix, xi, z[i:i + chunk])
                                for i in range(0, z.shape[0], chunk)])
    for M in opts.heads:
        inits = list(init_heads)
        if best_prev is not None and M == best_prev[0] + 1:  # grow the best smaller fit
            th = best_prev[1]
            inits.append([(th["U"][h], th["V"][h]) for h in range(best_prev[0])]
                         + [(0.1 * jnp.eye(d), jnp.zeros((d, d)))])
        theta, per_start = _search(mix, xi, M, fit, jax.random.fold_in(k_search, M), opts,
                                   inits)
        best_prev = (M, theta)
        tz = jnp.concatenate([_heads_out_jit(mz, theta, z[i:i + chunk])
                              for i in range(0, z.shape[0], chunk)])
        ex = jnp.sum((tz - fstar_mc) ** 2, -1)
        e, se = mc_mean_se(ex)
        out[f"head{M}_excess"], out[f"head{M}_excess_se"] = e, se
        out[f"head{M}_risk"] = out["bayes_risk"] + e
        out[f"head{M}_risk_se"] = float(np.hypot(out["bayes_risk_se"], se))
        # orthogonality of f*: |T - x|^2 = |T - f*|^2 + |f* - x|^2 + 2 <T - f*, f* - x>,
        # and the last term has mean 0 for any T (E[x | z] = f*(z))
        cross, cross_se = mc_mean_se(2 * jnp.sum((tz - fstar_mc) * (fstar_mc - x), -1))
        cmp.append(agreement(
            combined_z(cross, cross_se, 0.0, 0.0), Z_SE,
            f"{M} head(s): the risk as bayes_risk + excess rests on E<T - f*, f* - X> = 0 "
            "(f* the posterior mean); its Monte Carlo mean on fresh pairs is within 4 "
            "standard errors of 0", name=f"head{M}: orthogonality |z|"))
        g, g_se = out["linear_gap"], out["linear_gap_se"]
        out[f"head{M}_gap_recovered"] = 1.0 - e / g if g > 0 else float("nan")
        # delta method, the excess (fresh pairs) and the gap (Bayes value) independent
        out[f"head{M}_gap_recovered_se"] = (float(np.hypot(se / g, e * g_se / g**2))
                                            if g > 0 else float("nan"))
        out[f"head{M}_starts"] = per_start
        out[f"head{M}_U"], out[f"head{M}_V"] = np.asarray(theta["U"]), np.asarray(theta["V"])
    # the best of linear attention and the heads, and the mixture mean that one head cannot
    # cancel (report.HEAD_FAMILY)
    cands = [("linear attention", out["linear_risk"], out["linear_risk_se"])] + [
        (f"{M} head(s)", out[f"head{M}_risk"], out[f"head{M}_risk_se"]) for M in opts.heads]
    out["best_model"], out["best_risk"], out["best_risk_se"] = min(cands, key=lambda c: c[1])
    out["mixture_mean_norm"] = float(jnp.linalg.norm(mix.mean()))
    out["fit_method"] = fit.method
    out["head_eval_method"] = f"fresh Monte Carlo, {int(z.shape[0]):,} pairs"

    return out, cmp


def denoising_prompt(prob, limit: dict, key) -> dict:
    """Prompts of ``prob.L`` tokens: the limit-optimal head of :func:`denoising_limit`'s
    values on them, and heads trained on them by the training engine."""
    opts = prob.options
    mix, xi = prob.mixture(), float(prob.noise)
    M = min(opts.heads)
    theta = {"U": jnp.asarray(limit[f"head{M}_U"]), "V": jnp.asarray(limit[f"head{M}_V"])}
    k_eval_p, k_train = jax.random.split(key)
    out = _finite_prompt(mix, xi, theta, prob.L, k_eval_p, opts)
    if opts.train_steps > 0:
        trained = train_on_prompts(_train_loss, theta, (mix, jnp.asarray(xi)), k_train, opts,
                                   L=prob.L, tag=["explore-denoise", prob.L])
        per_seed = [_finite_prompt(mix, xi, jax.tree.map(lambda a, s=s: a[s], trained),
                                   prob.L, k_eval_p, opts, prefix="trained")
                    for s in range(opts.train_seeds)]
        out["trained_risk"], out["trained_risk_se"] = seeds_mean_se(
            [p["trained_risk"] for p in per_seed], [p["trained_risk_se"] for p in per_seed])
        out["trained_steps"] = opts.train_steps
    return out


def _prompt_batch(mix, xi, key, P, L, Q):
    """``P`` prompts of ``L`` tokens from ``mu_Z`` and ``Q`` pairs ``(x, z)`` per prompt."""
    mz = D.noisy_mixture(mix, xi)
    kt, kx, ke = jax.random.split(key, 3)
    toks = mz.sample(kt, P * L)[0].reshape(P, L, -1)
    x = mix.sample(kx, P * Q)[0].reshape(P, Q, -1)
    z = x + xi * jax.random.normal(ke, x.shape, dtype=x.dtype)
    return toks, x, z


def _prompt_heads(theta, toks, z):
    return sum(softmax_attention(toks, theta["U"][h], theta["V"][h], z)
               for h in range(theta["U"].shape[0]))


def _train_loss(theta, data, key):
    """Finite-prompt training loss: mean |head(prompt)(z) - x|^2 over fresh prompts
    (``data = (mixture, xi, shape)``; the prompt length and batch sizes are read off the
    static shape of ``shape`` so that one compiled program serves every point of an L)."""
    mix, xi, shape = data
    P, L, Q = shape.shape
    toks, x, z = _prompt_batch(mix, xi, key, P, L, Q)
    return jnp.mean(jnp.sum((_prompt_heads(theta, toks, z) - x) ** 2, -1))


def _finite_prompt(mix, xi, theta, L, key, opts, prefix="prompt"):
    """Risk of the heads on prompts of ``L`` tokens from ``mu_Z`` (SE over prompts), and
    ``E|T_L - T|^2`` with its delta-method prediction (operators.finite_prompt_variance)."""
    mz = D.noisy_mixture(mix, xi)
    toks, x, z = _prompt_batch(mix, xi, key, opts.prompts, L, opts.queries)
    tl = _prompt_heads(theta, toks, z)
    risks = jnp.mean(jnp.sum((tl - x) ** 2, -1), -1)                      # per prompt
    r, r_se = mc_mean_se(risks)
    res = {f"{prefix}_risk": r, f"{prefix}_risk_se": r_se}
    if prefix != "prompt":
        return res
    zf = z.reshape(-1, z.shape[-1])
    ti = _heads_out_jit(mz, theta, zf).reshape(tl.shape)
    dv, dv_se = mc_mean_se(jnp.mean(jnp.sum((tl - ti) ** 2, -1), -1))
    res.update({"L": L, "prompt_dev": dv, "prompt_dev_se": dv_se})
    if theta["U"].shape[0] == 1:
        # the prediction averaged over the same queries (its SE: over those queries)
        pred, pred_se = mc_mean_se(jnp.sum(
            finite_prompt_variance(mz, theta["U"][0], theta["V"][0], zf), -1) / L)
        res["prompt_dev_pred"], res["prompt_dev_pred_se"] = pred, pred_se
        res["prompt_dev_ratio"] = dv / pred
        # delta method; the two share their queries (positively correlated), so adding the
        # relative errors in quadrature overstates the ratio's error
        res["prompt_dev_ratio_se"] = float(abs(dv / pred) * np.hypot(dv_se / dv, pred_se / pred))
        # the 1/L law is asymptotic in the effective sample size of the prompt's weights
        ess = effective_sample_size(mz, theta["U"][0], zf, L)
        res["prompt_ess_p10"] = float(jnp.percentile(ess, 10))
    return res
