"""Softmax attention on the in-context regression task of Lu et al.
(docs/topics/icl.md#softmax-attention-on-the-regression-task).

Data as in :mod:`gmtheory.icl`: tokens ``x_i ~ N(0, I_d/d)``, a fresh task
``w ~ N(0, I_d)`` per prompt (or on the sphere ``|w|^2 = d``: :func:`sample_prompts`),
labels ``y_i = w^T x_i + eps_i`` with ``eps_i ~ N(0, rho)``,
``l = alpha d`` context tokens and a query ``x_q``.

One softmax head reads the tokens ``z_i = (x_i, y_i)`` from the query ``(x_q, 0)``:

    y_hat = sum_i softmax_i(x_q^T A x_i + (b^T x_q) y_i) (c^T x_i + e y_i).

* **Infinite prompt** (Prop. 2.1 on one Gaussian component): the head is the linear map
  ``y_hat = (c^T + e w^T) A^T x_q / d + e (|w|^2/d + rho) b^T x_q``; with ``A = (d/e) I``
  it is ``w^T x_q``, the Bayes predictor, so the head reaches error ``rho`` as linear
  attention does.
* **Finite prompt** (:func:`isotropic_error`, the delta method, exact as ``d -> inf`` at
  fixed ``alpha``): the isotropic head ``A = sqrt(t d) I``, ``e = g sqrt(d / t)``,
  ``b = c = 0`` has error ``rho + (1 - g)^2 + g^2 V(t)`` with

      V(t) = (1 / (alpha t)) [(1 + rho) (1 - 2t/d)^(-d/2) + (t/d) (1 - 2t/d)^(-d/2-1)].

  The softmax weights are log-normal and keep an effective sample size ``l e^{-t}``;
  balancing that loss against the tilt ``t`` gives ``t* -> 1`` and the best error
  ``rho + (1 + rho) / (alpha/e + 1 + rho)`` as ``d -> inf`` (:func:`softmax_head_optimum`):
  linear attention's ``tau, kappa -> inf`` error :func:`gmtheory.icl.limit_large` at the
  prompt length ``l / e``.
* **Exact at every prompt length** (:func:`finite_prompt_error`,
  :func:`finite_prompt_optimum`): the isotropic head reads the tokens only through their
  projections ``z_i = sqrt(d) x_i^T x_q / |x_q|`` (i.i.d. ``N(0, 1)``), and the label
  part orthogonal to ``x_q`` is independent noise, so its error at any ``(l, d)`` is
  ``rho + 1 - 2 g P + g^2 Q`` with

      P = E[r M1(k)] / sqrt(t),   Q = E[M2(k)] / t + (d/t)(1 - 1/d + rho) E[S(k)],

  ``r^2 = |x_q|^2 ~ chi^2_d/d``, ``k = sqrt(t) r``, ``p = softmax(k z)`` over ``l`` tokens,
  ``M1 = E sum p_i z_i``, ``M2 = E (sum p_i z_i)^2``, ``S = E sum p_i^2``.  The three
  moments are one-dimensional integrals through ``1/Z^n = int lambda^{n-1} e^{-lambda Z}
  d lambda / (n-1)!`` (docs/topics/icl.md#the-isotropic-head-at-every-prompt-length).
  The best tilt at short prompts lies far above the delta method's (about 3 against 0.9
  at ``l = 8``), and so does the error it reaches below it.
* :func:`linear_head` is linear attention in Lu et al.'s reduced form
  ``y_hat = x_q^T Gamma h``, ``h = ((d/l) sum y_i x_i, (1/l) sum y_i^2)``, so a trained
  ``Gamma`` is scored exactly by :func:`gmtheory.icl.test_error`.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import minimize_scalar

from .quadrature import chi2_rule as _chi2_rule

__all__ = ["sample_prompts", "softmax_head", "linear_head", "isotropic_params",
           "isotropic_variance", "isotropic_error", "softmax_head_optimum",
           "softmax_limit_matrices", "init_softmax_head", "finite_prompt_error",
           "finite_prompt_optimum", "two_head_error", "two_head_optimum"]


def _check(alpha=None, rho=None, d=None):
    if alpha is not None and not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha: the context length per dimension l/d must be a finite "
                         f"number > 0, got {alpha!r}.")
    if rho is not None and not (np.isfinite(rho) and rho >= 0):
        raise ValueError(f"rho: the label-noise variance must be finite and >= 0, got {rho!r}.")
    if d is not None and (int(d) != d or d < 3):
        raise ValueError(f"d: the token dimension must be an integer >= 3 (or None for "
                         f"d -> infinity), got {d!r}.")


def sample_prompts(key, d: int, ell: int, rho: float, n: int, *, fast: bool = False,
                   tasks: str = "gaussian"):
    """``n`` prompts of ``ell`` tokens with a fresh task each.

    Returns a dict: ``X`` (n, ell, d), ``y`` (n, ell), ``xq`` (n, d), ``yq`` (n,).
    ``tasks``: ``"gaussian"`` (``w ~ N(0, I_d)``, Lu et al.'s test law, the one that
    :func:`gmtheory.icl.test_error` scores linear attention under) or ``"sphere"``
    (``|w|^2 = d``).  Both have ``E w w^T = I``, so every error quadratic in ``w`` (the
    isotropic heads', :func:`finite_prompt_error`) is the same under both.
    ``fast=True`` draws the tokens ``X`` as float32 normals used in the working precision
    (1.7x faster on CPU; each draw rounded at 6e-8 relative, tails cut at |z| ~ 5.4, far
    below any Monte Carlo error): for training, where the draws are the bulk of a step."""
    if tasks not in ("gaussian", "sphere"):
        raise ValueError(f"tasks: choose 'gaussian' or 'sphere', got {tasks!r}.")
    kw, kx, ke, kq, kqe = jax.random.split(key, 5)
    w = jax.random.normal(kw, (n, d))
    if tasks == "sphere":
        w = w * jnp.sqrt(d) / jnp.linalg.norm(w, axis=1, keepdims=True)
    if fast:
        X = jax.random.normal(kx, (n, ell, d), jnp.float32).astype(w.dtype) / jnp.sqrt(d)
    else:
        X = jax.random.normal(kx, (n, ell, d)) / jnp.sqrt(d)
    y = jnp.einsum("nld,nd->nl", X, w) + jnp.sqrt(rho) * jax.random.normal(ke, (n, ell))
    xq = jax.random.normal(kq, (n, d)) / jnp.sqrt(d)
    yq = jnp.sum(xq * w, 1) + jnp.sqrt(rho) * jax.random.normal(kqe, (n,))
    return {"X": X, "y": y, "xq": xq, "yq": yq}


def _mask(ell, L):
    return None if ell is None else jnp.arange(L) < ell


def softmax_head(params, X, y, xq, ell=None):
    """The general one-layer softmax head on prompts ``(X, y)`` read from ``xq``.

    ``params``: ``A`` (d, d), ``b`` (d,), ``c`` (d,), ``e`` (); ``X`` (n, L, d), ``y`` (n, L),
    ``xq`` (n, d) -> ``y_hat`` (n,).  ``ell``: read only the first ``ell`` tokens (prompts
    of several lengths padded to one shape; may be traced)."""
    q = xq @ params["A"]                                      # x_q^T A, (n, d)
    s = jnp.einsum("nld,nd->nl", X, q) + (xq @ params["b"])[:, None] * y
    m = _mask(ell, X.shape[1])
    if m is not None:
        s = jnp.where(m[None], s, -jnp.inf)
    p = jax.nn.softmax(s, axis=1)
    v = X @ params["c"] + params["e"] * y
    return jnp.sum(p * v, axis=1)


def linear_head(Gamma, X, y, xq, ell=None):
    """Linear attention in the reduced form ``x_q^T Gamma h`` of :mod:`gmtheory.icl`.

    ``Gamma`` (d, d+1); ``X`` (n, L, d), ``y`` (n, L), ``xq`` (n, d) -> (n,); ``ell`` as in
    :func:`softmax_head`."""
    d, L = X.shape[2], X.shape[1]
    m = _mask(ell, L)
    n_tok = L if m is None else ell
    yw = y if m is None else jnp.where(m[None], y, 0.0)
    h = jnp.concatenate([(d / n_tok) * jnp.einsum("nl,nld->nd", yw, X),
                         (jnp.sum(yw * y, axis=1) / n_tok)[:, None]], axis=1)
    return jnp.einsum("nd,de,ne->n", xq, Gamma, h)


def isotropic_params(d: int, t: float, g: float) -> dict:
    """The isotropic head ``A = sqrt(t d) I``, ``e = g sqrt(d/t)``, ``b = c = 0`` as
    :func:`softmax_head` parameters: score variance ``t |x_q|^2``, infinite-prompt gain
    ``e sqrt(t d) / d = g``."""
    if int(d) != d or d < 1:
        raise ValueError(f"d: the token dimension must be an integer >= 1, got {d!r}.")
    if not (np.isfinite(t) and t > 0):
        raise ValueError(f"t: the score variance must be finite and > 0, got {t!r}.")
    return {"A": math.sqrt(t * d) * jnp.eye(d), "b": jnp.zeros(d), "c": jnp.zeros(d),
            "e": jnp.asarray(g * math.sqrt(d / t))}


def isotropic_variance(t, alpha: float, rho: float, d: int | None = None) -> float:
    """``V(t)``: the finite-prompt variance of the isotropic head at unit gain, to leading
    order in ``1/l`` (exact as ``d -> inf``; ``d = None`` is that limit,
    ``e^t (1 + rho) / (alpha t)``)."""
    _check(alpha, rho, d)
    t = float(t)
    if d is None:
        if t <= 0:
            raise ValueError(f"t: must be > 0, got {t!r}.")
        return math.exp(t) * (1 + rho) / (alpha * t)
    if not 0 < t < d / 2:
        raise ValueError(f"t: must lie in (0, d/2) = (0, {d / 2}), got {t!r}.")
    lm = math.log1p(-2 * t / d)                   # log(1 - 2t/d), in logs for large d
    lg = -d / 2 * lm
    if lg - lm > 700:                             # e^{t r} moments beyond float64
        return math.inf
    return ((1 + rho) * math.exp(lg) + (t / d) * math.exp(lg - lm)) / (alpha * t)


def isotropic_error(t, g, alpha: float, rho: float, d: int | None = None) -> float:
    """Test error of the isotropic head: ``rho + (1 - g)^2 + g^2 V(t)``."""
    return rho + (1 - g) ** 2 + g * g * isotropic_variance(t, alpha, rho, d)


def softmax_head_optimum(alpha: float, rho: float, d: int | None = None) -> dict:
    """The best isotropic head: ``t*`` minimises ``V`` (``t* = 1`` as ``d -> inf``),
    ``g* = 1 / (1 + V*)``, error ``rho + V* / (1 + V*)``.

    Returns ``{"error", "t", "g", "V"}``."""
    _check(alpha, rho, d)
    if d is None:
        t = 1.0
    else:
        r = minimize_scalar(lambda s: isotropic_variance(s, alpha, rho, d),
                            bounds=(1e-6, min(d / 2 * (1 - 1e-9), 20.0)), method="bounded",
                            options={"xatol": 1e-10})
        t = float(r.x)
    v = isotropic_variance(t, alpha, rho, d)
    return {"error": rho + v / (1 + v), "t": t, "g": 1 / (1 + v), "V": v}


def softmax_limit_matrices(params) -> tuple:
    """``(U, V)`` of :func:`gmtheory.operators.softmax_attention_limit` for the head on
    tokens ``z = (x, y)`` in ``R^{d+1}``: score ``z_i^T U z_q``, value ``V z_i``."""
    A, b, c, e = params["A"], params["b"], params["c"], params["e"]
    d = A.shape[0]
    U = jnp.zeros((d + 1, d + 1)).at[:d, :d].set(A.T).at[d, :d].set(b)
    V = jnp.concatenate([c, jnp.atleast_1d(e)])[None, :]
    return U, V


@partial(jax.jit, static_argnames=("d",))
def init_softmax_head(key, d: int, scale: float = 0.1) -> dict:
    """A random start for training: ``A = sqrt(d)/2 I + scale * noise``, ``e = 1``,
    ``b, c`` small (the head starts as a plain mean of the labels, tilted a little).
    Compiled once per ``d`` (eagerly, each draw compiled its own program)."""
    ka, kb, kc = jax.random.split(key, 3)
    return {"A": 0.5 * math.sqrt(d) * jnp.eye(d) + scale * jax.random.normal(ka, (d, d)),
            "b": scale / math.sqrt(d) * jax.random.normal(kb, (d,)),
            "c": scale / math.sqrt(d) * jax.random.normal(kc, (d,)),
            "e": jnp.asarray(1.0)}


#: quadrature sizes of :func:`finite_prompt_error`: nodes over ``|x_q|^2`` (``r_small_d``
#: below d = 8, where chi^2_d/d is wide and the rule converges algebraically), over ``log
#: lambda`` and over the token projection ``z``.  ``tests/test_icl_softmax.py`` doubles
#: each and sees the error move by < 1e-9 at d >= 8 and < 1e-6 below (measured: 5e-11
#: and 1e-7); that is the quadrature error the checks quote.
EXACT_NODES = {"r": 32, "r_small_d": 96, "v": 384, "z": 256}
#: the quadrature error stated beside every exact value (above the doubling test's bound)
EXACT_QUADRATURE_ERROR = 1e-6
#: the smaller rule the optimisers search on at d >= 2 (a sixth of the work at d >= 8, a
#: third below; within 5e-7 of ``EXACT_NODES`` at tilts 1e-3 to 12 for d = 8-64 and
#: within 2.5e-6 for d = 2-7, ell = 8-1024, for both the one-head and the two-head error,
#: tests/test_icl_softmax.py; at d = 1 the wide chi^2_1 needs the full rule); the optimum
#: found is then evaluated on ``EXACT_NODES``, so its stored error is exact at the stored
#: tilt, and within twice the search rule's error of the exact minimum
SEARCH_NODES = {"r": 16, "r_small_d": 96, "v": 256, "z": 128}


def _search_nodes(d: int) -> dict:
    return SEARCH_NODES if d >= 2 else EXACT_NODES


def _times(log_c, a):
    """``e^{log_c} a`` without ``inf * 0`` (where ``a`` underflowed to zero)."""
    return jnp.where(a == 0, 0.0, jnp.sign(a) * jnp.exp(log_c + jnp.log(jnp.abs(a))))


@partial(jax.jit, static_argnames=("nv", "nz"))
def _tilt_direct(k, ell, ell_max, nv, nz):
    """``(M1, M2, S, M3)`` of the module docstring for tilts ``k`` (n,) and prompt length
    ``ell``, at any tilt: trapezoid rules in ``z`` (the projection) and ``v = log lambda``, both
    spectrally accurate for these analytic integrands (steps < 0.27/k in ``z``)."""
    def one(k):
        z = jnp.linspace(-10.0, 2 * k + 10.0, nz)
        lw = -0.5 * z**2
        lw = lw - jax.scipy.special.logsumexp(lw)             # weights summing to one
        v = jnp.linspace(-jnp.log(ell_max) - 9 * k - 40.0, 9 * k + 5.0, nv)
        hv = v[1] - v[0]
        x = v[:, None] + k * z[None]                      # log(lambda e^{k z})
        E = jnp.exp(x)
        q = jnp.sum(-jnp.expm1(-E) * jnp.exp(lw)[None], 1)  # 1 - phi(lambda)
        # lambda^c e^{c k z - E} as one exponential, c x - e^x <= 0: nothing overflows
        F = lambda c: jnp.exp(lw[None] + c * x - E)
        la1 = jnp.sum(z[None] * F(1), 1)                  # lambda a1
        la2 = jnp.sum(z[None] ** 2 * F(2), 1)             # lambda^2 a2
        lb2 = jnp.sum(F(2), 1)                            # lambda^2 b2
        lc2 = jnp.sum(z[None] ** 2 * F(1), 1)             # lambda c2
        c0 = jnp.sum(z[None] * jnp.exp(lw[None] - E), 1)
        lphi = jnp.log1p(-jnp.minimum(q, 1.0))          # -inf where phi underflows
        p1 = jnp.exp((ell - 1) * lphi)
        p2 = jnp.where(ell > 2, jnp.exp(jnp.maximum(ell - 2, 1) * lphi), 1.0)
        m1 = ell * hv * jnp.sum(la1 * p1)
        m2 = hv * jnp.sum(ell * la2 * p1 + ell * (ell - 1) * la1**2 * p2)
        s2 = ell * hv * jnp.sum(lb2 * p1)
        # E[(sum_j z_j)(sum_i p_i z_i)]: the cross moment with the plain mean (two heads)
        m3 = hv * jnp.sum(ell * lc2 * p1 + ell * (ell - 1) * la1 * c0 * p2)
        return jnp.stack([m1, m2, s2, m3])
    return jax.vmap(one)(k)


@partial(jax.jit, static_argnames=("nv", "nz"))
def _tilt_fast(k, ell, ell_max, nv, nz):
    """:func:`_tilt_direct` on the same nodes with one transcendental per node instead of
    five: ``lambda e^{kz}`` as an outer product, and the four z-sums as one matrix product
    of ``e^{-lambda e^{kz}}`` with the tilted normal weights ``e^{-z^2/2 + c k z}``, each
    scaled by its largest value ``e^{s}``.  Those weights span ``e^{(z - ck)^2/2}`` over
    the grid, so the form holds only while ``(2k + 10)^2 / 2`` stays far from float64's
    ``e^{-708}``: ``k <= FAST_TILT`` (tests/test_icl_softmax.py compares both forms)."""
    def one(k):
        z = jnp.linspace(-10.0, 2 * k + 10.0, nz)
        lw = -0.5 * z**2
        lw = lw - jax.scipy.special.logsumexp(lw)
        v = jnp.linspace(-jnp.log(ell_max) - 9 * k - 40.0, 9 * k + 5.0, nv)
        hv = v[1] - v[0]
        em = jnp.expm1(-jnp.exp(v)[:, None] * jnp.exp(k * z)[None])   # e^{-E} - 1
        q = -em @ jnp.exp(lw)                                          # 1 - phi(lambda)

        def tilted(c):       # e^{lw + c k z} / e^{s} and s, its largest exponent
            e = lw + c * k * z
            return jnp.exp(e - jnp.max(e)), jnp.max(e)

        u1, s1 = tilted(1.0)
        u2, s2 = tilted(2.0)
        u0 = jnp.exp(lw)
        sums = (1.0 + em) @ jnp.stack([z * u1, z**2 * u2, u2, z**2 * u1, z * u0], axis=1)
        lphi = jnp.log1p(-jnp.minimum(q, 1.0))
        p1 = jnp.exp((ell - 1) * lphi)
        p2 = jnp.where(ell > 2, jnp.exp(jnp.maximum(ell - 2, 1) * lphi), 1.0)
        la1 = _times(v + s1, sums[:, 0])                          # lambda a1
        m1 = ell * hv * jnp.sum(la1 * p1)
        m2 = hv * jnp.sum(ell * _times(2 * v + s2, sums[:, 1]) * p1
                          + ell * (ell - 1) * la1**2 * p2)
        ss = ell * hv * jnp.sum(_times(2 * v + s2, sums[:, 2]) * p1)
        m3 = hv * jnp.sum(ell * _times(v + s1, sums[:, 3]) * p1
                          + ell * (ell - 1) * la1 * sums[:, 4] * p2)
        return jnp.stack([m1, m2, ss, m3])
    return jax.vmap(one)(k)


#: the largest tilt ``k`` that :func:`_tilt_fast` takes (above it, :func:`_tilt_direct`)
FAST_TILT = 13.0


def _tilt_moments(k, ell, nv, nz):
    """``(M1, M2, S, M3)`` at the tilts ``k`` (a NumPy vector): :func:`_tilt_fast` up to
    :data:`FAST_TILT` (3x faster), :func:`_tilt_direct` above it, on the large tilts only,
    padded to a power of two (few shapes, few compilations)."""
    k = np.asarray(k, float)
    m = np.array(_tilt_fast(jnp.asarray(np.minimum(k, FAST_TILT)), float(ell), float(ell),
                            nv, nz))
    big = np.flatnonzero(k > FAST_TILT)
    if big.size:
        kb = np.pad(k[big], (0, (1 << (big.size - 1).bit_length()) - big.size), mode="edge")
        m[big] = np.asarray(_tilt_direct(jnp.asarray(kb), float(ell), float(ell), nv,
                                         nz))[:big.size]
    return m


def _moments(t, ell: int, rho: float, d: int, caller: str = "finite_prompt_error",
             nodes: dict | None = None):
    """The expectations over ``r^2 ~ chi^2_d/d`` of ``r M1``, ``M2``, ``S`` and ``M3`` at
    tilt ``t`` (module docstring), after validating the input (``caller``: the public
    function an error message names), on ``nodes`` (``EXACT_NODES`` by default)."""
    if not jax.config.jax_enable_x64:
        raise RuntimeError(f"{caller}: the quadrature needs float64; call "
                           "gmtheory.enable_x64() first.")
    if int(ell) != ell or ell < 2:
        raise ValueError(f"ell: the prompt length must be an integer >= 2, got {ell!r}.")
    if int(d) != d or d < 1:
        raise ValueError(f"d: the token dimension must be an integer >= 1, got {d!r}.")
    if not (np.isfinite(rho) and rho >= 0):
        raise ValueError(f"rho: the label-noise variance must be finite and >= 0, got {rho!r}.")
    if not (np.isfinite(t) and 0 < t <= 50):
        raise ValueError(f"t: the score variance must lie in (0, 50], got {t!r}.")
    nodes = EXACT_NODES if nodes is None else nodes
    s, w = _chi2_rule(nodes["r" if d >= 8 else "r_small_d"], int(d))
    drop = w <= 1e-18 * w.max()      # nodes that cannot matter (and whose tilt would
    s, w = np.where(drop, 0.0, s), np.where(drop, 0.0, w)   # overflow): zero, one shape
    k = np.sqrt(t * s)
    m = _tilt_moments(k, ell, nodes["v"], nodes["z"])
    return (float(np.sum(w * np.sqrt(s) * m[:, 0])), float(np.sum(w * m[:, 1])),
            float(np.sum(w * m[:, 2])), float(np.sum(w * m[:, 3])))


def _exact_pq(t, ell: int, rho: float, d: int, caller: str = "finite_prompt_error",
              nodes: dict | None = None):
    rm1, m2, s2, _ = _moments(t, ell, rho, d, caller, nodes)
    return rm1 / math.sqrt(t), m2 / t + (d / t) * (1 - 1 / d + rho) * s2


def finite_prompt_error(t, g, ell: int, rho: float, d: int) -> float:
    """Exact test error of the isotropic head :func:`isotropic_params` ``(d, t, g)`` on
    prompts of ``ell`` tokens in dimension ``d`` (module docstring): ``rho + 1 - 2 g P +
    g^2 Q`` by quadrature, to ~1e-10 (``EXACT_NODES``).  Needs float64."""
    P, Q = _exact_pq(float(t), ell, rho, d)
    return float(rho + 1 - 2 * g * P + g * g * Q)


def finite_prompt_optimum(ell: int, rho: float, d: int) -> dict:
    """The best isotropic head at ``(ell, d)``: ``g* = P/Q`` for each tilt, then ``t*``
    minimising ``rho + 1 - P^2/Q`` (bounded scalar search on (0.05, 12) on the smaller
    ``SEARCH_NODES`` rule at d >= 2, then ``g*`` and the error on ``EXACT_NODES`` at the tilt found;
    the best tilt of the delta method, :func:`softmax_head_optimum`, is ~0.9 at long
    prompts and ~3 at ``ell = 8``).  Returns ``{"error", "t", "g"}``."""
    def err(t):
        P, Q = _exact_pq(t, ell, rho, d, "finite_prompt_optimum", _search_nodes(d))
        return rho + 1 - P * P / Q
    # the error is quadratic near t*: t to 1e-3 leaves it within ~1e-7 of its minimum
    r = minimize_scalar(err, bounds=(0.05, 12.0), method="bounded", options={"xatol": 1e-3})
    t = float(r.x)
    P, Q = _exact_pq(t, ell, rho, d)
    return {"error": float(rho + 1 - P * P / Q), "t": t, "g": P / Q}


def _two_head_form(t, ell: int, rho: float, d: int, caller: str = "two_head_error",
                   nodes: dict | None = None):
    """``(b, H)`` of the two-head error ``rho + 1 - 2 b^T e + e^T H e`` in the value scales
    ``e = (e1, e2)`` (docs/topics/icl.md#two-heads)."""
    rm1, m2, s2, m3 = _moments(t, ell, rho, d, caller, nodes)
    sig = 1 - 1 / d + rho                       # variance of a label's part off x_q
    b = np.array([rm1 / math.sqrt(d), 0.0])
    h12 = m3 / (ell * d) + sig / ell
    H = np.array([[m2 / d + sig * s2, h12], [h12, 1 / (d * ell) + sig / ell]])
    return b, H


def two_head_error(t, e, ell: int, rho: float, d: int) -> float:
    """Exact test error of two heads, ``y_hat = e1 sum_i softmax_i(a x_q^T x_i) y_i + e2
    mean(y)``: the isotropic head (``A = sqrt(t d) I``, value scale ``e1``) plus a head
    with ``A = 0`` (uniform weights: the prompt's mean label, value scale ``e2``).
    ``e = (e1, e2)``.  Needs float64."""
    e = np.asarray(e, dtype=float)
    if e.shape != (2,) or not np.all(np.isfinite(e)):
        raise ValueError(f"e: the two value scales (e1, e2) must be 2 finite numbers, got {e!r}.")
    b, H = _two_head_form(float(t), ell, rho, d)
    return float(rho + 1 - 2 * b @ e + e @ H @ e)


def two_head_optimum(ell: int, rho: float, d: int) -> dict:
    """The best two heads of :func:`two_head_error`: ``e* = H^{-1} b`` at each tilt, then
    ``t*`` minimising ``rho + 1 - b^T H^{-1} b`` over ``log t`` in (log 1e-3, log 12) (on
    ``SEARCH_NODES``; ``e*`` and the error then on ``EXACT_NODES``).  At every tilt the best pair
    has ``e2 = -e1`` (``E[(sum_j z_j)(sum_i p_i z_i)] = 1`` by Stein's lemma, the softmax
    being shift invariant): the mean head removes the ``1/l`` part of the weights'
    variance.  The error falls as ``t -> 0``, where the pair ``e1 (softmax(k z) - 1/l)``
    becomes linear attention on centred tokens; the search ends at its lower bound, within
    ~2e-4 relative of that limit (docs/topics/icl.md#two-heads).  Returns
    ``{"error", "t", "e"}``."""
    def err(u):
        b, H = _two_head_form(math.exp(u), ell, rho, d, "two_head_optimum",
                              _search_nodes(d))
        return rho + 1 - b @ np.linalg.solve(H, b)
    # t to 2 % (log t to 0.02): the error is flat near the lower bound, where it ends
    r = minimize_scalar(err, bounds=(math.log(1e-3), math.log(12.0)), method="bounded",
                        options={"xatol": 0.02})
    t = math.exp(float(r.x))
    b, H = _two_head_form(t, ell, rho, d)
    e = np.linalg.solve(H, b)
    return {"error": float(rho + 1 - b @ e), "t": t, "e": e}
