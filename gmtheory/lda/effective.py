"""The map ``Phi`` from attention parameters to the effective coordinates of eq. (7), the
predictor of eq. (6), Lemma B.1's blocks and output, flat coordinates, and the attention
predictors on finite prompts and in the linear limit."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from .problem import Effective, LDAParams, LDAProblem

__all__ = ["phi", "effective_score", "predictor", "params_from_matrices", "lemma_b1_output",
           "flatten", "unflatten", "jacobian_phi", "prompt_predictor", "linear_limit_weight"]

# ---------------------------------------------------------------- the map Phi ---------

@jax.jit
def phi(prob: LDAProblem, theta: LDAParams) -> Effective:
    """Eq. (7): ``w = U11 Gamma v21``, ``b = v21^T m_- - v22``,
    ``r = v21^T dm + 2 v22``, ``s = 2 u12 + U11 dm``."""
    U11, u12, v21, v22 = theta
    dm = prob.delta_m
    return Effective(U11 @ prob.cov @ v21, v21 @ prob.m_neg - v22, v21 @ dm + 2 * v22,
                     2 * u12 + U11 @ dm)


@jax.jit
def effective_score(prob: LDAProblem, zeta: Effective, x):
    """``g_zeta(x) = w^T x + b + r sigmoid(s0 + s^T x)`` (eq. (8))."""
    w, b, r, s = zeta
    return x @ w + b + r * jax.nn.sigmoid(prob.s0 + x @ s)


@jax.jit
def predictor(prob: LDAProblem, theta: LDAParams, x):
    """``f_theta(x)`` of eq. (6)."""
    return effective_score(prob, phi(prob, theta), x)


@jax.jit
def params_from_matrices(U, V) -> LDAParams:
    """Blocks of Lemma B.1 from full ``(d+1) x (d+1)`` matrices (the paper partitions ``U^T``;
    docs/topics/lda.md#lemma-b1-the-label-augmented-prompt)."""
    U, V = jnp.asarray(U), jnp.asarray(V)
    d = U.shape[0] - 1
    Ut = U.T
    return LDAParams(Ut[:d, :d], Ut[:d, d], V[d, :d], V[d, d])


@jax.jit
def lemma_b1_output(prob: LDAProblem, U, V, x, y):
    """Full output vector of Lemma B.1 at the token ``(x, y)``."""
    U, V = jnp.asarray(U), jnp.asarray(V)
    d = prob.d
    Ut = U.T
    U11, u12, u21, u22 = Ut[:d, :d], Ut[:d, d], Ut[d, :d], Ut[d, d]
    s = x @ U11 + y * u21                        # U11^T x + y u21
    t = x @ u12 + y * u22
    alpha = jax.nn.sigmoid(prob.s0 + 2 * t + s @ prob.delta_m)
    top = s @ prob.cov + (1 - alpha) * prob.m_neg + alpha * prob.m_pos
    return V @ jnp.append(top, 2 * alpha - 1)


# ---------------------------------------------------------------- attention coords ----

def flatten(theta: LDAParams):
    """Flat vector of ``theta`` (order U11, u12, v21, v22) and the inverse map."""
    return ravel_pytree(theta)


def unflatten(like: LDAParams, vec) -> LDAParams:
    return ravel_pytree(like)[1](vec)


def flatten_effective(zeta: Effective):
    """``zeta = (w, b, r, s)`` as one vector (the order of the effective Hessian)."""
    return jnp.concatenate([zeta.w, jnp.atleast_1d(zeta.b), jnp.atleast_1d(zeta.r), zeta.s])


def unflatten_effective(v, d: int) -> Effective:
    """The inverse of :func:`flatten_effective` in dimension ``d``."""
    return Effective(v[:d], v[d], v[d + 1], v[d + 2:])


@jax.jit
def jacobian_phi(prob: LDAProblem, theta: LDAParams):
    """``D Phi(theta)`` as a (2d+2) x (d^2+2d+1) matrix (flat orders of ``zeta``, ``theta``)."""
    vec, unr = ravel_pytree(theta)
    return jax.jacfwd(lambda v: flatten_effective(phi(prob, unr(v))))(vec)


@partial(jax.jit, static_argnames=("kind",))
def prompt_predictor(theta: LDAParams, X, Y, x, kind: str = "softmax"):
    """Last output coordinate of attention of the queries ``(x, 0)`` (q, d) over a finite
    prompt of tokens ``(X, Y)`` (L, d), (L,): ``softmax`` or ``linear`` (1/L-normalised).
    Batched prompts: ``X`` (B, L, d), ``Y`` (B, L), ``x`` (B, q, d)."""
    U11, u12, v21, v22 = theta
    scores = jnp.einsum("...qd,de,...le->...ql", x, U11, X) + (x @ u12)[..., None] * Y[..., None, :]
    values = X @ v21 + v22 * Y                                     # (..., L)
    if kind == "softmax":
        return jnp.einsum("...ql,...l->...q", jax.nn.softmax(scores, -1), values)
    if kind == "linear":
        return jnp.einsum("...ql,...l->...q", scores, values) / X.shape[-2]
    raise ValueError(f"kind: unknown attention {kind!r}; use 'softmax' or 'linear'.")


@jax.jit
def linear_limit_weight(prob: LDAProblem, theta: LDAParams):
    """Infinite-prompt linear attention at ``(x, 0)``: its last coordinate is ``w^T x`` with
    ``w = U11 E[X (v21^T X + v22 Y)] + u12 E[Y (v21^T X + v22 Y)]`` (no bias path)."""
    U11, u12, v21, v22 = theta
    p = prob.pi_pos
    Exx = (p * jnp.outer(prob.m_pos, prob.m_pos) + (1 - p) * jnp.outer(prob.m_neg, prob.m_neg)
           + prob.cov)
    Exy = p * prob.m_pos - (1 - p) * prob.m_neg
    return U11 @ (Exx @ v21 + Exy * v22) + u12 * (Exy @ v21 + v22)


