"""Perturbation test (issue 26): wrong code must turn `gmtheory verify` red.

The full test, ``pytest -m mutation`` (about an hour on two cores: one fresh interpreter
per function and delta), multiplies the output of every public function of the theory
modules by 1 + delta and requires a check to FAIL (gmtheory/verify/mutation.py); its last
result is committed in docs/measured/mutation.json and shown in docs/report.md.  The
default suite checks, in a second, that this file covers every current public function
(so a new function cannot join the package unperturbed), that each is caught or listed as
unchecked with its reason, and that the perturbation itself reaches every kind of output
and every alias of a function.
"""

import dataclasses
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory.verify import mutation

RERUN = ("python -m gmtheory.verify.mutation map && python -m gmtheory.verify.mutation run "
         "--jobs 2")


def _data():
    assert mutation.RESULT_FILE.exists(), f"no {mutation.RESULT_FILE}: run {RERUN}"
    return json.loads(mutation.RESULT_FILE.read_text())


def test_result_covers_every_public_function():
    funcs = _data().get("functions", {})
    public = mutation.public_functions()
    missing = [q for q in public if q not in funcs]
    assert not missing, (
        f"{len(missing)} public functions of the theory modules were never perturbed: "
        f"{missing}. Run `{RERUN} --only <module>.` and commit {mutation.RESULT_FILE.name}.")
    gone = sorted(set(funcs) - set(public))
    assert not gone, f"{mutation.RESULT_FILE.name} lists functions that are gone: {gone}"


def test_call_map_is_current():
    """The call map was measured on the checks and theory modules as they are now: a change
    to any of them may change which check calls which function, so a stale map fails."""
    stored = _data()["map"].get("fingerprint")
    stale = mutation.stale_files(stored)
    assert not stale, (
        f"the call map in {mutation.RESULT_FILE.name} is stale: {len(stale)} files changed "
        f"since it was measured ({', '.join(stale[:8])}). Rerun `{RERUN}` and `python -m "
        "gmtheory.verify.mutation breaks --jobs 2`, and commit the file.")


def test_stale_map_is_detected(tmp_path):
    fp = mutation.map_fingerprint()
    assert mutation.stale_files(fp) == []
    old = {**fp, "files": {**fp["files"]}}
    name = next(iter(old["files"]))
    old["files"][name] = "0" * 64
    assert mutation.stale_files(old) == [name]
    assert mutation.stale_files(None) == sorted(fp["files"])
    path = tmp_path / "mutation.json"
    path.write_text(json.dumps({"map": {"calls": {}, "seconds": {}, "verdicts": {},
                                        "fingerprint": old}}))
    with pytest.raises(SystemExit, match="stale"):
        mutation.run_breaks(path)


def test_zero_delta_trial_passes():
    """The call map's run wraps every public function (output unchanged): delta = 0 must
    leave every check with the verdict it has (PASS, or a pinned FINDING)."""
    expected = json.loads((Path(__file__).with_name("expected_findings.json")).read_text())
    verdicts = _data()["map"]["verdicts"]
    wrong = {c: v for c, v in verdicts.items()
             if v != ("FINDING" if c in expected["findings"] else "PASS")}
    assert not wrong, f"checks that do not pass with every function wrapped at delta = 0: {wrong}"


def test_every_called_function_is_broken_by_nan_and_a_sign_flip():
    """A NaN in the output of any function that a check calls must make one of those checks
    FAIL or raise; so must a sign flip, unless the reason is recorded in FLIP_SURVIVES."""
    funcs = _data()["functions"]
    missing, nan_passes, flip_passes = [], [], []
    for q, e in funcs.items():
        if not e.get("checks"):
            continue
        br = e.get("breaks", {})
        for k in mutation.BREAKS:
            run = br.get(k)
            if run is None or "error" in run and not run.get("ran"):
                missing.append(f"{q}:{k}")
            elif not run["caught"]:
                if k == "nan" and q not in mutation.NO_FLOAT:
                    nan_passes.append(q)
                elif k == "flip" and q not in mutation.FLIP_SURVIVES | mutation.NO_FLOAT:
                    flip_passes.append(q)
    assert not missing, (f"breaks not run: {missing}; run `python -m gmtheory.verify.mutation "
                         "breaks --jobs 2`")
    assert not nan_passes, f"every check still PASSes with a NaN from: {nan_passes}"
    assert not flip_passes, f"every check still PASSes with the sign of: {flip_passes} flipped"
    for table in (mutation.FLIP_SURVIVES, mutation.NO_FLOAT):
        for q in table:
            assert q in funcs and not funcs[q].get("breaks", {}).get("flip", {}).get(
                "caught"), f"{q} is listed as surviving a break but is caught: remove it"


def test_every_composition_rule_is_broken_by_a_smaller_bound():
    """approx_compose's functions return expressions with a certified bound: a 2 % smaller
    bound (the bound break, carried into every expression composed on it) must make a check
    FAIL or raise, or be listed with its reason in BOUND_REASONS, and no caught one listed
    there."""
    funcs = _data()["functions"]
    called = [q for q in mutation.public_functions(mutation.BOUND_MODULES)
              if funcs.get(q, {}).get("checks")]
    assert called, "no function of BOUND_MODULES is called by a check"
    missing, passes = [], []
    for q in called:
        run = funcs[q].get("breaks", {}).get(mutation.BOUND)
        if run is None or "error" in run and not run.get("ran"):
            missing.append(q)
        elif not run["caught"] and q not in mutation.BOUND_REASONS:
            passes.append(q)
        elif run["caught"]:
            assert q not in mutation.BOUND_REASONS, f"{q} is caught: remove its reason"
            assert run["factor"] == pytest.approx(1 - mutation.REQUIRED), run
    assert not missing, (f"bound break not run: {missing}; run `python -m gmtheory.verify."
                         "mutation breaks --jobs 2 --only approx_compose.`")
    assert not passes, f"every check still PASSes with a 2 % smaller bound from: {passes}"
    assert set(mutation.BOUND_REASONS) <= set(called)
    # the reason given for variables: exact coordinates carry the bound 0
    from gmtheory import approx_compose as C

    assert set(mutation.BOUND_REASONS) == {"approx_compose.variables"}
    assert all(v.bound == 0.0 for v in C.variables([0.0, -1.0], [1.0, 2.0]))


def test_every_function_is_caught_or_explained():
    funcs = _data()["functions"]
    pending = [q for q, e in funcs.items() if e.get("status") == "pending"]
    assert not pending, f"perturbation pass unfinished for {pending}: run {RERUN}"
    bare = [q for q, e in funcs.items() if e["status"] in ("unchecked", "coarse", "not-called")
            and q not in mutation.UNCHECKED]
    assert not bare, (f"no check catches a {mutation.REQUIRED:.0%} error in {bare}: add a "
                      "check that does, or give the reason in gmtheory.verify.mutation."
                      "UNCHECKED")
    stale = [q for q in mutation.UNCHECKED if funcs.get(q, {}).get("status") == "caught"]
    assert not stale, f"listed as unchecked but caught: {stale}; remove them from UNCHECKED"
    for q, e in funcs.items():
        if e["status"] in ("caught", "coarse"):
            run = next(r for r in e["runs"] if r["caught"] and r["delta"] == e["resolution"])
            assert run["ran"][-1]["verdict"] == "FAIL", (q, run)


def _test_functions() -> dict:
    """``tests/test_x.py::test_name`` -> the AST of that test function."""
    import ast

    out = {}
    for f in sorted(Path(__file__).parent.glob("test_*.py")):
        for node in ast.parse(f.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                out[f"tests/{f.name}::{node.name}"] = node
    return out


def _calls_and_asserts(node, name: str) -> tuple[bool, bool]:
    """Whether the function ``node`` calls ``name`` (as ``name(...)`` or ``x.name(...)``,
    not in a string or a comment) and whether it asserts anything."""
    import ast

    calls = asserts = False
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            callee = f.id if isinstance(f, ast.Name) else f.attr if isinstance(
                f, ast.Attribute) else ""
            calls |= callee == name
            asserts |= "assert" in callee or callee == "raises"
        asserts |= isinstance(n, ast.Assert)
    return calls, asserts


def test_every_unchecked_reason_is_verified_by_a_test():
    """Issue 41 item 4: an entry of UNCHECKED needs a reason that a test verifies.  Each
    listed function names unit tests (mutation.TESTED_BY) that exist, call it (in code, not
    in a string or a comment) and assert something, unless
    its reason declares an open gap ("open ... issue N"); a reason that says no check
    calls the function agrees with the call map; TESTED_BY lists no function that is
    not in UNCHECKED."""
    import re

    tests = _test_functions()
    calls = _data()["map"]["calls"]
    called = {q for fs in calls.values() for q in fs}
    unverified, missing, idle, wrong_claim = [], [], [], []
    for q, reason in mutation.UNCHECKED.items():
        named = mutation.TESTED_BY.get(q, ())
        if not named and not re.match(r"open\b.*\bissue \d+", reason, re.S):
            unverified.append(q)
        short = q.split(".", 1)[1]
        for t in named:
            if t not in tests:
                missing.append(t)
            elif not all(_calls_and_asserts(tests[t], short)):
                idle.append(f"{t} does not call {short} and assert")
        says_uncalled = re.search(r"no check calls it|called by no check", reason)
        if bool(says_uncalled) == (q in called):
            wrong_claim.append(q)
    assert not unverified, f"UNCHECKED reasons with no test and not declared open: {unverified}"
    assert not missing, f"TESTED_BY names tests that do not exist: {missing}"
    assert not idle, f"TESTED_BY names tests that do not call the function: {idle}"
    assert not wrong_claim, ("these reasons say whether a check calls the function, and the "
                             f"call map says otherwise: {wrong_claim}")
    extra = sorted(set(mutation.TESTED_BY) - set(mutation.UNCHECKED))
    assert not extra, f"TESTED_BY lists functions that are caught (not in UNCHECKED): {extra}"


@dataclasses.dataclass(frozen=True)
class _Box:
    a: jnp.ndarray
    n: int


def test_perturb_reaches_every_float_leaf():
    out = mutation.perturb((1.0, np.ones(2), jnp.ones(3, dtype=jnp.float32), 3,
                            {"x": np.arange(3)}, _Box(jnp.ones(2), 4)), 0.5)
    assert out[0] == 1.5 and np.all(out[1] == 1.5) and out[2].dtype == jnp.float32
    assert np.all(out[2] == 1.5) and out[3] == 3 and np.all(out[4]["x"] == np.arange(3))
    assert np.all(out[5].a == 1.5) and out[5].n == 4
    f = mutation.perturb(lambda x: 2.0 * x, 0.5)
    assert f(1.0) == 3.0


def test_perturb_reaches_an_emulated_expression_inside_a_composition():
    """An approx_compose expression is perturbed in its emulated values, also where a later
    composition reads it as a term (the composition walks its terms, not their calls)."""
    from gmtheory import approx_compose as C

    x, = C.variables(-1.0, 1.0)
    f = x * 0.5
    g = mutation.perturb(f, 0.5)
    pts = np.array([[0.4], [-0.8]])
    np.testing.assert_allclose(np.asarray(g(pts)), 1.5 * np.asarray(f(pts)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray((g + 1.0)(pts)), 1.5 * np.asarray(f(pts)) + 1.0,
                               rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(g.exact(pts)), np.asarray(f.exact(pts)))
    assert g.bound == f.bound and np.all(np.asarray(f(pts)) == 0.5 * pts[:, 0])


def test_patch_replaces_every_alias():
    import gmtheory.operators as ops
    from gmtheory.verify import all_checks

    all_checks()  # registered in the registry's order (docs/checks.md lists them so)
    from gmtheory.verify import lda_checks

    orig = ops.softmax_attention_limit
    assert lda_checks.softmax_attention_limit is orig
    try:
        n = mutation.patch("operators.softmax_attention_limit", 0.0)
        assert n >= 2 and lda_checks.softmax_attention_limit is ops.softmax_attention_limit
        assert ops.softmax_attention_limit is not orig
    finally:
        mutation.restore()
    assert ops.softmax_attention_limit is orig


@pytest.mark.mutation
@pytest.mark.parametrize("brk", sorted(mutation.BREAKS))
@pytest.mark.parametrize("qualname", mutation.public_functions())
def test_a_break_turns_a_check_red(qualname, brk):
    """A NaN (or a sign flip) in ``qualname``'s output, fresh: a check must FAIL or raise."""
    cmap = _data()["map"]
    checks = sorted((c for c in cmap["calls"] if qualname in cmap["calls"][c]),
                    key=lambda c: cmap["seconds"].get(c, 0.0))
    if not checks or qualname in mutation.NO_FLOAT or (
            brk == "flip" and qualname in mutation.FLIP_SURVIVES):
        return
    run = mutation._subprocess(qualname, mutation.BREAKS[brk], checks, timeout=900.0)
    assert run["caught"], run


@pytest.mark.mutation
@pytest.mark.parametrize("qualname", mutation.public_functions())
def test_perturbation_turns_a_check_red(qualname):
    """The ladder for one function, fresh (the committed call map says which checks call
    it; rerun `python -m gmtheory.verify.mutation map` first after changing the checks)."""
    cmap = _data()["map"]
    checks = sorted((c for c in cmap["calls"] if qualname in cmap["calls"][c]),
                    key=lambda c: cmap["seconds"].get(c, 0.0))
    if not checks:
        assert qualname in mutation.UNCHECKED, f"no check calls {qualname}"
        return
    runs = []
    while (d := mutation._next_delta(runs)) is not None:
        runs.append(mutation._subprocess(qualname, d, checks, timeout=900.0))
    caught = [r for r in runs if r["caught"]]
    assert caught or qualname in mutation.UNCHECKED, (qualname, runs)


def test_a_perturbed_process_never_feeds_the_cache(tmp_path):
    """A result computed while a function is deliberately wrong is marked, and a clean
    process never reads it back (an in-process NaN injection once poisoned the default
    results folder, and icl.09 FAILed at delta = 0)."""
    from gmtheory.cache import load_result, perturbed, save_result

    stem = tmp_path / "r"
    try:
        mutation.patch("operators.softmax_attention_limit", float("nan"))
        assert "softmax_attention_limit" in perturbed()
        save_result(stem, {"x": np.array([np.nan])}, {"key": "k"})
        assert load_result(stem, "k") is not None          # the same perturbed process
    finally:
        mutation.restore()
    assert perturbed() is None
    assert load_result(stem, "k") is None                  # a clean process: a miss
    save_result(stem, {"x": np.array([1.0])}, {"key": "k"})
    assert load_result(stem, "k") is not None
