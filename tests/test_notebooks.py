"""The notebooks of docs/notebooks/ run: each executed as a plain Python script.

A jupytext percent-format notebook is a Python script whose cells are ``# %%`` comments,
so running it with the venv's interpreter executes the same code, in the same order, as
the notebook kernel of ``make docs`` (mkdocs-jupyter, ``execute: true``), which is where CI
runs them; here that run is opt-in (``-m slow``).  They run in one
subprocess (a fresh JAX, the Agg backend), each in its own namespace, with their cache
under the test's temp dir.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "docs" / "notebooks").glob("*.py"))


def test_notebooks_are_in_the_site():
    assert len(NOTEBOOKS) >= 3
    nav = (ROOT / "mkdocs.yml").read_text()
    docs_index = (ROOT / "docs" / "examples.md").read_text()
    for nb in NOTEBOOKS:
        text = nb.read_text()
        assert "format_name: percent" in text and "# %% [markdown]" in text, nb.name
        assert f"notebooks/{nb.name}" in nav, f"{nb.name} is not in mkdocs.yml's nav"
        assert f"notebooks/{nb.name}" in docs_index, f"docs/examples.md does not list {nb.name}"


DRIVER = """
import runpy, sys, traceback
for path in sys.argv[1:]:
    print("=== notebook", path, flush=True)
    try:
        runpy.run_path(path, run_name="__main__")
    except BaseException:
        traceback.print_exc()
        print("=== failed", path, flush=True)
        sys.exit(1)
"""


@pytest.mark.slow
@pytest.mark.xdist_group("notebooks")
def test_notebooks_run(tmp_path):
    """All notebooks in one subprocess, one after the other (one JAX start-up, and the
    explore programs they share compile once); a failure names its notebook.

    Opt-in (``-m slow``): CI executes the same notebooks in ``make docs`` (mkdocs-jupyter,
    ``execute: true``, ``allow_errors: false``), where a failing cell or one of the
    notebooks' own ``assert``s fails the build, so running them here as well cost the
    default suite about 50 CPU-seconds for nothing new."""
    env = dict(os.environ, MPLBACKEND="Agg",
               GMTHEORY_NOTEBOOK_RESULTS=str(tmp_path / "results"))
    proc = subprocess.run([sys.executable, "-c", DRIVER, *map(str, NOTEBOOKS)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (f"a notebook failed:\n{proc.stdout[-3000:]}\n"
                                  f"{proc.stderr[-5000:]}")
    assert proc.stdout.count("notebook ran in") == len(NOTEBOOKS)
    assert "FAIL" not in proc.stdout and "ERROR" not in proc.stdout
