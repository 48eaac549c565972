"""Classification regimes of one problem: Bayes, linear attention and a softmax head.

Components carry class labels (docs/explore.md#classification).  Tokens are ``(x, y)``
with ``y = ±1`` for two classes (class 1 is ``+1``, Section 3's convention) and the one-hot
label for ``C > 2``; the query is ``(x, 0)`` and the prediction is the label coordinates
of attention.  The risk is the paper's: the logistic loss ``log(1 + e^{-y g})`` for two
classes, the cross-entropy of ``softmax(g)`` for more.

* ``bayes_error`` — ``E[1 - max_c P(c | X)]``; ``bayes_risk`` — the conditional entropy
  (the smallest risk).  Two classes of one Gaussian each with a shared covariance (the
  LDA setting of Section 3): closed form (``Phi`` of the Mahalanobis distance) and
  :func:`gmtheory.lda.bayes_risk`.  Otherwise an adaptive GH grid (``d <= gh_max_dim``;
  the order doubles until it changes by less than a quarter of the Monte Carlo SE, and the
  last change is its error) or Monte Carlo (SE); both are compared with Monte Carlo on
  fresh labelled samples (the counted mistakes; the mean of ``-log P(class | X)``).
* ``linear_risk`` / ``linear_error`` — linear attention's limit ``g(x) = W x`` (no bias
  path, Lemma C.7) at its best ``W``: :func:`gmtheory.lda.linear_attention_optimum` in the
  LDA setting, else L-BFGS on the grid or a fixed sample.
* ``softmax_risk`` / ``softmax_error`` — one softmax head on the label-augmented mixture
  (Prop. 2.1).  In the LDA setting Lemma B.3's parameters realise the Bayes score
  (:func:`gmtheory.lda.bayes_parameters`); otherwise the best head by L-BFGS from random
  and structured starts, with the spread over starts.

0–1 errors of the attention predictors are Monte Carlo means on fresh samples (SE).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy.stats import norm

from .. import lda
from ..comparisons import agreement, upper_bound
from ..mixture import GaussianMixture
from ..operators import softmax_attention, softmax_attention_limit
from ..training import minimize_lbfgs
from ._nodes import (
    adaptive_means,
    binomial_mean_se,
    combined_z,
    mc_mean_se,
    nodes,
    resolved_agreement,
    seeds_mean_se,
    train_on_prompts,
)

Z_SE = 4.0
QUAD_TOL = 0.25  # the adaptive quadrature stops when its change is below this x the MC SE


def _label_vectors(labels, C):
    """Token labels per component: ``±1`` (C = 2) or one-hot rows (C > 2)."""
    lab = np.asarray(labels)
    if C == 2:
        return np.where(lab == 1, 1.0, -1.0)[:, None]
    return np.eye(C)[lab]


def _augmented(mix: GaussianMixture, Y):
    """Law of the token ``(X, Y)``: components ``N((m_k, y_k), blockdiag(Gamma_k, 0))``."""
    K, d = mix.n_components, mix.dim
    c = Y.shape[1]
    covs = jnp.zeros((K, d + c, d + c)).at[:, :d, :d].set(mix.covs)
    return GaussianMixture(mix.weights, jnp.concatenate([mix.means, jnp.asarray(Y)], 1), covs)


def _loss(g, y):
    """Per-point risk: logistic for ``y = ±1`` (g, y of shape (n, 1)), else cross-entropy."""
    if y.shape[1] == 1:
        return jax.nn.softplus(-y[:, 0] * g[:, 0])
    return -jnp.sum(y * jax.nn.log_softmax(g, -1), -1)


def _wrong(g, y):
    if y.shape[1] == 1:
        return (y[:, 0] * g[:, 0] <= 0).astype(g.dtype)
    return (jnp.argmax(g, -1) != jnp.argmax(y, -1)).astype(g.dtype)


def _head(aug, theta, x):
    d = x.shape[1]
    c = aug.dim - d
    U = jnp.concatenate([theta["U"], jnp.zeros((d + c, c), theta["U"].dtype)], 1)
    q = jnp.concatenate([x, jnp.zeros((x.shape[0], c), x.dtype)], 1)
    return softmax_attention_limit(aug, U, theta["V"], q)


def _head_risk(theta, data):
    aug, x, w, y = data
    return jnp.sum(w * _loss(_head(aug, theta, x), y))


def _linear_risk(W, data):
    x, w, y = data
    return jnp.sum(w * _loss(x @ W.T, y))


def _class_posteriors(mix, labels, C, x):
    """``P(c | x)`` from the component log-densities (``jax.scipy`` Gaussian log-pdf)."""
    from jax.scipy.stats import multivariate_normal as mvn

    lp = jnp.stack([jnp.log(mix.weights[k]) + mvn.logpdf(x, mix.means[k], mix.covs[k])
                    for k in range(mix.n_components)], 1)
    onehot = jnp.asarray(np.eye(C)[np.asarray(labels)])               # (K, C)
    lc = jax.scipy.special.logsumexp(lp[:, :, None], axis=1, b=onehot[None])
    return jax.nn.softmax(lc, -1)


def lda_problem(prob):
    """The :class:`gmtheory.lda.LDAProblem` of a two-class, two-component problem with a
    shared positive-definite covariance, else ``None``."""
    mix = prob.mixture()
    if prob.n_classes != 2 or mix.n_components != 2 or not mix.is_shared() or mix.dim < 2:
        return None
    if np.linalg.eigvalsh(np.asarray(mix.covs[0]))[0] <= 1e-12:
        return None
    pos = prob.labels.index(1)
    return lda.LDAProblem(mix.means[pos], mix.means[1 - pos], mix.covs[0], mix.weights[pos])


def _lda_error(p: lda.LDAProblem, w, b):
    """0-1 error of ``sign(w^T x + b)`` in closed form (Gaussian classes)."""
    sd = float(jnp.sqrt(w @ p.cov @ w))
    pi = float(p.pi_pos)
    e_pos = norm.cdf(-(float(w @ p.m_pos) + float(b)) / sd)
    e_neg = norm.cdf((float(w @ p.m_neg) + float(b)) / sd)
    return pi * e_pos + (1 - pi) * e_neg


def classification_point(prob, key) -> tuple[dict, list]:
    """Every quantity of one classification point; returns ``(values, comparisons)``."""
    out, cmp = classification_limit(prob, key)
    if prob.L is not None:
        out = {**out, **classification_prompt(prob, out, jax.random.fold_in(key, prob.L))}
    return out, cmp


def classification_prompt(prob, limit: dict, key) -> dict:
    """The limit-optimal head of :func:`classification_limit` on prompts of ``prob.L``
    labelled tokens, and heads trained on them by the training engine (not in the LDA
    setting, whose head is Lemma B.3's construction)."""
    if "softmax_U" not in limit:
        return {"L": prob.L}
    mix = prob.mixture()
    Y = jnp.asarray(_label_vectors(prob.labels, prob.n_classes))
    theta = {"U": jnp.asarray(limit["softmax_U"]), "V": jnp.asarray(limit["softmax_V"])}
    opts = prob.options
    k_eval, k_train = jax.random.split(key)
    out = {"L": prob.L, **_finite_prompt(mix, Y, theta, prob.L, k_eval, opts)}
    if opts.train_steps > 0:
        trained = train_on_prompts(_train_loss, theta, (mix, Y), k_train, opts, L=prob.L,
                                   tag=["explore-classify", prob.L])
        per_seed = [_finite_prompt(mix, Y, jax.tree.map(lambda a, s=s: a[s], trained),
                                   prob.L, k_eval, opts, prefix="trained")
                    for s in range(opts.train_seeds)]
        for k in ("trained_error", "trained_risk"):
            out[k], out[f"{k}_se"] = seeds_mean_se([p[k] for p in per_seed],
                                                   [p[f"{k}_se"] for p in per_seed])
        out["trained_steps"] = opts.train_steps
    return out


def classification_limit(prob, key) -> tuple[dict, list]:
    """The infinite-prompt quantities of one point (independent of ``prob.L``)."""
    opts = prob.options
    mix = prob.mixture()
    C = prob.n_classes
    d = mix.dim
    Y = _label_vectors(prob.labels, C)
    Yc = jnp.asarray(Y)
    aug = _augmented(mix, Y)
    k_eval, k_fit, k_mc, k_search = jax.random.split(key, 4)
    out: dict = {"d": d, "components": mix.n_components, "classes": C}
    cmp = []
    x_mc, comp_mc = mix.sample(k_mc, opts.mc_samples)               # fresh samples
    y_mc = Yc[comp_mc]
    lp = lda_problem(prob)
    out["setting"] = "LDA (Section 3)" if lp is not None else "general"

    # ---- Bayes
    # independent (first: their SEs set the quadrature's tolerance): count the Bayes rule's
    # mistakes on fresh labelled samples, and average -log P(class | x) there, with the
    # posteriors from the mixture's own component log-densities
    lab = np.asarray(prob.labels)
    clp = mix.component_log_prob(x_mc) + mix.log_weights[None]
    lc = jnp.stack([jax.scipy.special.logsumexp(clp[:, lab == c], axis=-1)
                    for c in range(C)], 1)
    cls_mc = jnp.asarray(lab)[comp_mc]
    wrong = (jnp.argmax(lc, -1) != cls_mc).astype(float)
    out["bayes_error_mc"], out["bayes_error_mc_se"] = binomial_mean_se(wrong)
    log_post = lc - jax.scipy.special.logsumexp(lc, axis=-1, keepdims=True)
    out["bayes_risk_mc"], out["bayes_risk_mc_se"] = mc_mean_se(
        -jnp.take_along_axis(log_post, cls_mc[:, None], 1)[:, 0])
    if lp is not None:
        wb, bb = lda.bayes_score(lp)
        out["bayes_error"], out["bayes_error_se"] = _lda_error(lp, wb, bb), 0.0
        out["bayes_risk"], out["bayes_risk_se"] = float(lda.bayes_risk(lp)), 0.0
        out["bayes_error_kind"] = out["bayes_risk_kind"] = "exact (closed form)"
        out["bayes_method"] = "closed form (Phi of the Mahalanobis distance), eq. (5)"
    else:
        def integrands(q):
            post = _class_posteriors(mix, prob.labels, C, q)
            ent = -jnp.sum(jnp.where(post > 0, post * jnp.log(jnp.where(post > 0, post, 1)),
                                     0), -1)
            return 1 - jnp.max(post, -1), ent

        est = adaptive_means(integrands, mix, k_eval, order=opts.order,
                             max_order=opts.max_order,
                             tols=(QUAD_TOL * out["bayes_error_mc_se"],
                                   QUAD_TOL * out["bayes_risk_mc_se"]),
                             gh_max_dim=opts.gh_max_dim, n_samples=opts.mc_samples,
                             names=("bayes_error", "bayes_risk"))
        (out["bayes_error"], out["bayes_risk"]) = est.values
        (out["bayes_error_se"], out["bayes_risk_se"]) = est.errors
        out["bayes_error_kind"], out["bayes_risk_kind"] = est.kinds
        out["bayes_order_capped"] = est.capped
        if est.order is not None:
            out["bayes_order"] = est.order
        out["bayes_method"] = f"class posteriors, {est.method}"
    cmp.append(resolved_agreement(
        out["bayes_error"], out["bayes_error_se"], out["bayes_error_mc"],
        out["bayes_error_mc_se"], Z_SE,
        why="bayes_error against the counted mistakes of the Bayes rule on fresh labelled "
        "samples (posteriors from GaussianMixture.component_log_prob; Agresti-Coull SE of "
        "the count): within 4 combined errors (with the quadrature's measured error)",
        name="bayes_error |z| (vs counted MC)"))
    cmp.append(resolved_agreement(
        out["bayes_risk"], out["bayes_risk_se"], out["bayes_risk_mc"],
        out["bayes_risk_mc_se"], Z_SE,
        why="bayes_risk (the conditional entropy) against the mean of -log P(class | X) on the "
        "same fresh labelled samples: within 4 combined errors",
        name="bayes_risk |z| (vs MC of -log P(class | X))"))

    # ---- linear attention
    fit = nodes(mix, k_fit, n_samples=opts.fit_samples, order=opts.fit_order,
                gh_max_dim=opts.gh_max_dim)
    # the head search minimises a fixed-sample average (a coarse grid can be gamed by
    # sharp gates, giving a "risk" below Bayes), evaluated on fresh samples
    fit_h = nodes(mix, jax.random.fold_in(k_fit, 1), n_samples=opts.fit_samples,
                  order=opts.fit_order, gh_max_dim=0)
    y_fit = Yc[fit.comp]
    if lp is not None:
        w_lin, r_lin = lda.linear_attention_optimum(lp)
        W = w_lin[None]
        out["linear_risk"], out["linear_risk_se"] = float(r_lin), 0.0
        out["linear_error"] = _lda_error(lp, w_lin, 0.0)
        out["linear_error_se"] = 0.0
        out["linear_risk_kind"] = "exact (closed form)"
    else:
        res = minimize_lbfgs(_linear_risk, jnp.zeros((Y.shape[1], d)), (fit.x, fit.w, y_fit),
                             maxiter=opts.maxiter)
        W = res.x
        lin_mc, lin_mc_se = mc_mean_se(_loss(x_mc @ W.T, y_mc))
        # the loss with each component's label, integrated adaptively per component; the
        # errors add (quadrature) or add in quadrature (Monte Carlo)
        pis = np.asarray(mix.weights)
        parts = [adaptive_means(
            lambda q, k=k: (_loss(q @ W.T, jnp.broadcast_to(Yc[k], (q.shape[0], Yc.shape[1]))),),
            GaussianMixture(jnp.ones(1), mix.means[k:k + 1], mix.covs[k:k + 1]),
            jax.random.fold_in(k_eval, 100 + k), order=opts.order, max_order=opts.max_order,
            tols=(QUAD_TOL * lin_mc_se,), gh_max_dim=opts.gh_max_dim,
            n_samples=opts.mc_samples, names=(f"linear_risk (component {k})",))
            for k in range(mix.n_components)]
        vals = np.array([e.values[0] for e in parts])
        errs = np.array([e.errors[0] for e in parts])
        quad = [e.kinds[0] == "quadrature" for e in parts]
        out["linear_risk"] = float(pis @ vals)
        out["linear_risk_se"] = float(pis[quad] @ errs[quad]
                                      + np.sqrt(np.sum((pis * errs)[~np.array(quad)] ** 2)))
        out["linear_risk_kind"] = "quadrature" if all(quad) else "monte carlo"
        out["linear_error"], out["linear_error_se"] = binomial_mean_se(_wrong(x_mc @ W.T, y_mc))
    out["linear_W"] = np.asarray(W)
    if lp is not None:
        lin_mc, lin_mc_se = mc_mean_se(_loss(x_mc @ W.T, y_mc))
    cmp.append(agreement(
        combined_z(out["linear_risk"], out["linear_risk_se"], lin_mc, lin_mc_se), Z_SE,
        "linear attention's risk against Monte Carlo of its loss on fresh samples: within 4 "
        "combined errors", name="linear_risk |z| (vs MC)"))
    cmp.append(upper_bound(
        out["bayes_risk"] - out["linear_risk"],
        Z_SE * float(np.hypot(out["bayes_risk_se"], out["linear_risk_se"])) + 1e-10,
        "the conditional entropy is the smallest risk of any predictor: bayes_risk <= "
        "linear_risk (up to 4 SE and round-off)", name="bayes_risk - linear_risk"))

    # ---- one softmax head
    if lp is not None:
        th = lda.bayes_parameters(lp)
        r = float(lda.risk(lp, th))
        out["softmax_risk"], out["softmax_risk_se"] = r, 0.0
        out["softmax_method"] = "Lemma B.3's parameters (f_theta = f*)"
        cmp.append(agreement(
            abs(r - out["bayes_risk"]) / out["bayes_risk"], 1e-8,
            "Lemma B.3: the head's risk R(theta*) (2-D GH with the gate rule) against R* "
            "(1-D GH of the Bayes score): quadrature converged to ~1e-12",
            name="softmax head at Lemma B.3 vs R* (rel.)"))
        g = lda.predictor(lp, th, x_mc)[:, None]
        out["softmax_error"], out["softmax_error_se"] = binomial_mean_se(_wrong(g, y_mc))
        out["softmax_starts"] = np.array([r])
        theta = None
    else:
        c = Y.shape[1]
        starts = [{"U": 0.5 * jax.random.normal(jax.random.fold_in(k_search, 2 * i),
                                                (d + c, d)),
                   "V": 0.5 * jax.random.normal(jax.random.fold_in(k_search, 2 * i + 1),
                                                (c, d + c))}
                  for i in range(opts.starts)]
        # structured start: a small score scale makes the head ~ linear attention + mean
        # (softmax ~ 1 + score), so start from the best linear map read that way
        Mxx = jnp.sum(fit_h.w[:, None, None] * fit_h.x[:, :, None] * fit_h.x[:, None, :], 0)
        eps = 0.1
        starts.append({"U": jnp.concatenate([eps * jnp.eye(d), jnp.zeros((c, d))]),
                       "V": jnp.concatenate([W @ jnp.linalg.pinv(Mxx) / eps,
                                             jnp.zeros((c, c))], 1)})
        res = minimize_lbfgs(_head_risk, starts[0], (aug, fit_h.x, fit_h.w, Yc[fit_h.comp]),
                             starts=starts[1:], maxiter=opts.maxiter)
        theta = res.x
        g = _head(aug, theta, x_mc)
        out["softmax_risk"], out["softmax_risk_se"] = mc_mean_se(_loss(g, y_mc))
        out["softmax_error"], out["softmax_error_se"] = binomial_mean_se(_wrong(g, y_mc))
        out["softmax_starts"] = np.asarray(res.funs)
        out["softmax_method"] = (f"best of {len(starts)} L-BFGS starts on {fit_h.method}; "
                                 f"risk and error on {opts.mc_samples:,} fresh samples")
        out["softmax_U"], out["softmax_V"] = np.asarray(theta["U"]), np.asarray(theta["V"])
    for k in ("linear", "softmax"):
        out[f"{k}_excess_error"] = out[f"{k}_error"] - out["bayes_error"]
        # the two terms' errors add in quadrature: the head's error is counted on fresh
        # samples, the Bayes error comes from quadrature or from other samples (k_eval)
        out[f"{k}_excess_error_se"] = float(np.hypot(out[f"{k}_error_se"],
                                                     out["bayes_error_se"]))
    cmp.append(upper_bound(
        out["bayes_risk"] - out["softmax_risk"],
        Z_SE * float(np.hypot(out["bayes_risk_se"], out["softmax_risk_se"])) + 1e-10,
        "the conditional entropy is the smallest risk of any predictor: bayes_risk <= the "
        "head's risk on fresh samples (up to 4 combined SE and round-off)",
        name="bayes_risk - softmax_risk"))
    cmp.append(upper_bound(
        out["bayes_error"] - out["softmax_error"],
        Z_SE * float(np.hypot(out["bayes_error_se"], out["softmax_error_se"])) + 1e-12,
        "the Bayes rule has the smallest 0-1 error: bayes_error <= softmax_error (up to 4 "
        "combined SE)", name="bayes_error - softmax_error"))
    out["eval_method"] = ("linear attention's risk: " + (
        "closed form (Section 3)" if lp is not None else
        "per component, " + "; ".join(sorted({e.method for e in parts}))))
    out["fit_method"] = fit.method

    return out, cmp


def _prompt_batch(mix, Yc, key, P, L, Q):
    """``P`` prompts of ``L`` labelled tokens ``(x, y)``, ``Q`` queries ``(x, 0)`` per prompt
    and their labels (``Yc`` the label vector of each component)."""
    c = Yc.shape[1]
    kt, kx = jax.random.split(key)
    xt, ct = mix.sample(kt, P * L)
    toks = jnp.concatenate([xt, Yc[ct]], 1).reshape(P, L, -1)
    xq, cq = mix.sample(kx, P * Q)
    q = jnp.concatenate([xq, jnp.zeros((P * Q, c), xq.dtype)], 1).reshape(P, Q, -1)
    return toks, q, Yc[cq].reshape(P, Q, c)


def _prompt_head(theta, toks, q):
    """The head's label coordinates on a batch of prompts (the query's label slot is 0)."""
    c = toks.shape[-1] - theta["U"].shape[1]
    U = jnp.concatenate([theta["U"], jnp.zeros((toks.shape[-1], c), theta["U"].dtype)], 1)
    return softmax_attention(toks, U, theta["V"], q)


@partial(jax.jit, static_argnums=(4, 5, 6))
def _prompt_scores(theta, mix, Yc, key, P, L, Q):
    """Per prompt: the fraction of wrong labels and the mean risk over its ``Q`` queries."""
    toks, q, y = _prompt_batch(mix, Yc, key, P, L, Q)
    c = Yc.shape[1]
    g = _prompt_head(theta, toks, q).reshape(-1, c)
    y = y.reshape(-1, c)
    return _wrong(g, y).reshape(P, Q).mean(-1), _loss(g, y).reshape(P, Q).mean(-1)


def _finite_prompt(mix, Yc, theta, L, key, opts, prefix="prompt"):
    """0-1 error and risk of a head on ``opts.prompts`` prompts of ``L`` labelled tokens
    (SE over prompts)."""
    errs, risks = _prompt_scores(theta, mix, Yc, key, opts.prompts, L, opts.queries)
    e, e_se = mc_mean_se(errs)
    r, r_se = mc_mean_se(risks)
    return {f"{prefix}_error": e, f"{prefix}_error_se": e_se, f"{prefix}_risk": r,
            f"{prefix}_risk_se": r_se}


def _train_loss(theta, data, key):
    """Finite-prompt training loss: the mean risk over fresh prompts (``data = (mixture,
    label vectors, shape)``; the prompt length and batch sizes are read off the static
    shape of ``shape``, so one compiled program serves every point of an L)."""
    mix, Yc, shape = data
    P, L, Q = shape.shape
    toks, q, y = _prompt_batch(mix, Yc, key, P, L, Q)
    c = Yc.shape[1]
    return jnp.mean(_loss(_prompt_head(theta, toks, q).reshape(-1, c), y.reshape(-1, c)))
