"""The four-forms table (``gmtheory.catalog``) is true: every derivation key, closed form,
check, simulation and figure it names exists, and every derivation it cites is 0."""

import ast
from pathlib import Path

import pytest

from gmtheory import catalog
from gmtheory.derivations import derive_all, is_zero

# sympy derives every module once per process (~20 s): one xdist worker takes them all
# (make test runs pytest with --dist loadgroup)
pytestmark = pytest.mark.xdist_group("sympy")


@pytest.fixture(scope="module")
def registries():
    from gmtheory.figures import all_figures
    from gmtheory.simulations import SIMULATIONS, load_all
    from gmtheory.verify import all_checks

    load_all()
    return {"checks": [c.id for c in all_checks()], "simulations": list(SIMULATIONS),
            "figures": all_figures()}


def test_table_is_true(registries):
    assert catalog.problems(derivations=derive_all(), **registries) == []


def test_cited_derivations_are_zero():
    d = derive_all()
    for r in catalog.RESULTS:
        for key in r.derivation.names:
            mod, _, k = key.partition(".")
            if k.endswith("_residual"):
                assert is_zero(d[mod][k]), f"{r.id}: {key}"


def test_every_registered_check_is_cited(registries):
    cited = {c for r in catalog.RESULTS for c in r.estimate.names}
    assert set(registries["checks"]) - cited == set()


def test_problems_reports_a_false_entry():
    bad = catalog.Result("x", "SGM docs/topics/lda.md", "X", "made up",
                         catalog._f("denoising.nope_residual"),
                         catalog._f("gmtheory.denoising.no_such_function"),
                         catalog._f("no.such-check"), catalog._f("no-such-sim"), ("no-fig",))
    old = catalog.RESULTS
    try:
        catalog.RESULTS = (bad,)
        msgs = catalog.problems(derivations={"denoising": {}}, checks=[], simulations=[],
                                figures=[])
    finally:
        catalog.RESULTS = old
    assert len(msgs) == 5


def test_catalog_imports_no_registry_module():
    src = Path(catalog.__file__).read_text()
    names = [n.module or "" for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(ast.parse(src)) if isinstance(n, ast.Import)
              for a in n.names]
    assert not [n for n in names if any(p in n for p in ("verify", "simulations", "figures"))]


def test_rendered_table_links_existing_files(tmp_path):
    from gmtheory.derivations import write_all

    out = write_all(tmp_path)
    text = (out / "four-forms.md").read_text()
    rows = [ln for ln in text.splitlines() if ln.startswith("| **")]
    assert len(rows) == len(catalog.RESULTS)
    for r in catalog.RESULTS:
        for key in r.derivation.names:
            target = key.partition(".")[0] + ".md"
            assert f"]({target})" in text and (out / target).is_file()


def test_cli_derive_writes_the_folder_and_exits_0(tmp_path, capsys, registries):
    from gmtheory.cli import main

    assert main(["derive", "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "residuals," in out and "NOT ZERO" not in out and "four-forms table:" not in out
    assert (tmp_path / "d" / "four-forms.md").is_file()
