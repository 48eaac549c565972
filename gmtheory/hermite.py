"""Hermite expansions for single-index targets (docs/topics/icl.md#hermite-coefficients and
docs/topics/icl.md#the-nonlinearity-noise-equivalence).

Probabilists' Hermite polynomials ``He_k`` are orthogonal under ``z ~ N(0, 1)`` with
``E[He_j He_k] = k! delta_jk``; ``f = sum_k c_k He_k`` with ``c_k = E[f(z) He_k(z)] / k!``
and ``E f^2 = sum_k k! c_k^2``.  Linear attention only sees ``c_0`` and ``c_1``: the rest
of ``f`` acts as noise (:func:`effective_noise`).

Quadrature is adaptive: the order doubles until two successive results agree to ``tol``.
Smooth functions converge quickly under Gauss–Hermite; functions with kinks or jumps
(ReLU, sign, ``|z|``) converge only algebraically there, so pass their break points
as ``kinks=(0.0,)`` to integrate piecewise with Gauss–Legendre on ``[-Z, k_1], ...,
[k_n, Z]`` (``Z = 40``, beyond which the Gaussian weight is below 1e-300).  If
Gauss–Hermite does not converge, the error says so and suggests ``kinks``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import factorial

import numpy as np
from scipy.special import eval_hermitenorm

from .quadrature import normal_rule

__all__ = ["coefficients", "second_moment", "effective_noise", "linear_part", "KINKED",
           "expectation", "label_moments", "equivalence_error", "naive_alternative",
           "ALTERNATIVE_MIN_GAP"]

# break points of the functions the toolkit uses by name
KINKED = {"relu": (0.0,), "sign": (0.0,), "abs": (0.0,)}
_Z = 40.0


def _values(f: Callable, t: np.ndarray) -> np.ndarray:
    v = np.asarray(f(t), dtype=float)
    if v.shape != t.shape:
        raise ValueError(f"f: must map an array of shape {t.shape} to the same shape (apply "
                         f"elementwise), got {v.shape}.")
    if not np.all(np.isfinite(v)):
        raise ValueError("f: returned NaN or inf at a quadrature node; f must be finite on R "
                         "(polynomial growth at most).")
    return v


def expectation(g: Callable, *, kinks: Sequence[float] | None = None, tol: float = 1e-12,
                start: int = 32, max_order: int = 4096) -> tuple[float, int]:
    """``E g(z)``, ``z ~ N(0, 1)``, with adaptive order; returns ``(value, order used)``."""
    return _adaptive(lambda t: _values(g, t)[None], kinks, tol, start, max_order)


def _adaptive(vec: Callable, kinks, tol, start, max_order):
    n, prev = start, None
    while n <= max_order:
        t, w = normal_rule(n, breaks=kinks, bound=_Z)
        cur = vec(t) @ w
        if prev is not None and np.max(np.abs(cur - prev)) <= tol * max(1.0, np.max(np.abs(cur))):
            return (float(cur[0]) if cur.shape == (1,) else cur), n
        prev, n = cur, 2 * n
    hint = "" if kinks else (" If f has kinks or jumps (ReLU, sign, |z|), pass their "
                             "locations, e.g. kinks=(0.0,).")
    raise ValueError(f"tol: quadrature did not converge to {tol:g} by order {max_order}.{hint}")


def coefficients(f: Callable, order: int, *, kinks: Sequence[float] | None = None,
                 tol: float = 1e-12, max_order: int = 4096) -> np.ndarray:
    """Hermite coefficients ``c_0 .. c_order`` of ``f`` (vectorised numpy function).

    ``f`` may also be a name in :data:`KINKED` (``"relu"``, ``"sign"``, ``"abs"``).
    """
    if isinstance(f, str):
        f, kinks = _named(f), KINKED[f] if kinks is None else kinks
    order = int(order)
    if order < 0:
        raise ValueError(f"order: must be >= 0, got {order}.")
    ks = np.arange(order + 1)
    norms = np.array([float(factorial(k)) for k in ks])

    def vec(t):
        return _values(f, t)[None] * eval_hermitenorm(ks[:, None], t[None])

    # tolerance on E[f He_k]: relative to k! so that c_k is accurate to tol
    c, _ = _adaptive(lambda t: vec(t) / norms[:, None], kinks, tol, 32, max_order)
    return np.atleast_1d(c)


def second_moment(f: Callable, *, kinks: Sequence[float] | None = None, tol: float = 1e-12):
    """``E f(z)^2``."""
    if isinstance(f, str):
        f, kinks = _named(f), KINKED[f] if kinks is None else kinks
    return expectation(lambda t: _values(f, t) ** 2, kinks=kinks, tol=tol)[0]


def linear_part(f: Callable, *, kinks: Sequence[float] | None = None):
    """``(c_0, c_1)``: the part of ``f`` that linear attention can use."""
    c = coefficients(f, 1, kinks=kinks)
    return float(c[0]), float(c[1])


def effective_noise(f: Callable, noise_var: float, centred: bool = False, *,
                    kinks: Sequence[float] | None = None) -> float:
    """``rho_eff = E f^2 + sigma^2 - c_1^2``, the noise variance of the
    equivalent linear model ``y = c_1 z + eta``; with ``centred=True`` (labels centred)
    ``c_0^2`` is removed as well: ``V_res + sigma^2``."""
    if noise_var < 0 or not np.isfinite(noise_var):
        raise ValueError(f"noise_var: must be a finite variance >= 0, got {noise_var}.")
    if isinstance(f, str):
        f, kinks = _named(f), KINKED[f] if kinks is None else kinks
    c0, c1 = linear_part(f, kinks=kinks)
    m2 = second_moment(f, kinks=kinks) + noise_var
    return m2 - c1**2 - (c0**2 if centred else 0.0)


def equivalence_error(mom: dict, alpha: float, tau: float, kappa: float, lam: float, *,
                      rescale_lam: bool = True) -> float:
    """The equivalence's d -> infinity test error of ridge-pretrained linear attention on
    ``y = f(z) + eps``: ``c1^2 e_ridge(alpha, tau, kappa, rho_eff / c1^2, lam / c1^2)``
    (:func:`gmtheory.icl.e_icl_ridge`), from ``mom`` = :func:`label_moments`.  The target
    is ``c1`` times a linear target with noise ``rho_eff / c1^2`` whose ridge problem has
    penalty ``lam / c1^2`` (docs/topics/icl.md#the-nonlinearity-noise-equivalence);
    ``rescale_lam=False`` keeps ``lam`` as it is, the alternative check icl.10 rejects."""
    from . import icl

    c1 = mom["c1"]
    if c1 == 0:
        raise ValueError("mom: c1 = 0, nothing is learnable; the error is m2 tau/(tau - 1) "
                         "(tau > 1) or m2/(1 - tau) (docs/topics/icl.md).")
    return c1**2 * icl.e_icl_ridge(alpha, tau, kappa, mom["rho_eff"] / c1**2,
                                   lam / c1**2 if rescale_lam else lam)


#: a target's "naive" alternative (:func:`naive_alternative`) is resolvable at a point when
#: it differs from :func:`equivalence_error` by at least this relative amount (ReLU and sign
#: at icl-equivalence's quick points: 20-32 %; tanh and erf: 4-9 %); checks icl.05 and
#: icl.10 choose their power points with it, from the theory alone
ALTERNATIVE_MIN_GAP = 0.15


def naive_alternative(mom: dict, alpha: float, tau: float, kappa: float, *, rho: float,
                      lam: float) -> float:
    """The error the equivalence's alternative predicts: ridge pretraining that sees only
    the linear part ``c1 z + N(0, rho)`` (no extra noise from the nonlinearity), tested on
    the nonlinear target (whose unexplained variance ``rho_eff - rho`` is added)."""
    from . import icl

    c1 = mom["c1"]
    return (c1**2 * icl.e_icl_ridge(alpha, tau, kappa, rho / c1**2, lam / c1**2)
            + mom["rho_eff"] - rho)


def _named(name: str) -> Callable:
    table = {"relu": lambda z: np.maximum(z, 0.0), "sign": np.sign, "abs": np.abs}
    if name not in table:
        raise ValueError(f"f: unknown name {name!r}; pass a function or one of {sorted(table)}.")
    return table[name]


def label_moments(f: Callable, noise_var: float, *, kinks: Sequence[float] | None = None):
    """Moments of ``y = f(z) + eps`` (``eps ~ N(0, noise_var)``) used by the exact finite-d
    error of ``gmtheory.icl.test_error_nonlinear``: ``c0``, ``c1``, ``m2 = E y^2``,
    ``rho_eff = m2 - c1^2``, ``Ey2z2``, ``Ey3z``, ``Ey4``."""
    if isinstance(f, str):
        f, kinks = _named(f), KINKED[f] if kinks is None else kinks
    c0, c1 = linear_part(f, kinks=kinks)
    E = lambda g: expectation(g, kinks=kinks)[0]
    Ef2 = E(lambda z: f(z) ** 2)
    r = noise_var
    return {"c0": c0, "c1": c1, "m2": Ef2 + r, "rho_eff": Ef2 + r - c1**2,
            "Ey2z2": E(lambda z: f(z) ** 2 * z * z) + r,
            "Ey3z": E(lambda z: f(z) ** 3 * z) + 3 * r * c1,
            "Ey4": E(lambda z: f(z) ** 4) + 6 * r * Ef2 + 3 * r * r}
