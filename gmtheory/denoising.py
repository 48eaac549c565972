"""Denoising on Gaussian mixtures with attention (paper Section 4, docs/topics/denoising.md).

Model: ``X ~ sum_k pi_k N(m_k, Gamma)`` (shared ``Gamma``, possibly singular),
``Z = X + eps`` with ``eps ~ N(0, xi^2 I)``, ``S = Gamma + xi^2 I``.

* :func:`bayes_denoiser` — eq. (10), ``E[X | Z = z]``; :func:`tweedie_denoiser` — the
  independent Tweedie form ``z + xi^2 grad log p_Z(z)`` (autodiff, any covariances).
* :func:`noisy_mixture` — the prompt law ``mu_Z = sum_k pi_k N(m_k, Gamma_k + xi^2 I)``.
* :func:`heads_output` — a sum of population softmax heads on ``mu_Z`` (Prop. 2.1).
* constructions: :func:`single_head_construction` (``gamma^2 = xi^2``),
  :func:`two_head_construction` (App. C.6, non-collinear and opposite means),
  :func:`degenerate_construction` (``gamma = 0``, Prop. C.3),
  :func:`residual_icl_parameters` / :func:`residual_icl` (Prop. 4.4).
* :func:`linear_gap` — ``R(A*) - R(f*)`` with ``A* = Sigma_X (Sigma_X + xi^2 I)^{-1}`` in closed
  form and ``R(f*)`` by Gauss–Hermite quadrature on the few directions ``f*`` depends on.
* :func:`excess_risk` — ``E |f(Z) - f*(Z)|^2`` by Gauss–Hermite per component of ``mu_Z``.
* :func:`single_head_search` — the best single population head by L-BFGS (Thm 4.1 (ii)).
* :func:`train_heads` — population heads trained by online SGD (the Figure 2 protocol).
* :data:`FIG2` / :func:`figure2_mixture` — the Figure 2 problem, defined here only.
* :func:`u_lambda`, :func:`iterate_denoiser` — the clustering transition (Prop. 4.3).

Every expectation is taken with :mod:`gmtheory.quadrature`; every fit and training run
goes through :mod:`gmtheory.training`.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from scipy.optimize import brentq

from ._validation import as_float_array, is_concrete
from .mixture import GaussianMixture, as_points
from .operators import softmax_attention_limit
from .quadrature import expect_mixture, expect_mixture_projected
from .training import hyper, minimize_lbfgs, train

__all__ = [
    "FIG2",
    "Figure2Parameters",
    "figure2_mixture",
    "noisy_mixture",
    "posterior_weights",
    "bayes_denoiser",
    "tweedie_denoiser",
    "posterior_mean",
    "posterior_trace",
    "heads_output",
    "single_head_construction",
    "two_head_construction",
    "degenerate_construction",
    "residual_icl_parameters",
    "residual_icl",
    "linear_optimum",
    "linear_risk",
    "bayes_risk",
    "linear_gap",
    "excess_risk",
    "single_head_search",
    "SingleHeadFit",
    "train_heads",
    "HeadsTraining",
    "u_lambda",
    "iterate_denoiser",
]


class Figure2Parameters(NamedTuple):
    """The Figure 2 problem (d = 2, equal-norm non-collinear means;
    docs/topics/denoising.md#figure-2-learning-two-heads)."""

    m1: tuple[float, float]
    m2: tuple[float, float]
    gamma: float
    xi: float
    pi1: float  #: not reported by the paper; 1/2 as the reference suggests


#: The one definition of the Figure 2 parameters (simulations, checks and figures read it).
FIG2 = Figure2Parameters(m1=(3.0, 0.0), m2=(0.0, 3.0), gamma=1.0, xi=2.0, pi1=0.5)


def figure2_mixture(pi1: float | None = None):
    """The Figure 2 problem (:data:`FIG2`): ``m1 = (3, 0)``, ``m2 = (0, 3)``, ``gamma = 1``.

    Returns ``(mixture, xi)`` with ``xi = 2``; ``pi1`` defaults to ``FIG2.pi1 = 1/2``.
    """
    pi1 = FIG2.pi1 if pi1 is None else float(pi1)
    m = jnp.array([FIG2.m1, FIG2.m2])
    return GaussianMixture.shared([pi1, 1 - pi1], m, FIG2.gamma**2 * jnp.eye(2)), FIG2.xi


def _check_xi(xi):
    if isinstance(xi, jax.core.Tracer):
        return xi
    if not (np.isfinite(xi) and xi > 0):
        raise ValueError(f"xi: the noise level must be positive and finite, got {xi}.")
    return xi


def _shared_cov(mixture: GaussianMixture):
    if not isinstance(mixture, GaussianMixture):
        raise ValueError("mixture: expected a gmtheory.GaussianMixture of the clean signal X.")
    if is_concrete(mixture.covs) and not mixture.is_shared():  # traced: checked by caller
        raise ValueError(
            "mixture: eq. (10) needs one covariance Gamma shared by all components; "
            "use tweedie_denoiser for heteroscedastic mixtures."
        )
    return mixture.covs[0]


def noisy_mixture(mixture: GaussianMixture, xi) -> GaussianMixture:
    """Law of ``Z = X + N(0, xi^2 I)``: components ``N(m_k, Gamma_k + xi^2 I)``."""
    xi = _check_xi(xi)
    eye = jnp.eye(mixture.dim, dtype=mixture.covs.dtype)
    return GaussianMixture(mixture.weights, mixture.means, mixture.covs + xi**2 * eye)


def posterior_weights(mixture: GaussianMixture, xi, z):
    """``beta_k(z) = P(C = k | Z = z)`` (eq. (10)).  Shapes: ``(n, d) -> (n, K)``."""
    G = _shared_cov(mixture)
    xi = _check_xi(xi)
    z, squeeze = _points(z, mixture.dim)
    S_inv = jnp.linalg.inv(G + xi**2 * jnp.eye(mixture.dim))
    SM = mixture.means @ S_inv  # (K, d): rows S^{-1} m_k
    logits = mixture.log_weights[None] + z @ SM.T - 0.5 * jnp.sum(SM * mixture.means, 1)[None]
    b = jax.nn.softmax(logits, axis=1)
    return b[0] if squeeze else b


def _points(z, d):
    squeeze = jnp.ndim(z) == 1
    return as_points(z, d, "z"), squeeze


def bayes_denoiser(mixture: GaussianMixture, xi, z):
    """Eq. (10): ``f*(z) = Gamma S^{-1} z + xi^2 S^{-1} sum_k beta_k(z) m_k``.

    Any number of components, any shared PSD ``Gamma`` (``Gamma = 0`` included).
    Shapes: ``z`` ``(n, d)`` -> ``(n, d)``.
    """
    G = _shared_cov(mixture)
    xi = _check_xi(xi)
    z, squeeze = _points(z, mixture.dim)
    S_inv = jnp.linalg.inv(G + xi**2 * jnp.eye(mixture.dim))
    beta = posterior_weights(mixture, xi, z)
    out = z @ (G @ S_inv).T + xi**2 * (beta @ mixture.means) @ S_inv.T
    return out[0] if squeeze else out


def tweedie_denoiser(mixture: GaussianMixture, xi, z):
    """Tweedie: ``E[X | Z = z] = z + xi^2 grad_z log p_Z(z)`` (autodiff; any covariances)."""
    xi = _check_xi(xi)
    nm = noisy_mixture(mixture, xi)
    z, squeeze = _points(z, mixture.dim)
    score = jax.vmap(jax.grad(lambda q: nm.log_prob(q)))(z)
    out = z + xi**2 * score
    return out[0] if squeeze else out


def _component_posteriors(mixture: GaussianMixture, xi, z):
    """Per-component posterior pieces for any covariances: ``beta (n, K)``,
    ``mu (n, K, d)`` with ``mu_k(z) = m_k + Gamma_k S_k^{-1} (z - m_k)`` and the traces
    ``tr(Gamma_k - Gamma_k S_k^{-1} Gamma_k)`` ``(K,)``, ``S_k = Gamma_k + xi^2 I``."""
    d = mixture.dim
    G = mixture.covs
    S = G + xi**2 * jnp.eye(d, dtype=G.dtype)
    chol = jnp.linalg.cholesky(S)                                  # (K, d, d)
    diff = z[:, None, :] - mixture.means[None]                     # (n, K, d)
    sol = jax.vmap(lambda c, r: jax.scipy.linalg.cho_solve((c, True), r.T).T,
                   in_axes=(0, 1), out_axes=1)(chol, diff)         # S_k^{-1}(z - m_k)
    logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol, axis1=1, axis2=2)), axis=1)
    logp = (mixture.log_weights[None] - 0.5 * jnp.sum(diff * sol, -1) - 0.5 * logdet[None])
    beta = jax.nn.softmax(logp, axis=1)
    mu = mixture.means[None] + jnp.einsum("kij,nkj->nki", G, sol)
    SinvG = jax.vmap(lambda c, g: jax.scipy.linalg.cho_solve((c, True), g))(chol, G)
    tr = jnp.trace(G, axis1=1, axis2=2) - jnp.einsum("kij,kji->k", G, SinvG)
    return beta, mu, tr


def posterior_mean(mixture: GaussianMixture, xi, z):
    """``E[X | Z = z]`` for any covariances, in closed form:
    ``sum_k beta_k(z) (m_k + Gamma_k S_k^{-1} (z - m_k))`` with ``S_k = Gamma_k + xi^2 I``
    and ``beta_k(z) ∝ pi_k N(z; m_k, S_k)``.  Equals :func:`bayes_denoiser` (eq. (10))
    for a shared covariance and :func:`tweedie_denoiser` for any (independent forms).
    Shapes: ``(n, d) -> (n, d)``."""
    xi = _check_xi(xi)
    z, squeeze = _points(z, mixture.dim)
    beta, mu, _ = _component_posteriors(mixture, xi, z)
    out = jnp.einsum("nk,nki->ni", beta, mu)
    return out[0] if squeeze else out


def posterior_trace(mixture: GaussianMixture, xi, z):
    """``tr Cov(X | Z = z)`` for any covariances (closed form); its mean over
    ``Z ~ mu_Z`` is the MMSE ``E|f*(Z) - X|^2``.  Shapes: ``(n, d) -> (n,)``."""
    xi = _check_xi(xi)
    z, squeeze = _points(z, mixture.dim)
    beta, mu, tr = _component_posteriors(mixture, xi, z)
    f = jnp.einsum("nk,nki->ni", beta, mu)
    out = beta @ tr + jnp.einsum("nk,nk->n", beta, jnp.sum(mu**2, -1)) - jnp.sum(f**2, -1)
    return out[0] if squeeze else out


# ------------------------------------------------------------------ attention heads
def heads_output(mixture_z: GaussianMixture, heads, z):
    """Sum of population softmax heads ``sum_h T_{U_h, V_h}[mu_Z](z)`` (Prop. 2.1).

    ``heads`` is a sequence of ``(U, V)`` pairs.  Shapes: ``(n, d) -> (n, d)``.
    """
    if len(heads) == 0:
        raise ValueError("heads: need at least one (U, V) pair.")
    return sum(softmax_attention_limit(mixture_z, U, V, z) for U, V in heads)


def single_head_construction(gamma, xi, d: int):
    """``gamma^2 = xi^2``: ``U = S^{-1} = I / (2 xi^2)``, ``V = I / 2`` (Thm 4.1 (ii))."""
    if not np.isclose(gamma**2, xi**2, rtol=1e-12):
        raise ValueError(
            f"gamma, xi: one head realises f* only when gamma^2 = xi^2 (got {gamma**2} vs "
            f"{xi**2}); use two_head_construction."
        )
    eye = jnp.eye(d)
    return [(eye / (gamma**2 + xi**2), 0.5 * eye)]


def _unit_orthogonal(m):
    d = m.shape[0]
    if d < 2:
        raise ValueError("means: need d >= 2 for the opposite-means construction.")
    e = m / jnp.linalg.norm(m)
    basis = jnp.eye(d)
    cand = basis[jnp.argmin(jnp.abs(e))]
    n = cand - (cand @ e) * e
    return n / jnp.linalg.norm(n)


def two_head_construction(m1, m2, gamma, xi, n=None):
    """Two heads with ``T_1 + T_2 = f*`` on ``mu_Z`` (App. C.6, Thm 4.1 (i)).

    Requires ``|m1| = |m2|``, ``m1 != m2`` and ``gamma > 0``.  Non-collinear means use the
    (C1)–(C3) construction; opposite means ``m1 = -m2`` use (C2') with a unit ``n ⟂ m``
    (default: a deterministic choice).  Returns ``[(U1, V1), (U2, V2)]``.
    """
    m1, m2 = as_float_array(m1, "m1"), as_float_array(m2, "m2")
    _check_pair(m1, m2)
    if not gamma > 0:
        raise ValueError(f"gamma: the two-head construction needs gamma > 0, got {gamma}.")
    d = m1.shape[0]
    g2, x2 = gamma**2, xi**2
    s = g2 + x2
    a = x2 / s
    eye = jnp.eye(d)
    if bool(jnp.allclose(m1, -m2, rtol=1e-12, atol=1e-12)):
        m = m1
        nv = _unit_orthogonal(m) if n is None else as_float_array(n, "n")
        e = m / jnp.linalg.norm(m)
        P = jnp.outer(e, e)
        Q = eye - P
        A = (x2 / (2 * s)) * P + (g2 / (2 * s)) * Q
        B = ((g2 - x2) / (2 * s)) * jnp.outer(e, nv)
        U1 = (eye + jnp.outer(nv, e)) / s
        U2 = (eye - jnp.outer(nv, e)) / s
        return [(U1, A + B), (U2, A - B)]
    M = jnp.stack([m1, m2], axis=1)  # (d, 2)
    if jnp.linalg.matrix_rank(M) < 2:
        raise ValueError("m1, m2: collinear but not opposite; equal norms force m1 = ±m2.")
    Mp = jnp.linalg.pinv(M)  # rows mu_1^T, mu_2^T
    PE = M @ Mp
    V1 = a * jnp.outer(m1, Mp[0]) + (a / 2) * (eye - PE)
    V2 = a * jnp.outer(m2, Mp[1]) + (a / 2) * (eye - PE)
    dm = m1 - m2
    c0 = g2 / (x2 * s)
    c1 = (x2 - g2) / (x2 * s)
    U1 = c0 * eye + c1 * jnp.outer(m2, dm) / (m2 @ dm)
    U2 = c0 * eye + c1 * jnp.outer(m1, dm) / (m1 @ dm)
    return [(U1, V1), (U2, V2)]


def _check_pair(m1, m2):
    if m1.ndim != 1 or m1.shape != m2.shape:
        raise ValueError(f"m1, m2: expected two vectors of shape (d,), got {m1.shape}, {m2.shape}.")
    n1, n2 = float(jnp.linalg.norm(m1)), float(jnp.linalg.norm(m2))
    if abs(n1 - n2) > 1e-10 * max(1.0, n1):
        raise ValueError(f"m1, m2: the constructions need equal norms, got {n1} and {n2}.")
    if bool(jnp.allclose(m1, m2)):
        raise ValueError("m1, m2: the means must be distinct.")


def degenerate_construction(m1, m2, xi):
    """``gamma = 0`` (Prop. C.3): heads realising ``f* = beta_1 m1 + beta_2 m2``.

    Linearly independent means: two heads.  Opposite means: one head (returned as a
    one-element list).
    """
    m1, m2 = as_float_array(m1, "m1"), as_float_array(m2, "m2")
    _check_pair(m1, m2)
    x2 = xi**2
    if bool(jnp.allclose(m1, -m2, rtol=1e-12, atol=1e-12)):
        m = m1
        nv = _unit_orthogonal(m)
        mm = m @ m
        U = jnp.outer(m + nv, m) / (x2 * mm)
        V = jnp.outer(m, m / mm - nv / (nv @ nv))
        return [(U, V)]
    M = jnp.stack([m1, m2], axis=1)
    Mp = jnp.linalg.pinv(M)
    dm = m1 - m2
    V1, V2 = jnp.outer(m1, Mp[0]), jnp.outer(m2, Mp[1])
    U1 = jnp.outer(m2, dm) / (x2 * (m2 @ dm))
    U2 = jnp.outer(m1, dm) / (x2 * (m1 @ dm))
    return [(U1, V1), (U2, V2)]


def residual_icl_parameters(gamma, xi, d: int):
    """Task-independent parameters of Prop. 4.4: ``(U1, V1, U2, V2, W_out)``."""
    s = gamma**2 + xi**2
    a = xi**2 / s
    eye = jnp.eye(d)
    zero = jnp.zeros((d, d))
    W = jnp.concatenate([eye, -2 * a * eye], axis=1)
    return {"U1": eye / s, "V1": a * eye, "U2": zero, "V2": zero, "W_out": W}


def residual_icl(mixture_z: GaussianMixture, params, z, *, prompt=None):
    """Prop. 4.4: ``W_out (z + T_{U1,V1}[mu](z); z + T_{U2,V2}[mu](z))``.

    ``mu`` is the population prompt ``mixture_z`` or, if ``prompt`` (tokens ``(L, d)``)
    is given, its empirical measure.  Shapes: ``(n, d) -> (n, d)``.
    """
    from .operators import softmax_attention

    def T(U, V):
        if prompt is None:
            return softmax_attention_limit(mixture_z, U, V, z)
        return softmax_attention(prompt, U, V, z)

    h1 = z + T(params["U1"], params["V1"])
    h2 = z + T(params["U2"], params["V2"])
    return jnp.concatenate([h1, h2], axis=-1) @ params["W_out"].T


# ------------------------------------------------------------------------- risks
def linear_optimum(mixture: GaussianMixture, xi):
    """Best linear map (no intercept) ``A* = Sigma_X (Sigma_X + xi^2 I)^{-1}``."""
    Sx = mixture.second_moment()
    return Sx @ jnp.linalg.inv(Sx + xi**2 * jnp.eye(mixture.dim))


def linear_risk(mixture: GaussianMixture, xi, A=None):
    """``R(A) = E|(I - A) X|^2 + xi^2 |A|_F^2`` (closed form); ``A`` defaults to ``A*``."""
    A = linear_optimum(mixture, xi) if A is None else as_float_array(A, "A")
    Sx = mixture.second_moment()
    IA = jnp.eye(mixture.dim) - A
    return jnp.trace(IA @ Sx @ IA.T) + xi**2 * jnp.sum(A**2)


def _f_star_basis(mixture, xi, extra=None):
    """Orthonormal basis of the directions ``|f*(z)|^2`` (and extras) depend on."""
    G = mixture.covs[0]
    S_inv = jnp.linalg.inv(G + xi**2 * jnp.eye(mixture.dim))
    B, C = G @ S_inv, xi**2 * S_inv
    cols = [S_inv @ mixture.means.T, B.T @ C @ mixture.means.T]
    if extra is not None:
        cols.append(extra)
    D = np.asarray(jnp.concatenate(cols, axis=1))
    u, s, _ = np.linalg.svd(D, full_matrices=False)
    rank = int(np.sum(s > 1e-10 * s[0]))
    return jnp.asarray(u[:, :rank])


def bayes_risk(mixture: GaussianMixture, xi, order: int = 40):
    """``R(f*) = E|X|^2 - E|f*(Z)|^2`` with Gauss–Hermite on the span of ``S^{-1} m_k``."""
    G = _shared_cov(mixture)
    xi = _check_xi(xi)
    d = mixture.dim
    S = G + xi**2 * jnp.eye(d)
    S_inv = jnp.linalg.inv(S)
    B, C = G @ S_inv, xi**2 * S_inv
    mz = noisy_mixture(mixture, xi)
    Ezz = mz.second_moment()
    quad_lin = jnp.trace(B.T @ B @ Ezz)  # E z^T B^T B z, closed form
    P = _f_star_basis(mixture, xi)

    def rest(zp):  # terms of |f*|^2 that depend on z only through P^T z
        b = posterior_weights(mixture, xi, zp) @ mixture.means @ C.T
        return 2.0 * jnp.sum((zp @ B.T) * b, 1) + jnp.sum(b**2, 1)

    # rest depends on z only through P^T z: GH on the projections, lifted back to R^d
    Ef2 = quad_lin + expect_mixture_projected(rest, mz, P, order, lift=True)
    return jnp.trace(mixture.second_moment()) - Ef2


def linear_gap(mixture: GaussianMixture, xi, order: int = 40):
    """``R(A*) - R(f*) > 0``: the excess risk of the best linear (attention) denoiser.

    Returns ``(gap, R(A*), R(f*), A*)``.
    """
    Ra = linear_risk(mixture, xi)
    Rf = bayes_risk(mixture, xi, order)
    return Ra - Rf, Ra, Rf, linear_optimum(mixture, xi)


def excess_risk(f, mixture: GaussianMixture, xi, order: int = 40):
    """``E |f(Z) - f*(Z)|^2`` for ``Z ~ mu_Z`` by tensor Gauss–Hermite per component.

    ``f`` maps ``(N, d) -> (N, d)``.  Full tensor grid: use for small ``d`` (<= 3).
    Traceable: ``mixture`` and ``xi`` may be arguments of a jitted function.
    """
    mz = noisy_mixture(mixture, xi)

    def err(z):
        return jnp.sum((f(z) - bayes_denoiser(mixture, xi, z)) ** 2, axis=1)

    return expect_mixture(err, mz, order)


# ------------------------------------------------------------- single head
class SingleHeadFit(NamedTuple):
    excess: float          #: smallest excess risk found
    U: jnp.ndarray         #: the head reaching it
    V: jnp.ndarray
    excesses: np.ndarray   #: final excess of every start (random starts, then ``init``)


def _single_head_excess(theta, data, order):
    """Excess risk of one population head ``theta = (vec U, vec V)`` (GH of ``order``)."""
    mix, xi = data
    d = mix.dim
    mz = noisy_mixture(mix, xi)
    U, V = theta[: d * d].reshape(d, d), theta[d * d:].reshape(d, d)
    return excess_risk(lambda q: softmax_attention_limit(mz, U, V, q), mix, xi, order)


class _SingleHeadObjective(eqx.Module):
    """:func:`_single_head_excess` at one Gauss-Hermite ``order``, as a module that
    :func:`gmtheory.training.minimize_lbfgs` keys on its static field: every call of
    :func:`single_head_search` with one ``order`` shares one compiled value-and-grad."""

    order: int = eqx.field(static=True)

    def __call__(self, theta, data):
        return _single_head_excess(theta, data, self.order)


def single_head_search(mixture: GaussianMixture, xi, starts: int, key, *, order: int = 24,
                       init=None, scale: float = 0.5, maxiter: int = 500,
                       gtol: float = 1e-10) -> SingleHeadFit:
    """Best single population head ``T_{U,V}[mu_Z]`` for denoising (Thm 4.1 (ii)).

    Minimises the Gauss–Hermite excess risk :func:`excess_risk` of one head over
    ``(U, V)`` by L-BFGS (:func:`gmtheory.training.minimize_lbfgs`) from ``starts``
    random starts with i.i.d. ``N(0, scale^2)`` entries (start ``i`` from
    ``fold_in(key, i)``) plus, optionally, the structured start ``init = (U, V)``.
    The mixture and ``xi`` are passed as data, so the objective is compiled once for
    every start.  Returns a :class:`SingleHeadFit`; ``.excess`` is the best value.
    """
    if int(starts) < 0 or (int(starts) == 0 and init is None):
        raise ValueError(f"starts: need at least one start (random or init), got {starts}.")
    xi = _check_xi(xi)
    d = mixture.dim
    x0s = [scale * jax.random.normal(jax.random.fold_in(key, i), (2 * d * d,))
           for i in range(int(starts))]
    if init is not None:
        x0s.append(jnp.concatenate([jnp.ravel(as_float_array(init[0], "init U")),
                                    jnp.ravel(as_float_array(init[1], "init V"))]))
    data = (mixture, jnp.asarray(float(xi)))
    res = minimize_lbfgs(_SingleHeadObjective(int(order)), x0s[0], data,
                         starts=x0s[1:], maxiter=maxiter, gtol=gtol)
    th = res.x
    return SingleHeadFit(res.fun, th[: d * d].reshape(d, d), th[d * d:].reshape(d, d),
                         res.funs)


# ------------------------------------------------------------- trained heads
class HeadsTraining(NamedTuple):
    excess: np.ndarray     #: GH excess risk, (seeds, evaluations + 1), initial first
    steps: np.ndarray      #: step of each evaluation, (evaluations + 1,)
    U: jnp.ndarray         #: final heads, (seeds, heads, d, d)
    V: jnp.ndarray


def _stacked_heads(mixture_z, p, z):
    return heads_output(mixture_z, [(p["U"][h], p["V"][h]) for h in range(p["U"].shape[0])], z)


def _clipped_sgd(learning_rate, clip):
    """SGD after clipping the gradient's global norm to ``clip`` (an optax factory for
    :func:`gmtheory.training.hyper`)."""
    return optax.chain(optax.clip_by_global_norm(clip), optax.sgd(learning_rate))


class _HeadsLoss(eqx.Module):
    """Squared distance of the stacked heads to the Bayes denoiser on ``batch`` fresh noisy
    samples (data: ``(mixture, xi)``)."""

    batch: int = eqx.field(static=True)

    def __call__(self, p, data, k):
        mix, x = data
        mz = noisy_mixture(mix, x)
        z = mz.sample(k, self.batch)[0]
        return jnp.mean(jnp.sum((_stacked_heads(mz, p, z) - bayes_denoiser(mix, x, z)) ** 2,
                                1))


class _HeadsExcess(eqx.Module):
    """Excess risk of the stacked heads (Gauss–Hermite order ``order``)."""

    order: int = eqx.field(static=True)

    def __call__(self, p, data):
        mix, x = data
        mz = noisy_mixture(mix, x)
        return {"excess": excess_risk(lambda q: _stacked_heads(mz, p, q), mix, x,
                                      self.order)}


def train_heads(mixture: GaussianMixture, xi, key, *, seeds: int = 4, heads: int = 2,
                steps: int = 4000, lr: float = 2e-3, clip: float = 10.0, batch: int = 64,
                init_scale: float = 0.1, eval_every: int = 20, order: int = 20,
                progress: bool | None = None) -> HeadsTraining:
    """Population softmax heads trained by online SGD (the Figure 2 protocol,
    docs/topics/denoising.md#figure-2-learning-two-heads).

    Model ``sum_h T_{U_h,V_h}[mu_Z](z)`` (closed-form population attention), loss
    ``mean |f(Z) - f*(Z)|^2`` over a fresh batch ``Z ~ mu_Z`` per step, SGD of step
    ``lr`` after clipping the gradient norm at ``clip``.  Seed ``s`` uses
    ``k = split(key, seeds)[s]``, ``k_init, k_data = split(k)``: entries of ``U`` and
    ``V`` are i.i.d. ``N(0, init_scale^2)`` from ``split(k_init)``, and the batch of step
    ``t`` comes from ``fold_in(k_data, t)``.  The GH excess (order ``order``) is
    recorded every ``eval_every`` steps.  All seeds train in one compiled program
    (:func:`gmtheory.training.train`, ``batched=True``).
    """
    xi = _check_xi(xi)
    d = mixture.dim
    keys = jax.random.split(key, int(seeds))
    k_init, k_data = jax.vmap(jax.random.split, out_axes=1)(keys)

    def init(k):
        ku, kv = jax.random.split(k)
        return {"U": init_scale * jax.random.normal(ku, (heads, d, d)),
                "V": init_scale * jax.random.normal(kv, (heads, d, d))}

    params = jax.vmap(init)(k_init)
    data = (mixture, jnp.asarray(float(xi)))
    # the loss and metrics are modules (batch and order static) and the step size and the
    # clipping norm are data: every call with the same shapes reuses one compiled program
    res = train(_HeadsLoss(int(batch)), params,
                hyper(_clipped_sgd, learning_rate=float(lr), clip=float(clip)),
                steps=int(steps), key=k_data, data=data, record_every=int(eval_every),
                metrics_fn=_HeadsExcess(int(order)), batched=True, progress=progress,
                desc="two-head SGD", tag=["train_heads", heads, batch, lr, clip, order])
    excess = np.concatenate([res.initial["excess"][:, None], res.history["excess"].T], axis=1)
    return HeadsTraining(excess, np.concatenate([[0], res.steps]), res.params["U"],
                         res.params["V"])


# ------------------------------------------------------- clustering transition
def u_lambda(lam: float) -> float:
    """Positive root of ``u = tanh(lam^2 u)`` for ``lam > 1`` (0 for ``lam <= 1``)."""
    if lam <= 1.0:
        return 0.0
    l2 = lam * lam
    return float(brentq(lambda u: u - np.tanh(l2 * u), 1e-12, 1.0, xtol=1e-15, rtol=1e-15))


def iterate_denoiser(mixture: GaussianMixture, xi, z0, n_steps: int):
    """Iterates ``z_{n+1} = f*(z_n)``; returns ``(n_steps + 1, n, d)`` trajectories."""
    z0 = as_points(z0, mixture.dim, "z0")

    def step(z, _):
        z1 = bayes_denoiser(mixture, xi, z)
        return z1, z1

    _, traj = jax.lax.scan(step, z0, None, length=int(n_steps))
    return jnp.concatenate([z0[None], traj], axis=0)
