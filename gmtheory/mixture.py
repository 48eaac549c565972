"""Gaussian mixtures as JAX pytrees (docs/topics/operator.md#the-operator-on-gaussian-mixtures).

``GaussianMixture(weights, means, covs)`` holds K components in R^d:

* ``weights``: ``(K,)``, non-negative, summing to one;
* ``means``: ``(K, d)``;
* ``covs``: ``(K, d, d)``, symmetric positive **semi**-definite.

Singular covariances are allowed because label coordinates of the LDA embedding
are deterministic given the component (Lemma B.1,
docs/topics/lda.md#lemma-b1-the-label-augmented-prompt).  ``log_prob`` and
``responsibilities`` need densities and therefore positive-definite covariances.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ._validation import (
    as_float_array,
    check_finite,
    check_int,
    check_psd,
    check_result,
    check_shape,
    is_concrete,
)

__all__ = ["GaussianMixture", "psd_factor", "as_points"]

WEIGHT_SUM_TOL = 1e-8
_FAR_HINT = ("The squared Mahalanobis distance of x from every component overflows: "
             "x is too far from the means for the covariances' scale; rescale x, means "
             "and covs together.")


def psd_factor(cov):
    """Return ``F`` with ``F @ F.T == cov`` for a PSD ``cov`` of shape ``(..., d, d)``.

    Uses the symmetric eigendecomposition, so singular (rank-deficient)
    covariances are fine, unlike Cholesky.  Eigenvalues below ``16 d eps |lambda|_max``
    (a small multiple of the round-off of ``eigh``, so ``F F^T`` still equals ``cov`` to
    round-off) are taken as zero: their square roots, ``~ sqrt(eps)`` of the scale,
    would otherwise leak noise of relative size ~1e-8 into the null directions, e.g.
    into label coordinates that are deterministic given the component.
    """
    sym = 0.5 * (cov + jnp.swapaxes(cov, -1, -2))
    evals, evecs = jnp.linalg.eigh(sym)
    d = sym.shape[-1]
    tol = 16 * d * jnp.finfo(evals.dtype).eps * jnp.max(jnp.abs(evals), axis=-1, keepdims=True)
    return evecs * jnp.sqrt(jnp.where(evals > tol, evals, 0.0))[..., None, :]


@jax.tree_util.register_pytree_node_class
class GaussianMixture:
    """A mixture ``sum_k weights[k] N(means[k], covs[k])`` in R^d.

    A pytree: pass it through ``jax.jit``, ``jax.vmap`` and ``jax.grad``.  The
    constructor validates concrete inputs (shapes, finiteness, weights on the
    simplex within 1e-8 -- or ``4 K eps`` of their dtype when that is larger, e.g. for
    float32 -- symmetric PSD covariances) and raises ``ValueError``
    naming the offending argument; inside transformations values are tracers and
    are not re-validated.
    """

    def __init__(self, weights, means, covs):
        weights = as_float_array(weights, "weights")
        means = as_float_array(means, "means")
        covs = as_float_array(covs, "covs")
        if weights.ndim != 1:
            raise ValueError(f"weights: expected shape (K,), got {tuple(weights.shape)}.")
        K = weights.shape[0]
        if K == 0:
            raise ValueError("weights: need at least one component (K >= 1).")
        if means.ndim != 2:
            raise ValueError(
                f"means: expected shape (K, d) = ({K}, d), got {tuple(means.shape)}; "
                "for one component in R^d pass means[None, :]."
            )
        d = means.shape[1]
        check_shape(means, "means", (K, d), "means must have one row per weight.")
        check_shape(covs, "covs", (K, d, d), "covs must hold one d x d matrix per component.")
        for arr, name in ((weights, "weights"), (means, "means"), (covs, "covs")):
            check_finite(arr, name)
        if is_concrete(weights):
            w = np.asarray(weights, dtype=np.float64)
            if np.any(w < 0):
                raise ValueError(f"weights: must be non-negative, got {w}.")
            # 1e-8, or the round-off of summing K numbers of the weights' own dtype
            # (float32 weights 1/3 sum to 1 + 3e-8)
            tol = max(WEIGHT_SUM_TOL, 4 * K * float(jnp.finfo(weights.dtype).eps))
            if abs(w.sum() - 1.0) > tol:
                raise ValueError(
                    f"weights: must sum to 1 within {tol:g}, got sum {w.sum():.12g}; "
                    "normalise them (weights / weights.sum())."
                )
        check_psd(covs, "covs")
        self.weights = weights
        self.means = means
        self.covs = covs

    # ----------------------------------------------------------------- pytree
    def tree_flatten(self):
        return (self.weights, self.means, self.covs), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.weights, obj.means, obj.covs = children
        return obj

    # ------------------------------------------------------------ constructors
    @classmethod
    def isotropic(cls, weights, means, variances):
        """Components ``N(means[k], variances[k] I_d)``; ``variances`` scalar or ``(K,)``."""
        means = as_float_array(means, "means")
        if means.ndim != 2:
            raise ValueError(f"means: expected shape (K, d), got {tuple(means.shape)}.")
        K, d = means.shape
        var = as_float_array(variances, "variances")
        if var.ndim == 0:
            var = jnp.full((K,), var)
        check_shape(var, "variances", (K,), "pass one variance per component or a scalar.")
        check_finite(var, "variances")
        if is_concrete(var) and np.any(np.asarray(var) < 0):
            raise ValueError("variances: must be non-negative.")
        covs = var[:, None, None] * jnp.eye(d, dtype=means.dtype)
        return cls(weights, means, covs)

    @classmethod
    def shared(cls, weights, means, cov):
        """Components ``N(means[k], cov)`` sharing one ``(d, d)`` covariance."""
        means = as_float_array(means, "means")
        cov = as_float_array(cov, "cov")
        if means.ndim != 2:
            raise ValueError(f"means: expected shape (K, d), got {tuple(means.shape)}.")
        K, d = means.shape
        check_shape(cov, "cov", (d, d), "the shared covariance is one d x d matrix.")
        check_finite(cov, "cov")
        check_psd(cov, "cov")
        return cls(weights, means, jnp.broadcast_to(cov, (K, d, d)))

    # ----------------------------------------------------------------- basics
    @property
    def n_components(self) -> int:
        return self.weights.shape[0]

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    @property
    def log_weights(self):
        """``log weights`` with ``-inf`` for empty components."""
        return jnp.log(self.weights)

    def is_shared(self, rtol: float = 1e-12) -> bool:
        """True if all components share one covariance (concrete arrays only).

        Entries may differ by ``rtol`` times the largest entry, relative to the
        covariances' own scale (so covariances of scale 1e-8 that differ by 1e-13 are
        not taken as shared).
        """
        c = np.asarray(self.covs)
        return bool(np.all(np.abs(c - c[:1]) <= rtol * np.abs(c).max()))

    def mean(self):
        """First moment ``E[x] = sum_k pi_k m_k``, shape ``(d,)``."""
        return self.weights @ self.means

    def second_moment(self):
        """Uncentred second moment ``E[x x^T] = sum_k pi_k (Gamma_k + m_k m_k^T)``, ``(d, d)``."""
        outer = self.covs + self.means[:, :, None] * self.means[:, None, :]
        out = jnp.einsum("k,kij->ij", self.weights, outer)
        check_result(out, "second_moment", "The means or covariances are too large "
                     "(|m|^2 overflows); rescale them.")
        return out

    def covariance(self):
        """Covariance ``E[x x^T] - E[x] E[x]^T``, shape ``(d, d)``."""
        m = self.mean()
        return self.second_moment() - jnp.outer(m, m)

    # ---------------------------------------------------------------- sampling
    def sample(self, key, n: int):
        """Draw ``n`` i.i.d. points.

        Returns ``(x, component)`` with ``x`` of shape ``(n, d)`` and
        ``component`` of shape ``(n,)`` (int).  Works for singular covariances.
        Memory is ``O(n d)``: components are filled one at a time.
        """
        if not isinstance(key, jax.Array):
            raise ValueError("key: expected a jax.random key, e.g. jax.random.key(0).")
        n = check_int(n, "n", minimum=0)
        return _sample(self, key, n)

    # ---------------------------------------------------------------- densities
    def _require_pd(self, what: str):
        if not is_concrete(self.covs):
            return
        c = np.asarray(self.covs, dtype=np.float64)
        for k in range(c.shape[0]):
            ev = np.linalg.eigvalsh(c[k])
            if ev[0] <= 1e-12 * ev[-1]:  # condition number above 1e12, or zero
                raise ValueError(
                    f"covs[{k}]: {what} needs positive-definite covariances, but this one is "
                    f"singular (smallest eigenvalue {ev[0]:.3g}). Densities do not exist for "
                    "degenerate components; add a small ridge (covs + eps * I) if appropriate."
                )

    def component_log_prob(self, x):
        """``log N(x; m_k, Gamma_k)`` for every component: ``(n, d) -> (n, K)``."""
        self._require_pd("component_log_prob")
        x = as_points(x, self.dim, "x")
        chol = jnp.linalg.cholesky(self.covs)  # (K, d, d)
        diff = x[:, None, :] - self.means[None]  # (n, K, d)
        sol = jax.scipy.linalg.solve_triangular(
            chol[None], diff[..., None], lower=True
        )[..., 0]
        maha = jnp.sum(sol**2, axis=-1)
        logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
        return -0.5 * (maha + logdet[None] + self.dim * jnp.log(2.0 * jnp.pi))

    def log_prob(self, x):
        """Mixture log density ``log p(x)``: ``(n, d) -> (n,)`` (or ``(d,) -> ()``)."""
        squeeze = jnp.ndim(x) == 1
        lp = jax.scipy.special.logsumexp(
            self.component_log_prob(x) + self.log_weights[None], axis=-1
        )
        check_result(lp, "log_prob", _FAR_HINT)
        return lp[0] if squeeze else lp

    def responsibilities(self, x):
        """Posterior ``P(C = k | x)``: ``(n, d) -> (n, K)`` (or ``(d,) -> (K,)``)."""
        squeeze = jnp.ndim(x) == 1
        r = jax.nn.softmax(self.component_log_prob(x) + self.log_weights[None], axis=-1)
        check_result(r, "responsibilities", _FAR_HINT)
        return r[0] if squeeze else r

    def __repr__(self) -> str:
        return f"GaussianMixture(K={self.n_components}, d={self.dim})"


@partial(jax.jit, static_argnums=2)
def _sample(mixture: GaussianMixture, key, n: int):
    """The body of :meth:`GaussianMixture.sample`, compiled once per shape and ``n``
    (eagerly, the component loop was traced and dispatched again on every call)."""
    k_comp, k_noise = jax.random.split(key)
    comp = jax.random.categorical(k_comp, mixture.log_weights, shape=(n,))
    eps = jax.random.normal(k_noise, (n, mixture.dim), dtype=mixture.means.dtype)
    factors = psd_factor(mixture.covs)

    def body(k, x):
        xk = mixture.means[k] + eps @ factors[k].T
        return jnp.where((comp == k)[:, None], xk, x)

    x = jax.lax.fori_loop(0, mixture.n_components, body, jnp.zeros_like(eps))
    return x, comp


def as_points(x, d: int, name: str):
    """Coerce queries to shape ``(n, d)``; accepts a single point ``(d,)``."""
    x = as_float_array(x, name)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(
            f"{name}: expected shape (n, {d}) or ({d},) to match the mixture dimension d={d}, "
            f"got {tuple(x.shape)}."
        )
    check_finite(x, name)
    return x
