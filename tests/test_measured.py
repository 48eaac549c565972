"""The measured blocks of the README and docs/performance.md are rendered from the recorded
measurements in docs/measured/ by the code that printed them (python -m gmtheory.tables)."""

import shutil
from pathlib import Path

import pytest

from gmtheory import tables

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("page", ["README.md", "docs/performance.md"])
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
