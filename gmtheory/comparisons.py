"""Comparisons of declared kinds and the verdict that follows from them.

The vocabulary of ``gmtheory verify`` (gmtheory/verify/_registry.py) and of ``gmtheory
explore`` (gmtheory/regimes/), kept in the library so that both use one definition:

* ``agreement`` — two independent computations: ``discrepancy <= tolerance``;
* ``upper_bound`` — a measured quantity under a proven bound: ``measured <= bound``;
* ``lower_bound`` — a measured quantity above a bound: ``measured >= bound``;
* ``count`` — an exact integer: ``got == expected``.

An agreement between a simulation and a theory value is built with :func:`equivalence`,
which decides equality with power: the worst case of ``(|estimate - theory| + t SE) /
scale`` must be at most ``tol``, fixed from the claim before the run, and the noise alone,
``t SE / scale``, at most ``tol / 2``; a comparison too noisy to decide does not hold.  It
records its **resolution**, the smallest relative error in the theory value that it is
sure to detect (see :func:`equivalence`); a deterministic relative agreement records
``tol + measured`` (``relative=True``).

Each carries the reason for its threshold, set before the result was seen.  An
:class:`Outcome` is PASS when every comparison holds, FINDING when the only failures test
a claim printed in a paper (``finding=``), FAIL otherwise.

A comparison never passes by accident: a NaN or an infinite measured value or threshold
does not hold, whatever the kind.  A worst case over many cases is taken with
:func:`largest` or :func:`smallest`, which propagate NaN (Python's ``max(0.0, nan)`` is
``0.0``; ``np.nanmax`` drops NaN) and remember how many cases they covered: a comparison
built from such an :class:`Aggregate` records ``cases``, and one that covered zero cases
does not hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["KINDS", "IDENTITY_TOL", "Comparison", "Outcome", "agreement", "equivalence",
           "upper_bound", "lower_bound", "count", "Aggregate", "largest", "smallest", "resolution"]

KINDS = ("agreement", "upper_bound", "lower_bound", "count")

# The tolerance of an identity (a closed form against a simulation of the same quantity)
# checked by Monte Carlo, relative to the theory value's scale.  Any passing equivalence
# has d + n <= tol, so its resolution (tol - n + d, over 1 - tol when the scale is the
# theory value itself) is at most about 2 tol: 1 % gives the ~2 % resolution that the
# perturbation test asks of a value a figure draws.
IDENTITY_TOL = 0.01


@dataclass
class Comparison:
    """One comparison of a check (build it with :func:`agreement`, :func:`upper_bound`,
    :func:`lower_bound` or :func:`count`)."""

    kind: str
    measured: float
    threshold: float
    why: str
    name: str = ""
    finding: str | None = None  # the printed paper claim; a failure is then a FINDING
    cases: int | None = None    # how many cases a worst case covered (None: one value)
    power: float | None = None  # equivalence: worst t SE / scale; must be <= threshold / 2
    resolution: float | None = None  # smallest relative error in the theory value detected

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind: must be one of {KINDS}, got {self.kind!r}.")
        if self.cases is None and isinstance(self.measured, Aggregate):
            self.cases = self.measured.cases
        if self.cases is not None:
            self.cases = int(self.cases)
        self.measured = float(self.measured)
        self.threshold = float(self.threshold)
        for f in ("power", "resolution"):
            if getattr(self, f) is not None:
                setattr(self, f, float(getattr(self, f)))

    def holds(self) -> bool:
        """Whether the comparison holds; never for a NaN or an infinite measured value or
        threshold, nor for a worst case over zero cases, nor for an equivalence whose noise
        alone (``power``, t SE / scale) exceeds half its tolerance."""
        m, t = self.measured, self.threshold
        if not (math.isfinite(m) and math.isfinite(t)):
            return False
        if self.cases is not None and self.cases < 1:
            return False
        if self.power is not None and not (math.isfinite(self.power)
                                           and self.power <= t / 2):
            return False
        if self.kind in ("agreement", "upper_bound"):
            return m <= t
        if self.kind == "lower_bound":
            return m >= t
        return m == t

    def expectation(self) -> str:
        """The comparison in words, e.g. ``discrepancy <= 1e-12``."""
        what = self.name or {"agreement": "discrepancy", "count": "count"}.get(self.kind,
                                                                              "measured")
        op = {"agreement": "<=", "upper_bound": "<=", "lower_bound": ">=", "count": "=="}
        t = f"{_int(self.threshold)}" if self.kind == "count" else f"{self.threshold:g}"
        power = "" if self.power is None else f" and t SE <= {self.threshold / 2:g}"
        return f"{what} {op[self.kind]} {t}{power}"

    def describe(self) -> str:
        m = f"{_int(self.measured)}" if self.kind == "count" else f"{self.measured:.3g}"
        if self.kind == "count":
            return f"{self.name or 'count'}: expected {_int(self.threshold)}, got {m}"
        power = "" if self.power is None else f" (t SE {self.power:.3g})"
        return f"{self.expectation()}: measured {m}{power}"


def agreement(discrepancy, tolerance, why, *, name="", finding=None,
              cases=None, relative=False) -> Comparison:
    """Two independent computations agree: ``discrepancy <= tolerance``.  ``cases``: how
    many cases a worst-case discrepancy covers (taken from an :class:`Aggregate`).
    ``relative=True`` says the discrepancy is a relative error in the theory value, so the
    comparison detects any relative error above ``tolerance + discrepancy`` (its
    resolution).  Between a simulation and a theory value, use :func:`equivalence`."""
    res = None
    if relative:
        res = float(tolerance) + abs(float(discrepancy))
    return Comparison("agreement", discrepancy, tolerance, why, name, finding, cases,
                      resolution=res)


def equivalence(estimate, theory, se, tol, why, *, t, scale=None, name="",
                finding=None) -> Comparison:
    """A simulated ``estimate`` (standard error ``se``) equals a ``theory`` value within a
    relative tolerance ``tol``, decided with power (arrays broadcast; each element is one
    case).  With ``s = scale`` (default ``|theory|``), per case ``d = |estimate - theory| /
    s`` and ``n = t se / s``:

    * measured: the worst ``d + n`` (the equivalence form), compared with ``tol``;
    * power: the worst ``n``, which must be at most ``tol / 2`` (a check too noisy to
      decide does not pass);
    * resolution: the smallest relative error in the theory value that the comparison is
      sure to detect, ``min over cases (tol - n + d) s / |theory|``: a theory value wrong
      by more than that moves some case's ``d + n`` above ``tol`` whatever the sign.  With
      the default scale ``|theory|`` the scale moves with the error (and ``d`` and ``n``
      shrink as the theory value grows), so ``r = tol - n + d`` becomes ``r / (1 - tol)``.
      A failing case (``r < 0``) states 0.

    ``tol`` comes from the claim, ``t`` from the number of cases (e.g.
    :func:`gmtheory.stats.bonferroni_z`), both fixed before the run.  Pass ``scale`` (for
    example a vector's largest entry) where single entries of the theory value may be near
    zero.  A NaN anywhere makes the comparison fail."""
    import numpy as np

    if isinstance(t, bool) or not (np.ndim(t) == 0 and float(t) > 0 and math.isfinite(t)):
        raise ValueError(f"t: the number of standard errors must be a positive finite "
                         f"number, got {t!r}.")
    est, th, se = (np.asarray(v, dtype=float) for v in (estimate, theory, se))
    sc = np.abs(th) if scale is None else np.asarray(scale, dtype=float)
    est, th, se, sc = np.broadcast_arrays(est, th, se, sc)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.abs(est - th) / sc
        n = float(t) * se / sc
        bad = ~(se >= 0) | ~(sc > 0)           # a negative or NaN SE, a zero scale: NaN
        d = np.where(bad, np.nan, d)
        r = np.maximum(float(tol) - n + d, 0.0)
        res = r / (1.0 - float(tol)) if scale is None else r * sc / np.abs(th)
    return Comparison("agreement", largest(d + n), tol, why, name, finding,
                      power=largest(n), resolution=smallest(res))


def resolution(comparisons) -> float | None:
    """A check's resolution: the largest resolution of its comparisons that state one (a
    relative error above it in any theory value the check compares turns it FAIL), or None
    when none states one."""
    rs = [c.resolution for c in comparisons if c.resolution is not None]
    return float(largest(rs)) if rs else None


def upper_bound(measured, bound, why, *, name="", finding=None, cases=None) -> Comparison:
    """A measured quantity stays under a (proven or stated) bound: ``measured <= bound``."""
    return Comparison("upper_bound", measured, bound, why, name, finding, cases)


def lower_bound(measured, bound, why, *, name="", finding=None, cases=None) -> Comparison:
    """A measured quantity stays above a bound: ``measured >= bound``."""
    return Comparison("lower_bound", measured, bound, why, name, finding, cases)


def count(got, expected, why, *, name="", finding=None) -> Comparison:
    """An exact integer equality: ``got == expected``."""
    if not (math.isfinite(float(got)) and math.isfinite(float(expected))):
        return Comparison("count", float(got), float(expected), why, name, finding)  # fails
    for arg, v in (("got", got), ("expected", expected)):
        if float(v) != int(v):
            raise ValueError(f"count: {arg} must be an integer, got {v}.")
    return Comparison("count", int(got), int(expected), why, name, finding)


def _int(v: float) -> str:
    """A count as an integer, or as it is when it is not finite (NaN, inf)."""
    return f"{int(v)}" if math.isfinite(v) else f"{v}"


class Aggregate(float):
    """A worst case (the largest or smallest of ``cases`` values), as a float that
    remembers how many values it covers.  NaN when any value was NaN; ``-inf``
    (:func:`largest`) or ``+inf`` (:func:`smallest`) with ``cases == 0`` when there was
    none, so that a comparison built from it does not hold.  Arithmetic on it gives a
    plain float (the count is then the caller's to pass as ``cases=``)."""

    cases: int

    def __new__(cls, value: float, cases: int):
        obj = super().__new__(cls, value)
        obj.cases = int(cases)
        return obj

    def __repr__(self) -> str:
        return f"Aggregate({float(self)!r}, cases={self.cases})"

    def __reduce__(self):                      # copy, deepcopy and pickle keep the count
        return (Aggregate, (float(self), self.cases))


def _aggregate(values, pick, empty) -> Aggregate:
    import numpy as np

    parts, n = [], 0

    def add(v):
        nonlocal n
        if isinstance(v, Aggregate):
            if v.cases > 0:
                parts.append(np.array([float(v)]))
                n += v.cases
        elif isinstance(v, (str, bytes, dict)):
            raise TypeError(f"values: a worst case takes numbers or arrays, got "
                            f"{type(v).__name__}.")
        elif not hasattr(v, "shape") and hasattr(v, "__iter__"):
            for x in v:                    # a list, tuple or generator of values
                add(x)
        else:
            a = np.asarray(v, dtype=float).ravel()
            parts.append(a)
            n += a.size

    for v in values:
        add(v)
    if n == 0:
        return Aggregate(empty, 0)
    return Aggregate(float(pick(np.concatenate(parts))), n)   # np.max/np.min keep a NaN


def largest(*values) -> Aggregate:
    """The largest of ``values`` (numbers, arrays, iterables of them, or earlier
    aggregates, flattened), NaN if any is NaN, and how many values it covered: the one
    way a check takes a worst case, so that a NaN fails it and an empty grid is seen::

        worst = largest()                 # no case yet: -inf, cases = 0
        for case in grid:
            worst = largest(worst, error(case))
        agreement(worst, tol, why)        # records cases; fails on NaN or on no case
    """
    import numpy as np

    return _aggregate(values, np.max, -math.inf)


def smallest(*values) -> Aggregate:
    """The smallest of ``values``, as :func:`largest` (``+inf`` and ``cases = 0`` when
    there is none)."""
    import numpy as np

    return _aggregate(values, np.min, math.inf)


@dataclass
class Outcome:
    """What a check measured: its comparisons (the first is the headline) and details."""

    comparisons: list[Comparison]
    details: dict = field(default_factory=dict)

    def __init__(self, *comparisons: Comparison, details: dict | None = None):
        if not comparisons:
            raise ValueError("Outcome: a check must make at least one comparison.")
        for c in comparisons:
            if not isinstance(c, Comparison):
                raise ValueError("Outcome: pass comparisons built with agreement(), "
                                 "upper_bound(), lower_bound() or count().")
        self.comparisons = list(comparisons)
        self.details = dict(details or {})

    def headline(self) -> int:
        """Index of the comparison a one-line summary shows: for a FAIL the first comparison
        that fails without ``finding=``, for a FINDING the first that fails, for a PASS the
        first comparison."""
        v = self.verdict()
        for i, c in enumerate(self.comparisons):
            if not c.holds() and (v == "FINDING" or not c.finding):
                return i
        return 0

    def verdict(self) -> str:
        failed = [c for c in self.comparisons if not c.holds()]
        if not failed:
            return "PASS"
        if all(c.finding for c in failed):
            return "FINDING"
        return "FAIL"
