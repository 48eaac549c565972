"""Seeded random problem generators shared by checks, simulations and tests.

Every draw takes an explicit ``jax.random`` key (reference §6 check 1 protocol).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .mixture import GaussianMixture

__all__ = ["random_mixture", "random_attention", "scale_to_quad", "stream_key"]


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
