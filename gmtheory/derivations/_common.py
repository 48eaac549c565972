"""Shared helpers of the derivation modules: residual tests, seeded high-precision
evaluation where ``simplify`` cannot finish, small symbolic matrices, and Markdown.

A residual is either a sympy expression (or matrix, or list of them) that must be exactly
0, or a :class:`NumericResidual`: the largest ``|residual|`` over seeded random points
evaluated with mpmath at ``dps`` digits, which must be at most ``tol`` (1e-30).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import sympy as sp

__all__ = ["NumericResidual", "is_zero", "format_residual", "numeric_residual", "sym_matrix",
           "sym_vector", "cancel", "circle_point", "residual_lines", "L"]

NUMERIC_TOL = 1e-30


@dataclass(frozen=True)
class NumericResidual:
    """``max |residual|`` over ``points`` seeded random points at ``dps`` digits."""

    value: float
    points: int
    dps: int
    seed: int
    tol: float = NUMERIC_TOL

    def is_zero(self) -> bool:
        return self.value <= self.tol

    def __str__(self) -> str:
        return (f"{self.value:.1e} (numeric: max over {self.points} seeded points at "
                f"{self.dps} digits, must be <= {self.tol:g})")


def _entries(value):
    if isinstance(value, sp.MatrixBase):
        return list(value)
    if isinstance(value, list | tuple):
        return [e for v in value for e in _entries(v)]
    return [value]


def is_zero(value) -> bool:
    """True when a residual is exactly 0 (every entry) or a numeric residual within tol."""
    if isinstance(value, NumericResidual):
        return value.is_zero()
    return all(sp.sympify(e) == 0 for e in _entries(value))


def format_residual(value) -> str:
    if isinstance(value, NumericResidual):
        return str(value)
    entries = _entries(value)
    if all(sp.sympify(e) == 0 for e in entries):
        return "0" if len(entries) == 1 else f"0 ({len(entries)} entries)"
    return str(value)


def numeric_residual(expr, symbols, sample, *, points: int = 20, dps: int = 50,
                     seed: int = 0) -> NumericResidual:
    """Evaluate ``expr`` (expression or matrix) at seeded random points with mpmath.

    ``sample(rng)`` returns one value per symbol (floats or strings; converted to mpf at
    ``dps`` digits).  Used only where ``simplify`` cannot reduce ``expr`` to 0.
    """
    import mpmath

    f = sp.lambdify(symbols, _entries(expr), modules="mpmath")
    rng = random.Random(seed)
    worst = 0.0
    with mpmath.workdps(dps):
        for _ in range(points):
            args = [mpmath.mpf(str(v)) for v in sample(rng)]
            worst = max(worst, max(float(abs(v)) for v in f(*args)))
    return NumericResidual(worst, points, dps, seed)


def cancel(expr):
    """``sympy.cancel`` entrywise: the fast normal form of rational expressions.

    Zero, what every residual must reduce to, is recognised first: a rational expression
    whose numerator over a common denominator (``together``) expands to 0 is 0, and that
    is much cheaper than cancel's polynomial gcds (denoising's completed square: 0.4 s
    against 3 s).  Anything else gets ``sympy.cancel``'s normal form as before."""
    if isinstance(expr, sp.MatrixBase):
        return expr.applyfunc(_cancel_one)
    if isinstance(expr, list | tuple):
        return [cancel(e) for e in expr]
    return _cancel_one(expr)


def _cancel_one(expr):
    expr = sp.sympify(expr)
    if sp.expand(sp.numer(sp.together(expr))) == 0:
        return sp.Integer(0)
    return sp.cancel(expr)


def sym_vector(name: str, d: int = 2, **assumptions) -> sp.Matrix:
    assumptions = assumptions or {"real": True}
    return sp.Matrix([sp.Symbol(f"{name}_{i + 1}", **assumptions) for i in range(d)])


def sym_matrix(name: str, d: int = 2, symmetric: bool = False, cols: int | None = None
               ) -> sp.Matrix:
    cols = d if cols is None else cols

    def entry(i, j):
        if symmetric and j < i:
            i, j = j, i
        return sp.Symbol(f"{name}_{i + 1}{j + 1}", real=True)

    return sp.Matrix(d, cols, entry)


def circle_point(t, r):
    """Rational point of the circle of radius ``r``: ``r ((1-t^2), 2t) / (1+t^2)``."""
    return sp.Matrix([r * (1 - t**2) / (1 + t**2), r * 2 * t / (1 + t**2)])


def L(expr) -> str:
    return sp.latex(expr)


def residual_lines(results: dict) -> list[str]:
    """A Markdown table of every ``*_residual`` entry of ``results``."""
    lines = ["| residual | value |", "|---|---|"]
    for k, v in results.items():
        if k.endswith("_residual"):
            lines.append(f"| `{k}` | {format_residual(v)} |")
    return lines + [""]
