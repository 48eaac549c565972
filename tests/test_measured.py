"""The measured blocks of the README, docs/performance.md and docs/topics/gma.md are
rendered from the recorded measurements in docs/measured/ (and the committed cpu runs) by
the code that printed them (python -m gmtheory.tables)."""

import shutil
from pathlib import Path

import pytest

from gmtheory import tables

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("page", ["README.md", "docs/performance.md",
                                  "docs/topics/gma.md"])
def test_measured_blocks_are_current(page, tmp_path):
    copy = tmp_path / Path(page).name
    shutil.copy(ROOT / page, copy)
    changed = tables.update_blocks(copy, ROOT / "docs" / "measured")
    assert not changed, f"{page}: run `python -m gmtheory.tables` to re-render its blocks"


def test_reproduce_excerpt_keeps_findings_and_totals():
    log = "\n".join([
        "XLA compilation cache: cold (empty: /x)", "== checks ==",
        "check  verdict", *[f"a.{i:02d} PASS agreement 1 <= 2 0.1" for i in range(8)],
        "lda.12 FINDING agreement 1 <= 2 9.0", "",
        "findings (the computations agree; ...):", "  lda.12: expected 1, measured 2.",
        "59 passed, 1 findings, 0 failed", "== figures (profile: quick) ==",
        *[f"f{i} reproduce-out/figures/f{i}.png  (1.0 s, 3 programs compiled in 0.1 s)"
          for i in range(6)],
        "time: 400 s in total (checks 200 s, figures 200 s); ..."])
    text = tables._reproduce_excerpt(log, rows=2)
    assert "lda.12 FINDING" in text and "a.07" not in text and "time: 400 s" in text
    assert "expected 1" not in text                 # finding details stay in the report
    assert "f1 reproduce-out" in text and "f5 reproduce-out" not in text


def test_reproduce_excerpt_takes_checks_from_a_verify_run():
    from gmtheory.verify import Check, Outcome, agreement, upper_bound
    from gmtheory.verify._registry import _result

    log = "\n".join([
        "XLA compilation cache: cold (empty: /x)", "== checks ==", "check  verdict",
        "old.01 FINDING agreement 1 <= 2 9.0", "", "findings (...):", "  old.01: expected",
        "1 passed, 1 findings, 0 failed; figures: 2; report: r.md", "time: 10 s in total"])
    ok = agreement(0, 1, "x", name="holds")
    res = [_result(Check(f"n.{i:02d}", "c", "r", None), Outcome(ok), 0.1) for i in range(4)]
    res.append(_result(Check("n.09", "c", "r", None),
                       Outcome(ok, upper_bound(2, 1, "b", name="breaks")), 0.1))
    text = tables._reproduce_excerpt(log, rows=2, checks=res)
    assert "old.01" not in text and "n.00" in text and "n.02" not in text
    assert any(ln.startswith("n.09") and ln.endswith("breaks") for ln in text.splitlines())
    assert "4 passed, 0 findings, 1 failed; figures: 2" in text and "time: 10 s" in text


def test_report_page_lists_every_comparison(tmp_path):
    import json

    from gmtheory.verify import Check, Outcome, agreement, upper_bound, write_json
    from gmtheory.verify._registry import _result

    r = _result(Check("n.01", "claim", "docs/topics/lda.md#thm-31-the-effective-landscape", None),
                Outcome(agreement(0, 1, "why-a", name="holds"),
                        upper_bound(2, 1, "why-b", name="breaks")), 0.1)
    write_json([r], tmp_path / "checks.json")
    page = tables.report_page(tmp_path / "checks.json")
    assert "why-a" in page and "why-b" in page and "**upper_bound: breaks <= 1" in page
    assert "(topics/lda.md#thm-31-the-effective-landscape)" in page and "| FAIL |" in page
    assert json.loads((tmp_path / "checks.json").read_text())["checks"][0]["headline"] == 1


def test_report_page_is_current():
    """docs/report.md is rendered from the committed checks.json of a real verify run."""
    page = tables.report_page(ROOT / "docs" / "measured" / "checks.json")
    page = page.replace(str(ROOT / "docs" / "measured" / "checks.json"),
                        "docs/measured/checks.json")
    assert (ROOT / "docs" / "report.md").read_text() == page, (
        "run `python -m gmtheory.tables` to regenerate docs/report.md")


def test_committed_gma_results_record_their_commit_and_fingerprint():
    """Every committed GMA result (the cpu runs, their trivial-rule baselines and the
    benchmark JSON) names the commit and the source fingerprint that produced it (issue 44
    item 5): a number without them cannot be tied to code."""
    import json

    paths = [*ROOT.glob("simulations/committed/gma-*/*.json"),
             *ROOT.glob("simulations/committed/gma-*/baselines/*.json"),
             *ROOT.glob("simulations/committed/gma-*/retired/*.json"),
             ROOT / "docs" / "bench-gma.json"]
    assert len(paths) >= 4      # the cpu runs, the retired recall run, baselines, benchmark
    for p in paths:
        meta = json.loads(p.read_text())
        git = meta.get("provenance", {}).get("git")
        assert isinstance(git, str) and len(git) >= 7, f"{p}: no commit in provenance.git"
        fp = meta.get("fingerprint")
        assert isinstance(fp, dict) and fp.get("digest") and fp.get("files"), \
            f"{p}: no source fingerprint"
