"""Gauss–Hermite and Monte Carlo expectations over Gaussians and mixtures.

Gauss-Hermite quadrature ("GH").  Nodes come from
``scipy.special.roots_hermitenorm`` (probabilists' Hermite, weight ``exp(-t^2/2)``),
normalised so the weights sum to one: ``E f(x) ~ sum_i w_i f(m + F t_i)`` with
``F F^T = Gamma``.  This is the textbook ``z = m + sqrt(2) L t`` rule with the
physicists' nodes, written in the standard-normal variable.

* :func:`gauss_hermite_rule` — tensor grid in ``p`` dimensions (JAX arrays);
  :func:`gauss_hermite_nodes` — the same rule as cached NumPy arrays, for code that
  builds its own quadrature (a 1-D rule inside ``jit``, a product with another rule).
* :func:`expect_gaussian` / :func:`expect_mixture` — tensor grid in the full space
  (low dimension only: ``order**d`` nodes).
* :func:`expect_gaussian_projected` / :func:`expect_mixture_projected` — for high
  ``d``: the integrand depends on ``x`` only through ``P^T x`` for a few directions
  ``P`` (d, p), so integrate over the ``p``-dimensional projected Gaussian.
* :func:`gauss_legendre_nodes` / :func:`normal_rule` — a 1-D rule for ``N(0, 1)``:
  Gauss–Hermite, or, for an integrand with kinks or jumps at known break points,
  Gauss–Legendre on each piece of ``[-bound, bound]`` times the Gaussian density.
* :func:`sinh_trapezoid_rule` — a 1-D rule for ``N(0, 1)`` adapted to a sigmoid gate of
  any slope (trapezoid after a sinh change of variable, traceable under ``jit``).
* :func:`chi2_rule` — a 1-D rule for ``E h(s)``, ``s ~ chi^2_d / d`` (the squared norm of
  ``N(0, I_d/d)``): generalised Gauss–Laguerre, stable at any ``d``.
* :func:`monte_carlo` — sample mean with its standard error.

Mixture expectations take ``component=True`` when the integrand depends on the
component: ``f(x, k)`` then receives the component index ``k`` as well (class-
conditional risks, per-component labels).

This is the one quadrature API of the package: ``denoising``, ``lda``, ``hermite`` and
``bench`` build on it.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import roots_hermitenorm, roots_legendre

from ._validation import as_float_array, check_finite, check_shape
from .mixture import GaussianMixture, psd_factor

__all__ = [
    "gauss_hermite_rule",
    "gauss_hermite_nodes",
    "expect_gaussian",
    "expect_mixture",
    "expect_gaussian_projected",
    "expect_mixture_projected",
    "gauss_legendre_nodes",
    "normal_rule",
    "sinh_trapezoid_rule",
    "chi2_rule",
    "monte_carlo",
]

MAX_NODES = 5_000_000


@lru_cache(maxsize=64)
def _rule_np(order: int, dim: int):
    t, w = roots_hermitenorm(order)
    w = w / w.sum()
    grids = np.meshgrid(*([t] * dim), indexing="ij")
    nodes = np.stack([g.ravel() for g in grids], axis=1)
    wgrids = np.meshgrid(*([w] * dim), indexing="ij")
    weights = np.prod(np.stack([g.ravel() for g in wgrids], axis=1), axis=1)
    return nodes, weights


def gauss_hermite_nodes(order: int, dim: int = 1):
    """The rule of :func:`gauss_hermite_rule` as read-only, cached NumPy arrays
    ``(nodes (order**dim, dim), weights (order**dim,))``."""
    _check_rule(order, dim)
    nodes, weights = _rule_np(int(order), int(dim))
    nodes.flags.writeable = False
    weights.flags.writeable = False
    return nodes, weights


def _check_rule(order, dim):
    order, dim = int(order), int(dim)
    if order < 1:
        raise ValueError(f"order: must be a positive integer, got {order}.")
    if dim < 1:
        raise ValueError(f"dim: must be a positive integer, got {dim}.")
    if order**dim > MAX_NODES:
        raise ValueError(
            f"order: a tensor grid of order {order} in dim {dim} has {order**dim:,} nodes "
            f"(> {MAX_NODES:,}); lower the order or use expect_*_projected on a few directions."
        )
    return order, dim


def gauss_hermite_rule(order: int, dim: int = 1):
    """Tensor Gauss–Hermite rule for ``N(0, I_dim)``.

    Returns ``(nodes, weights)`` of shapes ``(order**dim, dim)`` and ``(order**dim,)``;
    the weights sum to one.  Exact for polynomials of degree ``<= 2 order - 1`` in
    each coordinate.
    """
    order, dim = _check_rule(order, dim)
    nodes, weights = _rule_np(order, dim)
    return jnp.asarray(nodes), jnp.asarray(weights)


def _weighted_sum(weights, values):
    return jnp.tensordot(weights, values, axes=(0, 0))


def expect_gaussian(f: Callable, mean, cov, order: int = 40):
    """``E f(x)`` for ``x ~ N(mean, cov)`` by tensor Gauss–Hermite quadrature.

    ``f`` maps points ``(N, d)`` to values ``(N, ...)``.  ``cov`` may be singular.
    Returns an array of shape ``(...)``.
    """
    mean = as_float_array(mean, "mean")
    cov = as_float_array(cov, "cov")
    if mean.ndim != 1:
        raise ValueError(f"mean: expected shape (d,), got {tuple(mean.shape)}.")
    d = mean.shape[0]
    check_shape(cov, "cov", (d, d))
    check_finite(mean, "mean")
    check_finite(cov, "cov")
    nodes, weights = gauss_hermite_rule(order, d)
    x = mean[None] + nodes @ psd_factor(cov).T
    return _weighted_sum(weights, f(x))


def expect_mixture(f: Callable, mixture: GaussianMixture, order: int = 40, *,
                   component: bool = False):
    """``E f(x)`` for ``x`` from a Gaussian mixture: ``sum_k pi_k E_k f``.

    Tensor grid in the full dimension ``d`` (``order**d`` nodes per component).  With
    ``component=True`` the integrand is called as ``f(x, k)`` with the component index.
    ``f`` may return a pytree of arrays ``(N, ...)``; each leaf is integrated.
    """
    if not isinstance(mixture, GaussianMixture):
        raise ValueError("mixture: expected a gmtheory.GaussianMixture.")
    nodes, weights = gauss_hermite_rule(order, mixture.dim)
    factors = psd_factor(mixture.covs)
    total = None
    for k in range(mixture.n_components):
        x = mixture.means[k][None] + nodes @ factors[k].T
        fx = f(x, k) if component else f(x)
        term = jax.tree.map(lambda v, k=k: mixture.weights[k] * _weighted_sum(weights, v), fx)
        total = term if total is None else jax.tree.map(jnp.add, total, term)
    return total


def expect_gaussian_projected(f: Callable, mean, cov, directions, order: int = 40):
    """``E f(P^T x)`` for ``x ~ N(mean, cov)`` in any dimension ``d``.

    ``directions`` ``P`` has shape ``(d, p)`` with ``p`` small; ``y = P^T x`` is
    Gaussian ``N(P^T mean, P^T cov P)``, integrated on a ``p``-dimensional tensor
    grid.  ``f`` receives ``(N, p)`` projections.
    """
    P = as_float_array(directions, "directions")
    mean = as_float_array(mean, "mean")
    if P.ndim != 2 or P.shape[0] != mean.shape[0]:
        raise ValueError(
            f"directions: expected shape (d, p) = ({mean.shape[0]}, p), got {tuple(P.shape)}."
        )
    return expect_gaussian(f, P.T @ mean, P.T @ cov @ P, order)


def expect_mixture_projected(f: Callable, mixture: GaussianMixture, directions, order=40, *,
                             lift: bool = False, component: bool = False):
    """``E f(P^T x)`` for ``x`` from a mixture, projecting each component (see above).

    ``lift=True`` passes ``f`` the points ``P P^T x`` in the full space instead of the
    projections (for an integrand written in ``x`` that depends on ``x`` only through
    ``P^T x``; ``P`` must then have orthonormal columns).  ``component=True`` calls
    ``f(y, k)`` with the component index.
    """
    if not isinstance(mixture, GaussianMixture):
        raise ValueError("mixture: expected a gmtheory.GaussianMixture.")
    P = as_float_array(directions, "directions")
    if P.ndim != 2 or P.shape[0] != mixture.dim:
        raise ValueError(
            f"directions: expected shape (d, p) = ({mixture.dim}, p), got {tuple(P.shape)}.")
    total = 0.0
    for k in range(mixture.n_components):
        def g(y, k=k):
            y = y @ P.T if lift else y
            return f(y, k) if component else f(y)
        e = expect_gaussian(g, P.T @ mixture.means[k], P.T @ mixture.covs[k] @ P, order)
        total = total + mixture.weights[k] * e
    return total


@lru_cache(maxsize=32)
def _legendre_np(order: int):
    return roots_legendre(order)


def gauss_legendre_nodes(order: int):
    """Gauss–Legendre nodes and weights on ``[-1, 1]`` (``scipy.special.roots_legendre``),
    cached NumPy arrays ``(nodes (order,), weights (order,))``."""
    if int(order) < 1:
        raise ValueError(f"order: must be a positive integer, got {order}.")
    return _legendre_np(int(order))


def normal_rule(order: int, *, breaks=None, bound: float = 40.0):
    """A 1-D rule ``(t, w)`` (NumPy) for ``E h(z)``, ``z ~ N(0, 1)``: ``sum_i w_i h(t_i)``.

    Without ``breaks``: Gauss–Hermite of ``order`` (weights sum to one).  With
    ``breaks`` (the kinks or jumps of ``h``, e.g. ``(0.0,)`` for ReLU): Gauss–Legendre of
    ``order`` on each piece of ``[-bound, k_1], ..., [k_n, bound]``, weighted by the
    standard normal density, so that each piece is smooth; ``bound = 40`` cuts a
    Gaussian tail below 1e-300."""
    if not breaks:
        t, w = gauss_hermite_nodes(order, 1)
        return t[:, 0], w
    edges = [-bound, *sorted(float(k) for k in breaks), bound]
    x0, w0 = gauss_legendre_nodes(order)
    ts, ws = [], []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        t = 0.5 * (b - a) * x0 + 0.5 * (a + b)
        ts.append(t)
        ws.append(0.5 * (b - a) * w0 * np.exp(-0.5 * t**2) / np.sqrt(2 * np.pi))
    return np.concatenate(ts), np.concatenate(ws)


def sinh_trapezoid_rule(center, kappa, n: int):
    """1-D rule ``(t, w)`` (JAX, traceable) for ``E_{t ~ N(0,1)} h(t)`` when ``h`` has a
    sigmoid of slope ``kappa`` centred at ``center``: trapezoid in ``tau`` after
    ``t = c + sinh(tau) / kappa'`` (``kappa' = max(|kappa|, 1)``, ``c`` = centre clipped
    to [-4, 4]), which puts nodes at spacing ~``h / kappa`` on the transition and
    ~``|t - c| h`` away from it.  The trapezoid converges geometrically in ``n`` for any
    slope, but the bulk of the Gaussian, up to ~7 from ``c``, needs ``h`` of a few
    hundredths: use n ~ 400-800.  The weights are normalised to sum to one."""
    kp = jnp.maximum(jnp.abs(kappa), 1.0)
    c = jnp.clip(center, -4.0, 4.0)
    T = jnp.arcsinh(14.0 * kp)
    tau = jnp.linspace(-1.0, 1.0, n) * T
    h = 2.0 * T / (n - 1)
    t = c + jnp.sinh(tau) / kp
    w = h * jnp.cosh(tau) / kp * jnp.exp(-0.5 * t**2) / jnp.sqrt(2 * jnp.pi)
    return t, w / jnp.sum(w)


@lru_cache(maxsize=64)
def _chi2_np(order: int, d: int):
    from scipy.linalg import eigh_tridiagonal
    a = d / 2 - 1                                 # Laguerre weight x^a e^-x, x = d s / 2
    k = np.arange(order, dtype=float)
    diag = 2 * k + a + 1
    off = np.sqrt(k[1:] * (k[1:] + a))
    x, v = eigh_tridiagonal(diag, off)
    w = v[0] ** 2                                 # Golub-Welsch: no Gamma(a + 1) overflow
    return 2 * x / d, w / w.sum()


def chi2_rule(order: int, d: int):
    """Nodes and weights ``(s, w)`` (NumPy, ``w`` summing to one) for ``E h(s)`` with
    ``s ~ chi^2_d / d``: generalised Gauss–Laguerre of ``order`` nodes, from the Jacobi
    matrix (Golub–Welsch), so that it stays finite for large ``d`` where
    ``scipy.special.roots_genlaguerre``'s weights overflow.  Exact for polynomials in ``s``
    of degree ``<= 2 order - 1``."""
    if int(order) != order or order < 1:
        raise ValueError(f"order: must be a positive integer, got {order!r}.")
    if int(d) != d or d < 1:
        raise ValueError(f"d: the degrees of freedom must be an integer >= 1, got {d!r}.")
    return _chi2_np(int(order), int(d))


def monte_carlo(f: Callable, sampler: Callable, key, n: int, *, batch: int = 100_000):
    """Monte Carlo mean of ``f`` with its standard error.

    ``sampler(key, m)`` returns ``m`` samples (an array whose leading axis is the
    sample axis, or a tuple whose first element is); ``f`` maps them to values of
    shape ``(m, ...)``.  Samples are drawn in batches of ``batch`` from keys
    ``fold_in(key, b)``, and sums are accumulated in float64 when enabled.

    Returns ``(estimate, standard_error)`` with ``se = std / sqrt(n)``.
    """
    n = int(n)
    if n < 2:
        raise ValueError(f"n: need at least 2 samples for a standard error, got {n}.")
    s1 = s2 = 0.0
    done = 0
    b = 0
    while done < n:
        m = min(batch, n - done)
        xs = sampler(jax.random.fold_in(key, b), m)
        if isinstance(xs, tuple):
            xs = xs[0]
        v = f(xs)
        s1 = s1 + jnp.sum(v, axis=0)
        s2 = s2 + jnp.sum(v**2, axis=0)
        done += m
        b += 1
    mean = s1 / n
    var = (s2 / n - mean**2) * n / (n - 1)
    return mean, jnp.sqrt(jnp.clip(var, 0.0) / n)
