"""In-context linear regression by linear attention (Lu, Letey, Zavatone-Veth, Maiti,
Pehlevan, PNAS 2025; docs/topics/icl.md).

Asymptotic theory in the scaling limit ``alpha = l/d``, ``tau = n/d^2``, ``kappa = k/d``
(:func:`M_kappa`, :func:`e_icl_ridgeless`, :func:`e_idg_ridgeless`, :func:`e_icl_ridge`,
:func:`g_task`), the exact finite-d test error of any ``Gamma`` (:func:`test_error`,
:func:`test_error_nonlinear`), and a pretraining simulator (:func:`pretrain`): batched
sampling of the statistics ``H_Z = x_q h^T`` with an O(l + d) construction for nonlinear
targets (docs/topics/icl.md#computing-it), and a matrix-free ridge solve (preconditioned
conjugate gradients, matvec O(n d^2)), or a direct Cholesky solve where cheaper.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import brentq

from . import variates
from ._xla import jit_long
from .stats import mean_se

__all__ = ["M_kappa", "dM_kappa", "e_icl_ridgeless", "e_idg_ridgeless", "g_task_ridgeless",
           "e_icl_ridge", "ridge_epsilon", "test_error", "optimum_error", "test_error_nonlinear",
           "sample_pool", "sample_statistics", "pretrain", "PretrainResult", "dmmse_error",
           "limit_large", "ridge_solve", "ridge_cg", "dmmse_errors"]


def _check_pos(**kw):
    for k, v in kw.items():
        if not (np.isfinite(v) or v == np.inf) or v <= 0:
            raise ValueError(f"{k}: must be positive (inf allowed for kappa), got {v}.")


# ---------------------------------------------------------------- asymptotic theory ---

def M_kappa(x, kappa):
    """``M_kappa(x) = lim (1/d) tr(x I + (1/k) sum_j w_j w_j^T)^-1`` (Marchenko–Pastur)."""
    x = np.asarray(x, float)
    if np.isinf(kappa):
        return 1.0 / (1.0 + x)
    a = x + 1.0 - 1.0 / kappa
    return 2.0 / (a + np.sqrt(a * a + 4.0 * x / kappa))


def dM_kappa(x, kappa):
    """Derivative of :func:`M_kappa` in ``x``."""
    x = np.asarray(x, float)
    M = M_kappa(x, kappa)
    if np.isinf(kappa):
        return -M * M
    a = x + 1.0 - 1.0 / kappa
    return -0.5 * M * M * (1.0 + (x + 1.0 + 1.0 / kappa) / np.sqrt(a * a + 4.0 * x / kappa))


def e_icl_ridgeless(alpha, tau, kappa, rho):
    """Ridgeless (lambda -> 0+) ICL error, both sides of ``tau = 1``
    (docs/topics/icl.md#ridgeless-errors)."""
    _check_pos(alpha=alpha, tau=tau, kappa=kappa)
    if tau == 1:
        return np.inf
    q = (1 + rho) / alpha
    if tau < 1:
        mu = q * M_kappa(q, kappa / tau)
        return (tau * (1 + q) / (1 - tau) * (1 - tau * (1 - mu) ** 2 - (1 - rho / q) * mu)
                - 2 * tau * (1 - mu) + 1 + rho)
    m = M_kappa(q, kappa)
    kstar = 1.0 if np.isinf(kappa) else 1.0 / (1 - kappa * m * m / (kappa + m) ** 2)
    return ((kstar - 1 / (tau - 1)) * (1 + q) * q * q * m * m
            + (3 - 2 * tau) / (tau - 1) * q * q * m + q * (1 + (1 + rho) * m / (tau - 1))
            + rho * m / (tau - 1) + rho)


def e_idg_ridgeless(alpha, tau, kappa, rho):
    """Ridgeless in-distribution (task pool) error (docs/topics/icl.md#ridgeless-errors)."""
    _check_pos(alpha=alpha, tau=tau, kappa=kappa)
    if tau == 1:
        return np.inf
    q = (1 + rho) / alpha
    if tau > 1:
        return tau / (tau - 1) * (rho + q * (1 - q * M_kappa(q, kappa)))
    mu = q * M_kappa(q, kappa / tau)
    xi = (1 - tau) * q / (tau * mu)
    c = 1.0 if np.isinf(kappa) else 1.0 / (1 - kappa * (1 + kappa * xi / (1 - tau)) ** -2)
    return tau * ((q + xi) ** 2 / xi
                  + (rho + q - 2 * q * (1 - tau) * (q / xi + 1)) / (1 - tau - c * (1 - tau) ** 2))


def g_task_ridgeless(alpha, tau, kappa, rho):
    """Task-generalisation gap ``e_ICL - e_IDG`` (ridgeless)."""
    return e_icl_ridgeless(alpha, tau, kappa, rho) - e_idg_ridgeless(alpha, tau, kappa, rho)


def ridge_epsilon(alpha, tau, kappa, rho, lam):
    """Smallest positive root of ``1 - tau + tau lam / eps - eps M_kappa(q + eps) = 0``,
    bracketed on a log grid and refined with ``brentq`` (the function is +inf at 0+ and
    tends to ``-tau`` at infinity)."""
    _check_pos(alpha=alpha, tau=tau, kappa=kappa, lam=lam)
    q = (1 + rho) / alpha
    F = lambda e: 1 - tau + tau * lam / e - e * M_kappa(q + e, kappa)
    grid = np.logspace(np.log10(lam) - 8, 8, 2000)
    vals = F(grid)                       # M_kappa is elementwise: one numpy pass
    idx = np.nonzero(np.sign(vals[:-1]) != np.sign(vals[1:]))[0]
    if idx.size == 0:
        raise ValueError("lam: no sign change of the ridge equation found; check the "
                         "parameters (all must be positive and finite).")
    i = idx[0]
    return brentq(F, grid[i], grid[i + 1], xtol=1e-300, rtol=4 * np.finfo(float).eps,
                  maxiter=500)


def e_icl_ridge(alpha, tau, kappa, rho, lam):
    """Ridge ICL error through :func:`ridge_epsilon` (docs/topics/icl.md#ridge-equation)."""
    q = (1 + rho) / alpha
    eps = ridge_epsilon(alpha, tau, kappa, rho, lam)
    nu = q + eps
    M, dM = M_kappa(nu, kappa), dM_kappa(nu, kappa)
    c = ((rho + nu - nu * nu * M - eps * (1 - 2 * nu * M - nu * nu * dM))
         / (1 - 2 * eps * M - eps * eps * dM - tau))
    return ((1 + q) * (1 - 2 * nu * M - nu * nu * dM - c * (M + eps * dM))
            - 2 * (1 - nu * M) + 1 + rho)


def limit_large(alpha, rho):
    """``tau, kappa -> infinity``: ``rho + (1 + rho) / (alpha + 1 + rho)``."""
    return rho + (1 + rho) / (alpha + 1 + rho)


# ---------------------------------------------------------------- exact finite-d error -

def test_error(Gamma, ell: int, rho: float, mu_hat=None, R_hat=None):
    """Exact test error ``e(Gamma)`` for a linear target; ``Gamma`` (d, d+1)
    (docs/topics/icl.md#exact-test-error-of-a-fixed-gamma).
    ICL test: ``mu_hat = 0``, ``R_hat = I`` (the defaults); IDG: the pool's moments."""
    Gamma = jnp.asarray(Gamma)
    d = Gamma.shape[0]
    if Gamma.shape != (d, d + 1):
        raise ValueError(f"Gamma: expected shape (d, d+1), got {Gamma.shape}.")
    mu = jnp.zeros(d) if mu_hat is None else jnp.asarray(mu_hat)
    R = jnp.eye(d) if R_hat is None else jnp.asarray(R_hat)
    alpha = ell / d
    A = jnp.concatenate([R, (1 + rho) * mu[None]], 0)
    B = jnp.block([[jnp.eye(d) / alpha + (1 + 1 / ell) * R / (1 + rho),
                    (1 + 2 / ell) * mu[:, None]],
                   [(1 + 2 / ell) * mu[None], jnp.full((1, 1), (1 + rho) * (1 + 2 / ell))]])
    return (1 + rho - 2 / d * jnp.trace(Gamma @ A)
            + (1 + rho) / d * jnp.trace(Gamma.T @ Gamma @ B))


def optimum_error(ell, d, rho):
    """Linear attention's least :func:`test_error` over every ``Gamma``: ``1 + rho - c`` at
    ``[c I, 0]``, ``c = 1/((1+rho) d/l + 1 + 1/l)``; :func:`limit_large` as d -> inf, l/d fixed."""
    return 1 + rho - 1 / ((1 + rho) * d / ell + 1 + 1 / ell)


def test_error_nonlinear(Gamma, ell: int, moments: dict, mu_hat=None, R_hat=None):
    """Exact finite-d error for ``y = f(z) + eps``
    (docs/topics/icl.md#the-nonlinearity-noise-equivalence).  ``moments``: ``c1``, ``m2``
    (``E f^2 + sigma^2``), ``Ey2z2``, ``Ey3z``, ``Ey4``."""
    Gamma = jnp.asarray(Gamma)
    d = Gamma.shape[0]
    if Gamma.shape != (d, d + 1):
        raise ValueError(f"Gamma: expected shape (d, d+1), got {Gamma.shape}.")
    missing = {"c1", "m2", "Ey2z2", "Ey3z", "Ey4"} - set(moments)
    if missing:
        raise ValueError(f"moments: missing {sorted(missing)}; compute them with "
                         "gmtheory.hermite.label_moments(f, noise_var).")
    mu = jnp.zeros(d) if mu_hat is None else jnp.asarray(mu_hat)
    R = jnp.eye(d) if R_hat is None else jnp.asarray(R_hat)
    c1, m2 = moments["c1"], moments["m2"]
    alpha = ell / d
    b1 = (1 - 1 / ell) * c1**2 + (moments["Ey2z2"] - m2) / ell
    b2 = (1 - 1 / ell) * c1 * m2 + moments["Ey3z"] / ell
    b3 = m2**2 + (moments["Ey4"] - m2**2) / ell
    B = jnp.block([[m2 / alpha * jnp.eye(d) + b1 * R, b2 * mu[:, None]],
                   [b2 * mu[None], jnp.full((1, 1), b3)]])
    G1, g = Gamma[:, :d], Gamma[:, d]
    return (m2 - 2 / d * (c1**2 * jnp.trace(G1 @ R) + c1 * m2 * g @ mu)
            + jnp.trace(Gamma.T @ Gamma @ B) / d)


# ---------------------------------------------------------------- simulator -----------

def sample_pool(key, d: int, k: int, sphere: bool = True):
    """``k`` tasks ``w_j ~ N(0, I_d)``, rescaled to norm ``sqrt(d)`` if ``sphere``."""
    w = jax.random.normal(key, (k, d))
    if sphere:
        w = w / jnp.linalg.norm(w, axis=1, keepdims=True) * jnp.sqrt(d)
    return w


def sample_statistics(key, W, ell, rho: float, *, f=None, scale=1.0):
    """For tasks ``W`` (n, d): context statistics ``h`` (n, d+1), queries ``x_q`` (n, d)
    and targets ``y_q`` (n,), with ``y = f(x^T w) + eps`` (``f = None``: the linear target
    ``y = scale * x^T w + eps``).

    O(l + d) per prompt: ``x_i = (z_i / |w|^2) w + x_perp``, so
    ``(d/l) sum y_i x_i = (d / |w|^2) a w + sqrt(s2 / alpha) g_perp`` with
    ``a = (1/l) sum y_i z_i``, ``s2 = (1/l) sum y_i^2``, ``g_perp ~ N(0, P_perp)``.
    For the linear target the context enters only through ``A = |z|^2``,
    ``B = z^T eps`` and ``C = |eps|^2``, which are sampled exactly in O(1):
    ``A ~ (|w|^2/d) chi2_l``, ``B | A ~ N(0, rho A)``, ``C = B^2/A + rho chi2_{l-1}``;
    then ``l`` needs not be static (one compilation for every ``alpha``).  ``chi2`` from
    :func:`gmtheory.variates.chi2` (compiles small; docs/performance.md)."""
    n, d = W.shape
    kc, kn, kx = jax.random.split(key, 3)
    w2 = jnp.sum(W * W, 1)                                    # |w|^2
    # the normals of a prompt in one draw (each random call compiles its own threefry),
    # the same for every target, so that runs with one key and two targets are paired
    N = jax.random.normal(kn, (n, 2 * d + 2))
    g, xq, e, eq = N[:, :d], N[:, d:2 * d] / jnp.sqrt(d), N[:, 2 * d], N[:, 2 * d + 1]
    if f is None:
        chi = variates.chi2(kc, jnp.stack([jnp.full((n,), ell), jnp.full((n,), ell - 1)]),
                            (2, n))
        A = (w2 / d) * chi[0]
        B = jnp.sqrt(rho * A) * e
        C = B * B / A + rho * chi[1]
        a = (scale * A + B) / ell
        s2 = (scale * scale * A + 2 * scale * B + C) / ell
    else:
        Z = jax.random.normal(kx, (2, n, ell))
        z = Z[0] * jnp.sqrt(w2 / d)[:, None]                         # x_i^T w
        y = f(z) + jnp.sqrt(rho) * Z[1]
        a = jnp.mean(y * z, 1)
        s2 = jnp.mean(y * y, 1)
    g = g - (jnp.sum(g * W, 1) / w2)[:, None] * W              # project out w
    top = (d / w2 * a)[:, None] * W + jnp.sqrt(s2 * d / ell)[:, None] * g
    h = jnp.concatenate([top, s2[:, None]], 1)
    zq = jnp.sum(xq * W, 1)
    yq = (scale * zq if f is None else f(zq)) + jnp.sqrt(rho) * eq
    return h, xq, yq


@dataclass(frozen=True)
class PretrainResult:
    """Fitted ``Gamma`` (d, d+1) and the relative residual of the ridge normal equations."""

    Gamma: jax.Array
    residual: float


DIRECT_MAX_PARAMS = 400   # d (d+1) up to this: form the Gram matrix and solve directly


def ridge_solve(h, xq, yq, lam_eff, *, tol, maxiter, n=None):
    """Ridge normal equations: direct (Cholesky of the d(d+1) Gram matrix, cost n p^2)
    when ``p = d(d+1) <= DIRECT_MAX_PARAMS``, where that is cheaper than CG's iterations
    and compilation; preconditioned CG (:func:`ridge_cg`) otherwise."""
    d = xq.shape[1]
    p = d * (h.shape[1])
    if p > DIRECT_MAX_PARAMS:
        return ridge_cg(h, xq, yq, lam_eff, tol=tol, maxiter=maxiter, n=n)
    n = h.shape[0] if n is None else n
    F = jnp.einsum("nd,ne->nde", xq, h).reshape(h.shape[0], p)
    A = F.T @ F / n + lam_eff * jnp.eye(p, dtype=F.dtype)
    b = F.T @ yq / n
    g = jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(A), b)
    res = jnp.linalg.norm(A @ g - b) / jnp.linalg.norm(b)
    return g.reshape(d, h.shape[1]), res


@partial(jax.jit, static_argnames=("maxiter",))
def ridge_cg(h, xq, yq, lam_eff, *, tol, maxiter, n=None):
    """Solve ``(1/n) sum x x^T G h h^T + lam_eff G = (1/n) sum y x h^T`` by CG with the
    Kronecker preconditioner ``(C_x + .) (x) (C_h + .)`` (docs/topics/icl.md#computing-it).
    Rows of zeros (padding) contribute nothing; ``n`` is the number of real rows (default: all).

    Shapes: ``h`` (n, p), ``xq`` (n, d), ``yq`` (n,); returns ``G`` (d, p) and the relative
    residual.  The one ridge solver of the ICL simulators (:func:`ridge_solve` picks it or
    a direct Cholesky solve)."""
    n = h.shape[0] if n is None else n
    rhs = (xq * yq[:, None]).T @ h / n

    def op(G):
        u = jnp.sum((xq @ G) * h, 1)
        return (xq * u[:, None]).T @ h / n + lam_eff * G

    Cx, Ch = xq.T @ xq / n, h.T @ h / n
    dx, Ux = jnp.linalg.eigh(Cx)
    dh, Uh = jnp.linalg.eigh(Ch)
    denom = dx[:, None] * dh[None] + lam_eff

    def precond(R):
        return Ux @ ((Ux.T @ R @ Uh) / denom) @ Uh.T

    G, _ = jax.scipy.sparse.linalg.cg(op, rhs, tol=tol, maxiter=maxiter, M=precond)
    res = jnp.linalg.norm(op(G) - rhs) / jnp.linalg.norm(rhs)
    return G, res


def pretrain(key, d: int, *, alpha: float, tau: float, kappa: float, rho: float, lam: float,
             f=None, sphere: bool = True, tol: float = 1e-10, maxiter: int = 500):
    """Simulate pretraining (docs/topics/icl.md#data-model-and-the-reduced-model):
    ``k = floor(kappa d)`` tasks (``kappa = inf``: a fresh task per prompt),
    ``n = round(tau d^2 / k) k`` prompts of ``l = round(alpha d)`` tokens,
    ridge ``Gamma* = argmin sum (y - <Gamma, H>)^2 + (n/d) lam |Gamma|^2``.
    Returns ``(PretrainResult, pool)``; evaluate with :func:`test_error` (no Monte Carlo)."""
    _check_pos(alpha=alpha, tau=tau, kappa=kappa, lam=lam)
    ell, k, n = sizes(d, alpha, tau, kappa)
    kp, ks = jax.random.split(key)
    if np.isinf(kappa):
        W, pool = sample_pool(kp, d, n, sphere), None
    else:
        pool = sample_pool(kp, d, k, sphere)
        W = jnp.tile(pool, (n // k, 1))
    h, xq, yq = sample_statistics(ks, W, ell, rho, f=f)
    # (1/n) normal equations: ridge (n/d) lam |G|^2 becomes lam / d
    G, res = ridge_solve(h, xq, yq, lam / d, tol=tol, maxiter=maxiter)
    return PretrainResult(G, float(res)), pool


def dmmse_error(key, pool, ell: int, rho: float, *, draws: int = 1000, test: str = "icl",
                k=None):
    """Monte Carlo error of the dMMSE predictor (posterior mean under a uniform prior on
    the pool) on ``draws`` test prompts, ``(mean, standard error)``; ``test="icl"``: fresh
    ``w ~ N(0, I)``, ``"idg"``: ``w`` from the pool (:func:`dmmse_errors`: both at once).
    Only the first ``k`` rows of ``pool`` are tasks (the rest is padding)."""
    if test not in ("icl", "idg"):
        raise ValueError(f"test: must be 'icl' or 'idg', got {test!r}.")
    return dmmse_errors(key, pool, ell, rho, draws=draws, k=k)[test]


def dmmse_errors(key, pool, ell: int, rho: float, *, draws: int = 1000, k=None,
                 f=None) -> dict:
    """:func:`dmmse_error` for both tests from one compiled program:
    ``{"icl": (mean, se), "idg": (mean, se)}``, ``draws`` prompts each.

    ``f``: a nonlinear single-index target ``y = f(x^T w) + sqrt(rho) eps`` (a JAX
    function of an array, elementwise; ``None``: the linear target).  The posterior over
    the pool then weighs each task by the Gaussian likelihood of the labels under ``f``
    and predicts ``sum_j p_j f(x_q^T w_j)``; fresh ICL tasks are drawn on the sphere
    ``|w|^2 = d`` (so ``x^T w ~ N(0, 1)``, the law the Hermite moments assume), and the
    prompt is drawn token by token (no sufficient statistic exists for a nonlinear f)."""
    k = pool.shape[0] if k is None else int(k)
    if f is not None and not callable(f):
        raise TypeError(f"f: expected an elementwise JAX function or None, got {f!r}.")
    out = (_dmmse(key, pool, k, ell, rho, draws) if f is None
           else _dmmse_dense(key, pool, k, ell, rho, draws, f))
    return {t: tuple(float(v) for v in mean_se(np.asarray(e)))
            for t, e in zip(("icl", "idg"), out, strict=True)}


DMMSE_CHUNK = 64   # pool rows per step of the dMMSE's online softmax


@partial(jit_long, static_argnames=("ell", "draws"))     # draws x pool: a long program
def _dmmse(key, pool, k, ell, rho, draws):
    """Squared errors of dMMSE on ``draws`` ICL and ``draws`` IDG test prompts.

    The posterior over the pool depends on a prompt only through ``X^T X`` and
    ``X^T y``, which are drawn exactly: ``X^T X = F F^T / d`` with ``F`` the Bartlett
    factor of a ``Wishart_d(l, I)`` matrix (``l >= d``: lower triangular, diagonal
    ``sqrt(chi2_{l-i})``, standard normal below) or ``F = G^T`` for ``G ~ N(0, 1)^{l x d}``
    (``l < d``), and ``X^T y = X^T X w + sqrt(rho / d) F z``, ``z ~ N(0, I)``.  The softmax
    over the ``k`` real tasks runs online over chunks of ``DMMSE_CHUNK`` pool rows (a
    loop of ``ceil(k / chunk)`` steps, so padding costs nothing), every prompt at once."""
    k_max, d = pool.shape
    c = min(DMMSE_CHUNK, k_max)
    pool = jnp.pad(pool, ((0, -k_max % c), (0, 0)))
    m = 2 * draws                                             # ICL prompts, then IDG
    kn, ki, kc = jax.random.split(key, 3)
    f_rows = min(ell, d)
    # every normal of a prompt from one draw (each random call compiles its own threefry)
    N = jax.random.normal(kn, (m, f_rows * (d + 1) + 2 * d + 1))
    F = N[:, :f_rows * d].reshape(m, f_rows, d)
    z = N[:, f_rows * d:f_rows * (d + 1)]
    xq, w_new = (N[:, f_rows * (d + 1) + i * d:f_rows * (d + 1) + (i + 1) * d] for i in (0, 1))
    e_q = N[:, -1]
    W = jnp.concatenate([w_new[:draws], pool[jax.random.randint(ki, (draws,), 0, k)]])
    if ell >= d:
        chi = variates.chi2(kc, ell - jnp.arange(d), (m, d))
        F = jnp.tril(F, -1) + jnp.sqrt(chi)[:, :, None] * jnp.eye(d)
    else:
        F = jnp.swapaxes(F, 1, 2)
    Xty = (jnp.einsum("mij,mkj,mk->mi", F, F, W) / d
           + jnp.sqrt(rho / d) * jnp.einsum("mij,mj->mi", F, z))

    def chunk(i, state):
        mx, den, num = state
        P = jax.lax.dynamic_slice_in_dim(pool, i * c, c, axis=0)        # (c, d)
        quad = jnp.sum(jnp.einsum("jd,mde->mje", P, F) ** 2, -1) / d     # w_j^T X^T X w_j
        ll = (Xty @ P.T - 0.5 * quad) / rho
        ll = jnp.where((i * c + jnp.arange(c) < k)[None], ll, -jnp.inf)
        new = jnp.maximum(mx, ll.max(1))
        p = jnp.exp(ll - new[:, None])
        s = jnp.exp(mx - new)
        return new, den * s + p.sum(1), num * s[:, None] + p @ P

    init = (jnp.full((m,), -jnp.inf), jnp.zeros((m,)), jnp.zeros((m, d)))
    _, den, num = jax.lax.fori_loop(0, (k + c - 1) // c, chunk, init)
    xq = xq / jnp.sqrt(d)
    yq = jnp.sum(xq * W, 1) + jnp.sqrt(rho) * e_q
    err = (yq - jnp.sum(xq * num, 1) / den) ** 2
    return err[:draws], err[draws:]


@partial(jit_long, static_argnames=("ell", "draws", "f"))
def _dmmse_dense(key, pool, k, ell, rho, draws, f):
    """:func:`_dmmse` for ``y = f(x^T w) + sqrt(rho) eps``: explicit prompts ``X`` (m, l, d),
    the log-likelihood ``-sum_i (y_i - f(x_i^T w_j))^2 / (2 rho)`` of each pool task, an
    online softmax over chunks of ``DMMSE_CHUNK`` pool rows as there."""
    k_max, d = pool.shape
    c = min(DMMSE_CHUNK, k_max)
    pool = jnp.pad(pool, ((0, -k_max % c), (0, 0)))
    m = 2 * draws
    kw, ki, kx, ke, kq, kqe = jax.random.split(key, 6)
    fresh = jax.random.normal(kw, (draws, d))
    fresh = fresh * jnp.sqrt(d) / jnp.linalg.norm(fresh, axis=1, keepdims=True)
    W = jnp.concatenate([fresh, pool[jax.random.randint(ki, (draws,), 0, k)]])
    X = jax.random.normal(kx, (m, ell, d)) / jnp.sqrt(d)
    y = f(jnp.einsum("mld,md->ml", X, W)) + jnp.sqrt(rho) * jax.random.normal(ke, (m, ell))
    xq = jax.random.normal(kq, (m, d)) / jnp.sqrt(d)

    def chunk(i, state):
        mx, den, num = state
        P = jax.lax.dynamic_slice_in_dim(pool, i * c, c, axis=0)        # (c, d)
        r = y[:, :, None] - f(jnp.einsum("mld,cd->mlc", X, P))
        ll = -0.5 * jnp.sum(r * r, axis=1) / rho
        ll = jnp.where((i * c + jnp.arange(c) < k)[None], ll, -jnp.inf)
        new = jnp.maximum(mx, ll.max(1))
        p = jnp.exp(ll - new[:, None])
        s = jnp.exp(mx - new)
        return new, den * s + p.sum(1), num * s + jnp.sum(p * f(xq @ P.T), 1)

    init = (jnp.full((m,), -jnp.inf), jnp.zeros((m,)), jnp.zeros((m,)))
    _, den, num = jax.lax.fori_loop(0, (k + c - 1) // c, chunk, init)
    yq = f(jnp.sum(xq * W, 1)) + jnp.sqrt(rho) * jax.random.normal(kqe, (m,))
    err = (yq - num / den) ** 2
    return err[:draws], err[draws:]


def sizes(d: int, alpha: float, tau: float, kappa: float):
    """``(l, k, n)`` of the authors' protocol: ``l = round(alpha d)``,
    ``k = floor(kappa d)``, ``n = round(tau d^2 / k) k`` (``kappa = inf``: ``k = n``)."""
    ell = max(1, round(alpha * d))
    if np.isinf(kappa):                      # a fresh task for every prompt
        n = max(1, round(tau * d * d))
        return ell, n, n
    k = max(1, int(np.floor(kappa * d)))
    return ell, k, max(1, round(tau * d * d / k)) * k


def _gtask_one(key, d, ell, k_max, n_max, k, n, rho, lam, tol, maxiter, f=None, scale=1.0):
    task_ok = jnp.arange(k_max) < k
    row_ok = (jnp.arange(n_max) < n)[:, None]
    kp, ks = jax.random.split(key)
    pool = sample_pool(kp, d, k_max)
    W = pool[jnp.arange(n_max) % k]               # task j repeated n / k times
    h, xq, yq = sample_statistics(ks, W, ell, rho, f=f, scale=scale)
    h, xq, yq = h * row_ok, xq * row_ok, yq * row_ok[:, 0]
    G, res = ridge_solve(h, xq, yq, lam / d, tol=tol, maxiter=maxiter, n=n)
    mp = pool * task_ok[:, None]
    e_icl = test_error(G, ell, rho)
    e_idg = test_error(G, ell, rho, mp.sum(0) / k, mp.T @ mp / k)
    return e_icl, e_idg, res, G


def _gtask_batch(keys, d, ell, k_max, n_max, k, n, rho, lam, tol, maxiter, ndev, f=None,
                 scale=1.0, ell_static=None, targets=None, target=0):
    """Trials run sequentially (``lax.map``) within a device and in parallel across the
    ``ndev`` devices (``shard_map`` over the trial axis).  Shapes are padded to
    ``(n_max, k_max)`` so that one compilation serves every kappa of a sweep at fixed d;
    ``k``, ``n`` (traced) select the real tasks and prompts; ``targets`` (static) and
    ``target`` (traced) select a nonlinear target, so one compilation serves them all."""
    ell = ell if ell_static is None else ell_static     # a shape for nonlinear targets
    if targets is not None:
        f = lambda z: jax.lax.switch(target, targets, z)    # noqa: E731
    one = lambda key: _gtask_one(key, d, ell, k_max, n_max, k, n, rho, lam, tol, maxiter, f,
                                 scale)
    if ndev == 1:
        return jax.lax.map(one, keys)
    from jax.sharding import PartitionSpec as P

    mesh = _trial_mesh(ndev)
    keys = jax.lax.with_sharding_constraint(keys, jax.sharding.NamedSharding(mesh, P("trials")))
    return jax.shard_map(lambda ks: jax.lax.map(one, ks), mesh=mesh, in_specs=P("trials"),
                         out_specs=P("trials"), check_vma=False)(keys)


_GTASK_STATIC = ("d", "ell_static", "k_max", "n_max", "maxiter", "ndev", "f", "targets")
_gtask_direct = jax.jit(_gtask_batch, static_argnames=_GTASK_STATIC)
# the CG solves iterate hundreds of times per trial: compiled to run fast
_gtask_cg = jit_long(_gtask_batch, static_argnames=_GTASK_STATIC)


def _trial_mesh(ndev: int):
    return jax.make_mesh((ndev,), ("trials",), devices=jax.local_devices()[:ndev],
                         axis_types=(jax.sharding.AxisType.Auto,))


def g_task_trials(key, d: int, *, alpha: float, tau: float, kappa: float, rho: float,
                  lam: float, trials: int, tol: float = 1e-10, maxiter: int = 500,
                  pad_to: tuple[int, int] | None = None, devices: int | None = None,
                  f=None, scale: float = 1.0, targets: tuple | None = None,
                  target: int | None = None):
    """``trials`` independent pretraining runs (fresh pool each) as one jitted batch;
    returns ``e_icl``, ``e_idg``, the CG residuals (each (trials,)) and the fitted
    ``Gamma`` (trials, d, d+1).  ``e_icl``/``e_idg`` use the linear-target formula; for a
    nonlinear target ``f`` (a jax function; pass the same object to reuse the
    compilation) evaluate ``Gamma`` with :func:`test_error_nonlinear`; ``scale`` multiplies
    the linear target (``y = scale x^T w + eps``).  ``targets`` (a tuple of jax functions)
    with ``target`` (an index) is ``f = targets[target]`` with the index traced: one
    compilation serves every target of the tuple.

    Trial ``t`` always uses ``fold_in(key, t)``, so the numbers do not depend
    on the number of devices; trials are sharded over ``devices`` (default: all devices
    that divide the padded trial count, i.e. every GPU of a machine).
    ``pad_to=(k_max, n_max)`` shares one compilation across a sweep over kappa."""
    _check_pos(alpha=alpha, tau=tau, kappa=kappa, lam=lam)
    if (targets is None) != (target is None):
        raise ValueError("targets, target: give both (a tuple of functions and an index) or "
                         "neither.")
    if targets is not None:
        if f is not None:
            raise ValueError("f, targets: give a target function f or targets[target], not "
                             "both.")
        if not 0 <= int(target) < len(targets):
            raise ValueError(f"target: an index into targets (0..{len(targets) - 1}), got "
                             f"{target}.")
    ell, k, n = sizes(d, alpha, tau, kappa)
    k_max, n_max = pad_to or (k, n)
    if k > k_max or n > n_max:
        raise ValueError(f"pad_to: ({k_max}, {n_max}) is smaller than (k, n) = ({k}, {n}).")
    ndev = jax.local_device_count() if devices is None else int(devices)
    if not 1 <= ndev <= jax.local_device_count():
        raise ValueError(f"devices: must be between 1 and {jax.local_device_count()} (this "
                         f"process's devices), got {devices}.")
    padded = -(-trials // ndev) * ndev
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(padded))
    nonlinear = f is not None or targets is not None
    batch = _gtask_cg if d * (d + 1) > DIRECT_MAX_PARAMS else _gtask_direct
    out = batch(keys, d, float(ell), k_max, n_max, k, n, rho, lam, tol, maxiter, ndev,
                f, float(scale), ell if nonlinear else None,
                None if targets is None else tuple(targets), 0 if target is None else int(target))
    return tuple(o[:trials] for o in out)


QUICK_FIGURE = {"kappas": (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.6, 2.0, 4.0, 8.0, 16.0, 32.0),
                "alpha": 10.0, "tau": 10.0, "rho": 0.01, "lam": 1e-6}


def quick_figure(d: int, trials: int = 20, draws: int = 1000, seed: int | None = None,
                 tol: float = 1e-8) -> dict:
    """The authors' quick-figure protocol (docs/topics/icl.md#the-authors-quick-figure) at
    dimension ``d``: g_task of the
    ridge-pretrained model (``trials`` runs per kappa, exact test errors, CG to relative
    residual ``tol``) and of dMMSE (``draws`` test prompts each for ICL and IDG), with
    z-scores against the authors' saved means where they exist (d = 10, 32, 64;
    :mod:`gmtheory.data`).  Draws use the non-partitionable threefry, which this CPU
    compiles about five times and runs about three times faster (same distribution,
    other numbers; trial ``t`` still has its own key, whatever the device count)."""
    with jax.threefry_partitionable(False):
        return _quick_figure(d, trials, draws, seed, tol)


def _quick_figure(d, trials, draws, seed, tol):
    from .data import lu2025_quick_figure

    q = QUICK_FIGURE
    kappas, alpha, tau, rho, lam = q["kappas"], q["alpha"], q["tau"], q["rho"], q["lam"]
    key = jax.random.key(d if seed is None else seed)
    sz = [sizes(d, alpha, tau, k) for k in kappas]
    ell = sz[0][0]
    pad = (max(s[1] for s in sz), max(s[2] for s in sz))
    g, g_se, dm, dm_se, res = [], [], [], [], []
    for i, kappa in enumerate(kappas):
        e1, e2, r, _ = g_task_trials(jax.random.fold_in(key, i), d, alpha=alpha, tau=tau,
                                     kappa=kappa, rho=rho, lam=lam, trials=trials, tol=tol,
                                     pad_to=pad)
        gs = np.asarray(e1 - e2)
        res.append(float(np.max(r)))
        m, se = mean_se(gs)
        g.append(float(m))
        g_se.append(float(se))
        kd = jax.random.fold_in(key, 1000 + i)
        pool = sample_pool(jax.random.fold_in(kd, 0), d, pad[0])
        e = dmmse_errors(jax.random.fold_in(kd, 1), pool, ell, rho, draws=draws, k=sz[i][1])
        (a1, s1), (a2, s2) = e["icl"], e["idg"]
        dm.append(a1 - a2)
        dm_se.append(float(np.hypot(s1, s2)))
    row = {"d": d, "g_task": g, "g_task_se": g_se, "dmmse_gap": dm, "dmmse_gap_se": dm_se,
           "theory_g_task_ridgeless": [float(g_task_ridgeless(alpha, tau, k, rho))
                                       for k in kappas],
           "max_cg_residual": float(np.max(res))}
    if d in (10, 32, 64):
        ext = lu2025_quick_figure(d)
        zs = lambda ours, se, theirs: [
            (a - b["gtask_mean"]) / np.hypot(s, b["gtask_std"] / np.sqrt(b["numavg"]))
            for a, s, b in zip(ours, se, theirs, strict=True)]
        row.update({"authors_g_task": [b["gtask_mean"] for b in ext["gamma"]],
                    "authors_g_task_se": [b["gtask_std"] / np.sqrt(b["numavg"])
                                          for b in ext["gamma"]],
                    "authors_dmmse_gap": [b["gtask_mean"] for b in ext["dmmse"]],
                    "z_vs_authors": zs(g, g_se, ext["gamma"]),
                    "z_dmmse_vs_authors": zs(dm, dm_se, ext["dmmse"])})
    return row
