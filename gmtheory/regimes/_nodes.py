"""Where an expectation is taken: a Gauss–Hermite grid in low dimension, samples above.

:func:`nodes` returns weighted points of a mixture, tagged with their component, so
one integrand serves both rules: ``E f = sum_i w_i f(x_i)``.  On the grid the standard
error is 0 (the error is the quadrature's, set by the order); on samples it is the
Monte Carlo standard error of the weighted mean (:func:`weighted_mean_se`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..mixture import GaussianMixture, psd_factor
from ..quadrature import gauss_hermite_rule


class Nodes(NamedTuple):
    x: jnp.ndarray         #: points (n, d)
    w: jnp.ndarray         #: weights (n,), summing to 1
    comp: jnp.ndarray      #: component of each point (n,)
    method: str            #: "gauss-hermite order p" or "monte carlo, n samples"
    mc: bool               #: True for samples (then an SE is reported)


def nodes(mixture: GaussianMixture, key, *, n_samples: int, order: int, gh_max_dim: int):
    """Weighted points for ``E_{x ~ mixture}``: a tensor GH grid per component when
    ``d <= gh_max_dim``, else ``n_samples`` i.i.d. samples from ``key``."""
    d, K = mixture.dim, mixture.n_components
    if d <= gh_max_dim:
        t, om = gauss_hermite_rule(order, d)
        F = psd_factor(mixture.covs)
        x = (mixture.means[:, None, :] + jnp.einsum("kij,nj->kni", F, t)).reshape(-1, d)
        w = (mixture.weights[:, None] * om[None]).reshape(-1)
        comp = jnp.repeat(jnp.arange(K), t.shape[0])
        return Nodes(x, w, comp, f"Gauss-Hermite, order {order} per dimension", False)
    x, comp = mixture.sample(key, int(n_samples))
    w = jnp.full((x.shape[0],), 1.0 / x.shape[0], dtype=x.dtype)
    return Nodes(x, w, comp, f"Monte Carlo, {int(n_samples):,} samples", True)


def weighted_mean_se(values, nd: Nodes):
    """``(sum_i w_i v_i, se)``: se = 0 on a GH grid, the MC standard error on samples."""
    v = jnp.asarray(values)
    mean = float(jnp.sum(nd.w * v))
    if not nd.mc:
        return mean, 0.0
    n = v.shape[0]
    return mean, float(jnp.std(v, ddof=1) / np.sqrt(n))


def mc_mean_se(values):
    """Plain Monte Carlo mean and standard error of i.i.d. values."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))


def binomial_mean_se(hits):
    """Mean of 0/1 outcomes with the Agresti–Coull standard error
    ``sqrt(p~ (1 - p~) / (n + 4))``, ``p~ = (k + 2) / (n + 4)``: unlike ``sqrt(p (1 - p) / n)``
    it is not 0 when no (or every) outcome is a hit, so rare errors keep an honest SE."""
    v = np.asarray(hits, dtype=float)
    n, k = v.size, float(v.sum())
    pt = (k + 2.0) / (n + 4.0)
    return k / n, float(np.sqrt(pt * (1.0 - pt) / (n + 4.0)))


def combined_z(a, se_a, b, se_b):
    """``|a - b| / sqrt(se_a^2 + se_b^2)`` (inf when both SEs are 0 and a != b)."""
    se = float(np.hypot(se_a, se_b))
    diff = abs(float(a) - float(b))
    if se == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / se


def split(key, n):
    return list(jax.random.split(key, n))
