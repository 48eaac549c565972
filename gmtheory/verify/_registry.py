"""Registry of named numerical checks behind ``gmtheory verify``.

A check is a function returning a :class:`Outcome`: the measured discrepancy, the
tolerance it must not exceed and why that tolerance is right (float64 round-off,
quadrature order, Monte Carlo standard error, or a range stated by the theory).
``run_checks`` times each check, turns exceptions into failures, and never lets a
check compare a value with itself: every check states its two computations.
"""

from __future__ import annotations

import fnmatch
import json
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

__all__ = ["Check", "Outcome", "CheckResult", "register_check", "CHECKS", "run_checks",
           "select_checks", "format_table"]


@dataclass
class Outcome:
    discrepancy: float
    tolerance: float
    justification: str
    details: dict = field(default_factory=dict)
    passed: bool | None = None  # default: discrepancy <= tolerance

    def ok(self) -> bool:
        if self.passed is not None:
            return bool(self.passed)
        return bool(self.discrepancy <= self.tolerance)


@dataclass(frozen=True)
class Check:
    id: str
    claim: str
    reference: str
    fn: Callable[[], Outcome]


@dataclass
class CheckResult:
    id: str
    claim: str
    reference: str
    discrepancy: float
    tolerance: float
    justification: str
    passed: bool
    seconds: float
    details: dict
    error: str | None = None


CHECKS: dict[str, Check] = {}


def register_check(id: str, claim: str, reference: str):
    """Decorator registering ``fn() -> Outcome`` as check ``id``."""

    def deco(fn):
        if id in CHECKS:
            raise ValueError(f"check id {id!r} registered twice")
        CHECKS[id] = Check(id, claim, reference, fn)
        return fn

    return deco


def _load_all():
    from . import (  # noqa: F401
        approx_checks,
        denoising_checks,
        hermite_checks,
        icl_checks,
        lda_checks,
        operator_checks,
    )


def select_checks(only: str | None = None) -> list[Check]:
    """Checks whose id matches ``only``: comma-separated globs, or a group name
    (``lda`` selects ``lda.*``), or else a substring."""
    _load_all()
    checks = list(CHECKS.values())
    if only:
        pats = [p.strip() for p in only.split(",") if p.strip()]
        groups = {c.id.split(".", 1)[0] for c in checks}

        def match(c):
            return any(
                fnmatch.fnmatch(c.id, p) if any(ch in p for ch in "*?[")
                else c.id.startswith(p + ".") if p in groups else p in c.id
                for p in pats
            )
        checks = [c for c in checks if match(c)]
        if not checks:
            raise ValueError(
                f"--only: no check matches {only!r}; available ids: "
                + ", ".join(sorted(CHECKS))
            )
    return checks


def run_checks(checks: list[Check], *, progress: bool = True) -> list[CheckResult]:
    results = []
    bar = tqdm(checks, desc="verify", disable=not progress, leave=False)
    for c in bar:
        bar.set_postfix_str(c.id)
        t0 = time.perf_counter()
        try:
            o = c.fn()
            res = CheckResult(c.id, c.claim, c.reference, float(o.discrepancy),
                              float(o.tolerance), o.justification, o.ok(),
                              time.perf_counter() - t0, _plain(o.details))
        except Exception as exc:  # a crashing check is a failing check
            res = CheckResult(c.id, c.claim, c.reference, float("nan"), float("nan"), "",
                              False, time.perf_counter() - t0, {},
                              error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        results.append(res)
    return results


def rel_error(a, b) -> float:
    """``max |a - b| / max(1, max |b|)``: relative error, absolute near zero."""
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


def _plain(obj):
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if hasattr(obj, "shape") and getattr(obj, "shape", None) == ():
        return float(obj)
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return np.asarray(obj).tolist()
    return obj


def format_table(results: list[CheckResult]) -> str:
    lines = [f"{'check':<34} {'result':<6} {'discrepancy':>12} {'tolerance':>10} {'s':>6}"]
    for r in results:
        status = "PASS" if r.passed else ("ERROR" if r.error else "FAIL")
        lines.append(f"{r.id:<34} {status:<6} {r.discrepancy:12.3g} {r.tolerance:10.3g} "
                     f"{r.seconds:6.1f}")
    n_ok = sum(r.passed for r in results)
    lines.append(f"{n_ok} passed, {len(results) - n_ok} failed")
    return "\n".join(lines)


def write_json(results: list[CheckResult], path: str | Path) -> None:
    from ..cache import atomic_write_bytes, provenance

    payload = {"provenance": provenance(), "checks": [asdict(r) for r in results]}
    atomic_write_bytes(Path(path), json.dumps(payload, indent=2, default=str).encode())
