"""Composition rules for the ReLU -> softmax constructions: one certified bound per expression.

Theory: docs/topics/approx.md#composition-rules.  :func:`variables` makes the coordinates of
a box; the rules below combine expressions, and every expression ``f`` carries

* ``f(x)``: its softmax-attention emulation on ``(n, d)`` inputs (``(n,)`` out), built from
  the heads of :mod:`gmtheory.approx` only;
* ``f.exact(x)``: the exact target (the same expression with exact ReLU, max, products
  and reciprocals);
* ``f.range``: an interval ``[L, U]`` holding the exact value on the box (interval
  arithmetic) and ``f.bound``: a certified ``sup |f(x) - f.exact(x)|`` over the box;
* ``f.resources``: :class:`gmtheory.approx.Resources` (heads and anchors of the distinct
  nodes, layers on the longest path, the largest ``beta``).

With ``e`` the bound and ``[L, U]`` the range of an argument, its emulation lies in
``[L - e, U + e]``.  Each rule maps that interval onto the domain of a construction and adds
the construction's bound to the propagated error (proofs in the docs page):

* affine ``c + sum a_i f_i``: exact arithmetic, ``sum |a_i| e_i``;
* :func:`multiply` ``f g`` (Yarotsky): ``u = (f^ - A)/S_f`` in ``[0, 1]`` with ``A = L_f - e_f``,
  ``S_f = U_f - L_f + 2 e_f`` (likewise ``v``), ``f^ g^ = AB + A S_g v + B S_f u + S_f S_g uv``:
  ``S_f S_g mu + e_f max|g^| + e_g max|f|``, ``mu`` the :func:`~gmtheory.approx.multiply_bound`;
* :func:`square` ``f^2``: ``S^2 sigma + e (2 max|f| + e)``;
* :func:`reciprocal` ``1/f`` (``[L - e, U + e]`` must exclude 0), ``u = f^/s`` in ``[a, 1]``
  with ``s = U + e``, ``a = (L - e)/s``: ``rho/s + e / (L (L - e))``, ``rho`` the bound of
  the piecewise-linear or the Newton form on ``[a, 1]``;
* :func:`maximum`, :func:`minimum` over ``k`` arguments (max is 1-Lipschitz in the sup
  norm): ``max_i e_i`` plus ``log(k)/beta`` (one head) or ``ceil(log2 k) c/beta`` (tree);
* :func:`relu`: ``e`` plus the two-key head's tail bound at the distance of
  ``[L - e, U + e]`` from 0; :func:`clip` (the interpolation head): ``e`` plus its bound;
* :func:`network`: a ReLU network on expressions, compiled by
  :func:`gmtheory.approx.compile_relu_network` on the box ``[L - e, U + e]``, plus
  ``|W_L| ... |W_1| e`` (ReLU is 1-Lipschitz).
"""

from __future__ import annotations

import math
import numbers

import jax.numpy as jnp
import numpy as np

from . import approx as A
from ._validation import as_float_array, check_finite

__all__ = ["Expr", "variables", "constant", "affine", "multiply", "square", "reciprocal",
           "maximum", "minimum", "relu", "clip", "network", "LEVELS", "PIECES", "BETA"]

LEVELS = 8      # Yarotsky levels of a product written ``f * g``
PIECES = 64     # pieces of ``1/f`` written ``c / f``
BETA = 1e6      # scale of the heads of ``1/f``, max/min and ReLU when none is given


class _Box:
    def __init__(self, lo, hi):
        lo = np.atleast_1d(np.asarray(lo, float))
        hi = np.atleast_1d(np.asarray(hi, float))
        if lo.ndim != 1 or lo.shape != hi.shape:
            raise ValueError(f"lo, hi: expected two vectors of one length d, got shapes "
                             f"{lo.shape} and {hi.shape}.")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ValueError("lo, hi: the box must be bounded (finite lo and hi).")
        if not np.all(lo < hi):
            raise ValueError(f"lo, hi: need lo < hi in every coordinate (a non-empty box), got "
                             f"lo={lo.tolist()}, hi={hi.tolist()}.")
        self.lo, self.hi = lo, hi

    @property
    def d(self) -> int:
        return int(self.lo.size)


class Expr:
    """An expression on a box, emulated by softmax-attention heads with a certified bound.

    Build it from :func:`variables` with ``+``, ``-``, ``*`` (a number, or an expression:
    :func:`multiply` with :data:`LEVELS` levels), ``/`` (by a number, or ``c / f``:
    :func:`reciprocal` with :data:`PIECES` pieces) and the rules of this module.
    Attributes: ``range`` ``(L, U)``, ``bound``, ``resources``; ``f(x)`` and ``f.exact(x)``
    on ``(n, d)`` inputs.  The bound holds in exact arithmetic for ``x`` in the box.
    """

    def __init__(self, box, kids, emulate, exact, *, lo, hi, err, heads=0, layers=0,
                 beta=0.0, anchors=0, label=""):
        self._box, self._kids = box, tuple(kids)
        self._emulate, self._exact = emulate, exact
        self.range = (float(lo), float(hi))
        self.bound = float(err)
        self._own = A.Resources(int(heads), int(layers), float(beta), int(anchors))
        self.label = label

    # -- evaluation ---------------------------------------------------------------------
    def _inputs(self, x):
        x = as_float_array(x, "x")
        if x.ndim != 2 or x.shape[1] != self._box.d:
            raise ValueError(f"x: expected shape (n, {self._box.d}), got {tuple(x.shape)}.")
        check_finite(x, "x")
        return x

    def _walk(self, x, emulated: bool, memo):
        key = id(self)
        if key not in memo:
            vals = [k._walk(x, emulated, memo) for k in self._kids]
            memo[key] = (self._emulate if emulated else self._exact)(vals, x)
        return memo[key]

    def __call__(self, x):
        return self._walk(self._inputs(x), True, {})

    def exact(self, x):
        """The exact target on ``x`` ``(n, d)``."""
        return self._walk(self._inputs(x), False, {})

    # -- resources ----------------------------------------------------------------------
    def _nodes(self):
        seen, order, stack = set(), [], [self]
        while stack:
            n = stack.pop()
            if id(n) not in seen:
                seen.add(id(n))
                order.append(n)
                stack.extend(n._kids)
        return order

    def _depth(self, memo):
        if id(self) not in memo:
            memo[id(self)] = self._own.layers + max((k._depth(memo) for k in self._kids),
                                                    default=0)
        return memo[id(self)]

    @property
    def resources(self) -> A.Resources:
        """Heads and anchors of the distinct nodes, layers on the longest path, largest beta."""
        nodes = self._nodes()
        return A.Resources(sum(n._own.heads for n in nodes), self._depth({}),
                           max(n._own.max_beta for n in nodes),
                           sum(n._own.anchors for n in nodes))

    @property
    def emulated_range(self):
        """``[L - e, U + e]``: an interval holding the emulated value on the box."""
        return self.range[0] - self.bound, self.range[1] + self.bound

    def __repr__(self) -> str:
        r = self.resources
        return (f"Expr({self.label}: range=[{self.range[0]:.4g}, {self.range[1]:.4g}], "
                f"bound={self.bound:.4g}, heads={r.heads}, layers={r.layers}, "
                f"max_beta={r.max_beta:.4g})")

    # -- operators ----------------------------------------------------------------------
    def __add__(self, other):
        return affine(((1.0, self), (1.0, other)))

    __radd__ = __add__

    def __sub__(self, other):
        return affine(((1.0, self), (-1.0, other)))

    def __rsub__(self, other):
        return affine(((-1.0, self), (1.0, other)))

    def __neg__(self):
        return affine(((-1.0, self),))

    def __mul__(self, other):
        if isinstance(other, Expr):
            return square(self) if other is self else multiply(self, other)
        return affine(((_number(other, "other"), self),))

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, Expr):
            return multiply(self, reciprocal(other))
        c = _number(other, "other")
        if c == 0:
            raise ZeroDivisionError("other: division of an expression by 0.")
        return affine(((1.0 / c, self),))

    def __rtruediv__(self, other):
        return affine(((_number(other, "other"), reciprocal(self)),))


def _number(c, name):
    if isinstance(c, Expr) or not isinstance(c, numbers.Real) or not math.isfinite(c):
        raise TypeError(f"{name}: expected a finite real number or an Expr, got {c!r}.")
    return float(c)


def _same_box(exprs, name):
    boxes = {id(e._box) for e in exprs}
    if len(boxes) != 1:
        raise ValueError(f"{name}: the expressions live on different boxes; build every "
                         "variable with one call to variables(lo, hi).")
    return exprs[0]._box


def _expr(f, name):
    if not isinstance(f, Expr):
        raise TypeError(f"{name}: expected an Expr (from variables(lo, hi)), got {type(f)}.")
    return f


def _mag(lo, hi):
    return max(abs(lo), abs(hi))


def variables(lo, hi):
    """The ``d`` coordinates of the box ``[lo, hi]`` as exact expressions (bound 0)."""
    box = _Box(lo, hi)
    return tuple(
        Expr(box, (), (lambda _v, x, i=i: x[:, i]), (lambda _v, x, i=i: x[:, i]),
             lo=box.lo[i], hi=box.hi[i], err=0.0, label=f"x{i}")
        for i in range(box.d))


def constant(c, like: Expr) -> Expr:
    """The number ``c`` on the box of ``like`` (bound 0)."""
    c = _number(c, "c")
    return Expr(_expr(like, "like")._box, (), lambda _v, x: jnp.full(x.shape[:1], c, x.dtype),
                lambda _v, x: jnp.full(x.shape[:1], c, x.dtype), lo=c, hi=c, err=0.0,
                label=f"{c:g}")


def affine(terms, c0: float = 0.0) -> Expr:
    """``c0 + sum_i a_i f_i`` for ``terms`` ``[(a_i, f_i)]``; a number ``f_i`` joins ``c0``.

    Exact arithmetic on the emulations: bound ``sum |a_i| e_i``, no heads.
    """
    c0 = _number(c0, "c0")
    coefs, kids = [], []
    for a, f in terms:
        a = _number(a, "terms")
        if isinstance(f, Expr):
            coefs.append(a)
            kids.append(f)
        else:
            c0 += a * _number(f, "terms")
    if not kids:
        raise ValueError("terms: need at least one Expr.")
    box = _same_box(kids, "terms")
    lo = c0 + sum(min(a * f.range[0], a * f.range[1]) for a, f in zip(coefs, kids, strict=True))
    hi = c0 + sum(max(a * f.range[0], a * f.range[1]) for a, f in zip(coefs, kids, strict=True))
    err = sum(abs(a) * f.bound for a, f in zip(coefs, kids, strict=True))

    def comb(vals, _x):
        out = c0 + coefs[0] * vals[0]
        for a, v in zip(coefs[1:], vals[1:], strict=True):
            out = out + a * v
        return out

    return Expr(box, kids, comb, comb, lo=lo, hi=hi, err=err, label="affine")


def _unit(f):
    """``(A, S)`` mapping the emulated range of ``f`` onto ``[0, 1]``: ``u = (f^ - A)/S``."""
    lo, hi = f.emulated_range
    return lo, (hi - lo) if hi > lo else 1.0


def multiply(f: Expr, g: Expr, m: int = LEVELS, beta=None) -> Expr:
    """``f g`` by Yarotsky's product on ``[0, 1]^2`` (:func:`gmtheory.approx.multiply`,
    ``9m`` heads, ``m`` layers) after mapping each emulated range onto ``[0, 1]``.

    Bound ``S_f S_g mu + e_f max|g^| + e_g max|f|`` (module docstring).
    """
    f, g = _expr(f, "f"), _expr(g, "g")
    box = _same_box([f, g], "f, g")
    (a, sa), (b, sb) = _unit(f), _unit(g)
    mu = A.multiply_bound(m, beta)
    corners = [p * q for p in f.range for q in g.range]
    err = sa * sb * mu + f.bound * _mag(*g.emulated_range) + g.bound * _mag(*f.range)
    beta_used = A.beta_for_levels(m) if beta is None else float(beta)

    def emulate(vals, _x):
        u, v = (vals[0] - a) / sa, (vals[1] - b) / sb
        return a * b + a * sb * v + b * sa * u + sa * sb * A.multiply(u, v, m, beta)[0]

    return Expr(box, (f, g), emulate, lambda vals, _x: vals[0] * vals[1], lo=min(corners),
                hi=max(corners), err=err, heads=9 * int(m), layers=int(m), beta=beta_used,
                label="multiply")


def square(f: Expr, m: int = LEVELS, beta=None) -> Expr:
    """``f^2`` by Yarotsky's squaring (:func:`gmtheory.approx.square`, ``3m`` heads, ``m``
    layers) after mapping the emulated range onto ``[0, 1]``: bound ``S^2 sigma + e (2 max|f|
    + e)``."""
    f = _expr(f, "f")
    a, s = _unit(f)
    lo, hi = f.range
    sq_lo = 0.0 if lo <= 0.0 <= hi else min(lo * lo, hi * hi)
    err = s * s * A.square_bound(m, beta) + f.bound * (2.0 * _mag(lo, hi) + f.bound)

    def emulate(vals, _x):
        u = (vals[0] - a) / s
        return a * a + 2.0 * a * s * u + s * s * A.square(u, m, beta)[0]

    return Expr(f._box, (f,), emulate, lambda vals, _x: vals[0] ** 2, lo=sq_lo,
                hi=_mag(lo, hi) ** 2, err=err, heads=3 * int(m), layers=int(m),
                beta=A.beta_for_levels(m) if beta is None else float(beta), label="square")


def reciprocal(f: Expr, *, form: str = "pl", n: int = PIECES, beta=BETA, steps: int = 6,
               m: int = 10) -> Expr:
    """``1/f`` for ``f`` bounded away from 0, by the piecewise-linear form (``form="pl"``,
    ``n`` attention-ReLUs at ``beta``) or Newton's iteration (``form="newton"``, ``steps``
    steps of products with ``m`` levels; ``beta`` as in :func:`gmtheory.approx.multiply`,
    ``None`` for :func:`~gmtheory.approx.beta_for_levels`).  A negative ``f`` uses
    ``1/f = -1/(-f)``.  Bound ``rho/s + e / (L (L - e))`` (module docstring)."""
    f = _expr(f, "f")
    if form not in ("pl", "newton"):
        raise ValueError(f"form: must be 'pl' or 'newton', got {form!r}.")
    elo, ehi = f.emulated_range
    if elo > 0:
        sign = 1.0
    elif ehi < 0:
        sign = -1.0
    else:
        raise ValueError(f"f: 1/f needs f bounded away from 0, but its emulated range "
                         f"[{elo:.4g}, {ehi:.4g}] (range +- bound) contains 0.")
    lo, hi = sorted((sign * f.range[0], sign * f.range[1]))
    s = hi + f.bound
    a = min((lo - f.bound) / s, 0.5)  # a constant f has a = 1; the bound on [1/2, 1] covers it
    if form == "pl":
        rho = A.reciprocal_pl_bound(a, n, beta)
        heads, layers, b_used = int(n), 1, float(beta)
    else:
        rho = A.reciprocal_newton_bound(a, steps, m, beta)
        b_used = A.beta_for_levels(m) if beta is None else float(beta)
        heads, layers = 2 * int(steps) * 9 * int(m), 2 * int(steps) * int(m)
    err = rho / s + f.bound / (lo * (lo - f.bound))

    def emulate(vals, _x):
        u = sign * vals[0] / s
        if form == "pl":
            out = A.reciprocal_pl(u, a, n, beta)[0]
        else:
            out = A.reciprocal_newton(u, a, steps, m, beta)[0]
        return sign * out / s

    return Expr(f._box, (f,), emulate, lambda vals, _x: 1.0 / vals[0],
                lo=min(sign / lo, sign / hi), hi=max(sign / lo, sign / hi), err=err, heads=heads,
                layers=layers, beta=b_used, label=f"reciprocal-{form}")


def _extremum(fs, form, beta, largest: bool) -> Expr:
    if len(fs) < 2:
        raise ValueError(f"fs: need at least two expressions, got {len(fs)}.")
    fs = [_expr(f, f"fs[{i}]") for i, f in enumerate(fs)]
    box = _same_box(fs, "fs")
    if form not in ("tree", "head"):
        raise ValueError(f"form: must be 'tree' or 'head', got {form!r}.")
    beta = A._check_beta(beta)
    k = len(fs)
    if form == "head":
        own, heads, layers = A.max_one_head_bound(k, beta), 1, 1
    else:
        own, heads, layers = A.max_relu_tree_bound(k, beta), k - 1, math.ceil(math.log2(k))
    pick = max if largest else min
    lo, hi = pick(f.range[0] for f in fs), pick(f.range[1] for f in fs)

    def emulate(vals, _x):
        x = jnp.stack(vals, axis=1)
        if form == "head":
            return A.max_one_head(x, beta) if largest else A.min_one_head(x, beta)
        return (A.max_relu_tree if largest else A.min_relu_tree)(x, beta)[0]

    def exact(vals, _x):
        x = jnp.stack(vals, axis=1)
        return x.max(1) if largest else x.min(1)

    return Expr(box, fs, emulate, exact, lo=lo, hi=hi, err=own + max(f.bound for f in fs),
                heads=heads,
                layers=layers, beta=beta, label=("max-" if largest else "min-") + form)


def maximum(*fs: Expr, form: str = "tree", beta=BETA) -> Expr:
    """``max_i f_i``: a tree of attention-ReLUs (``form="tree"``, ``k - 1`` heads, bound
    ``ceil(log2 k) c/beta``) or one head (``form="head"``, bound ``log(k)/beta``), plus
    ``max_i e_i``."""
    return _extremum(fs, form, beta, True)


def minimum(*fs: Expr, form: str = "tree", beta=BETA) -> Expr:
    """``min_i f_i`` as :func:`maximum` (``min = -max(-f)``), same bound."""
    return _extremum(fs, form, beta, False)


def relu(f: Expr, beta=BETA) -> Expr:
    """``ReLU(f)`` by the two-key head: bound ``e`` plus the tail bound
    :func:`gmtheory.approx.relu_tail_bound` at the distance of ``[L - e, U + e]`` from 0."""
    f = _expr(f, "f")
    beta = A._check_beta(beta)
    elo, ehi = f.emulated_range
    err = f.bound + float(A.relu_tail_bound(beta, max(elo, -ehi, 0.0)))
    return Expr(f._box, (f,), lambda vals, _x: A.relu(vals[0], beta),
                lambda vals, _x: jnp.maximum(vals[0], 0.0), lo=max(f.range[0], 0.0),
                hi=max(f.range[1], 0.0), err=err, heads=1, layers=1, beta=beta, label="relu")


def clip(f: Expr, a: float, b: float, p: int, beta) -> Expr:
    """``clip(f, a, b)`` by the ``p``-anchor interpolation head: bound ``e`` plus
    :func:`gmtheory.approx.interpolation_bound` (clip is 1-Lipschitz)."""
    f = _expr(f, "f")
    own = A.interpolation_bound(a, b, p, beta)  # validates beta
    if not (b > a) or int(p) < 2:
        raise ValueError(f"a, b, p: need a < b and p >= 2, got a={a}, b={b}, p={p}.")
    return Expr(f._box, (f,), lambda vals, _x: A.interpolation_head(vals[0], a, b, p, beta),
                lambda vals, _x: jnp.clip(vals[0], a, b), lo=min(max(f.range[0], a), b),
                hi=max(min(f.range[1], b), a), err=own + f.bound, heads=1, layers=1,
                beta=float(beta), anchors=int(p), label="clip")


def _interval(layers, lo, hi):
    """Interval of a ReLU network's outputs over the box ``[lo, hi]``."""
    for i, (W, b) in enumerate(layers):
        mid, rad = W @ ((lo + hi) / 2.0) + b, np.abs(W) @ ((hi - lo) / 2.0)
        lo, hi = mid - rad, mid + rad
        if i < len(layers) - 1:
            lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
    return lo, hi


def network(layers, *fs: Expr, output: int = 0, eps=None, beta=None) -> Expr:
    """Output ``output`` of a ReLU network applied to the expressions ``fs``, compiled by
    :func:`gmtheory.approx.compile_relu_network` on the box of their emulated ranges (pass
    ``eps`` or ``beta`` as there).  Bound: the compiled bound plus ``(|W_L| ... |W_1| e)``
    at ``output`` (ReLU is 1-Lipschitz), ``e`` the vector of the arguments' bounds."""
    fs = [_expr(f, f"fs[{i}]") for i, f in enumerate(fs)]
    if not fs:
        raise ValueError("fs: pass the network's inputs as expressions.")
    box = _same_box(fs, "fs")
    rng = np.array([f.emulated_range for f in fs])
    net = A.compile_relu_network(layers, rng[:, 0], rng[:, 1], eps=eps, beta=beta)
    d_out = net.layers[-1][0].shape[0]
    if not 0 <= int(output) < d_out:
        raise ValueError(f"output: need 0 <= output < {d_out}, got {output}.")
    prop = np.array([f.bound for f in fs])
    for W, _ in net.layers:
        prop = np.abs(W) @ prop
    lo, hi = _interval(net.layers, np.array([f.range[0] for f in fs]),
                       np.array([f.range[1] for f in fs]))
    o = int(output)
    r = net.resources
    return Expr(box, fs, lambda vals, _x: net(jnp.stack(vals, 1))[:, o],
                lambda vals, _x: net.reference(jnp.stack(vals, 1))[:, o], lo=lo[o], hi=hi[o],
                err=net.output_bounds[o] + prop[o], heads=r.heads, layers=r.layers,
                beta=r.max_beta, label="network")
