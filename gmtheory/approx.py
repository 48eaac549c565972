"""ReLU -> softmax attention: explicit constructions with resource counts and bounds.

Theory: docs/topics/approx.md#relu-to-softmax.  Every construction evaluates through the toolkit's
finite-prompt operator :func:`gmtheory.softmax_attention` on constructed tokens
(score ``key^T U query``), never through a closed-form shortcut.  A "head" is one
softmax-attention head; a "layer" is a set of heads applied in parallel, with affine
maps of their outputs between layers.

Building blocks and their bounds (``c = max_{u>0} u / (1 + e^u) ~ 0.2785``):

* :func:`relu` — two keys with scores ``(beta t, 0)`` and values ``(t, 0)`` give
  ``t sigma(beta t)``; ``sup_t |t sigma(beta t) - ReLU(t)| = c / beta`` exactly.
* :func:`interpolation_head` — ``p`` anchors ``a_j`` on ``[a, b]``; the score
  ``beta (2 a_j y - a_j^2) = -beta (y - a_j)^2 + const`` makes softmax a near-argmax
  over anchors, approximating ``clip(y, a, b)``.  Derived bound (spacing
  ``h = (b - a)/(p - 1)``, ``q = exp(-beta h^2)``): ``h + 2 (b - a) q / (1 - q)``.
  :func:`interpolation_head_affine` is the ``d > 1`` form for ``y = w^T x + t`` (the
  affine map moves into the keys; same score, same bound).
* :func:`max_one_head` — one head over ``n`` scores ``beta x_i``:
  ``0 <= max - out <= log(n)/beta`` and ``<= (n - 1) range e^{-beta delta}``.
* :func:`max_relu_tree` — ``max(x, y) = y + ReLU(x - y)``, depth ``ceil(log2 n)``;
  each level adds at most ``c/beta`` (max is 1-Lipschitz): bound ``depth c / beta``.
* :func:`square` — Yarotsky's sawtooth ``x - sum_{s<=m} g_s(x)/4^s`` with the hat
  ``g = 2R(x) - 4R(x - 1/2) + 2R(x - 1)`` built from attention-ReLUs.  Derived bound:
  ``4^{-(m+1)} + 8 c / beta`` on ``[0, 1]`` (the hat errs by ``<= 8c/beta``, ``g`` is
  2-Lipschitz, and ``sum_s (2^s - 1) / 4^s < 1``).
* :func:`multiply` — ``xy = 2 sq((x+y)/2) - sq(x)/2 - sq(y)/2`` on ``[0, 1]^2``: bound
  ``3 x`` the squaring bound.
* :func:`reciprocal_pl` — ``1/x`` on ``[a, 1]`` by the ReLU form of the piecewise-linear
  interpolant with ``n`` pieces: ``(1-a)^2 / (4 a^3 n^2) + TV c / beta`` with ``TV`` the
  sum of the absolute slope coefficients.
* :func:`reciprocal_newton` — ``y <- y (2 - x y)`` from ``y_0 = 1`` with attention
  multiplications; ``r = 1 - x y`` obeys ``|r_{k+1}| <= r_k^2 + delta`` with ``delta`` the
  multiplication error, so ``|y_k - 1/x| <= R_k / a``.

:func:`compile_relu_network` compiles any ReLU network (one :func:`relu` head per hidden
unit) with a certified bound on a box; :mod:`gmtheory.approx_compose` composes the blocks
above (sums, products, reciprocals, max/min, ReLU networks of expressions) with one bound.

Length: about 700 lines because every construction stands next to the bound that is proved
for it (the list above), so a reader checks each bound against the code it bounds in one
place, and the compiler at the end builds on :func:`relu` and :func:`relu_tail_bound`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import brentq

from ._validation import as_float_array, check_finite
from .operators import softmax_attention

__all__ = [
    "Resources",
    "RELU_C",
    "RELU_U",
    "relu_tail_bound",
    "compile_relu_network",
    "relu_network_bound",
    "CompiledNetwork",
    "NetworkResources",
    "max_one_head_gap_bound",
    "max_network",
    "relu",
    "relu_bound",
    "interpolation_head",
    "interpolation_head_affine",
    "interpolation_bound",
    "max_one_head",
    "max_one_head_bound",
    "max_relu_tree",
    "min_one_head",
    "min_relu_tree",
    "max_relu_tree_bound",
    "square",
    "square_bound",
    "beta_for_levels",
    "multiply",
    "multiply_bound",
    "reciprocal_pl",
    "reciprocal_pl_bound",
    "reciprocal_newton",
    "reciprocal_newton_bound",
]


@dataclass(frozen=True)
class Resources:
    """Resources of a construction: softmax heads, layers, largest scale, anchors."""

    heads: int
    layers: int
    max_beta: float
    anchors: int = 0

    def __add__(self, other: Resources) -> Resources:  # sequential composition
        return Resources(self.heads + other.heads, self.layers + other.layers,
                         max(self.max_beta, other.max_beta), self.anchors + other.anchors)


def _relu_maximiser() -> float:
    # maximiser of u/(1+e^u): derivative zero where 1 + e^u - u e^u = 0
    return brentq(lambda u: 1.0 + math.exp(u) - u * math.exp(u), 0.5, 3.0, xtol=1e-15)


RELU_U = _relu_maximiser()  # u* ~ 1.2785: |t sigma(beta t) - ReLU(t)| peaks at |t| = u*/beta
RELU_C = RELU_U / (1.0 + math.exp(RELU_U))


def _check_beta(beta):
    if isinstance(beta, jax.core.Tracer):
        return beta
    if not (np.isfinite(beta) and beta > 0):
        raise ValueError(f"beta: must be a positive finite scale, got {beta}.")
    return float(beta)


# ------------------------------------------------------------------------ ReLU
def relu(t, beta):
    """Attention-ReLU: one head over two keys; ``t sigma(beta t) -> ReLU(t)``.

    Tokens per input: ``(t, 0)`` and ``(0, 0)``; query ``(1, 0)``; ``U = beta I``, so the
    scores are ``(beta t, 0)``; ``V = (1, 0)`` reads values ``(t, 0)``.
    Shapes: any ``t`` -> same shape.  Resources: 1 head, 1 layer.
    """
    beta = _check_beta(beta)
    t = as_float_array(t, "t")
    check_finite(t, "t")
    flat = t.reshape(-1)
    zeros = jnp.zeros_like(flat)
    tokens = jnp.stack([jnp.stack([flat, zeros], -1), jnp.stack([zeros, zeros], -1)], axis=1)
    q = jnp.broadcast_to(jnp.array([[1.0, 0.0]], flat.dtype), (flat.shape[0], 1, 2))
    out = softmax_attention(tokens, beta * jnp.eye(2, dtype=flat.dtype),
                            jnp.array([[1.0, 0.0]], flat.dtype), q)
    return out.reshape(t.shape)


def relu_bound(beta) -> float:
    """``sup_t |relu(t, beta) - ReLU(t)| = c / beta`` (attained at ``t = u*/beta``)."""
    return RELU_C / _check_beta(beta)


def relu_tail_bound(beta, r):
    """``sup_{|t| >= r} |relu(t, beta) - ReLU(t)|``: ``c/beta`` if ``beta r <= u*``, else
    ``r / (1 + e^{beta r})``.

    The error is ``|t| sigma(-beta |t|) = phi(beta |t|) / beta`` with ``phi(u) = u/(1+e^u)``,
    increasing on ``[0, u*]`` and decreasing after, so away from ``0`` it is exponentially
    small.  ``r`` may be an array (elementwise); ``r = 0`` gives :func:`relu_bound`.
    """
    beta = _check_beta(beta)
    r = np.maximum(np.asarray(r, float), 0.0)
    u = beta * r
    with np.errstate(over="ignore"):
        tail = r / (1.0 + np.exp(u))
    return np.where(u <= RELU_U, RELU_C / beta, tail)


# ------------------------------------------------------------- interpolation head
def interpolation_head(y, a: float, b: float, p: int, beta):
    """One head with ``p`` anchors approximating ``clip(y, a, b)``.

    Anchor tokens ``(a_j, a_j^2)``, query ``(y, 1)``, ``U = beta diag(2, -1)`` so the score
    is ``beta (2 a_j y - a_j^2)``; ``V = (1, 0)`` reads ``a_j``.  For a truncated linear map
    ``clip(w^T x + t, a, b)`` pass ``y = w^T x + t``.  Shapes: ``y`` ``(n,)`` -> ``(n,)``.
    Resources: 1 head, 1 layer, ``p`` anchors.
    """
    beta = _check_beta(beta)
    if not (b > a):
        raise ValueError(f"a, b: need a < b, got a={a}, b={b}.")
    if int(p) < 2:
        raise ValueError(f"p: need at least 2 anchors, got {p}.")
    y = as_float_array(y, "y").reshape(-1)
    check_finite(y, "y")
    anchors = jnp.linspace(a, b, int(p), dtype=y.dtype)
    tokens = jnp.stack([anchors, anchors**2], axis=1)
    q = jnp.stack([y, jnp.ones_like(y)], axis=1)
    U = beta * jnp.diag(jnp.array([2.0, -1.0], y.dtype))
    return softmax_attention(tokens, U, jnp.array([[1.0, 0.0]], y.dtype), q)[:, 0]


def interpolation_head_affine(x, w, t: float, a: float, b: float, *, p: int, beta):
    """The interpolation head for ``clip(w^T x + t, a, b)`` on inputs ``x`` in ``R^d``.

    The reference's form for ``d > 1``: anchor tokens ``k_j = (a_j w, a_j t - a_j^2/2,
    a_j)`` in ``R^{d+2}``, query ``(x, 1, 0)``, ``U = 2 beta I``, so the score is
    ``2 beta (a_j (w^T x + t) - a_j^2/2) = beta (2 a_j y - a_j^2)`` with ``y = w^T x + t``,
    the scalar head's score; ``V = e_{d+2}^T`` reads ``a_j``.  The map ``x -> y`` lives in
    the keys, so the bound is :func:`interpolation_bound` for every ``x``.
    Shapes: ``x`` ``(n, d)``, ``w`` ``(d,)`` -> ``(n,)``.  Resources: 1 head, ``p`` anchors.
    """
    beta = _check_beta(beta)
    if not (b > a):
        raise ValueError(f"a, b: need a < b, got a={a}, b={b}.")
    if int(p) < 2:
        raise ValueError(f"p: need at least 2 anchors, got {p}.")
    x = as_float_array(x, "x")
    w = as_float_array(w, "w")
    if w.ndim != 1 or x.ndim != 2 or x.shape[1] != w.shape[0]:
        raise ValueError(f"x, w: expected x of shape (n, d) and w of shape (d,), got "
                         f"{tuple(x.shape)} and {tuple(w.shape)}.")
    check_finite(x, "x")
    check_finite(w, "w")
    if not math.isfinite(t):
        raise ValueError(f"t: the offset must be finite, got {t}.")
    d = w.shape[0]
    anchors = jnp.linspace(a, b, int(p), dtype=x.dtype)
    tokens = jnp.concatenate([anchors[:, None] * w[None], (anchors * t - anchors**2 / 2)[:, None],
                              anchors[:, None]], axis=1)
    q = jnp.concatenate([x, jnp.ones((x.shape[0], 1), x.dtype),
                         jnp.zeros((x.shape[0], 1), x.dtype)], axis=1)
    V = jnp.zeros((1, d + 2), x.dtype).at[0, d + 1].set(1.0)
    return softmax_attention(tokens, 2.0 * beta * jnp.eye(d + 2, dtype=x.dtype), V, q)[:, 0]


def interpolation_bound(a: float, b: float, p: int, beta) -> float:
    """Derived bound ``h + 2 (b - a) q / (1 - q)``, ``h = (b-a)/(p-1)``, ``q = e^{-beta h^2}``."""
    h = (b - a) / (int(p) - 1)
    q = math.exp(-_check_beta(beta) * h * h)
    return h + 2.0 * (b - a) * q / (1.0 - q) if q < 1 else math.inf


# --------------------------------------------------------------------- max / min
def max_one_head(x, beta):
    """One head over ``n`` scores ``beta x_i`` returning ``sum_i softmax(beta x)_i x_i``.

    Tokens ``x_i`` (d = 1), query 1, ``U = beta``, ``V = 1``.  Shapes: ``(B, n) -> (B,)``.
    Resources: 1 head, 1 layer.  For the minimum use ``-max_one_head(-x, beta)``.
    """
    beta = _check_beta(beta)
    x = as_float_array(x, "x")
    if x.ndim != 2:
        raise ValueError(f"x: expected shape (B, n), got {tuple(x.shape)}.")
    check_finite(x, "x")
    q = jnp.ones((x.shape[0], 1, 1), x.dtype)
    return softmax_attention(x[..., None], jnp.full((1, 1), beta, x.dtype),
                             jnp.ones((1, 1), x.dtype), q)[:, 0, 0]


def min_one_head(x, beta):
    """Minimum over ``n`` inputs with one head: ``-max_one_head(-x, beta)``.

    ``0 <= out - min <= log(n)/beta``.  Shapes: ``(B, n) -> (B,)``.
    """
    return -max_one_head(-as_float_array(x, "x"), beta)


def min_relu_tree(x, beta):
    """Minimum by the ReLU tree: ``min(a, b) = a - ReLU(a - b)`` (``-max(-x)``)."""
    out, res = max_relu_tree(-as_float_array(x, "x"), beta)
    return -out, res


def max_one_head_bound(n: int, beta) -> float:
    """``max - out <= log(n) / beta``."""
    return math.log(int(n)) / _check_beta(beta)


def max_relu_tree(x, beta):
    """``max`` over ``n`` inputs by a tree of ``max(a, b) = b + ReLU(a - b)`` attention-ReLUs.

    Shapes: ``(B, n) -> (B,)``.  Returns ``(out, Resources)`` with ``n - 1`` heads and
    ``ceil(log2 n)`` layers.
    """
    x = as_float_array(x, "x")
    if x.ndim != 2:
        raise ValueError(f"x: expected shape (B, n), got {tuple(x.shape)}.")
    cols = [x[:, i] for i in range(x.shape[1])]
    heads = layers = 0
    while len(cols) > 1:
        pairs = len(cols) // 2
        left = jnp.stack(cols[0:2 * pairs:2], 1)
        right = jnp.stack(cols[1:2 * pairs:2], 1)
        merged = right + relu(left - right, beta)  # one layer of parallel heads
        nxt = [merged[:, i] for i in range(pairs)]
        if len(cols) % 2:
            nxt.append(cols[-1])
        cols = nxt
        heads += pairs
        layers += 1
    return cols[0], Resources(heads, layers, float(beta))


def max_relu_tree_bound(n: int, beta) -> float:
    """``ceil(log2 n) c / beta``: each level adds ``<= c/beta``; max is 1-Lipschitz."""
    return math.ceil(math.log2(int(n))) * relu_bound(beta)


# -------------------------------------------------------- Yarotsky multiplication
def _hat(x, beta):
    r = relu(jnp.stack([x, x - 0.5, x - 1.0]), beta)  # three heads in parallel
    return 2.0 * r[0] - 4.0 * r[1] + 2.0 * r[2]


def beta_for_levels(m: int, factor: float = 10.0) -> float:
    """Scale making the attention error ``8c/beta`` a ``1/factor`` of ``4^{-(m+1)}``."""
    return factor * 8.0 * RELU_C * 4.0 ** (int(m) + 1)


def square(x, m: int, beta=None):
    """Yarotsky's ``x^2 ~ x - sum_{s=1}^m g_s(x) / 4^s`` on ``[0, 1]`` with attention hats.

    ``beta`` defaults to :func:`beta_for_levels` ``(m)``.  Shapes: any -> same.
    Returns ``(out, Resources)``: ``3m`` heads, ``m`` layers.
    """
    m = int(m)
    if m < 0:
        raise ValueError(f"m: number of levels must be >= 0, got {m}.")
    beta = beta_for_levels(m) if beta is None else _check_beta(beta)
    x = as_float_array(x, "x")
    check_finite(x, "x")
    g = x
    out = x
    for s in range(1, m + 1):
        g = _hat(g, beta)
        out = out - g / 4.0**s
    return out, Resources(3 * m, m, beta)


def _levels(m) -> int:
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < 0:
        raise ValueError(f"m: the number of levels must be an integer >= 0, got {m!r}.")
    return int(m)


def square_bound(m: int, beta=None) -> float:
    """``4^{-(m+1)} + 8 c / beta`` on ``[0, 1]``."""
    m = _levels(m)
    beta = beta_for_levels(m) if beta is None else beta
    return 4.0 ** (-(int(m) + 1)) + 8.0 * RELU_C / _check_beta(beta)


def multiply(x, y, m: int, beta=None):
    """``x y = 2 sq((x+y)/2) - sq(x)/2 - sq(y)/2`` for ``x, y`` in ``[0, 1]``.

    Returns ``(out, Resources)``: three squarings in parallel (``9m`` heads, ``m`` layers).
    """
    _levels(m)
    x = as_float_array(x, "x")
    y = as_float_array(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x, y: shapes must match, got {tuple(x.shape)} and {tuple(y.shape)}.")
    sq, res = square(jnp.stack([(x + y) / 2.0, x, y]), m, beta)
    return 2.0 * sq[0] - 0.5 * sq[1] - 0.5 * sq[2], Resources(3 * res.heads, res.layers,
                                                             res.max_beta)


def multiply_bound(m: int, beta=None) -> float:
    """``3 x`` :func:`square_bound` (coefficients 2 + 1/2 + 1/2)."""
    return 3.0 * square_bound(m, beta)


# -------------------------------------------------------------------- reciprocal
def _pl_coefficients(a: float, n: int):
    knots = np.linspace(a, 1.0, int(n) + 1)
    vals = 1.0 / knots
    slopes = np.diff(vals) / np.diff(knots)
    coef = np.concatenate([[slopes[0]], np.diff(slopes)])  # ReLU(x - knot_i) weights
    return knots, vals, coef


def reciprocal_pl(x, a: float, n: int, beta):
    """``1/x`` on ``[a, 1]``: ``1/a + sum_i c_i ReLU(x - x_i)`` with ``n`` attention-ReLUs.

    Shapes: any -> same.  Returns ``(out, Resources)``: ``n`` heads, 1 layer.
    """
    if not (0 < a < 1):
        raise ValueError(f"a: need 0 < a < 1, got {a}.")
    if int(n) < 1:
        raise ValueError(f"n: need at least one piece, got {n}.")
    x = as_float_array(x, "x")
    knots, vals, coef = _pl_coefficients(a, n)
    r = relu(x[None] - jnp.asarray(knots[:-1]).reshape((-1,) + (1,) * x.ndim), beta)
    out = vals[0] + jnp.tensordot(jnp.asarray(coef), r, axes=(0, 0))
    return out, Resources(int(n), 1, float(beta))


def reciprocal_pl_bound(a: float, n: int, beta) -> float:
    """``(1-a)^2 / (4 a^3 n^2) + (sum_i |c_i|) c / beta``."""
    _, _, coef = _pl_coefficients(a, n)
    return (1 - a) ** 2 / (4 * a**3 * int(n) ** 2) + float(np.abs(coef).sum()) * relu_bound(beta)


def reciprocal_newton(x, a: float, steps: int, m: int, beta=None):
    """Newton ``y <- y (2 - x y)`` from ``y_0 = 1`` with attention multiplications.

    Products are rescaled into ``[0, 1]``: ``x y = (1/a) mul(x, a y)`` and
    ``y (2 - p) = (2/a) mul(a y, (2 - p)/2)``.  Returns ``(out, Resources)``.
    """
    if not (0 < a < 1):
        raise ValueError(f"a: need 0 < a < 1, got {a}.")
    x = as_float_array(x, "x")
    y = jnp.ones_like(x)
    res = Resources(0, 0, 0.0)
    for _ in range(int(steps)):
        p, r1 = multiply(x, jnp.clip(a * y, 0.0, 1.0), m, beta)
        p = p / a
        y2, r2 = multiply(jnp.clip(a * y, 0.0, 1.0), jnp.clip((2.0 - p) / 2.0, 0.0, 1.0), m, beta)
        y = y2 * 2.0 / a
        res = res + r1 + r2
    return y, res


def reciprocal_newton_bound(a: float, steps: int, m: int, beta=None) -> float:
    """``R_k / a`` with ``R_0 = 1 - a`` and ``R_{k+1} = R_k^2 + delta``.

    One step computes ``p = x y + e1`` with ``|e1| <= eps/a`` and ``y' = y (2 - p) + e2``
    with ``|e2| <= 2 eps/a`` (``eps`` the :func:`multiply_bound`), so
    ``y' = y(2 - x y) + delta`` with ``|delta| <= |y| eps/a + 2 eps/a <= eps/a^2 + 2 eps/a``
    and ``r' = r^2 - x delta`` with ``x <= 1``.
    """
    eps = multiply_bound(m, beta)
    delta = eps / a**2 + 2.0 * eps / a
    R = 1.0 - a
    for _ in range(int(steps)):
        R = R * R + delta
    return R / a


def max_one_head_gap_bound(x, beta):
    """Per-input gap bound of the one-head max: ``(n - 1) range e^{-beta delta}``.

    ``x`` ``(B, n)``; ``range = max - min`` and ``delta`` the top-2 gap of each row.  Each
    non-maximal ``i`` has weight ``softmax_i <= e^{-beta (max - x_i)} <= e^{-beta delta}``
    and contributes ``(max - x_i) softmax_i <= range e^{-beta delta}`` to
    ``max - out = sum_i softmax_i (max - x_i)``.  Returns ``(B,)``.
    """
    beta = _check_beta(beta)
    x = np.asarray(x, float)
    if x.ndim != 2 or x.shape[1] < 2:
        raise ValueError(f"x: expected shape (B, n) with n >= 2, got {x.shape}.")
    top = np.sort(x, axis=1)
    delta = top[:, -1] - top[:, -2]
    rng = top[:, -1] - top[:, 0]
    return (x.shape[1] - 1) * rng * np.exp(-beta * delta)


# ------------------------------------------------------------ ReLU network compiler
@dataclass(frozen=True)
class NetworkResources:
    """Resources of a compiled ReLU network: one attention-ReLU head per hidden unit."""

    heads_per_layer: tuple
    layers: int
    max_beta: float
    betas: tuple
    anchors: int = 0

    @property
    def heads(self) -> int:
        return int(sum(self.heads_per_layer))


# inputs of every scale, both signs, and above 6 (where relu6 and other clipped ReLUs part
# from ReLU): an activation is taken for ReLU only if it equals max(x, 0) on all of them
_PROBE = np.array([-1e6, -1e3, -10.0, -2.0, -0.5, -1e-3, 0.0, 1e-3, 0.25, 3.0, 5.999, 6.0,
                   6.5, 10.0, 1e3, 1e6])


def _probe():
    """:data:`_PROBE` as the default float type stores it (1e-3 is not exact in float32)."""
    return jnp.asarray(_PROBE), np.asarray(jnp.asarray(_PROBE), float)


def _is_relu(f) -> bool:
    try:
        x, xs = _probe()
        return f is jax.nn.relu or bool(np.array_equal(np.asarray(f(x), float),
                                                       np.maximum(xs, 0.0)))
    except Exception:  # noqa: BLE001 - a non-array activation is simply not ReLU
        return False


def _layers_from(layers):
    """``[(W, b), ...]`` as float64 numpy arrays, from a list or an Equinox MLP."""
    if hasattr(layers, "layers") and hasattr(layers, "activation"):  # equinox.nn.MLP
        mlp = layers
        if not _is_relu(mlp.activation):
            raise ValueError("layers: the MLP's activation is not ReLU (tested on inputs from "
                             "-1e6 to 1e6, above 6 included: relu6 and clipped ReLUs are not "
                             "ReLU); the compiler emulates ReLU only (build it with "
                             "activation=jax.nn.relu).")
        final = getattr(mlp, "final_activation", None)
        x, xs = _probe()
        if final is not None and not np.array_equal(np.asarray(final(x), float), xs):
            raise ValueError("layers: the MLP's final_activation must be the identity "
                             "(the compiled network has no activation after the last layer).")
        out = []
        for i, lin in enumerate(mlp.layers):
            if np.iscomplexobj(lin.weight) or (lin.bias is not None
                                               and np.iscomplexobj(lin.bias)):
                raise ValueError(f"layers: the MLP's layer {i} has complex weights; the "
                                 "compiler takes real networks.")
            W = np.asarray(lin.weight, float)
            if W.ndim == 1:  # 'scalar' in/out sizes
                W = W.reshape(-1, 1) if lin.in_features == "scalar" else W.reshape(1, -1)
            b = np.zeros(W.shape[0]) if lin.bias is None else np.asarray(lin.bias, float)
            out.append((W, b.reshape(-1)))
        return out
    if isinstance(layers, (str, bytes)) or not hasattr(layers, "__len__") or len(layers) == 0:
        raise ValueError("layers: pass a non-empty list of (W, b) pairs (W of shape "
                         "(out, in), b of shape (out,)) or an equinox.nn.MLP.")
    out = []
    prev = None
    for i, wb in enumerate(layers):
        if len(wb) != 2:
            raise ValueError(f"layers[{i}]: expected a pair (W, b), got {len(wb)} items.")
        if np.iscomplexobj(wb[0]) or np.iscomplexobj(wb[1]):
            raise ValueError(f"layers[{i}]: W and b must be real, got complex values.")
        W, b = np.asarray(wb[0], float), np.asarray(wb[1], float)
        if W.ndim != 2:
            raise ValueError(f"layers[{i}]: W must be 2-D (out, in), got shape {W.shape}.")
        if b.shape != (W.shape[0],):
            raise ValueError(f"layers[{i}]: b must have shape ({W.shape[0]},) to match W "
                             f"{W.shape}, got {b.shape}.")
        if prev is not None and W.shape[1] != prev:
            raise ValueError(f"layers[{i}]: W has {W.shape[1]} inputs but layer {i - 1} has "
                             f"{prev} outputs; W must have shape (out, {prev}).")
        if not (np.all(np.isfinite(W)) and np.all(np.isfinite(b))):
            raise ValueError(f"layers[{i}]: W and b must be finite.")
        out.append((W, b))
        prev = W.shape[0]
    return out


def _box(lo, hi, d_in):
    lo = np.broadcast_to(np.asarray(lo, float), (d_in,)) if np.ndim(lo) == 0 else \
        np.asarray(lo, float)
    hi = np.broadcast_to(np.asarray(hi, float), (d_in,)) if np.ndim(hi) == 0 else \
        np.asarray(hi, float)
    for name, v in (("lo", lo), ("hi", hi)):
        if v.shape != (d_in,):
            raise ValueError(f"{name}: expected a scalar or shape ({d_in},) for the network's "
                             f"{d_in} inputs, got {v.shape}.")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name}: the box must be bounded (finite lo and hi).")
    if not np.all(lo < hi):
        raise ValueError(f"lo, hi: need lo < hi in every coordinate (a non-empty box), got "
                         f"lo={lo.tolist()}, hi={hi.tolist()}.")
    return lo.copy(), hi.copy()


def _roundoff_bound(layers, lo, hi, u: float):
    """A first-order bound, per output, on the floating-point round-off of evaluating the
    compiled network on the box (unit round-off ``u``: ``jnp.finfo(dtype).eps``).  Each
    layer's ``W h + b`` errs by at most ``gamma_{n+1} (|W| |h| + |b|)`` (Higham's bound for a
    dot product of length ``n``, ``gamma_k = k u / (1 - k u)``), the attention ReLU adds at
    most ``4 u`` times its input's magnitude (softmax of two scores, one product), ReLU is
    1-Lipschitz, and errors propagate through ``|W|``; magnitudes come from interval
    arithmetic on the box."""
    M = np.maximum(np.abs(lo), np.abs(hi))                    # |h_0| bound per input
    e = np.zeros_like(M)
    for i, (W, b) in enumerate(layers):
        n = W.shape[1]
        gamma = (n + 1) * u / (1 - (n + 1) * u)
        A = np.abs(W) @ M + np.abs(b)                         # |W h + b| bound
        e = np.abs(W) @ e + gamma * A
        if i < len(layers) - 1:                               # a hidden layer: ReLU
            e = e + 4 * u * A
            M = A
    return e


def relu_network_bound(layers, lo, hi, betas):
    """Certified sup error of the attention emulation of a ReLU network on a box, per output.

    ``layers`` ``[(W_l, b_l)]`` (ReLU after every layer but the last), ``betas`` one scale
    per hidden layer.  Interval arithmetic gives ``z_l in [zlo, zhi]`` for the exact
    pre-activations; by induction ``|h^_l - h_l| <= E_l`` componentwise, with ``E_0 = 0``,
    ``D_l = |W_l| E_{l-1}`` (so ``|z^_l - z_l| <= D_l`` and ``z^_l in [zlo - D, zhi + D]``),
    ``E_l = min(D_l, ReLU(zhi + D_l) - ReLU(zlo - D_l)) + relu_tail_bound(beta_l, r_l)`` with
    ``r_l`` the distance of ``[zlo - D, zhi + D]`` from 0 (ReLU is 1-Lipschitz and maps that
    interval into ``[ReLU(zlo - D), ReLU(zhi + D)]``).  Returns ``|W_L| E_{L-1}``, shape
    ``(d_out,)``; docs/topics/approx.md#compile-your-own-relu-network.
    """
    layers = _layers_from(layers)
    lo, hi = _box(lo, hi, layers[0][0].shape[1])
    betas = np.broadcast_to(np.asarray(betas, float), (len(layers) - 1,))
    hlo, hhi = lo, hi
    E = np.zeros_like(lo)
    for l, (W, b) in enumerate(layers):
        Wa = np.abs(W)
        mid = W @ ((hlo + hhi) / 2.0) + b
        rad = Wa @ ((hhi - hlo) / 2.0)
        zlo, zhi = mid - rad, mid + rad
        D = Wa @ E
        if l == len(layers) - 1:
            return D
        elo, ehi = zlo - D, zhi + D
        dist = np.maximum(np.maximum(elo, -ehi), 0.0)
        E = np.minimum(D, np.maximum(ehi, 0.0) - np.maximum(elo, 0.0)) + \
            relu_tail_bound(betas[l], dist)
        hlo, hhi = np.maximum(zlo, 0.0), np.maximum(zhi, 0.0)
    raise AssertionError("unreachable")


class CompiledNetwork:
    """A ReLU network compiled to softmax attention: one :func:`relu` head per hidden unit.

    Call it on ``(n, d_in)`` inputs (``(n, d_out)`` out).  Attributes: ``bound`` (certified
    sup error over the box, max over outputs), ``output_bounds`` (per output), ``resources``
    (:class:`NetworkResources`), ``betas`` (per hidden layer), ``layers``, ``lo``, ``hi``,
    ``eps``.  :meth:`reference` evaluates the ReLU network itself.  The bound holds in exact
    arithmetic on the box; enable float64 (``gmtheory.enable_x64()``) when it is small.
    """

    def __init__(self, layers, lo, hi, betas, eps=None):
        self.layers = tuple(layers)
        self.lo, self.hi = lo, hi
        self.betas = tuple(float(b) for b in betas)
        self.eps = eps
        # the emulation's bound (exact arithmetic) plus the round-off of the float type in
        # use (_roundoff_bound), so that the certified bound holds for the computed outputs
        self.dtype = jnp.zeros(()).dtype
        self.roundoff = _roundoff_bound(self.layers, lo, hi, float(jnp.finfo(self.dtype).eps))
        self.output_bounds = relu_network_bound(self.layers, lo, hi, self.betas) + self.roundoff
        self.bound = float(np.max(self.output_bounds))
        widths = tuple(int(W.shape[0]) for W, _ in self.layers[:-1])
        self.resources = NetworkResources(widths, len(widths),
                                          max(self.betas, default=0.0), self.betas)

    @property
    def d_in(self) -> int:
        return int(self.layers[0][0].shape[1])

    def _inputs(self, x):
        x = as_float_array(x, "x")
        if x.ndim != 2 or x.shape[1] != self.d_in:
            raise ValueError(f"x: expected shape (n, {self.d_in}), got {tuple(x.shape)}.")
        check_finite(x, "x")
        if not isinstance(x, jax.core.Tracer):
            xs = np.asarray(x)             # the box as stored in the input's float type
            lo, hi = self.lo.astype(xs.dtype), self.hi.astype(xs.dtype)
            out = int(np.sum(np.any((xs < lo) | (xs > hi), axis=1)))
            if out:
                warnings.warn(f"x: {out} of {xs.shape[0]} point(s) lie outside the box lo="
                              f"{self.lo.tolist()}, hi={self.hi.tolist()}; the certified bound "
                              "holds only inside it.", stacklevel=3)
        return x

    def __call__(self, x):
        h = self._inputs(x)
        # full-precision products: the round-off bound assumes the float type's own unit
        # round-off, not TF32's (the default of float32 matmuls on recent GPUs)
        with jax.default_matmul_precision("highest"):
            for (W, b), beta in zip(self.layers[:-1], self.betas, strict=True):
                h = relu(h @ jnp.asarray(W, h.dtype).T + jnp.asarray(b, h.dtype), beta)
            W, b = self.layers[-1]
            return h @ jnp.asarray(W, h.dtype).T + jnp.asarray(b, h.dtype)

    def reference(self, x):
        """The exact ReLU network on ``x`` ``(n, d_in)``."""
        h = self._inputs(x)
        for W, b in self.layers[:-1]:
            h = jax.nn.relu(h @ jnp.asarray(W, h.dtype).T + jnp.asarray(b, h.dtype))
        W, b = self.layers[-1]
        return h @ jnp.asarray(W, h.dtype).T + jnp.asarray(b, h.dtype)

    def __repr__(self) -> str:
        r = self.resources
        return (f"CompiledNetwork(bound={self.bound:.4g}, heads={r.heads_per_layer}, "
                f"layers={r.layers}, max_beta={r.max_beta:.4g})")


_BETA_RANGE = (1e-6, 1e15)


def _smallest_beta(f, eps, lo, hi, rtol=1e-9):
    """Smallest ``beta`` in ``[lo, hi]`` with ``f(beta) <= eps`` (``f`` non-increasing)."""
    if f(lo) <= eps:
        return lo
    a, b = math.log(lo), math.log(hi)
    while b - a > rtol:
        m = 0.5 * (a + b)
        if f(math.exp(m)) <= eps:
            b = m
        else:
            a = m
    return math.exp(b)


def compile_relu_network(layers, lo, hi, *, eps=None, beta=None) -> CompiledNetwork:
    """Compile a ReLU network to softmax attention with a certified sup-error bound on a box.

    ``layers``: a list of ``(W, b)`` (``W`` ``(out, in)``, ``y = W h + b``; ReLU between
    layers, none after the last) or an ``equinox.nn.MLP`` with ``jax.nn.relu`` activation
    and identity final activation.  ``lo``, ``hi``: the box (scalars or ``(d_in,)``).
    Pass exactly one of ``eps`` (the smallest common ``beta`` with ``bound <= eps`` is
    found by bisection; since the bound is non-increasing in every layer's ``beta``, any
    per-layer choice meeting ``eps`` has a largest scale at least this one, so per-layer
    scales cannot lower the largest ``beta``) or ``beta`` (a scale, or one per hidden layer;
    the bound is reported).  Each hidden unit becomes one :func:`relu` head; the bound is
    :func:`relu_network_bound`.  Theory: docs/topics/approx.md#compile-your-own-relu-network.
    """
    layers = _layers_from(layers)
    lo, hi = _box(lo, hi, layers[0][0].shape[1])
    n_hidden = len(layers) - 1
    if (eps is None) == (beta is None):
        raise ValueError("eps, beta: pass exactly one, eps (a target sup error; the scales are "
                         "chosen) or beta (the scale; the bound is reported).")
    if beta is not None:
        betas = np.broadcast_to(np.asarray(beta, float), (n_hidden,)) if np.ndim(beta) == 0 \
            else np.asarray(beta, float)
        if betas.shape != (n_hidden,):
            raise ValueError(f"beta: expected a scalar or one scale per hidden layer "
                             f"({n_hidden}), got shape {betas.shape}.")
        for v in betas:
            _check_beta(float(v))
        return CompiledNetwork(layers, lo, hi, betas.tolist())
    if isinstance(eps, bool | np.bool_ | str | bytes) or np.ndim(eps) != 0 or \
            np.asarray(eps).dtype.kind not in "iuf":
        raise ValueError(f"eps: expected a positive number (the target sup error), got "
                         f"{eps!r} of type {type(eps).__name__}.")
    if not (np.isfinite(eps) and eps > 0):
        raise ValueError(f"eps: must be a positive finite error target, got {eps}.")
    eps = float(eps)
    dtype = jnp.zeros(()).dtype
    r = float(np.max(_roundoff_bound(layers, lo, hi, float(jnp.finfo(dtype).eps))))
    if r >= eps:
        raise ValueError(f"eps: {eps:g} is below what {dtype} can certify on this box (its "
                         f"round-off alone is up to {r:.2g}); enable float64 with "
                         "gmtheory.enable_x64(), or pass a larger eps.")
    if n_hidden == 0:
        return CompiledNetwork(layers, lo, hi, [], eps)

    def total(bs):
        return float(np.max(relu_network_bound(layers, lo, hi, bs))) + r

    if total([_BETA_RANGE[1]] * n_hidden) > eps:
        raise ValueError(f"eps: {eps:g} is below what beta <= {_BETA_RANGE[1]:g} certifies "
                         f"({total([_BETA_RANGE[1]] * n_hidden):.3g}); pass a larger eps.")
    common = _smallest_beta(lambda b: total([b] * n_hidden), eps, *_BETA_RANGE)
    return CompiledNetwork(layers, lo, hi, [common] * n_hidden, eps)


def max_network(n: int):
    """``max`` over ``n`` inputs as a plain ReLU network ``[(W, b)]`` for the compiler.

    Each tree level maps pairs ``(a, b)`` to ``ReLU(a - b) + ReLU(b) - ReLU(-b)`` (the
    identity ``b = ReLU(b) - ReLU(-b)`` carries ``b`` through a ReLU layer) and an odd
    leftover ``c`` to ``ReLU(c) - ReLU(-c)``; ``ceil(log2 n)`` hidden layers.  Compile it with
    :func:`compile_relu_network` for a certified bound on any box (looser than
    :func:`max_relu_tree_bound`: the bound does not know the carried identity is exact).
    """
    n = int(n)
    if n < 2:
        raise ValueError(f"n: need at least 2 inputs, got {n}.")
    layers, k, into = [], n, np.eye(n)  # ``into``: current values as a map of the layer input
    while k > 1:
        rows, merge = [], []
        for i in range(0, k - 1, 2):
            a, b = into[i], into[i + 1]
            rows += [a - b, b, -b]
            merge.append([1.0, 1.0, -1.0])
        if k % 2:
            rows += [into[k - 1], -into[k - 1]]
            merge.append([1.0, -1.0])
        W = np.array(rows)
        layers.append((W, np.zeros(W.shape[0])))
        M = np.zeros((len(merge), W.shape[0]))
        col = 0
        for j, m in enumerate(merge):
            M[j, col:col + len(m)] = m
            col += len(m)
        into, k = M, len(merge)
    layers.append((into, np.zeros(1)))
    return layers
