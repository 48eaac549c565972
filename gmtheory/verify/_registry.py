"""Registry of named numerical checks behind ``gmtheory verify``.

A check is a function returning an :class:`Outcome`: one or more *comparisons*, each of
a declared kind, with a threshold set before the result was seen and the reason why
that threshold is right (float64 round-off, quadrature order, Monte Carlo standard
error, or a bound proven by the theory):

* ``agreement`` — two independent computations: ``discrepancy <= tolerance``;
* ``upper_bound`` — a measured quantity under a proven bound: ``measured <= bound``;
* ``lower_bound`` — a measured quantity above a bound: ``measured >= bound``;
* ``count`` — an exact integer: ``got == expected``.

The verdict follows from the comparisons and from nothing else (there is no override):

* **PASS** — every comparison holds;
* **FINDING** — every comparison holds except some that test *a claim printed in a paper*
  (declared with ``finding="<the claim, quoted, and where it is printed>"`` before
  running): our computations agree, but the paper's printed claim is not what was
  measured.  ``finding=`` is never put on a comparison between two of our computations
  (that disagreement is a FAIL), nor on an expectation of our own protocol; the checks
  expected to return FINDING are pinned in ``tests/expected_findings.json``.  The report
  prints the expectation, the measurement and the claim;
* **FAIL** — a comparison without ``finding=`` does not hold (or the check raised).

``gmtheory verify`` exits 0 on PASS and FINDING, 1 on FAIL.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import math
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

__all__ = ["Check", "Outcome", "Comparison", "CheckResult", "register_check", "CHECKS",
           "EXPERIMENTS", "PAPER_VARIANTS", "experiment", "experiment_config", "experiment_stem",
           "experiment_profile",
           "results_dir",
           "set_results_dir",
           "all_checks", "summary_line", "run_checks", "select_checks", "format_table",
           "agreement", "equivalence", "upper_bound", "lower_bound", "count", "KINDS",
           "rel_error",
           "write_json", "read_json"]

from ..comparisons import (  # noqa: F401  (re-exported: the checks build them from here)
    KINDS,
    Comparison,
    Outcome,
    agreement,
    count,
    equivalence,
    lower_bound,
    resolution,
    upper_bound,
)


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
    verdict: str                 # PASS, FINDING, FAIL or ERROR
    kind: str                    # kind of the headline comparison (the first failing one
    measured: float              # of a FAIL or FINDING, else the first)
    threshold: float
    justification: str
    comparisons: list            # every comparison, as dicts (kind, measured, threshold, ...)
    findings: list               # for FINDING: expectation, measured and reason of each
    seconds: float
    details: dict
    error: str | None = None
    compiles: dict = field(default_factory=dict)  # gmtheory.profiling.CompileStats.as_dict
    headline: int = 0            # index in comparisons of the headline comparison
    headline_name: str = ""      # its name or kind
    resolution: float | None = None  # smallest relative error in a theory value it detects

    @property
    def failing(self) -> list:
        """The comparisons (as dicts) that do not hold."""
        return [c for c in self.comparisons if not c.get("holds", True)]

    @property
    def passed(self) -> bool:
        """True unless the check failed: a FINDING is not a failure."""
        return self.verdict in ("PASS", "FINDING")


CHECKS: dict[str, Check] = {}

# check id -> the simulation whose cached result it reads (:func:`experiment`): the one
# that the check's figures draw, at their profile and config
EXPERIMENTS: dict[str, str] = {}
EXPERIMENT_PROFILE = "quick"     # the profile `gmtheory figures` and `reproduce` draw
# paper variants (register_check(paper=...)): check id -> the simulation whose committed
# paper-profile result it reads; _PROFILE is the profile experiment() reads right now
PAPER = "-paper"
PAPER_VARIANTS: dict[str, str] = {}
_PROFILE = [EXPERIMENT_PROFILE]
_RESULTS = [os.environ.get("GMTHEORY_RESULTS", "simulations/results")]


def register_check(id: str, claim: str, reference: str, *, experiment: str | None = None,
                   paper: str | None = None):
    """Decorator registering ``fn() -> Outcome`` as check ``id``; ``experiment`` names the
    simulation whose cached result the check reads with :func:`experiment`.  ``paper``
    (with ``experiment``) also registers ``id + "-paper"``: the same check on the committed
    paper-profile result of that simulation (``gmtheory run NAME --profile paper
    --commit``), its claim followed by ``paper`` (what the larger run adds)."""

    def deco(fn):
        for cid in (id, id + PAPER) if paper is not None else (id,):
            if cid in CHECKS:
                raise ValueError(f"check id {cid!r} registered twice")
        CHECKS[id] = Check(id, claim, reference, fn)
        if experiment is not None:
            EXPERIMENTS[id] = experiment
        if paper is not None:
            if experiment is None:
                raise ValueError(f"{id}: paper= reads the committed paper run of the check's "
                                 "experiment; pass experiment=NAME too.")
            CHECKS[id + PAPER] = Check(id + PAPER, f"{claim} Paper profile: {paper}", reference,
                                       functools.partial(_on_profile, "paper", fn))
            PAPER_VARIANTS[id + PAPER] = experiment
        return fn

    return deco


def _on_profile(profile: str, fn):
    """Run check ``fn`` with :func:`experiment` reading the committed ``profile`` result."""
    _PROFILE[0] = profile
    try:
        return fn()
    finally:
        _PROFILE[0] = EXPERIMENT_PROFILE


def experiment_profile() -> str:
    """The profile :func:`experiment` reads now: ``"quick"``, or ``"paper"`` inside a paper
    variant (a check whose targets differ between the two asks this)."""
    return _PROFILE[0]


def results_dir() -> str:
    """The simulation cache folder that :func:`experiment` reads: ``GMTHEORY_RESULTS`` or
    ``simulations/results`` (the default of ``gmtheory figures``); ``gmtheory verify
    --results`` sets it."""
    return _RESULTS[0]


def set_results_dir(path) -> None:
    """Read and write the checks' experiments in ``path`` (see :func:`results_dir`)."""
    _RESULTS[0] = str(path)


def experiment_stem(check_id: str):
    """``(stem, key)`` of the cached result that check ``check_id`` reads: the figures'
    (same simulation, profile and config; :func:`gmtheory.simulations.result_stem`)."""
    from ..simulations import result_stem

    if check_id not in EXPERIMENTS:
        raise ValueError(f"check_id: {check_id!r} declares no experiment; pass "
                         "experiment=NAME to register_check.")
    return result_stem(EXPERIMENTS[check_id], EXPERIMENT_PROFILE, results_dir=results_dir())


def experiment(check_id: str) -> dict:
    """The arrays of the simulation that check ``check_id`` shares with its figures: the
    cached result the figure draws (computed here, once, if no one has yet): one run, two
    consumers."""
    from ..simulations import run_simulation

    if check_id not in EXPERIMENTS:
        raise ValueError(f"check_id: {check_id!r} declares no experiment; pass "
                         "experiment=NAME to register_check.")
    name, profile = EXPERIMENTS[check_id], _PROFILE[0]
    if profile != EXPERIMENT_PROFILE:      # a paper variant: the committed run, never rerun
        from ..simulations.committed import load_committed

        hit = load_committed(name, profile)
        if hit is None:
            raise RuntimeError(
                f"{check_id}{PAPER}: no committed {profile}-profile result of {name!r} for "
                f"its current config; run `gmtheory run {name} --profile {profile} --commit` "
                "(a paper run: minutes to hours) and commit simulations/committed/.")
        return hit[0]
    arrays, _, _ = run_simulation(name, profile, results_dir=results_dir(), progress=False)
    return arrays


def experiment_config(check_id: str):
    """The config of the run that :func:`experiment` reads for ``check_id`` (its profile's
    TOML values): a check that recomputes the theory from a run's arrays reads the sizes
    and parameters here, so a committed run is checked against the theory as it is now."""
    from ..simulations import get_simulation, make_config

    if check_id not in EXPERIMENTS:
        raise ValueError(f"check_id: {check_id!r} declares no experiment; pass "
                         "experiment=NAME to register_check.")
    return make_config(get_simulation(EXPERIMENTS[check_id]), _PROFILE[0])


def _load_all():
    from . import (  # noqa: F401
        approx_checks,
        denoising_checks,
        denoising_extended_checks,
        gma_checks,
        hermite_checks,
        icl_checks,
        icl_engine_checks,
        icl_equivalence_checks,
        icl_nonlinear_checks,
        icl_softmax_checks,
        icl_sweep_checks,
        lda_checks,
        lda_landscape_checks,
        lda_trained_checks,
        lda_trajectory_checks,
        operator_checks,
    )


def all_checks() -> list[Check]:
    """Every registered check, in registration order."""
    _load_all()
    return list(CHECKS.values())


def select_checks(only: str | None = None) -> list[Check]:
    """Checks whose id matches ``only``: comma-separated globs, or a group name
    (``lda`` selects ``lda.*``), or else a substring."""
    checks = all_checks()
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


def _result(c: Check, o: Outcome, seconds: float) -> CheckResult:
    h = o.headline()
    head = o.comparisons[h]
    findings = [{"comparison": x.name or x.kind, "expectation": x.expectation(),
                 "measured": x.measured, "reason": x.finding}
                for x in o.comparisons if not x.holds() and x.finding]
    return CheckResult(
        c.id, c.claim, c.reference, o.verdict(), head.kind, head.measured, head.threshold,
        head.why, [{**asdict(x), "holds": x.holds(), "expectation": x.expectation()}
                   for x in o.comparisons],
        findings, seconds, _plain(o.details), headline=h,
        headline_name=head.name or head.kind, resolution=resolution(o.comparisons))


def run_checks(checks: list[Check], *, progress: bool = True) -> list[CheckResult]:
    """Run ``checks`` in order; each result also records the XLA compilations that its
    check triggered (:func:`gmtheory.profiling.compile_stats`)."""
    from ..profiling import compile_stats

    results = []
    bar = tqdm(checks, desc="verify", disable=not progress, leave=False)
    for c in bar:
        bar.set_postfix_str(c.id)
        t0 = time.perf_counter()
        with compile_stats() as st:
            try:
                o = c.fn()
                if not isinstance(o, Outcome):
                    raise TypeError(f"check {c.id} returned {type(o).__name__}, not an Outcome")
                res = _result(c, o, time.perf_counter() - t0)
            except Exception as exc:  # a crashing check is a failing check
                res = CheckResult(c.id, c.claim, c.reference, "ERROR", "", float("nan"),
                                  float("nan"), "", [], [], time.perf_counter() - t0, {},
                                  error=f"{type(exc).__name__}: {exc}\n"
                                        f"{traceback.format_exc()}")
        res.compiles = st.as_dict()
        results.append(res)
    return results


def rel_error(a, b) -> float:
    """``max |a - b| / max(1, max |b|)``: relative error, absolute near zero."""
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.maximum(1.0, np.max(np.abs(b))))   # keeps a NaN


def _plain(obj):
    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, float):          # an Aggregate (a float subclass) as a plain float
        return float(obj)
    if hasattr(obj, "shape") and getattr(obj, "shape", None) == ():
        return float(obj)
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return np.asarray(obj).tolist()
    return obj


_OPS = {"agreement": "<=", "upper_bound": "<=", "lower_bound": ">=", "count": "=="}


def _fmt(v: float, kind: str) -> str:
    if kind == "count" and math.isfinite(v):
        return f"{int(v)}"
    return f"{v:.3g}"


def summary_line(results: list[CheckResult]) -> str:
    n = {v: sum(r.verdict == v for r in results) for v in ("PASS", "FINDING", "FAIL", "ERROR")}
    return (f"{n['PASS']} passed, {n['FINDING']} findings, "
            f"{n['FAIL'] + n['ERROR']} failed")


def format_table(results: list[CheckResult], verbose: bool = False) -> str:
    """The verify table: each check's verdict and its headline comparison (the first
    failing comparison of a FAIL or FINDING, the first comparison of a PASS), then the
    findings with the paper's claim, the measurement and the expectation.  ``verbose``
    adds every comparison of every check under its row."""
    w = max([34] + [len(r.id) for r in results])
    lines = [f"{'check':<{w}} {'verdict':<8} {'kind':<12} {'measured':>10}    "
             f"{'threshold':<10} {'s':>6}  comparison"]
    for r in results:
        op = _OPS.get(r.kind, "  ")
        name = (r.error or "").splitlines()[0][:60] if r.error else r.headline_name
        lines.append(f"{r.id:<{w}} {r.verdict:<8} {r.kind or '-':<12} "
                     f"{_fmt(r.measured, r.kind):>10} {op:>2} {_fmt(r.threshold, r.kind):<10} "
                     f"{r.seconds:6.1f}  {name}")
        if verbose:
            for c in r.comparisons:
                mark = "ok  " if c.get("holds") else "FAIL"
                n, p, res = c.get("cases"), c.get("power"), c.get("resolution")
                lines.append(f"    {mark} {c['kind']:<12} {c['expectation']}: measured "
                             f"{_fmt(c['measured'], c['kind'])}"
                             + (f", t SE {p:.3g}" if p is not None else "")
                             + (f" (worst of {n} cases)" if n is not None else "")
                             + (f"; resolution {res:.2g}" if res is not None else ""))
            if r.resolution is not None:
                lines.append(f"    resolution {r.resolution:.2g}: a relative error above it in "
                             "any theory value compared here turns this check FAIL")
    finds = [r for r in results if r.verdict == "FINDING"]
    if finds:
        lines.append("")
        lines.append("findings (our computations agree; a claim printed in the paper is not "
                     "what was measured):")
        for r in finds:
            for f in r.findings:
                lines.append(f"  {r.id}: expected {f['expectation']}, measured "
                             f"{f['measured']:.3g}. {f['reason']} ({r.reference})")
    lines.append(summary_line(results))
    return "\n".join(lines)


def write_json(results: list[CheckResult], path: str | Path) -> None:
    from ..cache import atomic_write_bytes, provenance

    payload = {"provenance": provenance(),
               "checks": [{**asdict(r), "passed": r.passed} for r in results]}
    atomic_write_bytes(Path(path), json.dumps(payload, indent=2, default=str).encode())


def read_json(path: str | Path) -> list[CheckResult]:
    """The results that :func:`write_json` wrote (fields it does not know are ignored, fields
    an older file lacks take their defaults)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(CheckResult)}
    rows = json.loads(Path(path).read_text())["checks"]
    return [CheckResult(**{k: v for k, v in r.items() if k in names}) for r in rows]
