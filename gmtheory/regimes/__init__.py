"""``gmtheory explore``: where softmax attention is needed and where linear suffices,
for any Gaussian-mixture problem written as data (docs/explore.md).

* :func:`load_spec` / :class:`Problem` — the problem (TOML or Python), validated;
* :func:`explore` — every point of the sweep through the cache (resumable, shared by
  processes), with the comparisons of ``gmtheory verify`` run on the user's problem;
* :meth:`ExploreResult.write` — ``explore.json`` and ``report.md``; the regime figure is
  drawn by :func:`gmtheory.figures.explore.draw_regimes` (the figures layer).

A library package: it uses the comparison kinds of :mod:`gmtheory.comparisons` (the same
as ``gmtheory verify``'s) and imports nothing from the checks, simulations or figures.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np

from .spec import AXES, Options, Problem, SpecError, at_point, load_spec, problem_from_dict

__all__ = ["explore", "ExploreResult", "Problem", "Options", "SpecError", "load_spec",
           "problem_from_dict", "AXES"]

SCHEMA = 1
ESS_ASYMPTOTIC = 20.0  # effective sample size from which the delta method's 1/L law applies


@dataclass
class ExploreResult:
    """The sweep: ``points`` (one record per point: parameters, values, comparisons,
    verdict), the problem and the sweep-level comparisons."""

    problem: Problem
    points: list
    sweep_comparisons: list
    seconds: float

    @property
    def axes(self) -> dict:
        return dict(self.problem.vary)

    @property
    def verdict(self) -> str:
        vs = [p["verdict"] for p in self.points] + [c["verdict"] for c in self.sweep_comparisons]
        return "FAIL" if "FAIL" in vs else ("FINDING" if "FINDING" in vs else "PASS")

    def as_dict(self) -> dict:
        return {"schema": SCHEMA, "problem": self.problem.as_dict(), "axes": self.axes,
                "verdict": self.verdict, "seconds": self.seconds, "points": self.points,
                "sweep_comparisons": self.sweep_comparisons}

    def write(self, out) -> dict:
        """Write ``explore.json`` and ``report.md`` into ``out``; the report shows
        ``regimes.png`` when it is there (drawn by
        :func:`gmtheory.figures.explore.draw_regimes`, as ``gmtheory explore`` does)."""
        from ..cache import atomic_write_bytes
        from .report import report_markdown

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {"json": out / "explore.json", "report": out / "report.md"}
        atomic_write_bytes(paths["json"], json.dumps(_jsonable(self.as_dict()), indent=1)
                           .encode())
        fig = "regimes.png" if (out / "regimes.png").exists() else None
        atomic_write_bytes(paths["report"], report_markdown(self, figure=fig).encode())
        return paths


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if np.isfinite(v) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _coerce(problem) -> Problem:
    if isinstance(problem, Problem):
        return problem
    if isinstance(problem, (str, Path)):
        return load_spec(problem)
    if isinstance(problem, dict):
        return problem_from_dict(problem)
    raise SpecError("problem: expected a Problem, a path to a TOML spec or a dict in the "
                    f"spec's layout, got {type(problem).__name__}.")


def _split(values: dict):
    """Arrays go to the ``.npz``, scalars and strings to the record."""
    arrays, scalars = {}, {}
    for k, v in values.items():
        if isinstance(v, (np.ndarray,)) or hasattr(v, "shape") and np.ndim(v) > 0:
            arrays[k] = np.asarray(v)
        elif isinstance(v, str):
            scalars[k] = v
        else:
            scalars[k] = float(v) if not isinstance(v, (int, np.integer)) else int(v)
    return arrays, scalars


def explore(problem, vary: dict | None = None, *, results_dir="simulations/results",
            force: bool = False, progress: bool = True, out=None) -> ExploreResult:
    """Map one problem over its sweep: Bayes, linear attention and softmax heads per point.

    ``problem`` is a :class:`Problem`, a path to a TOML spec or a dict in the spec's
    layout; ``vary`` replaces its ``[vary]`` axes (same forms: lists or
    ``{"start", "stop", "num"}``).  Each point is cached under ``results_dir/explore/``
    (keyed by the problem, the point, the source code and the jax/jaxlib versions, x64 and
    ``XLA_FLAGS``) and claimed before it is
    computed, so an interrupted sweep resumes and two processes share the points.
    With ``out`` the JSON and the report are written there too (:meth:`ExploreResult.write`).
    """
    from tqdm.auto import tqdm

    from ..cache import (
        check_writable,
        config_key,
        environment_identity,
        load_result,
        release_claim,
        save_result,
        source_fingerprint,
        try_claim,
    )
    from ..comparisons import Outcome
    from .spec import sweep_points, vary_axes

    if not jax.config.jax_enable_x64:
        # in float32 the closed forms differ from their second computations by ~1e-7, and
        # the comparisons, decided at float64 round-off, would FAIL on every problem
        raise RuntimeError("explore: its comparisons are decided at float64 round-off; call "
                           "gmtheory.enable_x64() first (the gmtheory CLI does).")
    prob = _coerce(problem)
    if vary is not None:
        prob = dataclasses.replace(prob, vary=vary_axes(vary, dataclasses.replace(prob, vary={}),
                                                     "vary"))
    fp = source_fingerprint("gmtheory.regimes.run_point")
    base = {k: v for k, v in prob.as_dict().items() if k not in ("vary", "name")}
    points = sweep_points(prob)
    env = environment_identity()   # jax, jaxlib, x64 and XLA_FLAGS: part of every key
    folder = check_writable(Path(results_dir) / "explore" / f"{prob.name}-{config_key(base)}")
    t0 = time.perf_counter()
    records: dict[int, dict] = {}
    bar = tqdm(total=len(points), desc=f"explore {prob.name}", disable=not progress,
               leave=False)
    pending = list(range(len(points)))
    while pending:
        waiting = []
        for i in pending:
            pt = points[i]
            key = config_key(SCHEMA, base, pt, fp.digest, env)
            stem = folder / f"point-{config_key(pt)}"
            hit = None if force else load_result(stem, key)
            if hit is None:
                claim = stem.with_suffix(".claim")
                if not try_claim(claim):
                    waiting.append(i)
                    continue
                try:
                    hit = None if force else load_result(stem, key)
                    if hit is None:
                        arrays, meta = _run_point(prob, pt, i, key, fp)
                        save_result(stem, arrays, meta)
                        hit = (arrays, meta)
                finally:
                    release_claim(claim)
            records[i] = _record(pt, hit)
            bar.update()
        if waiting:
            time.sleep(0.5)
        pending = waiting
        force = False
    bar.close()
    recs = [records[i] for i in range(len(points))]
    sweep = _sweep_comparisons(prob, recs, Outcome)
    res = ExploreResult(prob, recs, sweep, time.perf_counter() - t0)
    if out is not None:
        res.write(out)
    return res


def _run_point(prob, pt, i, key, fp):
    from ..cache import config_key
    from ..comparisons import Outcome
    from .run_point import compute_point

    t = time.perf_counter()
    # the key of a point's infinite-prompt part comes from its parameters other than L, so
    # that every L of a sweep evaluates the same limit-optimal heads
    from ..problems import stream_key

    limit_params = {k: v for k, v in pt.items() if k != "L"}
    values, cmp = compute_point(at_point(prob, pt),
                                stream_key(prob.seed, config_key(limit_params)))
    arrays, scalars = _split(values)
    outcome = Outcome(*cmp)
    meta = {"key": key, "point": pt, "index": i, "values": scalars,
            "comparisons": [dataclasses.asdict(c) | {"holds": c.holds()} for c in cmp],
            "verdict": outcome.verdict(), "seconds": time.perf_counter() - t,
            "fingerprint": fp.as_dict()}
    return arrays, meta


def _record(pt, hit):
    arrays, meta = hit
    rec = {"params": dict(pt), **meta["values"], "verdict": meta["verdict"],
           "comparisons": meta["comparisons"], "seconds": meta["seconds"]}
    for k, v in arrays.items():
        if k.endswith("_starts"):
            rec[k] = np.asarray(v).tolist()
    return rec


def _sweep_comparisons(prob, recs, Outcome) -> list:
    """Comparisons over the whole sweep: the finite-prompt deviation's rate in ``L``."""
    from ..comparisons import agreement
    from ..stats import fit_loglog

    out = []
    Ls = prob.vary.get("L", ())
    others = [a for a in prob.vary if a != "L"]
    if prob.task == "denoising" and len(Ls) >= 3 and not others and "prompt_dev" in recs[0]:
        ess = min(r.get("prompt_ess_p10", 0.0) for r in recs)
        if ess < ESS_ASYMPTOTIC:
            out.append({"name": "rate of the finite-prompt deviation in L", "kind": "agreement",
                        "verdict": "not applicable", "holds": None,
                        "why": f"the 1/L law is asymptotic in the prompt's effective sample "
                               f"size; its 10th percentile over queries is {ess:.3g} < "
                               f"{ESS_ASYMPTOTIC} at some L (pre-asymptotic: the head's "
                               f"gates are too sharp for these prompt lengths)"})
            return out
        L = np.array([r["L"] for r in recs], float)
        dev = np.array([r["prompt_dev"] for r in recs], float)
        fit = fit_loglog(L, dev)
        c = agreement(abs(fit.slope + 1.0), 4 * fit.stderr,
                      "E|T_L(z) - T(z)|^2 of the limit-optimal head falls like 1/L (a "
                      "self-normalised importance-sampling estimator, delta method) once the "
                      f"prompt's effective sample size is >= {ESS_ASYMPTOTIC} for 90 % of the "
                      "queries: fitted log-log slope within 4 of its standard errors of -1",
                      name="|slope + 1| of the finite-prompt deviation in L")
        out.append({"name": c.name, "kind": c.kind, "measured": c.measured,
                    "threshold": c.threshold, "why": c.why, "holds": c.holds(),
                    "slope": fit.slope, "slope_se": fit.stderr,
                    "verdict": Outcome(c).verdict()})
    return out
