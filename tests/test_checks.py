"""Every registered check of `gmtheory verify` must PASS, or return FINDING when, and only
when, it is pinned in tests/expected_findings.json with the printed paper claim that does
not reproduce (they are the real assertions); a FAIL, an error, an unexpected FINDING or a
pinned FINDING that disappears fails the test."""

import json
from pathlib import Path

import pytest

from gmtheory.verify import run_checks, select_checks

EXPECTED_FILE = Path(__file__).with_name("expected_findings.json")
EXPECTED = json.loads(EXPECTED_FILE.read_text())["findings"]

# checks that derive with sympy join the derivation tests on one xdist worker (the
# derivations are computed once per process; tests/test_derivations.py)
SYMPY = ("hermite.01", "denoising.28")


def _group(cid):
    """sympy checks on the derivations' worker; a
    check that reads a figure's run in the xdist group named after that experiment, on one
    worker, which computes the run once for every check and test of the group
    (tests/conftest.py: ``shared_results``)"""
    from gmtheory.verify import EXPERIMENTS

    if cid.startswith(SYMPY):
        return "sympy"
    return EXPERIMENTS.get(cid)


CHECK_IDS = [pytest.param(c.id, marks=pytest.mark.xdist_group(g)) if (g := _group(c.id))
             else c.id for c in select_checks(None)]


@pytest.fixture(scope="module", autouse=True)
def _fresh_results(shared_results):
    """The checks that read a figure's run compute it here, cold, as CI does, in the
    worker's shared folder (tests of the same experiment group read it there)."""
    from gmtheory.verify import results_dir, set_results_dir

    old = results_dir()
    set_results_dir(shared_results)
    yield
    set_results_dir(old)


def test_checks_read_their_figures_run():
    """A check that tests a figure's experiment reads the figure's cached result: the same
    simulation, profile and config, hence the same cache key (one run, two consumers)."""
    import inspect

    from gmtheory.figures._base import FIGURES, load_all
    from gmtheory.simulations import result_stem
    from gmtheory.verify import CHECKS, EXPERIMENTS, experiment_stem, results_dir

    load_all()
    assert EXPERIMENTS, "no check declares the experiment it shares with a figure"
    for cid, sim in EXPERIMENTS.items():
        figs = [f for f in FIGURES.values() if cid in f.checks]
        assert figs, f"{cid} reads {sim!r}, but no figure lists it in checks="
        for f in figs:
            assert f.simulation == sim, (cid, f.name, f.simulation, sim)
            # make_figure / gmtheory figures: run_simulation(f.simulation, "quick", ...)
            assert experiment_stem(cid) == result_stem(f.simulation, "quick",
                                                       results_dir=results_dir())
        src = inspect.getsource(CHECKS[cid].fn)
        src = src.replace('"', "'")
        assert (f"experiment({cid!r})" in src
                or (f"cid = {cid!r}" in src and "experiment(cid)" in src)), (
            f"{cid} declares experiment={sim!r} but does not read it with experiment()")


def test_every_figure_check_link_reads_that_figures_run():
    """A figure's ``checks`` read its run (one run, two consumers); checks of the theory it
    draws on their own points are ``theory_checks``; a figure whose run no check reads
    says why (``run_unchecked``), and a figure with such a check says nothing of the kind."""
    from gmtheory.figures._base import FIGURES, load_all
    from gmtheory.verify import CHECKS, EXPERIMENTS

    load_all()
    for f in FIGURES.values():
        wrong = [c for c in f.checks if EXPERIMENTS.get(c) != f.simulation]
        assert not wrong, (f"{f.name}: checks {wrong} do not read its run "
                           f"({f.simulation!r}); list them as theory_checks or make them "
                           "read it with experiment()")
        for c in f.theory_checks:
            assert c in CHECKS, (f.name, c)
            assert EXPERIMENTS.get(c) != f.simulation, (f"{f.name}: {c} reads its run: list "
                                                        "it under checks")
        assert bool(f.checks) != bool(f.run_unchecked.strip()), (
            f"{f.name}: a figure names the checks that read its run or says why none does")


def test_paper_variants_read_a_committed_paper_run():
    """A ``-paper`` check reads the committed paper-profile result of its check's
    experiment, for the profile's current config (never a rerun: hours on a CPU), and a
    figure of that simulation lists the quick check it varies."""
    from gmtheory.figures._base import FIGURES, load_all
    from gmtheory.simulations.committed import load_committed
    from gmtheory.verify import EXPERIMENTS, PAPER_VARIANTS

    load_all()
    for vid, sim in PAPER_VARIANTS.items():
        base = vid.removesuffix("-paper")
        assert EXPERIMENTS[base] == sim, (vid, sim)
        assert load_committed(sim, "paper") is not None, (
            f"{vid}: no committed paper result of {sim!r} for its current config; run "
            f"`gmtheory run {sim} --profile paper --commit`")
        assert any(base in f.checks and f.simulation == sim for f in FIGURES.values()), vid


def test_a_paper_variant_without_its_committed_run_says_how_to_make_it(monkeypatch):
    from gmtheory.simulations import committed
    from gmtheory.verify import PAPER_VARIANTS

    monkeypatch.setattr(committed, "load_committed", lambda name, profile: None)
    vid, sim = next(iter(PAPER_VARIANTS.items()))
    (res,) = run_checks([c for c in select_checks(None) if c.id == vid], progress=False)
    assert res.verdict == "ERROR" and not res.passed
    assert f"gmtheory run {sim} --profile paper --commit" in res.error


def test_expected_findings_are_pinned_paper_claims():
    ids = {c.id for c in select_checks(None)}
    for cid, entry in EXPECTED.items():
        assert cid in ids, f"{EXPECTED_FILE.name}: {cid} is not a registered check"
        for k in ("claim", "source", "comparison"):
            assert str(entry.get(k, "")).strip(), f"{EXPECTED_FILE.name}: {cid} needs {k!r}"


@pytest.mark.parametrize("check_id", CHECK_IDS)
def test_check_passes(check_id):
    (res,) = run_checks([c for c in select_checks(None) if c.id == check_id], progress=False)
    assert res.error is None, res.error
    assert res.verdict in ("PASS", "FINDING"), (res.verdict, res.comparisons, res.details)
    if check_id in EXPECTED:
        assert res.verdict == "FINDING", (
            f"{check_id} is pinned as a FINDING in {EXPECTED_FILE.name} but returned "
            f"{res.verdict}: remove it there if the paper's claim now reproduces")
        failed = {f["comparison"] for f in res.findings}
        assert EXPECTED[check_id]["comparison"] in failed, (failed, EXPECTED[check_id])
    else:
        assert res.verdict == "PASS", (
            f"{check_id} returned FINDING but is not pinned in {EXPECTED_FILE.name}; a "
            f"FINDING must be a printed paper claim, listed there with the claim quoted: "
            f"{res.findings}")
