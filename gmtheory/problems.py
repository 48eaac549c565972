"""Seeded random problem generators shared by checks, simulations and tests.

Every draw takes an explicit ``jax.random`` key (the protocol of checks ``operator.01*``,
docs/topics/operator.md#what-the-checks-test).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._xla import LONG_RUN_TOKENS, jit_long, traced
from .mixture import GaussianMixture
from .operators import (
    linear_attention,
    linear_attention_limit,
    softmax_attention,
    softmax_attention_limit,
)
from .sharding import shard_leading

__all__ = ["random_mixture", "random_attention", "scale_to_quad", "stream_key", "make_problem",
           "sample_prompts", "prompt_sq_errors"]


def random_mixture(key, n_components: int, dim: int, *, shared: bool = False, ridge=0.3):
    """Random mixture as in check 1: ``pi ~ Dirichlet(1)``, ``m_k ~ N(0, I)``,
    ``Gamma_k = A A^T / d + ridge I`` (one ``A`` for all components if ``shared``)."""
    kw, km, ka = jax.random.split(key, 3)
    e = jax.random.exponential(kw, (n_components,))  # normalised Exp(1) = Dirichlet(1)
    w = e / jnp.sum(e)
    means = jax.random.normal(km, (n_components, dim))
    nA = 1 if shared else n_components
    A = jax.random.normal(ka, (nA, dim, dim))
    covs = A @ jnp.swapaxes(A, -1, -2) / dim + ridge * jnp.eye(dim)
    covs = jnp.broadcast_to(covs, (n_components, dim, dim))
    return GaussianMixture(w, means, covs)


def scale_to_quad(mixture: GaussianMixture, U, z, target: float):
    """Rescale ``U`` so that ``max_{k, queries} (U z)^T Gamma_k (U z) == target``."""
    u = z @ U.T
    quad = jnp.einsum("ni,kij,nj->nk", u, mixture.covs, u)
    return U * jnp.sqrt(target / jnp.max(quad))


def random_attention(key, mixture: GaussianMixture, n_queries: int, *, max_quad=1.0,
                     d_out=None):
    """Random ``(U, V, z)`` with Gaussian entries.

    ``U`` is scaled so that ``max (Uz)^T Gamma_k (Uz) = max_quad`` over the queries.
    """
    d = mixture.dim
    d_out = d if d_out is None else d_out
    ku, kv, kz = jax.random.split(key, 3)
    z = jax.random.normal(kz, (n_queries, d))
    U = scale_to_quad(mixture, jax.random.normal(ku, (d, d)), z, max_quad)
    V = jax.random.normal(kv, (d_out, d))
    return U, V, z


def stream_key(seed: int, name: str):
    """Named seed stream: ``fold_in(key(seed), crc32(name))`` (data, task, noise, ...)."""
    import zlib

    return jax.random.fold_in(jax.random.key(int(seed)), zlib.crc32(name.encode()) & 0x7FFFFFFF)


def make_problem(seed: int, d: int, n_components: int, n_queries: int, max_quad: float):
    """The seeded mixture and ``(U, V, z)`` of the prompt-convergence experiment and of
    checks operator.05b/06: ``random_mixture`` and ``random_attention`` from named streams."""
    mix = random_mixture(stream_key(seed, "mixture"), n_components, d)
    U, V, z = random_attention(stream_key(seed, "attention"), mix, n_queries, max_quad=max_quad)
    return mix, U, V, z


def sample_prompts(mixture, keys, L):
    """``len(keys)`` prompts of ``L`` tokens from ``mixture``, one per key: ``(R, L, d)``
    (compiled once per shape; with :data:`gmtheory._xla.LONG_RUNNING` from
    ``LONG_RUN_TOKENS`` tokens in all)."""
    long = len(keys) * int(L) >= LONG_RUN_TOKENS and not traced(keys, mixture)
    return (_sample_prompts_long if long else _sample_prompts)(mixture, keys, L)


def _draw_prompts(mixture, keys, L):
    return jax.vmap(lambda k: mixture.sample(k, L)[0])(keys)


_sample_prompts = jax.jit(_draw_prompts, static_argnames=("L",))
_sample_prompts_long = jit_long(_draw_prompts, static_argnames=("L",))


def prompt_sq_errors(key, mixture, U, V, z, *, L: int, reps: int,
                     kind: str | tuple[str, ...] = "softmax", max_tokens: int = 1 << 22):
    """Squared errors ``|T[mu_L](z) - T[mu](z)|^2`` over ``reps`` independent prompts.

    Prompt ``r`` uses key ``fold_in(key, r)``.  Returns ``(reps, n)``.  ``kind``:
    ``"softmax"``, ``"linear"``, or a tuple of them, which reads every prompt with each
    operator (one draw, sampled once) and returns one ``(reps, n)`` array per kind.
    """
    kinds = (kind,) if isinstance(kind, str) else tuple(kind) if isinstance(
        kind, tuple | list) else ()
    if not kinds or any(k not in ("softmax", "linear") for k in kinds):
        raise ValueError(f"kind: must be 'softmax', 'linear' or a tuple of them, got {kind!r}.")
    ops = {"softmax": (softmax_attention_limit, softmax_attention),
           "linear": (linear_attention_limit, linear_attention)}
    limits = [ops[k][0](mixture, U, V, z) for k in kinds]
    batch = max(1, min(reps, max_tokens // L))
    out = [[] for _ in kinds]
    for start in range(0, reps, batch):
        r = jnp.arange(start, min(reps, start + batch))
        keys = shard_leading(jax.vmap(lambda i: jax.random.fold_in(key, i))(r))
        toks = sample_prompts(mixture, keys, L)       # prompts split over the devices
        for j, k in enumerate(kinds):
            est = ops[k][1](toks, U, V, z)
            out[j].append(jnp.sum((est - limits[j][None]) ** 2, axis=-1))
    res = tuple(jnp.concatenate(o, axis=0) for o in out)
    return res[0] if isinstance(kind, str) else res
