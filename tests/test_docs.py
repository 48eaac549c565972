"""The README, the examples and the generated indexes run and stay true to the code."""

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
    timings = tables.simulation_timings(ROOT / tables.MEASURED)
    assert (ROOT / "simulations" / "README.md").read_text() == \
        tables.simulations_index(timings), \
        "simulations/README.md is stale: run `python -m gmtheory.tables`"


def test_every_simulation_has_a_measured_quick_time():
    from gmtheory.simulations import SIMULATIONS, load_all

    load_all()
    secs = tables.simulation_timings(ROOT / tables.MEASURED).get("seconds", {})
    assert sorted(secs) == sorted(SIMULATIONS), \
        "docs/measured/simulations.json: run `python -m gmtheory.tables --measure [NAME ...]`"
    assert "not measured" not in (ROOT / "simulations" / "README.md").read_text()


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


# ------------------------------------------------------------ pointers from code to docs
# Docstrings and comments point to the documentation as ``docs/<page>.md#<anchor>``
# (issue 15: no pointer to a document that is not in the repository or the site).  The
# anchors are computed as MkDocs' toc extension computes them (mkdocs.yml configures
# ``toc`` with the default ``slugify``), so no site build is needed.
POINTER = re.compile(r"docs/[\w./-]+?\.md(?:#[\w-]+)?")
OUT_OF_REPO = re.compile(r"§|(?<![\w/-])(?:softmax-gaussian-mixtures|linear-attention-icl|"
                         r"relu-to-softmax|gma)\.md")
SOURCES = sorted((ROOT / "gmtheory").rglob("*.py")) + sorted((ROOT / "examples").glob("*.py"))


def _heading_ids(page: Path) -> set[str]:
    """The ids MkDocs gives the headings of ``page``: explicit ``{#id}`` attributes, else the
    toc slug of the heading's text (duplicates get ``_1``, ``_2``, ... as in toc)."""
    from markdown.extensions.toc import slugify

    ids: set[str] = set()
    fence = None
    for line in page.read_text().splitlines():
        m = re.match(r"\s*(`{3,}|~{3,})", line)
        if m:
            fence = None if fence and m.group(1)[0] == fence[0] else (fence or m.group(1))
            continue
        if fence:
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = m.group(1)
        explicit = re.search(r"\{[^}]*#([\w-]+)[^}]*\}\s*$", text)
        if explicit:
            ids.add(explicit.group(1))
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)         # links: their text
        text = re.sub(r"[`*$]", "", text)                              # code, emphasis, math
        slug = base = slugify(text, "-")
        n = 0
        while slug in ids:
            n += 1
            slug = f"{base}_{n}"
        ids.add(slug)
    return ids


def test_heading_ids_follow_toc(tmp_path):
    from markdown import Markdown

    text = ("# A `b.c` (x) §2 – [link](x.md)\n\n## Thm 3.5: local\n\n```python\n"
            "# not a heading\n```\n\n## Thm 3.5: local\n\n### Eqs. (9)–(10): *the* Bayes\n")
    md = Markdown(extensions=["toc", "fenced_code"])
    md.convert(text)

    def walk(tokens):
        for t in tokens:
            yield t["id"]
            yield from walk(t["children"])

    want = set(walk(md.toc_tokens))
    assert "not-a-heading" not in want and len(want) == 4
    page = tmp_path / "page.md"
    page.write_text(text)
    assert _heading_ids(page) == want


def test_no_pointer_to_documents_outside_the_repository():
    bad = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
           for p in SOURCES for i, line in enumerate(p.read_text().splitlines(), 1)
           if OUT_OF_REPO.search(line)]
    assert not bad, "point to docs/<page>.md#<anchor> instead:\n" + "\n".join(bad)


def test_docs_pointers_in_source_resolve():
    ids: dict[Path, set[str]] = {}
    bad, n = [], 0
    for p in SOURCES + sorted((ROOT / "tests").glob("*.py")):
        for i, line in enumerate(p.read_text().splitlines(), 1):
            for ptr in POINTER.findall(line):
                n += 1
                page, _, anchor = ptr.partition("#")
                path = ROOT / page
                where = f"{p.relative_to(ROOT)}:{i}: {ptr}"
                if not path.is_file():
                    bad.append(f"{where} (no such page)")
                elif anchor and anchor not in ids.setdefault(path, _heading_ids(path)):
                    bad.append(f"{where} (no such heading)")
    assert n > 50, f"only {n} pointers found"
    assert not bad, "\n".join(bad)


def test_every_public_module_has_an_api_page():
    """docs/api/ has a page for every public module of the package, and mkdocs.yml lists it."""
    root = Path(__file__).resolve().parent.parent
    nav = (root / "mkdocs.yml").read_text()
    mods = [p.stem for p in (root / "gmtheory").glob("*.py") if not p.stem.startswith("_")]
    mods += [p.name for p in (root / "gmtheory").iterdir()
             if p.is_dir() and (p / "__init__.py").exists()]
    missing = [m for m in mods if not (root / "docs" / "api" / f"{m}.md").exists()
               or f"api/{m}.md" not in nav]
    assert not missing, f"add an API page (docs/api/) and a nav entry for: {missing}"
