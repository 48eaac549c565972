"""Gaussian Mixture Attention (GMA): linear-time attention routed through K Gaussians.

Documented in docs/topics/gma.md (this project's definition of GMA; the paper publishes
no code).  Per head,
queries and keys are mapped to routing vectors ``z = W x`` in ``R^{d_r}``, whose
responsibilities ``r(z) = softmax_c(l_c(z) / tau)`` over K diagonal (optionally
diagonal + low-rank precision) Gaussian components define the rank-K affinity
``A = R_q R_k^T``, which is never formed:

* bidirectional, ``normalisation="query"``: ``y_i = r_qi^T (R_k^T V) / (r_qi^T R_k^T 1 + eps)``;
* causal: the same with prefix sums ``S_t``, ``n_t``, computed chunk by chunk in a
  ``lax.scan`` that carries ``(S, n)`` (body rematerialised), so memory is
  ``O(N K + K d_v)`` per head in training as in inference;
* ``normalisation="slot"``: per-slot means ``M = diag(R_k^T 1 + c)^{-1} R_k^T V`` read out
  by ``y = R_q M`` (EM / Luna style; ``c`` a pseudo-count for empty slots).

Padding masks zero the key responsibilities.  Accumulators are float32 or wider, also
for bfloat16 inputs.  :func:`naive_attention` is the ``O(N^2)`` reference with the
materialised affinity.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._validation import (
    as_float_array,
    check_finite,
    check_int,
    check_positive,
    check_result,
    is_concrete,
)

__all__ = ["GMAParams", "init", "responsibilities", "gma_attention", "naive_attention",
           "log_responsibility_logits", "routes", "bidirectional_contraction",
           "causal_contraction", "uses_fused", "kmeanspp_means", "SIGMA_MIN", "FUSED_MIN_N"]

SIGMA_MIN = 1e-2


class GMAParams(NamedTuple):
    """Parameters of a multi-head GMA layer (a pytree).

    Shapes: ``Wq, Wk`` ``(H, d_model, d_r)``; ``Wv`` ``(H, d_model, d_v)``; ``Wo``
    ``(H * d_v, d_model)``; ``mu``, ``rho`` ``(H, K, d_r)`` (scales
    ``sigma = SIGMA_MIN + softplus(rho)``); ``mix_logits`` ``(H, K)``; ``log_tau`` ``(H,)``;
    ``lowrank`` ``(H, K, d_r, r)`` or ``None`` (precision ``diag(sigma^-2) + U U^T``).
    """

    Wq: jax.Array
    Wk: jax.Array
    Wv: jax.Array
    Wo: jax.Array
    mu: jax.Array
    rho: jax.Array
    mix_logits: jax.Array
    log_tau: jax.Array
    lowrank: jax.Array | None = None


@partial(jax.jit, static_argnums=2)
def _kmeanspp(key, pts, K):
    """k-means++ seeding on ``pts`` (n, d): returns ``(K, d)`` centres (compiled once per
    shape and K; eagerly each of its small ops was dispatched separately)."""
    n = pts.shape[0]
    k0, key = jax.random.split(key)
    centres = [pts[jax.random.randint(k0, (), 0, n)]]
    for _ in range(1, K):
        d2 = jnp.min(jnp.stack([jnp.sum((pts - c) ** 2, 1) for c in centres]), 0)
        tot = jnp.sum(d2)
        # every point already a centre (K > distinct points): draw uniformly, not 0/0
        prob = jnp.where(tot > 0, d2 / jnp.where(tot > 0, tot, 1.0), 1.0 / n)
        key, k = jax.random.split(key)
        centres.append(pts[jax.random.choice(k, n, p=prob)])
    return jnp.stack(centres)


def init(key, d_model: int, *, heads: int = 4, K: int = 16, d_r: int | None = None,
         d_v: int | None = None, lowrank_rank: int = 0, tokens=None, tau0: float = 1.0,
         dtype=jnp.float32) -> GMAParams:
    """Initialise a GMA layer.

    ``tokens`` ``(n, d_model)`` (optional) seeds the means by k-means++ on the projected
    keys of each head; otherwise ``mu ~ N(0, I)``.  The temperature starts at
    ``tau0 * sqrt(d_r)`` (``tau0`` positive and finite); scales start near 1.
    """
    for name, v in (("d_model", d_model), ("heads", heads), ("K", K),
                    ("lowrank_rank", lowrank_rank)):
        check_int(v, name)
    if K < 1 or heads < 1:
        raise ValueError(f"K, heads: must be positive, got K={K}, heads={heads}.")
    check_int(d_model, "d_model", minimum=1)
    check_int(lowrank_rank, "lowrank_rank", minimum=0)
    d_r = max(1, d_model // heads) if d_r is None else check_int(d_r, "d_r", minimum=1)
    d_v = max(1, d_model // heads) if d_v is None else check_int(d_v, "d_v", minimum=1)
    tau0 = check_positive(tau0, "tau0")
    try:
        floating = jnp.issubdtype(dtype, jnp.floating)
    except TypeError:
        floating = False
    if not floating:
        raise ValueError(f"dtype: expected a floating dtype (e.g. jnp.float32), got {dtype!r}.")
    ks = jax.random.split(key, 6)
    s = 1.0 / np.sqrt(d_model)
    Wq = s * jax.random.normal(ks[0], (heads, d_model, d_r), dtype)
    Wk = s * jax.random.normal(ks[1], (heads, d_model, d_r), dtype)
    Wv = s * jax.random.normal(ks[2], (heads, d_model, d_v), dtype)
    Wo = jax.random.normal(ks[3], (heads * d_v, d_model), dtype) / np.sqrt(heads * d_v)
    mu = jax.random.normal(ks[4], (heads, K, d_r), dtype)
    rho = jnp.full((heads, K, d_r), np.log(np.expm1(1.0 - SIGMA_MIN)), dtype)
    low = (0.01 * jax.random.normal(ks[5], (heads, K, d_r, lowrank_rank), dtype)
           if lowrank_rank > 0 else None)
    params = GMAParams(Wq, Wk, Wv, Wo, mu, rho, jnp.zeros((heads, K), dtype),
                       jnp.full((heads,), np.log(tau0 * np.sqrt(d_r)), dtype), low)
    if tokens is not None:
        params = params._replace(mu=kmeanspp_means(params, tokens, ks[4]))
    return params


def kmeanspp_means(params: GMAParams, tokens, key):
    """Means ``(H, K, d_r)`` seeded by k-means++ on each head's projected keys
    ``tokens @ Wk[h]`` (``tokens`` ``(n, d_model)``): the initialisation that
    :func:`init` applies with ``tokens=``, for a layer whose projections already exist
    (e.g. inside a model, on the residual stream entering it)."""
    _check_params(params)
    H, d_model, _ = params.Wk.shape
    tokens = as_float_array(tokens, "tokens")
    if tokens.ndim != 2 or tokens.shape[0] == 0 or tokens.shape[1] != d_model:
        raise ValueError(f"tokens: expected shape (n, {d_model}) with n >= 1, got "
                         f"{tuple(tokens.shape)}.")
    check_finite(tokens, "tokens")
    K = params.mu.shape[1]
    tokens = tokens.astype(params.Wk.dtype)
    return jnp.stack([_kmeanspp(jax.random.fold_in(key, h), tokens @ params.Wk[h], K)
                      for h in range(H)])


def _head(params: GMAParams, h: int):
    return jax.tree_util.tree_map(lambda a: None if a is None else a[h], params,
                                  is_leaf=lambda a: a is None)


def log_responsibility_logits(mu, rho, mix_logits, z, lowrank=None):
    """``l_c(z) = log pi_c - 1/2 (z - mu_c)^T Lambda_c (z - mu_c) + 1/2 log det Lambda_c``.

    Diagonal part by matmuls (``z^2 s^-2 - 2 z (mu s^-2) + sum mu^2 s^-2``) in float32 or
    wider; low-rank part ``|U_c^T (z - mu_c)|^2`` and the determinant lemma.
    Shapes: ``z`` ``(..., N, d_r)`` -> ``(..., N, K)``.
    """
    acc = jnp.promote_types(z.dtype, jnp.float32)
    z = z.astype(acc)
    mu, rho, mix_logits = mu.astype(acc), rho.astype(acc), mix_logits.astype(acc)
    sigma = SIGMA_MIN + jax.nn.softplus(rho)
    prec = sigma**-2  # (K, d_r)
    quad = (z**2) @ prec.T - 2.0 * z @ (mu * prec).T + jnp.sum(mu**2 * prec, -1)
    logdet = -2.0 * jnp.sum(jnp.log(sigma), -1)  # log det diag(sigma^-2)
    if lowrank is not None:
        U = lowrank.astype(acc)  # (K, d_r, r)
        proj = jnp.einsum("...nd,kdr->...nkr", z, U) - jnp.einsum("kd,kdr->kr", mu, U)
        quad = quad + jnp.sum(proj**2, -1)
        inner = jnp.eye(U.shape[-1], dtype=acc) + jnp.einsum("kdr,kd,kds->krs", U, sigma**2, U)
        logdet = logdet + jnp.linalg.slogdet(inner)[1]
    return jax.nn.log_softmax(mix_logits) - 0.5 * quad + 0.5 * logdet


def responsibilities(params: GMAParams, z, head: int = 0):
    """Responsibilities ``softmax_c(l_c(z) / tau)`` of one head.

    Shapes: ``(..., N, d_r) -> (..., N, K)``.
    """
    _check_params(params)
    H, _, d_r = params.Wq.shape
    head = check_int(head, "head", minimum=0)
    if head >= H:
        raise ValueError(f"head: must be below the number of heads {H}, got {head}.")
    z = as_float_array(z, "z")
    if z.ndim < 1 or z.shape[-1] != d_r:
        raise ValueError(f"z: expected routing vectors of shape (..., {d_r}), got "
                         f"{tuple(z.shape)}.")
    check_finite(z, "z")
    p = _head(params, head)
    logits = log_responsibility_logits(p.mu, p.rho, p.mix_logits, z, p.lowrank)
    r = jax.nn.softmax(logits / jnp.exp(p.log_tau.astype(logits.dtype)), axis=-1)
    check_result(r, "responsibilities", _ROUTE_FIX)
    return r


_ROUTE_FIX = ("Rescale z (or x) or raise the temperature exp(log_tau): the logits "
              "|z - mu|^2 / (sigma^2 tau) overflow.")


def _check_params(params) -> None:
    """Shapes, dtypes and (for concrete arrays) finiteness of every field of ``params``."""
    if not isinstance(params, GMAParams):
        raise ValueError(f"params: expected gma.GMAParams (from gma.init), got "
                         f"{type(params).__name__}.")
    if jnp.ndim(params.Wq) != 3:
        raise ValueError(f"params.Wq: expected shape (H, d_model, d_r), got "
                         f"{tuple(jnp.shape(params.Wq))}.")
    H, d_model, d_r = params.Wq.shape
    d_v = params.Wv.shape[-1] if jnp.ndim(params.Wv) == 3 else None
    K = params.mu.shape[1] if jnp.ndim(params.mu) == 3 else None
    want = {"Wk": (H, d_model, d_r), "Wv": (H, d_model, d_v), "Wo": (None, d_model),
            "mu": (H, K, d_r), "rho": (H, K, d_r), "mix_logits": (H, K), "log_tau": (H,)}
    if params.lowrank is not None:
        want["lowrank"] = (H, K, d_r, None)
    if d_v is not None:
        want["Wo"] = (H * d_v, d_model)
    for name, shape in want.items():
        a = getattr(params, name)
        got = tuple(jnp.shape(a))
        if len(got) != len(shape) or any(w is not None and w != g
                                          for w, g in zip(shape, got, strict=True)):
            spec = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
            raise ValueError(f"params.{name}: expected shape {spec} to match params.Wq "
                             f"{tuple(params.Wq.shape)}, got {got}.")
    for name in GMAParams._fields:
        a = getattr(params, name)
        if a is None:
            continue
        if not jnp.issubdtype(jnp.result_type(a), jnp.floating):
            raise ValueError(f"params.{name}: expected a floating array, got "
                             f"{jnp.result_type(a)}.")
        check_finite(a, f"params.{name}")


def _check_inputs(params, x, mask, normalisation):
    if not isinstance(normalisation, str) or normalisation not in ("query", "slot"):
        raise ValueError(f"normalisation: must be 'query' or 'slot', got {normalisation!r}.")
    _check_params(params)
    if x.ndim != 3 or x.shape[-1] != params.Wq.shape[1]:
        raise ValueError(f"x: expected shape (B, N, {params.Wq.shape[1]}), got {tuple(x.shape)}.")
    if x.shape[1] == 0:
        raise ValueError("x: the sequence is empty (N = 0); pass at least one token.")
    check_finite(x, "x")
    if mask is not None and tuple(mask.shape) != tuple(x.shape[:2]):
        raise ValueError(f"mask: expected shape {tuple(x.shape[:2])} (True = real token), got "
                         f"{tuple(mask.shape)}.")


def _as_mask(mask):
    """A boolean mask; 0/1 numbers are accepted, anything else would reweight keys."""
    if mask is None:
        return None
    mask = jnp.asarray(mask) if not isinstance(mask, jax.core.Tracer) else mask
    if mask.dtype == jnp.bool_ or not is_concrete(mask):
        return mask
    m = np.asarray(mask)
    if m.dtype.kind not in "iuf" or not np.all((m == 0) | (m == 1)):
        raise ValueError(f"mask: expected booleans (True = real token) or 0/1, got dtype "
                         f"{m.dtype} with values other than 0 and 1.")
    return mask != 0


def routes(params: GMAParams, x, mask=None):
    """Routing of every head: query and key responsibilities and the values.

    The first stage of :func:`gma_attention` (no input checks), public for profiling.
    Shapes: ``x`` ``(B, N, d_model)``, ``mask`` ``(B, N)`` bool or ``None`` (padded keys
    get zero responsibility) -> ``(R_q, R_k, v)`` with ``R_q, R_k`` ``(H, B, N, K)`` in
    the accumulator dtype (float32 or wider) and ``v`` ``(H, B, N, d_v)`` in that dtype.
    """
    def one(h):
        p = _head(params, h)
        rq = responsibilities(params, x @ p.Wq, h)
        rk = responsibilities(params, x @ p.Wk, h)
        if mask is not None:
            rk = rk * mask[..., None].astype(rk.dtype)
        return rq, rk, (x @ p.Wv).astype(rq.dtype)

    outs = [one(h) for h in range(params.Wq.shape[0])]
    return tuple(jnp.stack(o) for o in zip(*outs, strict=True))


def bidirectional_contraction(rq, rk, v, normalisation: str = "query", eps: float = 1e-6):
    """The bidirectional (non-causal) GMA read-out from responsibilities and values.

    ``"query"``: ``y_n = r_qn^T (R_k^T V) / (r_qn^T R_k^T 1 + eps)``; ``"slot"``:
    ``y_n = r_qn^T diag(R_k^T 1 + eps)^{-1} R_k^T V``.  The second stage of
    :func:`gma_attention` (no input checks), public for profiling.
    Shapes: ``rq, rk`` ``(..., N, K)``, ``v`` ``(..., N, d_v)`` -> ``(..., N, d_v)``
    (any leading axes, e.g. the ``(H, B)`` of :func:`routes`).
    """
    kv = jnp.einsum("...nk,...nd->...kd", rk, v)
    ksum = jnp.sum(rk, axis=-2)
    if normalisation == "query":
        return jnp.einsum("...nk,...kd->...nd", rq, kv) / (
            jnp.einsum("...nk,...k->...n", rq, ksum)[..., None] + eps)
    return jnp.einsum("...nk,...kd->...nd", rq, kv / (ksum[..., None] + eps))


def _causal_chunked(rq, rk, v, chunk, normalisation, eps):
    """Causal GMA for one (head, batch): ``rq, rk`` (N, K), ``v`` (N, d_v)."""
    N, K = rq.shape
    dv = v.shape[-1]
    nc = -(-N // chunk)
    pad = nc * chunk - N
    rq_p = jnp.pad(rq, ((0, pad), (0, 0))).reshape(nc, chunk, K)
    rk_p = jnp.pad(rk, ((0, pad), (0, 0))).reshape(nc, chunk, K)  # padded keys: r = 0
    v_p = jnp.pad(v, ((0, pad), (0, 0))).reshape(nc, chunk, dv)

    @jax.checkpoint
    def body(carry, blk):
        S, n = carry
        q, k, vv = blk
        y = _causal_chunk_math(q, k, vv, S, n, normalisation, eps)
        return (S + k.T @ vv, n + k.sum(0)), y

    init = (jnp.zeros((K, dv), rq.dtype), jnp.zeros((K,), rq.dtype))
    _, ys = jax.lax.scan(body, init, (rq_p, rk_p, v_p))
    return ys.reshape(nc * chunk, dv)[:N]


def causal_contraction(rq, rk, v, *, chunk: int = 128, normalisation: str = "query",
                       eps: float = 1e-6):
    """The causal GMA read-out from non-negative features: ``y_t = r_qt^T S_t / (r_qt^T n_t
    + eps)`` with prefix sums ``S_t = sum_{j<=t} r_kj v_j^T``, ``n_t = sum_{j<=t} r_kj``,
    as a rematerialised ``lax.scan`` over chunks of ``chunk`` tokens (``"slot"``: the
    per-slot prefix means).  Any non-negative feature maps work (elu+1 linear attention
    and FAVOR+ use it too).  Shapes: ``rq, rk`` ``(..., N, K)``, ``v`` ``(..., N, d_v)``
    -> ``(..., N, d_v)``.
    """
    fn = lambda a, b, c: _causal_chunked(a, b, c, int(chunk), normalisation, eps)
    for _ in range(rq.ndim - 2):
        fn = jax.vmap(fn)
    return fn(rq, rk, v)


# Forms with the routing fused into the chunked scan (docs/topics/gma.md#benchmark): the
# (H, B, N, K) responsibilities are never materialised; each chunk's queries, keys and
# values are projected and routed inside the scan body (rematerialised for the backward).
# The unfused form is faster while its working set fits in the cache; past
# FUSED_MIN_N tokens per sequence the fused form is used (measured in docs/topics/gma.md).
FUSED_MIN_N = {"causal": 4096, "bidirectional": 8192}
FUSED_CHUNK = 512  # bidirectional fused form: tokens per scan step


def uses_fused(N: int, causal: bool, fused: bool | None = None) -> bool:
    """Whether :func:`gma_attention` takes the fused form for a sequence of ``N`` tokens
    (``fused=None``: by :data:`FUSED_MIN_N`)."""
    if fused is not None:
        return bool(fused)
    return int(N) >= FUSED_MIN_N["causal" if causal else "bidirectional"]


def _route_chunk(params, xc, mc):
    """Routing of every head for one chunk ``xc`` ``(B, C, d_model)`` (mask ``mc``
    ``(B, C)`` or ``None``): ``R_q, R_k`` ``(H, B, C, K)``, ``v`` ``(H, B, C, d_v)``, the
    same numbers as :func:`routes` restricted to the chunk."""
    def resp(p, z):
        logits = log_responsibility_logits(p.mu, p.rho, p.mix_logits, z, p.lowrank)
        return jax.nn.softmax(logits / jnp.exp(p.log_tau.astype(logits.dtype)), axis=-1)

    rqs, rks, vs = [], [], []
    for h in range(params.Wq.shape[0]):
        p = _head(params, h)
        rq = resp(p, xc @ p.Wq)
        rk = resp(p, xc @ p.Wk)
        if mc is not None:
            rk = rk * mc[..., None].astype(rk.dtype)
        rqs.append(rq)
        rks.append(rk)
        vs.append((xc @ p.Wv).astype(rq.dtype))
    return jnp.stack(rqs), jnp.stack(rks), jnp.stack(vs)


def _chunks(a, chunk):
    """``(B, N, ...)`` -> ``(n_chunks, B, chunk, ...)``, zero-padded at the end."""
    B, N = a.shape[:2]
    nc = -(-N // chunk)
    pad = [(0, 0), (0, nc * chunk - N)] + [(0, 0)] * (a.ndim - 2)
    a = jnp.pad(a, pad).reshape((B, nc, chunk) + a.shape[2:])
    return jnp.moveaxis(a, 1, 0)


def _causal_chunk_math(q, k, vv, S, n, normalisation, eps):
    """One chunk of the causal read-out for one (head, batch) given the carried prefix."""
    if normalisation == "query":
        # numerator and denominator from one pair of products, [S | n] and [v | 1]: written
        # as two, ``(q S + a v) / (q n + a 1 + eps)``, XLA:CPU (jaxlib 0.10.2) compiled the
        # vmapped scan so that the output columns beyond K were read from memory it never
        # wrote (the intermittent gma-lm NaN: docs/topics/gma.md;
        # tests/test_gma.py::test_no_uninitialised_memory_in_the_compiled_forward)
        a = (q @ k.T) * jnp.tril(jnp.ones((q.shape[0], q.shape[0]), q.dtype))
        nd = (q @ jnp.concatenate([S, n[:, None]], 1)
              + a @ jnp.concatenate([vv, jnp.ones((vv.shape[0], 1), vv.dtype)], 1))
        return nd[:, :-1] / (nd[:, -1:] + eps)
    S_t = S[None] + jnp.cumsum(k[:, :, None] * vv[:, None, :], axis=0)
    n_t = n[None] + jnp.cumsum(k, axis=0)
    return jnp.einsum("ck,ckd->cd", q, S_t / (n_t[..., None] + eps))


@partial(jax.jit, static_argnames=("causal", "chunk", "normalisation"))
def _gma_fused(params, x, mask, causal, chunk, normalisation, eps):
    B, N, _ = x.shape
    H, _, d_v = params.Wv.shape
    K = params.mu.shape[1]
    # the routing's dtype: float32 or wider, and as wide as the widest parameter (float64
    # projections with float32 inputs route in float64, as the materialised form does)
    acc = jnp.result_type(x.dtype, jnp.float32,
                          *[a.dtype for a in jax.tree.leaves(params) if a is not None])
    xs = _chunks(x, chunk)
    # padding to whole chunks adds zero tokens: their keys must not count (bidirectional)
    real = jnp.ones((B, N), bool) if mask is None else mask
    ms = _chunks(real, chunk) if (mask is not None or N % chunk) else None
    Wo = params.Wo.astype(acc)

    def out(y):  # (H, B, C, d_v) -> (B, C, d_model)
        Hh, Bb, C, dv = y.shape
        return jnp.transpose(y, (1, 2, 0, 3)).reshape(Bb, C, Hh * dv) @ Wo

    if causal:
        math = jax.vmap(jax.vmap(lambda q, k, vv, S, n: _causal_chunk_math(
            q, k, vv, S, n, normalisation, eps)))

        @jax.checkpoint
        def body(carry, blk):
            S, n = carry
            rq, rk, v = _route_chunk(params, blk[0], blk[1])
            y = math(rq, rk, v, S, n)
            S = S + jnp.einsum("hbck,hbcd->hbkd", rk, v)
            return (S, n + rk.sum(2)), out(y)

        init = (jnp.zeros((H, B, K, d_v), acc), jnp.zeros((H, B, K), acc))
        _, ys = jax.lax.scan(body, init, (xs, ms))
    else:
        @jax.checkpoint
        def accumulate(carry, blk):
            kv, ks = carry
            _, rk, v = _route_chunk(params, blk[0], blk[1])
            return (kv + jnp.einsum("hbck,hbcd->hbkd", rk, v), ks + rk.sum(2)), None

        init = (jnp.zeros((H, B, K, d_v), acc), jnp.zeros((H, B, K), acc))
        (kv, ks), _ = jax.lax.scan(accumulate, init, (xs, ms))
        if normalisation == "slot":
            kv, ks = kv / (ks[..., None] + eps), None

        @jax.checkpoint
        def read(_, xc):
            rq, _, _ = _route_chunk(params, xc, None)
            if ks is None:
                y = jnp.einsum("hbck,hbkd->hbcd", rq, kv)
            else:
                y = jnp.einsum("hbck,hbkd->hbcd", rq, kv) / (
                    jnp.einsum("hbck,hbk->hbc", rq, ks)[..., None] + eps)
            return None, out(y)

        _, ys = jax.lax.scan(read, None, xs)
    y = jnp.moveaxis(ys, 0, 1).reshape(B, -1, ys.shape[-1])[:, :N]
    return y.astype(x.dtype)


@partial(jax.jit, static_argnames=("causal", "chunk", "normalisation"))
def _gma(params, x, mask, causal, chunk, normalisation, eps):
    rq, rk, v = routes(params, x, mask)  # (H, B, N, K), (H, B, N, d_v)
    if causal:
        fn = lambda a, b, c: _causal_chunked(a, b, c, chunk, normalisation, eps)
        y = jax.vmap(jax.vmap(fn))(rq, rk, v)
    else:
        y = bidirectional_contraction(rq, rk, v, normalisation, eps)
    H, B, N, dv = y.shape
    y = jnp.transpose(y, (1, 2, 0, 3)).reshape(B, N, H * dv)
    return (y @ params.Wo.astype(y.dtype)).astype(x.dtype)


def gma_attention(params: GMAParams, x, *, causal: bool = False, chunk: int | None = None,
                  mask=None, normalisation: str = "query", eps: float = 1e-6,
                  fused: bool | None = None):
    """Multi-head Gaussian Mixture Attention.

    Shapes: ``x`` ``(B, N, d_model)`` or ``(N, d_model)`` -> same; ``mask`` ``(B, N)`` bool
    (True for real tokens; padded keys get zero responsibility).  ``chunk`` is the causal
    chunk size (default ``min(N, 128)``; the fused bidirectional form scans chunks of
    ``FUSED_CHUNK``).  ``fused``: compute the responsibilities chunk by chunk inside the
    scan instead of materialising them (``None``: from ``N`` by :func:`uses_fused`; the
    two forms agree to round-off).  Outputs are cast back to ``x.dtype``; accumulation
    happens in float32 or wider.
    """
    x = as_float_array(x, "x")
    mask = _as_mask(mask)
    squeeze = x.ndim == 2
    if squeeze:
        x = x[None]
        mask = None if mask is None else mask[None]
    _check_inputs(params, x, mask, normalisation)
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError(f"causal: expected True or False, got {causal!r}.")
    if is_concrete(eps):
        check_positive(eps, "eps", " (it keeps a query whose keys are all masked or unrouted "
                       "at 0 instead of 0/0)")
    c = min(x.shape[1], 128) if chunk is None else check_int(chunk, "chunk", minimum=1)
    if fused is not None and not isinstance(fused, (bool, np.bool_)):
        raise ValueError(f"fused: expected True, False or None, got {fused!r}.")
    if uses_fused(x.shape[1], bool(causal), fused):
        if not causal:
            c = min(x.shape[1], FUSED_CHUNK) if chunk is None else c
        out = _gma_fused(params, x, mask, bool(causal), c, normalisation, eps)
    else:
        out = _gma(params, x, mask, bool(causal), c, normalisation, eps)
    check_result(out, "gma_attention", "Rescale x, or cast float16 inputs to float32; the "
                 "routing logits or the values overflowed.")
    return out[0] if squeeze else out


def naive_attention(params: GMAParams, x, *, causal=False, mask=None, normalisation="query",
                    eps: float = 1e-6):
    """``O(N^2)`` reference with the materialised affinity ``R_q R_k^T`` (tests only)."""
    x = jnp.asarray(x)
    if x.ndim == 2:
        x = x[None]
        mask = None if mask is None else jnp.asarray(mask)[None]
    rq, rk, v = routes(params, x, mask)
    N = x.shape[1]
    if normalisation == "query":
        A = jnp.einsum("hbnk,hbmk->hbnm", rq, rk)
        if causal:
            A = A * jnp.tril(jnp.ones((N, N), A.dtype))
        y = (A @ v) / (A.sum(-1, keepdims=True) + eps)
    else:
        if causal:
            n_t = jnp.cumsum(rk, axis=2)  # (H, B, N, K) prefix counts
            A = jnp.einsum("hbtk,hbjk->hbtj", rq / (n_t + eps), rk)
            A = A * jnp.tril(jnp.ones((N, N), A.dtype))
        else:
            A = jnp.einsum("hbtk,hbjk->hbtj", rq / (rk.sum(2, keepdims=True) + eps), rk)
        y = A @ v
    H, B, _, dv = y.shape
    y = jnp.transpose(y, (1, 2, 0, 3)).reshape(B, N, H * dv)
    return (y @ params.Wo.astype(y.dtype)).astype(x.dtype)
