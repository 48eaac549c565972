"""GMA against the mixture theory, and what its responsibilities do (issue 14).

Infinite-prompt limit
---------------------
GMA is kernel attention with the rank-K kernel ``kappa(q, t) = r(q) . r(t)`` per head.
On a prompt of ``L`` i.i.d. tokens ``t ~ mu`` the bidirectional, query-normalised head
reads ``y_L(q) = sum_i w_i v(t_i) / sum_i w_i`` with ``w_i = r_q(q) . r_k(t_i)``; as
``L -> inf`` this tends to

    y(q) = r_q(q)^T E[r_k(t) v(t)^T] / r_q(q)^T E[r_k(t)],

two moments of the prompt distribution, evaluated here by Gauss-Hermite quadrature
(:func:`gmtheory.quadrature.expect_mixture`) or Monte Carlo
(:func:`gmtheory.quadrature.monte_carlo`) when ``mu`` is a
:class:`gmtheory.GaussianMixture`, or the image of one under a token map (a label
appended per component, a LayerNorm, ...).  The fluctuation is a self-normalised
importance-sampling error: ``L E|o_L - o|^2 -> E|g|^2`` with
``g = sum_h Wo_h^T w_h (v_h - y_h) / E w_h`` (delta method), which
:func:`limit_variance` evaluates by the same quadrature.

Responsibility analysis
-----------------------
:func:`usage_entropy` ``H(mean_n r_n) / log K``, :func:`token_entropy` (mean per-token
entropy / ``log K``), :func:`dead_fraction`, :func:`byte_categories`,
:func:`normalised_mutual_information` of the argmax component and a category, and
:func:`responsibility_report` on one layer of a trained model.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from . import gma
from .mixture import GaussianMixture
from .quadrature import expect_mixture, monte_carlo

__all__ = ["head_features", "limit_moments", "limit_moments_mc", "prompt_limit",
           "limit_variance", "finite_prompt_outputs", "PROMPT_FORMS", "usage_entropy",
           "usage_entropy_array", "token_entropy",
           "dead_fraction", "byte_categories", "BYTE_CATEGORIES",
           "normalised_mutual_information", "contingency", "responsibility_report"]


# ------------------------------------------------------------------- infinite prompt
def head_features(params: gma.GMAParams, t):
    """Per-head key responsibilities and values of tokens ``t`` ``(n, d_model)``:
    ``(R_k (H, n, K), V (H, n, d_v))`` (float32 or wider)."""
    rq, rk, v = gma.routes(params, t[None])
    return rk[:, 0], v[:, 0]


def _moment_integrand(params, token_map):
    def f(x, k=None):
        t = x if token_map is None else token_map(x, k)
        rk, v = head_features(params, t)                     # (H, n, K), (H, n, dv)
        rv = jnp.einsum("hnk,hnd->nhkd", rk, v)
        n = t.shape[0]
        return jnp.concatenate([rv.reshape(n, -1), jnp.moveaxis(rk, 0, 1).reshape(n, -1)], 1)
    return f


def _split_moments(params, flat):
    H, _, dv = params.Wv.shape
    K = params.mu.shape[1]
    return flat[: H * K * dv].reshape(H, K, dv), flat[H * K * dv:].reshape(H, K)


def limit_moments(params: gma.GMAParams, mixture: GaussianMixture, *, order: int = 40,
                  token_map=None):
    """``(E[r_k v^T] (H, K, d_v), E[r_k] (H, K))`` over tokens ``t = token_map(x, k)``
    (``x`` from component ``k`` of ``mixture``; ``None``: ``t = x``) by tensor
    Gauss-Hermite quadrature of the given order."""
    f = jax.jit(_moment_integrand(params, token_map), static_argnums=1)
    flat = expect_mixture(f, mixture, order, component=token_map is not None)
    return _split_moments(params, flat)


def limit_moments_mc(params: gma.GMAParams, mixture: GaussianMixture, key, n: int, *,
                     token_map=None, batch: int = 100_000):
    """Monte Carlo version of :func:`limit_moments`: ``(moments, standard_errors)``, each
    a pair ``(E[r_k v^T], E[r_k])``."""
    f = _moment_integrand(params, token_map)
    d = mixture.dim

    def sampler(k, m):  # the component index travels as a last column
        x, comp = mixture.sample(k, m)
        return jnp.concatenate([x, comp[:, None].astype(x.dtype)], 1)

    def g(xc):
        x, comp = xc[:, :d], xc[:, d].astype(jnp.int32)
        if token_map is None:
            return f(x)
        outs = [f(x, k) for k in range(mixture.n_components)]
        return jnp.select([comp[:, None] == k for k in range(len(outs))], outs)

    est, se = monte_carlo(jax.jit(g), jax.jit(sampler, static_argnums=1), key, n, batch=batch)
    return _split_moments(params, est), _split_moments(params, se)


def prompt_limit(params: gma.GMAParams, queries, moments, *, per_head: bool = False):
    """The infinite-prompt GMA output at ``queries`` ``(n, d_model)``: per head
    ``r_q(q)^T E[r_k v^T] / r_q(q)^T E[r_k]``, concatenated and projected by ``Wo``
    (``per_head=True``: the ``(H, n, d_v)`` head outputs before ``Wo``)."""
    rv, r = moments
    rq, _, _ = gma.routes(params, queries[None])
    rq = rq[:, 0]                                            # (H, n, K)
    y = jnp.einsum("hnk,hkd->hnd", rq, rv) / jnp.einsum("hnk,hk->hn", rq, r)[..., None]
    if per_head:
        return y
    H, n, dv = y.shape
    return jnp.moveaxis(y, 0, 1).reshape(n, H * dv) @ params.Wo.astype(y.dtype)


def limit_variance(params: gma.GMAParams, queries, mixture: GaussianMixture, moments, *,
                   order: int = 40, token_map=None):
    """Delta-method ``lim L E|o_L(q) - o(q)|^2`` (summed over output coordinates) for each
    query: ``E|sum_h Wo_h^T w_h (v_h - y_h) / E w_h|^2``, by quadrature."""
    y = prompt_limit(params, queries, moments, per_head=True)   # (H, n, dv)
    rq, _, _ = gma.routes(params, queries[None])
    rq = rq[:, 0]
    ew = jnp.einsum("hnk,hk->hn", rq, moments[1])               # E w_h per query
    H, _, dv = y.shape
    Wo = params.Wo.reshape(H, dv, -1)

    def f(x, k=None):
        t = x if token_map is None else token_map(x, k)
        rk, v = head_features(params, t)                       # (H, m, K), (H, m, dv)
        w = jnp.einsum("hnk,hmk->hnm", rq, rk) / ew[..., None]  # (H, n, m)
        dev = v[:, None] - y[:, :, None]                        # (H, n, m, dv)
        g = jnp.einsum("hnm,hnmd,hde->nme", w, dev, Wo)
        return jnp.moveaxis(jnp.sum(g**2, -1), 1, 0)            # (m, n)

    return expect_mixture(jax.jit(f, static_argnums=1), mixture, order,
                          component=token_map is not None)


#: the forms of :func:`gmtheory.gma.gma_attention` that :func:`finite_prompt_outputs` runs
PROMPT_FORMS = ("unfused", "fused", "causal")


def finite_prompt_outputs(params: gma.GMAParams, prompts, queries, length=None, *,
                          form: str = "unfused"):
    """GMA outputs at ``queries`` ``(n, d_model)`` reading finite prompts ``prompts``
    ``(reps, L, d_model)``: the layer (:func:`gmtheory.gma.gma_attention`) on
    ``[prompt; queries]`` with the queries masked out as keys (and, with ``length``,
    the prompt tokens from ``length`` on: one compiled program serves every length).
    ``form``: ``"unfused"`` or ``"fused"`` bidirectional, or ``"causal"`` (chunked
    prefix scan, fused past :data:`gmtheory.gma.FUSED_MIN_N` tokens; every query comes
    after the whole prompt, so it reads the same keys).
    Returns ``(reps, n, d_model)``."""
    if form not in PROMPT_FORMS:
        raise ValueError(f"form: must be one of {PROMPT_FORMS}, got {form!r}.")
    reps, L, _ = prompts.shape
    n = queries.shape[0]
    x = jnp.concatenate([prompts, jnp.broadcast_to(queries, (reps,) + queries.shape)], 1)
    pos = jnp.arange(L + n)
    keep = pos < (L if length is None else jnp.minimum(length, L))
    mask = jnp.broadcast_to(keep, (reps, L + n))
    causal = form == "causal"
    return gma.gma_attention(params, x, mask=mask, causal=causal,
                             fused=None if causal else form == "fused",
                             chunk=64 if causal else None)[:, L:]


# ---------------------------------------------------------------- responsibility stats
def _entropy(p, axis=-1):
    p = jnp.asarray(p)
    return -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0), axis)


def usage_entropy(r):
    """``H(mean_n r_n) / log K`` of responsibilities ``r`` ``(..., N, K)`` pooled over
    every leading axis: 1 when all components are used equally, 0 for one component."""
    return float(usage_entropy_array(r))


def usage_entropy_array(r):
    """:func:`usage_entropy` as a JAX scalar (differentiable, traceable under ``jit``): the
    term of the usage-entropy auxiliary loss against dead components."""
    r = jnp.asarray(r).reshape(-1, jnp.shape(r)[-1])
    K = r.shape[-1]
    return _entropy(jnp.mean(r, 0)) / np.log(K) if K > 1 else jnp.zeros((), r.dtype)


def token_entropy(r):
    """Mean per-token entropy ``mean_n H(r_n) / log K``: 0 for hard routing, 1 uniform."""
    r = jnp.asarray(r).reshape(-1, jnp.shape(r)[-1])
    K = r.shape[-1]
    return float(jnp.mean(_entropy(r)) / np.log(K)) if K > 1 else 0.0


def dead_fraction(r, threshold: float = 0.01):
    """Fraction of components whose mean responsibility is below ``threshold / K`` (a
    hundredth of the uniform share by default)."""
    r = jnp.asarray(r).reshape(-1, jnp.shape(r)[-1])
    K = r.shape[-1]
    return float(jnp.mean(jnp.mean(r, 0) < threshold / K))


BYTE_CATEGORIES = ("lowercase", "uppercase", "digit", "whitespace", "punctuation", "other")


def byte_categories(b):
    """Category index (:data:`BYTE_CATEGORIES`) of each byte: ASCII letters split by
    case, digits, whitespace (space, tab, newline, CR, FF, VT), printable punctuation,
    and everything else (control and non-ASCII bytes)."""
    b = np.asarray(b, np.int64)
    out = np.full(b.shape, 5, np.int32)
    out[(b >= 97) & (b <= 122)] = 0
    out[(b >= 65) & (b <= 90)] = 1
    out[(b >= 48) & (b <= 57)] = 2
    out[np.isin(b, [9, 10, 11, 12, 13, 32])] = 3
    punct = ((b >= 33) & (b <= 47)) | ((b >= 58) & (b <= 64)) | ((b >= 91) & (b <= 96)) | (
        (b >= 123) & (b <= 126))
    out[punct] = 4
    return out


def contingency(a, b, na: int, nb: int):
    """Counts ``(na, nb)`` of the pairs ``(a_i, b_i)``."""
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    return np.bincount(a * nb + b, minlength=na * nb).reshape(na, nb).astype(float)


def normalised_mutual_information(a, b, na: int | None = None, nb: int | None = None):
    """``I(a; b) / ((H(a) + H(b)) / 2)`` of two label sequences (arithmetic-mean
    normalisation, as scikit-learn's default); 0 when either is constant."""
    a, b = np.asarray(a).ravel(), np.asarray(b).ravel()
    na = int(a.max()) + 1 if na is None else na
    nb = int(b.max()) + 1 if nb is None else nb
    p = contingency(a, b, na, nb)
    p /= p.sum()
    pa, pb = p.sum(1), p.sum(0)
    nz = p > 0
    mi = float(np.sum(p[nz] * np.log(p[nz] / np.outer(pa, pb)[nz])))
    ha = float(-np.sum(pa[pa > 0] * np.log(pa[pa > 0])))
    hb = float(-np.sum(pb[pb > 0] * np.log(pb[pb > 0])))
    return 0.0 if ha == 0 or hb == 0 else mi / (0.5 * (ha + hb))


def responsibility_report(params: gma.GMAParams, x, categories=None, n_categories=None, *,
                          key=None, shuffles: int = 4):
    """Statistics of one GMA layer's key responsibilities on inputs ``x`` ``(B, N, d)``
    (the normalised residual stream entering the layer): per head usage entropy, token
    entropy, dead fraction, mean usage ``(K,)``, and with ``categories`` ``(B, N)`` the NMI
    of the argmax component with them and the ``(K, n_categories)`` contingency table.
    With ``key`` also ``nmi_shuffled``: the mean NMI of the argmax component with
    ``shuffles`` random permutations of the categories (the chance level of the NMI for
    these marginals)."""
    _, rk, _ = gma.routes(params, x)                         # (H, B, N, K)
    H, K = rk.shape[0], rk.shape[-1]
    out = {"usage_entropy": [], "token_entropy": [], "dead_fraction": [], "usage": [],
           "nmi": [], "table": [], "nmi_shuffled": []}
    for h in range(H):
        r = rk[h]
        out["usage_entropy"].append(usage_entropy(r))
        out["token_entropy"].append(token_entropy(r))
        out["dead_fraction"].append(dead_fraction(r))
        out["usage"].append(np.asarray(jnp.mean(r.reshape(-1, K), 0)))
        if categories is not None:
            am = np.asarray(jnp.argmax(r, -1))
            nc = n_categories or int(np.max(categories)) + 1
            out["nmi"].append(normalised_mutual_information(am, categories, K, nc))
            out["table"].append(contingency(am, categories, K, nc))
            if key is not None:
                flat = jnp.asarray(categories).ravel()
                out["nmi_shuffled"].append(float(np.mean([normalised_mutual_information(
                    am, np.asarray(jax.random.permutation(jax.random.fold_in(key, h * shuffles
                                                                             + i), flat)),
                    K, nc) for i in range(shuffles)])))
    return {k: np.asarray(v) for k, v in out.items() if len(v)}
