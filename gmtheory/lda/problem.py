"""The LDA problem (paper Section 3, eqs. (4)-(5)): :class:`LDAProblem`, the parameter
pytrees :class:`LDAParams` and :class:`Effective`, Table 1's configurations, the Bayes
score and risk, the posterior and sampling."""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._validation import as_float_array, check_finite, check_psd, check_shape, is_concrete
from ..mixture import GaussianMixture
from ..quadrature import gauss_hermite_nodes

__all__ = ["LDAProblem", "LDAParams", "Effective", "config", "CONFIGS", "DEFAULT_ORDER",
           "GATE_NODES", "bayes_score", "bayes_risk", "posterior", "sample",
           "label_augmented_mixture"]

DEFAULT_ORDER = 64
GATE_NODES = 256


class LDAParams(NamedTuple):
    """Attention parameters that matter at a query ``(x, 0)`` (Lemma B.1,
    docs/topics/lda.md#lemma-b1-the-label-augmented-prompt).  A NamedTuple: it unpacks as
    the paper's ``theta = (U11, u12, v21, v22)``, the flat order of :func:`flatten`."""

    U11: jax.Array  # (d, d)
    u12: jax.Array  # (d,)
    v21: jax.Array  # (d,)
    v22: jax.Array  # ()


class Effective(NamedTuple):
    """Effective coordinates ``zeta = (w, b, r, s)`` of eq. (7) (a NamedTuple that unpacks
    in that order, the flat order of the effective Hessian)."""

    w: jax.Array
    b: jax.Array
    r: jax.Array
    s: jax.Array


class LDAProblem(eqx.Module):
    """Two-class Gaussian problem ``LDAProblem(m_pos, m_neg, cov, pi_pos)`` (eq. (4),
    docs/topics/lda.md#eqs-45-model-and-bayes-score).

    Validated on construction (shapes, finite values, symmetric positive definite
    ``cov``, ``0 < pi_pos < 1``, ``m_pos != m_neg``).  An ``eqx.Module`` (a pytree of
    its four arrays), so it can be passed to jitted functions without recompiling per
    problem; JAX rebuilds it from its leaves without running the checks again.
    """

    m_pos: jax.Array
    m_neg: jax.Array
    cov: jax.Array
    pi_pos: jax.Array

    def __init__(self, m_pos, m_neg, cov, pi_pos):
        m_pos = as_float_array(m_pos, "m_pos")
        m_neg = as_float_array(m_neg, "m_neg")
        cov = as_float_array(cov, "cov")
        pi_pos = as_float_array(pi_pos, "pi_pos")
        if is_concrete(m_pos, m_neg, cov, pi_pos):
            check_shape(m_pos, "m_pos", (None,), "pass the positive-class mean as a vector.")
            d = m_pos.shape[0]
            if d < 2:
                raise ValueError(f"m_pos: dimension d = {d}; attention-based LDA needs d >= 2.")
            check_shape(m_neg, "m_neg", (d,), "m_neg must have the same length as m_pos.")
            check_shape(cov, "cov", (d, d), f"pass a {d}x{d} covariance matrix.")
            check_shape(pi_pos, "pi_pos", (), "pass P(Y = 1) as a scalar.")
            for a, n in ((m_pos, "m_pos"), (m_neg, "m_neg"), (cov, "cov"), (pi_pos, "pi_pos")):
                check_finite(a, n)
            check_psd(np.asarray(cov), "cov")
            if np.linalg.eigvalsh(np.asarray(cov))[0] <= 1e-12 * max(1.0, float(np.abs(cov).max())):
                raise ValueError("cov: must be positive definite (the Bayes score uses its "
                                 "inverse); add a small ridge, e.g. cov + 1e-6 * I.")
            if not 0.0 < float(pi_pos) < 1.0:
                raise ValueError(f"pi_pos: must lie strictly between 0 and 1, got {float(pi_pos)}.")
            if np.allclose(np.asarray(m_pos), np.asarray(m_neg), rtol=0, atol=0):
                raise ValueError("m_pos, m_neg: the class means must differ.")
        self.m_pos, self.m_neg, self.cov, self.pi_pos = m_pos, m_neg, cov, pi_pos

    @property
    def d(self) -> int:
        return self.m_pos.shape[0]

    @property
    def delta_m(self):
        return self.m_pos - self.m_neg

    @property
    def s0(self):
        return jnp.log(self.pi_pos) - jnp.log1p(-self.pi_pos)

    @property
    def chol(self):
        return jnp.linalg.cholesky(self.cov)

    @property
    def symmetric(self) -> bool:
        """``m_pos == -m_neg`` (Lemma 3.2 and Theorem 3.3 need this to fail)."""
        return bool(np.allclose(np.asarray(self.m_pos), -np.asarray(self.m_neg), atol=1e-14))

    def __repr__(self):
        return (f"LDAProblem(d={self.d}, pi_pos={float(self.pi_pos):.4g}, "
                f"|delta_m|={float(jnp.linalg.norm(self.delta_m)):.4g})")


def _c1():
    return LDAProblem([1.0, 0.0], [0.0, 1.0], np.eye(2), 0.6)


def _c2():
    e1 = np.eye(20)[0]
    return LDAProblem(e1, -e1, np.eye(20), 0.5)


CONFIGS = {"C1": _c1, "C2": _c2}


def config(name: str) -> LDAProblem:
    """Table 1 configurations by name: ``"C1"`` (d = 2, asymmetric, pi = 0.6) or ``"C2"``
    (d = 20, opposite means, balanced)."""
    if name not in CONFIGS:
        raise ValueError(f"config: unknown name {name!r}; choose one of {sorted(CONFIGS)}.")
    return CONFIGS[name]()


# ---------------------------------------------------------------- Bayes score ---------

@jax.jit
def bayes_score(prob: LDAProblem):
    """``(w*, b*)`` of eq. (5)."""
    ci = jnp.linalg.inv(prob.cov)
    w = ci @ prob.delta_m
    b = -0.5 * (prob.m_pos @ ci @ prob.m_pos - prob.m_neg @ ci @ prob.m_neg) + prob.s0
    return w, b


@jax.jit
def posterior(prob: LDAProblem, x):
    """``eta(x) = P(Y = 1 | X = x)`` from the two Gaussian densities (not from eq. (5))."""
    from jax.scipy.stats import multivariate_normal as mvn

    lp = jnp.log(prob.pi_pos) + mvn.logpdf(x, prob.m_pos, prob.cov)
    ln = jnp.log1p(-prob.pi_pos) + mvn.logpdf(x, prob.m_neg, prob.cov)
    return jax.nn.sigmoid(lp - ln)


@partial(jax.jit, static_argnames=("order",))
def bayes_risk(prob: LDAProblem, order: int = 200):
    """``R*`` by 1-D Gauss–Hermite on ``f*(X) ~ N(w*^T m_c + b*, w*^T Gamma w*)``."""
    w, b = bayes_score(prob)
    t, om = (jnp.asarray(a) for a in gauss_hermite_nodes(order, 1))
    sd = jnp.sqrt(w @ prob.cov @ w)
    out = 0.0
    for c, m, p in ((1.0, prob.m_pos, prob.pi_pos), (-1.0, prob.m_neg, 1 - prob.pi_pos)):
        f = w @ m + b + sd * t[:, 0]
        out = out + p * om @ jax.nn.softplus(-c * f)
    return out


@jax.jit
def label_augmented_mixture(prob: LDAProblem) -> GaussianMixture:
    """The law of the token ``(X, Y)``: components ``N((m_c, c), blockdiag(Gamma, 0))``."""
    d = prob.d
    cov = jnp.zeros((d + 1, d + 1)).at[:d, :d].set(prob.cov)
    means = jnp.stack([jnp.append(prob.m_pos, 1.0), jnp.append(prob.m_neg, -1.0)])
    return GaussianMixture(jnp.stack([prob.pi_pos, 1 - prob.pi_pos]), means,
                           jnp.stack([cov, cov]))



@partial(jax.jit, static_argnames=("n", "fast"))
def sample(prob: LDAProblem, key, n: int, *, fast: bool = False):
    """``n`` i.i.d. pairs ``(X, Y)`` with ``Y in {-1, +1}``.

    ``fast=True`` draws the normals as float32 and uses them in the working precision
    (each draw rounded at 6e-8 relative, tails cut at |z| ~ 5.4, far below any Monte Carlo
    error; as :func:`gmtheory.icl_softmax.sample_prompts`): for SGD, where the draws are
    the bulk of a step."""
    ky, kx = jax.random.split(key)
    y = jnp.where(jax.random.bernoulli(ky, prob.pi_pos, (n,)), 1.0, -1.0)
    m = jnp.where(y[:, None] > 0, prob.m_pos, prob.m_neg)
    z = jax.random.normal(kx, (n, prob.d), dtype=jnp.float32 if fast else m.dtype)
    x = m + z.astype(m.dtype) @ prob.chol.T
    return x, y


