"""Comparisons of declared kinds and the verdict that follows from them.

The vocabulary of ``gmtheory verify`` (gmtheory/verify/_registry.py) and of ``gmtheory
explore`` (gmtheory/regimes/), kept in the library so that both use one definition:

* ``agreement`` — two independent computations: ``discrepancy <= tolerance``;
* ``upper_bound`` — a measured quantity under a proven bound: ``measured <= bound``;
* ``lower_bound`` — a measured quantity above a bound: ``measured >= bound``;
* ``count`` — an exact integer: ``got == expected``.

Each carries the reason for its threshold, set before the result was seen.  An
:class:`Outcome` is PASS when every comparison holds, FINDING when the only failures test
a claim printed in a paper (``finding=``), FAIL otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["KINDS", "Comparison", "Outcome", "agreement", "upper_bound", "lower_bound",
           "count"]

KINDS = ("agreement", "upper_bound", "lower_bound", "count")


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

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind: must be one of {KINDS}, got {self.kind!r}.")
        self.measured = float(self.measured)
        self.threshold = float(self.threshold)

    def holds(self) -> bool:
        m, t = self.measured, self.threshold
        if math.isnan(m) or math.isnan(t):
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
        t = f"{self.threshold:g}" if self.kind != "count" else f"{int(self.threshold)}"
        return f"{what} {op[self.kind]} {t}"

    def describe(self) -> str:
        m = f"{self.measured:.3g}" if self.kind != "count" else f"{int(self.measured)}"
        if self.kind == "count":
            return f"{self.name or 'count'}: expected {int(self.threshold)}, got {m}"
        return f"{self.expectation()}: measured {m}"


def agreement(discrepancy, tolerance, why, *, name="", finding=None) -> Comparison:
    """Two independent computations agree: ``discrepancy <= tolerance``."""
    return Comparison("agreement", discrepancy, tolerance, why, name, finding)


def upper_bound(measured, bound, why, *, name="", finding=None) -> Comparison:
    """A measured quantity stays under a (proven or stated) bound: ``measured <= bound``."""
    return Comparison("upper_bound", measured, bound, why, name, finding)


def lower_bound(measured, bound, why, *, name="", finding=None) -> Comparison:
    """A measured quantity stays above a bound: ``measured >= bound``."""
    return Comparison("lower_bound", measured, bound, why, name, finding)


def count(got, expected, why, *, name="", finding=None) -> Comparison:
    """An exact integer equality: ``got == expected``."""
    if float(got) != int(got) or float(expected) != int(expected):
        raise ValueError(f"count: expected and got must be integers, got {expected}, {got}.")
    return Comparison("count", int(got), int(expected), why, name, finding)


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
