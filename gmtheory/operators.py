"""Attention operators: infinite-prompt closed forms and finite prompts.

Theory: docs/topics/operator.md#the-operator-on-gaussian-mixtures.  Convention throughout: the
score of key ``z'`` for query ``z`` is ``z'^T U z = <U z, z'>``; write ``u = U z``.

* ``softmax_attention_limit``: Prop. 2.1, eq. (2), softmax-gated affine experts.
* ``softmax_attention_limit_shared``: eq. (3), the shared-covariance form.
* ``linear_attention_limit``: Lemma C.7, ``V E[z z^T] U z``
  (docs/topics/operator.md#lemma-c7-linear-attention-has-no-gates).
* ``softmax_attention`` / ``linear_attention``: finite prompts (empirical measure),
  chunked over tokens with an online log-sum-exp so that ``L = 10^7`` fits.
* ``weighted_attention`` / ``mixture_decomposition``: Prop. A.1 for any positive
  alignment function given as a log-score.
* ``effective_sample_size`` / ``finite_prompt_variance``: finite-prompt diagnostics
  (docs/topics/operator.md#finite-prompts-rate-and-effective-sample-size).

Shapes: queries ``z`` are ``(n, d)`` (a single ``(d,)`` query is accepted and the
output is squeezed), ``U`` is ``(d, d)``, ``V`` is ``(d_out, d)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._validation import (
    as_float_array,
    check_finite,
    check_int,
    check_positive,
    check_result,
    check_shape,
    is_concrete,
)
from ._xla import LONG_RUN_TOKENS, jit_long, traced
from .mixture import GaussianMixture, as_points

__all__ = [
    "attention_gates",
    "softmax_attention_limit",
    "softmax_attention_limit_shared",
    "linear_attention_limit",
    "softmax_attention",
    "linear_attention",
    "weighted_attention",
    "mixture_decomposition",
    "softmax_score",
    "rbf_score",
    "effective_sample_size",
    "empirical_ess",
    "finite_prompt_variance",
    "softmax_limit_blocked",
    "online_softmax",
]


# --------------------------------------------------------------------------- helpers
def _check_mixture(mixture) -> GaussianMixture:
    if not isinstance(mixture, GaussianMixture):
        raise ValueError(
            f"mixture: expected a gmtheory.GaussianMixture, got {type(mixture).__name__}."
        )
    return mixture


def _check_uv(U, V, d: int):
    U = as_float_array(U, "U")
    V = as_float_array(V, "V")
    check_shape(U, "U", (d, d), "U is the merged query-key matrix of the token dimension d.")
    if V.ndim != 2 or V.shape[1] != d:
        raise ValueError(f"V: expected shape (d_out, {d}), got {tuple(V.shape)}.")
    check_finite(U, "U")
    check_finite(V, "V")
    return U, V


def _queries(z, d):
    squeeze = jnp.ndim(z) == 1
    return as_points(z, d, "z"), squeeze


_LIMIT_FIX = ("Rescale the mixture (means, covs), U or z: the gate logits "
              "log pi_k + m_k^T U z + (Uz)^T Gamma_k (Uz) / 2 and the experts must stay "
              "below ~1e300.")
_PROMPT_FIX = ("Rescale tokens, U, V or z: the scores z_i^T U z and the values V z_i "
               "must stay below ~1e300 (~1e38 in float32).")


# ------------------------------------------------------------- infinite-prompt limits
def attention_gates(mixture: GaussianMixture, U, z):
    """Gates ``alpha_k(z)`` of Prop. 2.1, eq. (2).

    ``alpha_k(z) = softmax_k(log pi_k + m_k^T U z + 1/2 (U z)^T Gamma_k (U z))``.

    Shapes: ``z`` ``(n, d)`` -> ``(n, K)``.
    """
    mixture = _check_mixture(mixture)
    d = mixture.dim
    U, _ = _check_uv(U, jnp.eye(d), d)
    z, squeeze = _queries(z, d)
    a = jax.nn.softmax(_gate_logits(mixture, U, z), axis=-1)
    check_result(a, "attention_gates", _LIMIT_FIX)
    return a[0] if squeeze else a


def _gate_logits(mixture, U, z):
    u = z @ U.T  # (n, d): u = U z per query
    quad = 0.5 * jnp.einsum("ni,kij,nj->nk", u, mixture.covs, u)
    return mixture.log_weights[None] + u @ mixture.means.T + quad


QUERY_BLOCK = 8192


@jax.jit
def softmax_limit_blocked(mixture: GaussianMixture, U, V, z):
    """Eq. (2) for validated inputs, jitted, in blocks of ``QUERY_BLOCK`` queries.

    The unchecked core of :func:`softmax_attention_limit` (which validates its arguments
    and then calls this), public for benchmarks and inner loops that call it many times
    on arrays already known to be well formed.  The blocks keep the ``(n, K, d)`` expert
    tensor small for ``n`` in the millions.

    Shapes: ``mixture`` with ``K`` components in ``d`` dimensions, ``U`` ``(d, d)``,
    ``V`` ``(d_out, d)``, ``z`` ``(n, d)`` (2-D only) -> ``(n, d_out)``.
    """
    n = z.shape[0]
    if n <= QUERY_BLOCK:
        return _softmax_limit_block(mixture, U, V, z)
    nb = -(-n // QUERY_BLOCK)
    zp = jnp.pad(z, ((0, nb * QUERY_BLOCK - n), (0, 0)))
    out = jax.lax.map(lambda b: _softmax_limit_block(mixture, U, V, b),
                      zp.reshape(nb, QUERY_BLOCK, -1))
    return out.reshape(nb * QUERY_BLOCK, -1)[:n]


def _softmax_limit_block(mixture, U, V, z):
    u = z @ U.T
    logits = _gate_logits(mixture, U, z)
    alpha = jax.nn.softmax(logits, axis=-1)  # log-sum-exp stable, fine for logits ~ 1e3+
    experts = mixture.means[None] + jnp.einsum("kij,nj->nki", mixture.covs, u)
    return jnp.einsum("nk,nki->ni", alpha, experts) @ V.T


def softmax_attention_limit(mixture: GaussianMixture, U, V, z):
    """Infinite-prompt softmax attention on a Gaussian mixture (Prop. 2.1, eq. (2)).

    ``T[mu](z) = V sum_k alpha_k(z) (m_k + Gamma_k U z)`` with the gates of
    :func:`attention_gates`.  Computed with a max-subtracted softmax, so scores in
    the thousands stay finite.  Valid for singular (PSD) covariances.

    Shapes: ``z`` ``(n, d)`` -> ``(n, d_out)``; ``(d,)`` -> ``(d_out,)``.
    """
    mixture = _check_mixture(mixture)
    U, V = _check_uv(U, V, mixture.dim)
    z, squeeze = _queries(z, mixture.dim)
    out = softmax_limit_blocked(mixture, U, V, z)
    check_result(out, "softmax_attention_limit", _LIMIT_FIX)
    return out[0] if squeeze else out


def softmax_attention_limit_shared(mixture: GaussianMixture, U, V, z):
    """Eq. (3): shared covariance, the quadratic offsets cancel.

    ``T[mu](z) = V Gamma U z + V sum_k alpha_k(z) m_k`` with
    ``alpha_k = softmax_k(log pi_k + m_k^T U z)``: a global linear predictor plus a
    gated barycentre of the means.  Raises if the covariances differ.

    Shapes: ``z`` ``(n, d)`` -> ``(n, d_out)``.
    """
    mixture = _check_mixture(mixture)
    if not mixture.is_shared():
        raise ValueError(
            "mixture: eq. (3) needs one shared covariance for all components; "
            "use softmax_attention_limit for heteroscedastic mixtures."
        )
    U, V = _check_uv(U, V, mixture.dim)
    z, squeeze = _queries(z, mixture.dim)
    u = z @ U.T
    alpha = jax.nn.softmax(mixture.log_weights[None] + u @ mixture.means.T, axis=-1)
    out = (u @ mixture.covs[0].T + alpha @ mixture.means) @ V.T
    check_result(out, "softmax_attention_limit_shared", _LIMIT_FIX)
    return out[0] if squeeze else out


def linear_attention_limit(mixture: GaussianMixture, U, V, z):
    """Infinite-prompt linear attention: ``T_lin[mu](z) = V E[z' z'^T] U z`` (Lemma C.7,
    docs/topics/operator.md#lemma-c7-linear-attention-has-no-gates).

    Linear in ``z`` with no bias; the mixture enters only through its uncentred
    second moment, with fixed weights ``pi_k`` whatever the query.

    Shapes: ``z`` ``(n, d)`` -> ``(n, d_out)``.
    """
    mixture = _check_mixture(mixture)
    U, V = _check_uv(U, V, mixture.dim)
    z, squeeze = _queries(z, mixture.dim)
    out = z @ (V @ mixture.second_moment() @ U).T
    check_result(out, "linear_attention_limit", "Rescale the mixture, U, V or z.")
    return out[0] if squeeze else out


# ------------------------------------------------------------------- finite prompts
def _default_chunk(n_queries: int, L: int) -> int:
    # keep the (n, chunk) score block near 2^20 entries, but never below 1024 tokens
    # (measured fastest on a 2-core CPU for n ~ 1e3; see `gmtheory bench operator`)
    c = max(1024, (1 << 20) // max(1, n_queries))
    c = 1 << (c.bit_length() - 1)
    return int(min(L, c))


def online_softmax(tokens, u, V, *, chunk: int, with_se: bool = False):
    """Online-softmax attention of pre-multiplied queries over one prompt, jitted.

    ``out_n = sum_i softmax_i(<u_n, x_i>) V x_i`` over the tokens ``x_i``, accumulated
    in chunks of ``chunk`` tokens with a running log-sum-exp (memory ``O(n chunk)``).
    The unchecked core of :func:`softmax_attention` (which validates its arguments,
    forms ``u = z U^T`` and picks the chunk), public for benchmarks.

    Shapes: ``tokens`` ``(L, d)``, ``u`` ``(n, d)`` (the queries times ``U^T``), ``V``
    ``(d_out, d)``; ``1 <= chunk <= L``.  Returns ``(out, se)``, both ``(n, d_out)``:
    ``se`` is the delta-method standard error of the self-normalised estimate when
    ``with_se`` and zeros otherwise.  Accumulates in float32 or wider.
    """
    L = tokens.shape[0]
    n = u.shape[0]
    dv = V.shape[0]
    acc_dtype = jnp.promote_types(tokens.dtype, jnp.float32)
    n_chunks = -(-L // chunk)
    ar = jnp.arange(chunk)
    if n_chunks == 1 and not with_se:  # one block: plain softmax, no loop (cheaper to compile)
        s = (u @ tokens.T).astype(acc_dtype)
        p = jax.nn.softmax(s, axis=1)
        out = p @ (tokens @ V.T).astype(acc_dtype)
        return out, jnp.zeros_like(out)

    def body(i, state):
        mx, den, num, s2, s2x, s2xx = state
        nominal = i * chunk
        start = jnp.minimum(nominal, L - chunk)  # last chunk overlaps; mask repeats
        blk = jax.lax.dynamic_slice_in_dim(tokens, start, chunk, axis=0)
        valid = (start + ar) >= nominal
        s = jnp.where(valid[None], (u @ blk.T).astype(acc_dtype), -jnp.inf)  # (n, C)
        new_mx = jnp.maximum(mx, jnp.max(s, axis=1))
        scale = jnp.exp(mx - new_mx)
        p = jnp.exp(s - new_mx[:, None])
        vals = (blk @ V.T).astype(acc_dtype)  # (C, dv)
        den = den * scale + p.sum(axis=1)
        num = num * scale[:, None] + p @ vals
        if with_se:
            sc2 = scale**2
            p2 = p**2
            s2 = s2 * sc2 + p2.sum(axis=1)
            s2x = s2x * sc2[:, None] + p2 @ vals
            s2xx = s2xx * sc2[:, None] + p2 @ vals**2
        return new_mx, den, num, s2, s2x, s2xx

    z1 = jnp.zeros((n,), acc_dtype)
    zv = jnp.zeros((n, dv), acc_dtype)
    init = (jnp.full((n,), -jnp.inf, acc_dtype), z1, zv, z1, zv, zv)
    mx, den, num, s2, s2x, s2xx = jax.lax.fori_loop(0, n_chunks, body, init)
    out = num / den[:, None]
    if not with_se:
        return out, jnp.zeros_like(out)
    # delta-method SE of a self-normalised estimator:
    # se^2 = sum_i w_i^2 (x_i - T)^2 / (sum_i w_i)^2
    var_num = s2xx - 2.0 * out * s2x + out**2 * s2[:, None]
    se = jnp.sqrt(jnp.clip(var_num, 0.0)) / den[:, None]
    return out, se


_online_softmax_impl = online_softmax
online_softmax = jax.jit(_online_softmax_impl, static_argnames=("chunk", "with_se"))
# prompts of LONG_RUN_TOKENS tokens or more: compiled to run fast
_online_softmax_long = jit_long(_online_softmax_impl, fused=True,
                                static_argnames=("chunk", "with_se"))


def _prep_prompt(tokens, U, V, z):
    tokens = as_float_array(tokens, "tokens")
    if tokens.ndim not in (2, 3):
        raise ValueError(
            f"tokens: expected shape (L, d) or (B, L, d), got {tuple(tokens.shape)}."
        )
    d = tokens.shape[-1]
    if tokens.shape[-2] == 0:
        raise ValueError("tokens: the prompt is empty (L = 0); pass at least one token.")
    check_finite(tokens, "tokens")
    U, V = _check_uv(U, V, d)
    z = as_float_array(z, "z")
    squeeze = z.ndim == 1
    if squeeze:
        z = z[None]
    if z.ndim not in (2, 3) or z.shape[-1] != d:
        raise ValueError(
            f"z: expected queries of shape (n, {d}) or (B, n, {d}), got {tuple(z.shape)}."
        )
    if z.ndim == 3 and (tokens.ndim != 3 or z.shape[0] != tokens.shape[0]):
        raise ValueError(
            f"z: batched queries {tuple(z.shape)} need tokens of shape "
            f"({z.shape[0]}, L, {d}), got {tuple(tokens.shape)}."
        )
    check_finite(z, "z")
    return tokens, U, V, z, squeeze


def softmax_attention(tokens, U, V, z, *, chunk: int | None = None, return_se: bool = False):
    """Softmax attention of queries over a finite prompt (eq. (1) on the empirical measure,
    docs/topics/operator.md#eq-1-attention-on-a-measure).

    ``T[mu_L](z) = sum_i softmax_i(z_i^T U z) V z_i`` — standard dot-product
    attention, i.e. the operator on the empirical measure of the tokens.

    Tokens are processed in chunks of ``chunk`` with an online log-sum-exp, so
    memory is ``O(n * chunk)`` beyond the tokens themselves (``L = 10^7`` fits).

    Shapes: ``tokens`` ``(L, d)`` or ``(B, L, d)``; ``z`` ``(n, d)``, ``(d,)`` or
    ``(B, n, d)``; returns ``(n, d_out)`` or ``(B, n, d_out)``.  With
    ``return_se=True`` also returns the delta-method standard error of the
    self-normalised estimate (same shape), for Monte Carlo checks of Prop. 2.1.
    """
    tokens, U, V, z, squeeze = _prep_prompt(tokens, U, V, z)
    L = tokens.shape[-2]
    n = z.shape[-2]
    c = _default_chunk(n, L) if chunk is None else check_int(chunk, "chunk", minimum=1)
    c = min(c, L)
    # the long program is its own jit: not inside another one (icl-denoising's training)
    long = (L * (tokens.shape[0] if tokens.ndim == 3 else 1) >= LONG_RUN_TOKENS
            and not traced(tokens, U, V, z))
    kernel = _online_softmax_long if long else online_softmax
    fn = lambda t, q: kernel(t, q @ U.T, V, chunk=c, with_se=return_se)
    if tokens.ndim == 3:
        in_z = 0 if z.ndim == 3 else None
        out, se = jax.vmap(fn, in_axes=(0, in_z))(tokens, z)
    else:
        out, se = fn(tokens, z)
    check_result(out, "softmax_attention", _PROMPT_FIX)
    check_result(se, "softmax_attention (return_se)", _PROMPT_FIX)
    if squeeze:
        out, se = out[..., 0, :], se[..., 0, :]
    return (out, se) if return_se else out


def linear_attention(tokens, U, V, z):
    """Linear attention on a finite prompt with 1/L normalisation (Lemma C.7).

    ``T_lin[mu_L](z) = L^{-1} sum_i (z_i^T U z) V z_i = V (Z^T Z / L) U z``.
    Memory is ``O(d^2)`` beyond the tokens.

    Shapes as in :func:`softmax_attention`.
    """
    tokens, U, V, z, squeeze = _prep_prompt(tokens, U, V, z)
    L = tokens.shape[-2]
    second = jnp.einsum("...li,...lj->...ij", tokens, tokens) / L  # (..., d, d)
    M = V @ second @ U  # (..., d_out, d)
    if tokens.ndim == 3:
        out = jnp.einsum("boj,bnj->bno", M, z) if z.ndim == 3 else jnp.einsum("boj,nj->bno", M, z)
    else:
        out = z @ M.T
    check_result(out, "linear_attention", _PROMPT_FIX)
    return out[..., 0, :] if squeeze else out


# --------------------------------------------------------- generalised scores (A.1)
LogScore = Callable[[jax.Array, jax.Array], jax.Array]


def softmax_score(U) -> LogScore:
    """Log-alignment of softmax attention: ``log a(z, z') = z'^T U z``.

    Returns a function ``(queries (n, d), keys (L, d)) -> (n, L)``.
    """
    U = as_float_array(U, "U")
    if U.ndim != 2 or U.shape[0] != U.shape[1]:
        raise ValueError(f"U: expected a square (d, d) matrix, got shape {tuple(U.shape)}.")
    check_finite(U, "U")
    return lambda q, k: (q @ U.T) @ k.T


def rbf_score(bandwidth: float = 1.0) -> LogScore:
    """Log-alignment of an RBF kernel: ``log a(z, z') = -|z - z'|^2 / (2 h^2)``."""
    h2 = check_positive(bandwidth, "bandwidth") ** 2

    def score(q, k):
        sq = jnp.sum(q**2, 1)[:, None] + jnp.sum(k**2, 1)[None] - 2.0 * q @ k.T
        return -0.5 * sq / h2

    return score


def weighted_attention(log_score: LogScore, tokens, token_weights, z, V=None):
    """Normalised attention ``T_a[mu](z)`` on a weighted discrete measure (Prop. A.1).

    ``mu = sum_i w_i delta_{z_i}``; ``T_a[mu](z) = sum_i w_i a(z,z_i) V z_i /
    sum_i w_i a(z,z_i)`` with ``a = exp(log_score)``, evaluated by log-sum-exp.

    Shapes: ``tokens`` ``(L, d)``, ``token_weights`` ``(L,)`` (non-negative, not all
    zero), ``z`` ``(n, d)``, ``V`` ``(d_out, d)`` or ``None`` (identity); returns
    ``(n, d_out)``.  Also returns the log normaliser ``log sum_i w_i a(z, z_i)`` of shape
    ``(n,)``.  ``log_score`` may return ``-inf`` (zero alignment) but not NaN or
    ``+inf``, and every query needs one token of positive weight and finite score.
    """
    tokens = as_float_array(tokens, "tokens")
    if tokens.ndim != 2 or tokens.shape[0] == 0:
        raise ValueError(
            f"tokens: expected shape (L, d) with L >= 1, got {tuple(tokens.shape)}."
        )
    check_finite(tokens, "tokens")
    L, d = tokens.shape
    tw = as_float_array(token_weights, "token_weights")
    check_shape(tw, "token_weights", (L,), "one weight per token.")
    check_finite(tw, "token_weights")
    if is_concrete(tw) and (np.any(np.asarray(tw) < 0) or not np.any(np.asarray(tw) > 0)):
        raise ValueError(
            "token_weights: must be non-negative with at least one positive weight."
        )
    z, _ = _queries(z, d)
    if V is None:
        values = tokens
    else:
        V = as_float_array(V, "V")
        if V.ndim != 2 or V.shape[1] != d:
            raise ValueError(f"V: expected shape (d_out, {d}), got {tuple(V.shape)}.")
        check_finite(V, "V")
        values = tokens @ V.T
    try:
        score = log_score(z, tokens)
    except TypeError as exc:  # shape mismatch inside the user's function
        raise ValueError(
            f"log_score: failed on queries of shape {tuple(z.shape)} and tokens of shape "
            f"{tuple(tokens.shape)} ({exc})."
        ) from exc
    if tuple(jnp.shape(score)) != (z.shape[0], L):
        raise ValueError(
            f"log_score: expected scores of shape ({z.shape[0]}, {L}), got "
            f"{tuple(jnp.shape(score))}."
        )
    if is_concrete(score) and np.any(np.isnan(np.asarray(score)) | (np.asarray(score) == np.inf)):
        raise ValueError(
            "log_score: returned NaN or +inf scores (overflow?); rescale tokens, z or the "
            "score's parameters."
        )
    logits = score + jnp.where(tw > 0, jnp.log(jnp.where(tw > 0, tw, 1.0)), -jnp.inf)[None]
    lse = jax.scipy.special.logsumexp(logits, axis=1)
    if is_concrete(lse) and not np.all(np.isfinite(np.asarray(lse))):
        raise ValueError(
            "log_score: every token of positive weight has score -inf (or the log "
            "normaliser overflowed) for some query; rescale tokens, z or the score."
        )
    out = jnp.exp(logits - lse[:, None]) @ values
    check_result(out, "weighted_attention", "Rescale tokens or V: the values overflow.")
    return out, lse


def mixture_decomposition(log_score: LogScore, components: Sequence, weights, z, V=None):
    """Prop. A.1: ``T_a[sum_k pi_k mu_k](z) = sum_k r_k(z) T_a[mu_k](z)``.

    Each ``mu_k`` is the empirical measure of ``components[k]`` (shape ``(L_k, d)``).
    Returns ``(outputs, r)`` where ``outputs[k]`` is ``T_a[mu_k](z)`` (``(K, n, d_out)``)
    and ``r`` the context weights ``(n, K)``, non-negative and summing to one:
    ``r_k = pi_k int a dmu_k / int a dmu``.
    """
    w = as_float_array(weights, "weights")
    if w.ndim != 1 or w.shape[0] != len(components):
        raise ValueError(
            f"weights: expected one weight per component ({len(components)}), got shape "
            f"{tuple(w.shape)}."
        )
    if np.any(np.asarray(w) < 0) or abs(float(np.sum(w)) - 1.0) > 1e-8:
        raise ValueError("weights: must be non-negative and sum to 1 within 1e-8.")
    outs, lognorm = [], []
    for k, comp in enumerate(components):
        comp = as_float_array(comp, f"components[{k}]")
        Lk = comp.shape[0]
        o, lse = weighted_attention(log_score, comp, jnp.full((Lk,), 1.0 / Lk), z, V)
        outs.append(o)
        lognorm.append(lse)
    logr = jnp.log(w)[None] + jnp.stack(lognorm, axis=1)  # (n, K)
    r = jax.nn.softmax(logr, axis=1)
    return jnp.stack(outs), r


# ------------------------------------------------------------ effective sample size
def _log_tilt_moments(mixture, u):
    """``log E[w]`` and ``log E[w^2]`` for ``w = exp(<u, x>)``, ``u`` of shape ``(n, d)``."""
    lin = u @ mixture.means.T  # (n, K)
    quad = jnp.einsum("ni,kij,nj->nk", u, mixture.covs, u)
    lw = mixture.log_weights[None]
    log_m1 = jax.scipy.special.logsumexp(lw + lin + 0.5 * quad, axis=1)
    log_m2 = jax.scipy.special.logsumexp(lw + 2.0 * lin + 2.0 * quad, axis=1)
    return log_m1, log_m2


def effective_sample_size(mixture: GaussianMixture, U, z, L):
    """Predicted ESS of softmax attention on ``L`` i.i.d. tokens
    (docs/topics/operator.md#finite-prompts-rate-and-effective-sample-size).

    ``ESS = L (E w)^2 / E w^2`` with importance weights ``w = exp(<U z, x>)``; for one
    Gaussian this is ``L exp(-u^T Gamma u)``.  Shapes: ``z`` ``(n, d)`` -> ``(n,)``.
    """
    mixture = _check_mixture(mixture)
    U, _ = _check_uv(U, jnp.eye(mixture.dim), mixture.dim)
    z, squeeze = _queries(z, mixture.dim)
    log_m1, log_m2 = _log_tilt_moments(mixture, z @ U.T)
    ess = L * jnp.exp(2.0 * log_m1 - log_m2)
    return ess[0] if squeeze else ess


def empirical_ess(tokens, U, z):
    """Empirical ESS ``(sum_i w_i)^2 / sum_i w_i^2`` of a finite prompt.

    Shapes: ``tokens`` ``(L, d)``, ``z`` ``(n, d)`` -> ``(n,)``.
    """
    tokens = as_float_array(tokens, "tokens")
    U, _ = _check_uv(U, jnp.eye(tokens.shape[1]), tokens.shape[1])
    z, squeeze = _queries(z, tokens.shape[1])
    s = (z @ U.T) @ tokens.T
    ess = jnp.exp(
        2.0 * jax.scipy.special.logsumexp(s, axis=1) - jax.scipy.special.logsumexp(2.0 * s, axis=1)
    )
    return ess[0] if squeeze else ess


def finite_prompt_variance(mixture: GaussianMixture, U, V, z):
    """Asymptotic variance of finite-prompt softmax attention, times ``L``
    (docs/topics/operator.md#finite-prompts-rate-and-effective-sample-size).

    The empirical operator is a self-normalised importance-sampling estimator, so
    ``L Var(T[mu_L](z)_j) -> E[w^2 (V x - T)_j^2] / (E w)^2`` (delta method).  For a
    mixture each tilted component is Gaussian: mass ``pi_k exp(2 u.m_k + 2 u^T Gamma_k u)``,
    mean ``m_k + 2 Gamma_k u`` and covariance ``Gamma_k``, which gives a closed form.
    For one Gaussian the total is ``exp(u^T Gamma u) (tr V Gamma V^T + |V Gamma u|^2)``.

    Shapes: ``z`` ``(n, d)`` -> ``(n, d_out)`` per-coordinate ``L * variance``.
    """
    mixture = _check_mixture(mixture)
    U, V = _check_uv(U, V, mixture.dim)
    z, squeeze = _queries(z, mixture.dim)
    u = z @ U.T
    T = softmax_limit_blocked(mixture, U, V, z)  # (n, dv)
    log_m1, _ = _log_tilt_moments(mixture, u)
    lin = u @ mixture.means.T
    quad = jnp.einsum("ni,kij,nj->nk", u, mixture.covs, u)
    log_mass = mixture.log_weights[None] + 2.0 * lin + 2.0 * quad - 2.0 * log_m1[:, None]
    tilted_mean = mixture.means[None] + 2.0 * jnp.einsum("kij,nj->nki", mixture.covs, u)
    diff = tilted_mean @ V.T - T[:, None, :]  # (n, K, dv)
    cov_diag = jnp.einsum("oi,kij,oj->ko", V, mixture.covs, V)  # (K, dv)
    var = jnp.einsum("nk,nko->no", jnp.exp(log_mass), diff**2 + cov_diag[None])
    return var[0] if squeeze else var
