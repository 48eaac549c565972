"""Perturbation test of ``gmtheory verify``: wrong code must turn verify red.

For each public function of the theory modules (:data:`MODULES`: the callables in their
``__all__``), the output is multiplied by ``1 + delta`` (every floating-point leaf: arrays,
scalars, tuples, dicts, dataclasses, pytrees; a returned callable is wrapped the same way)
and the checks that call the function run.  It is *caught* when one of them returns FAIL
(not PASS, FINDING or ERROR).  A proven bound (``*_bound``) is multiplied by ``1 - delta``
instead: a larger bound is still a bound (:func:`signed_delta`).

``delta`` walks the ladder :data:`LADDER` (1e-6, 1e-3, 2e-2, 1e-1): first 1e-3, which
every check of a float64 computation claims to resolve (their tolerances are 1e-6 or
finer); when it is not caught, :data:`REQUIRED` = 2e-2, the resolution every function must
have (the Monte Carlo identities are decided at 1 %, so a 2 % error is past their
resolution); when that is not caught either, 1e-1, to record how coarse the checks are.
With ``--refine``, 1e-6 where 1e-3 is caught.  The smallest caught ``delta`` is the
*resolution* that the checks of that function have, measured.  A function caught at 2e-2
or finer is *caught*; one caught only at 1e-1 is *coarse*, and one not caught at all is
*unchecked*: both are listed with their reason (:data:`UNCHECKED`) in ``docs/report.md``.
A run records the checks it ran (redone when the call map gives another set).

Which checks call which function is measured: :func:`call_map` wraps every public function
with a counter and runs every check once, jax's and every ``functools`` cache cleared
before each (so a function traced or cached by another check is recorded for each).
Each perturbation runs in a fresh interpreter (nothing traced or cached before the patch
survives it), its checks in order of their measured time, stopping at the first FAIL.
The function is replaced wherever the package holds it: its module's attribute, every
``from X import f`` alias in ``gmtheory``, every default argument that is the function.

Two *breaks* follow the ladder (:data:`BREAKS`): the output multiplied by NaN, and its sign
flipped.  Each must be caught by a check that returns FAIL or ERROR (a check that raises on
a NaN has refused it, which is what it should do); a check that PASSes on a NaN is a hole
in the verdicts (issue 41).  The functions of :mod:`gmtheory.approx_compose` return
expressions that carry a certified bound beside their emulation; the ladder perturbs the
emulation, and a third break (:data:`BOUND`) makes the bound 2 % smaller, the error of a
composition rule that adds too little, carried into every expression composed on it.
The call map's own run is the delta = 0 trial: every public
function is wrapped (counted, output unchanged) and every check must still PASS.

The call map carries the fingerprint of the files it was measured on (:func:`map_fingerprint`:
the check modules, the registry, :mod:`gmtheory.comparisons` and the perturbed modules); the
default test fails when any of them changed since, so that the pass never runs on a stale
map of which check calls which function.

Run the pass (``map``, then ``run --jobs 2`` for the ladder and ``breaks --jobs 2``; about
an hour on two cores from scratch, and it resumes), or ``pytest -m mutation``; the default
tests check the committed ``docs/measured/mutation.json`` (tests/test_mutation.py).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["MODULES", "LADDER", "REQUIRED", "BREAKS", "UNCHECKED", "public_functions",
           "perturb", "patch", "restore", "call_map", "run_one", "run_pass", "run_breaks",
           "signed_delta", "NO_FLOAT", "FLIP_REASONS", "FLIP_SURVIVES", "stale_files",
           "map_fingerprint", "RESULT_FILE", "TESTED_BY", "BOUND", "BOUND_MODULES",
           "BOUND_REASONS", "breaks_of"]

MODULES = ("operators", "lda", "denoising", "icl", "icl_softmax", "hermite", "approx", "gma",
           "gma_analysis", "approx_compose", "regimes", "stats", "quadrature", "variates")
LADDER = (1e-6, 1e-3, 2e-2, 1e-1)
REQUIRED = 2e-2      # every function must be caught at this delta (or listed with a reason)
# the breaks: the name and the delta whose factor 1 + delta breaks the output (NaN; -1)
BREAKS = {"nan": float("nan"), "flip": -2.0}
#: the third break, for the functions of BOUND_MODULES: the certified bound of every
#: expression they return multiplied by 1 - REQUIRED, their emulation left as it is (a
#: composition rule that adds too little error), carried into every expression composed
#: on them; caught when a check FAILs or raises
BOUND = "bound"
BOUND_MODULES = ("approx_compose",)
RESULT_FILE = Path(__file__).resolve().parents[2] / "docs" / "measured" / "mutation.json"

# why a function is not caught (its reasons live in their own module, read into the report)
from ._perturb import Tally, perturb, wrap  # noqa: E402
from .mutation_reasons import (  # noqa: E402
    BOUND_REASONS,
    FLIP_REASONS,
    FLIP_SURVIVES,
    NO_FLOAT,
    TESTED_BY,
    UNCHECKED,
)


def breaks_of(qualname: str) -> list[str]:
    """The breaks run on ``qualname``: :data:`BREAKS`, and :data:`BOUND` for the functions
    of :data:`BOUND_MODULES` (whose outputs carry a certified bound)."""
    return [*BREAKS, *([BOUND] if qualname.split(".")[0] in BOUND_MODULES else [])]


def public_functions(modules=MODULES) -> list[str]:
    """``module.name`` of every callable in the ``__all__`` of ``modules`` that is not a
    class (a config dataclass or a result container is not a computation)."""
    out = []
    for m in modules:
        mod = importlib.import_module(f"gmtheory.{m}")
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name, None)
            if callable(obj) and not isinstance(obj, type):
                out.append(f"{m}.{name}")
    return out


def signed_delta(qualname: str, delta: float) -> float:
    """``-delta`` for a proven bound (a function named ``*_bound``): a bound is wrong when
    it is too small; one made larger is still a bound, only looser, and no check can
    call that wrong.  ``delta`` for every other function."""
    if delta in BREAKS.values() or delta != delta:     # a break: the factor as it is
        return delta
    return -delta if qualname.endswith("_bound") else delta


def _break_name(delta: float) -> str | None:
    if delta != delta:
        return "nan"
    return next((k for k, v in BREAKS.items() if v == delta), None)


def map_fingerprint() -> dict:
    """``{"digest", "files"}``: the sha256 of every file whose change can change the call
    map or a verdict's arithmetic: the check modules and the registry
    (``gmtheory/verify``), :mod:`gmtheory.comparisons`, and the perturbed modules
    (:data:`MODULES`; every file of a package)."""
    import hashlib

    root = Path(__file__).resolve().parents[1]
    paths = sorted(root.joinpath("verify").glob("*_checks.py"))
    paths += [root / "verify" / "_registry.py", root / "comparisons.py"]
    for m in MODULES:
        if (root / f"{m}.py").is_file():
            paths.append(root / f"{m}.py")
        else:
            paths += sorted((root / m).glob("*.py"))
    files = {p.relative_to(root.parent).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in paths}
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    return {"digest": digest, "files": files}


def stale_files(stored: dict | None) -> list[str]:
    """The files whose hash differs between the call map's stored fingerprint and now
    (every file when nothing is stored)."""
    now = map_fingerprint()["files"]
    old = (stored or {}).get("files", {})
    return sorted(f for f in set(now) | set(old) if now.get(f) != old.get(f))


def _load_everything() -> None:
    """Import every module whose code a check may run, so that :func:`patch` finds every
    alias (a module imported later reads the patched attribute)."""
    from ..simulations import load_all
    from . import all_checks

    all_checks()
    load_all()


def patch(qualname: str, delta: float, counter: dict | None = None,
          bound: bool = False) -> int:
    """Replace ``gmtheory.<qualname>`` by a version whose output is multiplied by
    ``1 + delta`` (with ``counter``, also count its calls under ``qualname``) wherever the
    package holds it; with ``bound``, only the certified bounds of the expressions it
    returns, by ``1 - |delta|`` (:data:`BOUND`).  Returns the number of references
    replaced."""
    from ..cache import mark_perturbed, perturbed

    m, name = qualname.split(".", 1)
    mod = importlib.import_module(f"gmtheory.{m}")
    orig = getattr(mod, name)
    d = -abs(delta) if bound else signed_delta(qualname, delta)
    new = wrap(orig, d, counter, qualname, bound=bound)
    if delta:                    # results computed from here on are marked, never reused
        prev = perturbed()       # by an unperturbed process (gmtheory.cache)
        mark_perturbed(f"{qualname}{' bound' if bound else ''} x {1.0 + d!r}")
        _UNDO.append(lambda: mark_perturbed(prev))
    n = 0
    for modname, module in list(sys.modules.items()):
        if not (modname == "gmtheory" or modname.startswith("gmtheory.")) or module is None:
            continue
        for attr, val in list(vars(module).items()):
            if val is orig:
                setattr(module, attr, new)
                _UNDO.append(lambda module=module, attr=attr: setattr(module, attr, orig))
                n += 1
            elif inspect.isfunction(val) and val.__module__ == modname:
                n += _patch_defaults(val, orig, new)
            elif isinstance(val, type) and val.__module__ == modname:
                for meth in vars(val).values():
                    if inspect.isfunction(meth):
                        n += _patch_defaults(meth, orig, new)
    return n


_UNDO: list = []


def restore() -> None:
    """Undo every :func:`patch` of this process."""
    while _UNDO:
        _UNDO.pop()()


def _patch_defaults(fn, orig, new) -> int:
    n = 0
    if fn.__defaults__ or fn.__kwdefaults__:
        _UNDO.append(lambda d=fn.__defaults__, k=fn.__kwdefaults__: (
            setattr(fn, "__defaults__", d), setattr(fn, "__kwdefaults__", k)))
    if fn.__defaults__ and any(d is orig for d in fn.__defaults__):
        fn.__defaults__ = tuple(new if d is orig else d for d in fn.__defaults__)
        n += 1
    if fn.__kwdefaults__ and any(d is orig for d in fn.__kwdefaults__.values()):
        fn.__kwdefaults__ = {k: new if d is orig else d for k, d in fn.__kwdefaults__.items()}
        n += 1
    return n


def _clear_caches() -> None:
    import jax

    jax.clear_caches()
    for modname, module in list(sys.modules.items()):
        if modname.startswith("gmtheory") and module is not None:
            for val in list(vars(module).values()):
                if callable(getattr(val, "cache_clear", None)):
                    val.cache_clear()


def _setup() -> None:
    import gmtheory

    gmtheory.enable_x64()
    gmtheory.enable_compilation_cache()
    gmtheory.limit_blas_threads()


def call_map(only: str | None = None, progress: bool = True) -> dict:
    """Run every check once with every public function counted: ``{"calls": {check:
    {function: calls}}, "seconds": {check: s}, "verdicts": {check: verdict}}``."""
    from ._registry import results_dir, run_checks, select_checks, set_results_dir

    _setup()
    _load_everything()
    counter: dict = {}
    for q in public_functions():
        patch(q, 0.0, counter)
    calls, seconds, verdicts = {}, {}, {}
    old = results_dir()
    # a fresh simulation cache: a check that reads a figure's run computes it here, under
    # the counters (a cached run would hide the calls made inside the simulation, and a
    # run cached by other code, or poisoned by an in-process perturbation, would be read)
    with tempfile.TemporaryDirectory(prefix="gmtheory-callmap-") as fresh:
        set_results_dir(fresh)
        try:
            for c in select_checks(only):
                _clear_caches()
                counter.clear()
                (res,) = run_checks([c], progress=False)
                calls[c.id] = dict(sorted(counter.items()))
                seconds[c.id] = round(res.seconds, 2)
                verdicts[c.id] = res.verdict
                if progress:
                    print(f"map {c.id} {res.verdict} {res.seconds:.1f}s {len(counter)} "
                          "functions", file=sys.stderr, flush=True)
        finally:
            set_results_dir(old)
    return {"calls": calls, "seconds": seconds, "verdicts": verdicts}


def run_one(qualname: str, delta: float, check_ids: list[str], bound: bool = False) -> dict:
    """Perturb ``qualname`` by ``delta`` (in this process) and run ``check_ids`` in order
    until one FAILs (for a break, :data:`BREAKS` or ``bound`` (:data:`BOUND`, the bounds
    by ``1 - |delta|``), until one FAILs or raises)."""
    from ._registry import run_checks, select_checks

    _setup()
    _load_everything()
    refs = patch(qualname, delta, bound=bound)
    by_id = {c.id: c for c in select_checks(None)}
    brk = BOUND if bound else _break_name(delta)
    stops = ("FAIL", "ERROR") if brk else ("FAIL",)
    ran = []
    for cid in check_ids:
        (res,) = run_checks([by_id[cid]], progress=False)
        row = {"check": cid, "verdict": res.verdict, "seconds": round(res.seconds, 2)}
        if res.verdict == "FAIL":
            f = res.comparisons[res.headline]
            row["comparison"] = f"{f['expectation']}: measured {f['measured']:.6g}"
        if res.error:
            row["error"] = res.error.splitlines()[0][:300]
        ran.append(row)
        if res.verdict in stops:
            break
    return {"function": qualname, "delta": brk or delta,
            "factor": (1.0 - abs(delta) if bound else brk or 1.0 + signed_delta(qualname, delta)),
            "references": refs,
            "perturbed_calls": Tally.perturbed, "untouched_calls": Tally.untouched,
            "caught": any(r["verdict"] in stops for r in ran), "ran": ran}


def _read(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def _write(path: Path, data: dict) -> None:
    from ..cache import atomic_write_bytes

    atomic_write_bytes(path, (json.dumps(data, indent=1, sort_keys=True) + "\n").encode())


def _subprocess(qualname: str, delta: float | str, checks: list[str], timeout: float) -> dict:
    """``run_one`` in a fresh interpreter; ``delta``: a number, a break's value in
    :data:`BREAKS`, or :data:`BOUND`."""
    name = delta if delta == BOUND else _break_name(delta) or repr(delta)
    cmd = [sys.executable, "-m", "gmtheory.verify.mutation", "one", qualname,
           "--delta", name, "--checks", ",".join(checks)]
    t0 = time.perf_counter()
    # a fresh simulation cache: a cached run of unperturbed code would hide the perturbation
    # from a check that reads a figure's run (its key knows the source, not the patch)
    with tempfile.TemporaryDirectory(prefix="gmtheory-mutation-") as results:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               env={**os.environ, "TQDM_DISABLE": "1",
                                    "GMTHEORY_RESULTS": results})
        except subprocess.TimeoutExpired:
            return {"function": qualname, "delta": name if name in (BOUND, *BREAKS) else delta,
                    "caught": False, "ran": [], "error": f"timed out after {timeout:.0f} s"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        return {"function": qualname, "delta": name if name in (BOUND, *BREAKS) else delta,
                "caught": False,
                "ran": [],
                "error": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}
    out = json.loads(lines[-1])
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def _next_delta(runs: list[dict], refine: bool = False) -> float | None:
    """The ladder walk: 1e-3 first; caught -> 1e-6 with ``refine``, then stop; not caught
    -> 2e-2 (:data:`REQUIRED`); not caught -> 1e-1; then stop."""
    done = {r["delta"]: r["caught"] for r in runs}
    lo, mid, req, hi = LADDER
    if mid not in done:
        return mid
    if done[mid]:
        return lo if refine and lo not in done else None
    if req not in done:
        return req
    if done[req]:
        return None
    return hi if hi not in done else None


def summarize(entry: dict) -> dict:
    """Status of one function from its runs: caught (at :data:`REQUIRED` or finer, with
    the smallest caught delta), coarse (caught only above it), unchecked, or not-called (no
    check calls it)."""
    caught = sorted(r["delta"] for r in entry.get("runs", []) if r["caught"])
    if not entry.get("checks"):
        return {"status": "not-called", "resolution": None}
    if caught:
        by = next(r for r in entry["runs"] if r["caught"] and r["delta"] == caught[0])
        status = "caught" if caught[0] <= REQUIRED else (
            "coarse" if _next_delta(entry["runs"]) is None else "pending")
        return {"status": status, "resolution": caught[0],
                "caught_by": by["ran"][-1]["check"],
                "comparison": by["ran"][-1].get("comparison", "")}
    none = {"resolution": None, "caught_by": None, "comparison": None}  # no stale catch
    return {"status": "unchecked" if _next_delta(entry.get("runs", [])) is None
            else "pending", **none}


def _same_checks(a, b) -> bool:
    """Whether two runs tried the same checks (in any order: a run stops at the first
    FAIL, so which checks it covers decides it, not their order)."""
    return a is not None and b is not None and sorted(a) == sorted(b)


def run_pass(path: Path = RESULT_FILE, jobs: int = 1, only: str | None = None,
             timeout: float = 900.0, refine: bool = False) -> dict:
    """Walk the ladder for every public function (resuming from ``path``), writing
    ``path`` after each run."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    data = _read(path)
    cmap = _current_map(data, path)
    funcs = data.setdefault("functions", {})
    prefixes = tuple(p.strip() for p in (only or "").split(",") if p.strip())
    names = [q for q in public_functions() if not prefixes or q.startswith(prefixes)]
    for q in names:
        checks = [c for c in cmap["calls"] if q in cmap["calls"][c]]
        checks.sort(key=lambda c: cmap["seconds"].get(c, 0.0))
        e = funcs.setdefault(q, {"runs": []})
        for r in e["runs"]:             # a run from before runs recorded their checks
            r.setdefault("checks", e.get("checks"))
        e["runs"] = [r for r in e["runs"] if _same_checks(r["checks"], checks)]
        e["checks"] = checks

    def todo():
        return [(q, d) for q in names if funcs[q]["checks"]
                for d in [_next_delta(funcs[q]["runs"], refine)] if d is not None]

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while True:
            work = todo()
            if not work:
                break
            futs = {pool.submit(_subprocess, q, d, funcs[q]["checks"], timeout): q
                    for q, d in work}
            for f in as_completed(futs):
                q = futs[f]
                res = {**f.result(), "checks": funcs[q]["checks"],
                       "map": (cmap.get("fingerprint") or {}).get("digest")}
                funcs[q]["runs"].append(res)
                funcs[q].update(summarize(funcs[q]))
                print(f"{q} delta={res['delta']:g} caught={res['caught']} "
                      f"{[r['check'] + ':' + r['verdict'] for r in res['ran']]} "
                      f"{res.get('error', '')}", file=sys.stderr, flush=True)
                _write(path, data)
    for q in names:
        funcs[q].update(summarize(funcs[q]))
    data["ladder"] = list(LADDER)
    data["modules"] = list(MODULES)
    _write(path, data)
    return data


def _current_map(data: dict, path: Path) -> dict:
    cmap = data.get("map")
    if cmap is None:
        raise SystemExit(f"{path}: no call map; run `python -m gmtheory.verify.mutation map`")
    stale = stale_files(cmap.get("fingerprint"))
    if stale:
        raise SystemExit(f"{path}: the call map is stale ({', '.join(stale[:5])} changed); run "
                         "`python -m gmtheory.verify.mutation map` first")
    return cmap


def run_breaks(path: Path = RESULT_FILE, jobs: int = 1, only: str | None = None,
               timeout: float = 900.0) -> dict:
    """Each break of :func:`breaks_of` (:data:`BREAKS`, and :data:`BOUND` for the
    functions of :data:`BOUND_MODULES`) for every function that a check calls (resuming
    from ``path``): ``functions[q]["breaks"][name]`` is the run; caught when a check FAILs
    or raises."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    data = _read(path)
    cmap = _current_map(data, path)
    funcs = data.setdefault("functions", {})
    prefixes = tuple(p.strip() for p in (only or "").split(",") if p.strip())
    work = []
    for q in public_functions():
        if prefixes and not q.startswith(prefixes):
            continue
        checks = sorted((c for c in cmap["calls"] if q in cmap["calls"][c]),
                        key=lambda c: cmap["seconds"].get(c, 0.0))
        e = funcs.setdefault(q, {"runs": []})
        br = e.setdefault("breaks", {})
        for name in breaks_of(q):
            delta = BREAKS.get(name, name)            # BOUND: passed by its name
            done = br.get(name)
            if checks and not (done and _same_checks(done.get("checks"), checks)
                               and "error" not in done):
                work.append((q, name, delta, checks))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futs = {pool.submit(_subprocess, q, delta, checks, timeout): (q, name, checks)
                for q, name, delta, checks in work}
        for f in as_completed(futs):
            q, name, checks = futs[f]
            res = {**f.result(), "checks": checks,
                   "map": (cmap.get("fingerprint") or {}).get("digest")}
            funcs[q]["breaks"][name] = res
            print(f"{q} {name} caught={res['caught']} "
                  f"{[r['check'] + ':' + r['verdict'] for r in res['ran']]} "
                  f"{res.get('error', '')}", file=sys.stderr, flush=True)
            _write(path, data)
    _write(path, data)
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gmtheory.verify.mutation",
                                 description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("map", help="measure which checks call which public function")
    a.add_argument("--out", type=Path, default=RESULT_FILE)
    a.add_argument("--only", default=None,
                   help="only these checks (as `gmtheory verify --only`), merged into the map")
    a = sub.add_parser("run", help="perturb every public function along the ladder")
    a.add_argument("--out", type=Path, default=RESULT_FILE)
    a.add_argument("--jobs", type=int, default=1)
    a.add_argument("--only", default=None,
                   help="comma-separated prefixes, e.g. 'lda.,icl.pretrain'")
    a.add_argument("--timeout", type=float, default=900.0)
    a.add_argument("--refine", action="store_true",
                   help="also try delta = 1e-6 where 1e-3 is caught")
    a = sub.add_parser("breaks", help="NaN and a sign flip for every called function (and a "
                       "2 %% smaller certified bound for approx_compose's)")
    a.add_argument("--out", type=Path, default=RESULT_FILE)
    a.add_argument("--jobs", type=int, default=1)
    a.add_argument("--only", default=None, help="comma-separated prefixes")
    a.add_argument("--timeout", type=float, default=900.0)
    a = sub.add_parser("one", help="(internal) one perturbation, in this process")
    a.add_argument("function")
    a.add_argument("--delta", required=True, help="a float, or a break: nan, flip")
    a.add_argument("--checks", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "map":
        data = _read(args.out)
        from ..cache import provenance

        fp = map_fingerprint()
        new = call_map(args.only)
        if args.only and "map" in data:     # a partial map keeps the old fingerprint: only
            for k in ("calls", "seconds", "verdicts"):     # a full map is current
                data["map"][k].update(new[k])
        else:
            data["map"] = {**new, "fingerprint": fp}
            data["provenance"] = provenance()
        _write(args.out, data)
    elif args.cmd == "run":
        run_pass(args.out, args.jobs, args.only, args.timeout, args.refine)
    elif args.cmd == "breaks":
        run_breaks(args.out, args.jobs, args.only, args.timeout)
    else:
        checks = [c for c in args.checks.split(",") if c]
        if args.delta == BOUND:
            print(json.dumps(run_one(args.function, REQUIRED, checks, bound=True)))
        else:
            delta = BREAKS[args.delta] if args.delta in BREAKS else float(args.delta)
            print(json.dumps(run_one(args.function, delta, checks)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
