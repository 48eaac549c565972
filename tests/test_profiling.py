"""gmtheory.profiling counts the compilations of its block, and verify records them."""

import jax
import jax.numpy as jnp

from gmtheory.profiling import compile_stats


def test_counts_a_new_program_and_not_a_cached_call():
    f = jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)
    x = jnp.arange(7.0)
    with compile_stats() as st:
        f(x)
    assert st.programs >= 1 and st.compile_seconds > 0
    assert any("lambda" in name for name, _ in st.top(10))
    with compile_stats() as again:          # same shapes: the in-memory cache serves it
        f(x)
    assert again.programs == 0


def test_nested_blocks_both_count():
    g = jax.jit(lambda x: jnp.cos(x) - 2.0)
    with compile_stats() as outer:
        with compile_stats() as inner:
            g(jnp.ones(5))
    assert inner.programs >= 1 and outer.programs >= inner.programs


def test_verify_records_compilations_per_check():
    from gmtheory.verify import run_checks, select_checks

    (res,) = run_checks(select_checks("operator.01c"), progress=False)
    assert set(res.compiles) >= {"programs", "compile_s", "top"}


def test_reproduce_end_to_end_on_a_subset(tmp_path, monkeypatch, capsys):
    """`gmtheory reproduce` on one check (in its second process) and one figure: the report,
    checks.json, profile.json and timings.json are written, and the cache state is
    printed."""
    import json

    import gmtheory.derivations as derivations
    import gmtheory.figures as figures
    from gmtheory.cli import main

    monkeypatch.setattr(figures, "all_figures", lambda: ["gated-experts"])
    monkeypatch.setattr(derivations, "write_all",
                        lambda out: (tmp_path / "out" / "derivations").mkdir(parents=True)
                        or tmp_path / "out" / "derivations")
    rc = main(["reproduce", "--no-progress", "--out", str(tmp_path / "out"),
               "--results", str(tmp_path / "res"), "--checks", "operator.01c"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "XLA compilation cache:" in text and "in total" in text
    assert "operator.01c-large-scores" in text and "PASS" in text
    prof = json.loads((tmp_path / "out" / "profile.json").read_text())
    assert set(prof["checks"]) == {"operator.01c-large-scores"}
    assert set(prof["figures"]) == {"gated-experts"}
    assert (tmp_path / "out" / "report.md").exists()
    assert (tmp_path / "out" / "figures" / "gated-experts.png").exists()
