"""The README, the examples and the generated indexes run and stay true to the code."""

import json
import re
import runpy
import sys
from pathlib import Path

import pytest

from gmtheory import tables

ROOT = Path(__file__).resolve().parent.parent


def _readme():
    return (ROOT / "README.md").read_text()


def test_readme_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", _readme(), flags=re.S)
    assert blocks, "the README has no ```python example"
    code = blocks[0]
    assert 15 <= len(code.strip().splitlines()) <= 25
    exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out
    assert "PASS" in out and "L = 1,000,000" in out


def test_readme_map_is_generated_from_the_code():
    text = _readme()
    block = text.split(tables.MAP_START, 1)[1].split(tables.MAP_END, 1)[0]
    assert block.strip() == tables.readme_map().strip(), \
        "README map is stale: run `python -m gmtheory.tables`"


def test_readme_is_short():
    assert len(_readme().splitlines()) <= 210


def test_committed_indexes_match_the_registries():
    assert (ROOT / "docs" / "checks.md").read_text() == tables.checks_page(), \
        "docs/checks.md is stale: run `python -m gmtheory.tables`"
    assert (ROOT / "figures" / "README.md").read_text() == tables.figures_index(), \
        "figures/README.md is stale: run `python -m gmtheory.tables`"
    tpath = ROOT / "simulations" / "timings.json"
    timings = json.loads(tpath.read_text()) if tpath.exists() else {}
    assert (ROOT / "simulations" / "README.md").read_text() == \
        tables.simulations_index(timings), \
        "simulations/README.md is stale: run `python -m gmtheory.tables`"


def test_figure_index_lists_every_figure():
    from gmtheory.figures import all_figures

    index = tables.figures_index()
    for name in all_figures():
        assert f"## {name}\n" in index
        assert (ROOT / "figures" / f"{name}.png").exists(), f"figures/{name}.png is missing"


@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*.py")),
                         ids=lambda p: p.name)
def test_example_runs(script, monkeypatch, capsys):
    from gmtheory.verify import CHECKS

    before = set(CHECKS)
    monkeypatch.setattr(sys, "argv", [str(script), "--quick"])
    try:
        runpy.run_path(str(script), run_name="__main__")
    finally:
        for k in set(CHECKS) - before:  # an example may register a check of its own
            del CHECKS[k]
    assert capsys.readouterr().out.strip()


TOPIC_BLOCKS = [(p, i, code) for p in sorted((ROOT / "docs" / "topics").glob("*.md"))
                for i, code in enumerate(re.findall(r"```python\n(.*?)```", p.read_text(),
                                                    flags=re.S))]


@pytest.mark.slow
@pytest.mark.parametrize("page,index,code", TOPIC_BLOCKS,
                         ids=[f"{p.stem}-{i}" for p, i, _ in TOPIC_BLOCKS])
def test_topic_page_snippets_run(page, index, code, capsys):
    """The documentation's snippets run (slow: ~2 min in all; `pytest -m slow`)."""
    exec(compile(code, f"{page.name}[{index}]", "exec"), {"__name__": "__docs__"})
