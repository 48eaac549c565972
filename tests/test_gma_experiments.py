"""The GMA experiments (gma-recall, gma-lm, gma-gmm) run end to end at tiny overrides and
their figures draw from the results.  One mixer each (GMA: the one with the most code).
Compilation dominates (~5 s per model configuration), so only gma-lm runs in the default
suite; gma-recall and gma-gmm run under ``-m slow``."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gmtheory.figures import get_figure  # noqa: E402
from gmtheory.simulations import run_simulation  # noqa: E402
from gmtheory.training import set_progress  # noqa: E402

SEQ = dict(mixers=("gma",), d_model=8, depth=1, heads=2, mlp_hidden=16, K=4, features=4,
           steps=8, batch=4, records=2, seeds=2)


def _draw(name, arrays, meta, tmp_path):
    fig = get_figure(name).draw(arrays, meta)
    out = tmp_path / f"{name}.png"
    fig.savefig(out)
    plt.close(fig)
    assert out.stat().st_size > 1000


@pytest.fixture(autouse=True)
def _quiet():
    set_progress(False)
    yield
    set_progress(True)


def test_lm_runs_and_draws(tmp_path):
    lm = dict(SEQ, width=16, n_train=32, n_val=8, max_train_bytes=20_000, max_val_bytes=5_000)
    a, meta, _ = run_simulation("gma-lm", "quick", lm, results_dir=tmp_path, progress=False)
    bpb = a["gma/val_bpb"]
    assert bpb.shape == (2, 2) and np.all(np.isfinite(bpb))
    assert abs(float(np.mean(a["gma/val_bpb0"])) - 8.0) < 1.5   # near uniform at init
    assert a["gma/resp_usage"].shape == (2, 2, 4)
    np.testing.assert_allclose(a["gma/resp_usage"].sum(-1), 1.0, rtol=1e-5)
    assert a["gma/resp_table"].sum() == 2 * 2 * 8 * 16          # seeds x heads x tokens
    assert len(a["val_files"]) > 0 and str(a["python"]).count(".") == 2
    _draw("gma-lm", a, meta, tmp_path)
    _draw("gma-responsibilities", a, meta, tmp_path)


@pytest.mark.slow
def test_recall_runs_and_draws(tmp_path):
    rec = dict(SEQ, tasks=("listops", "mqar"), listops_lengths=(12, 16), mqar_lengths=(8, 16),
               mqar_pairs=2, mqar_keys=4, width=16, n_train=32, n_test=8)
    a, meta, _ = run_simulation("gma-recall", "quick", rec, results_dir=tmp_path,
                                progress=False)
    assert a["mqar/gma/acc"].shape == (2, 2) and a["listops/gma/acc"].shape == (2, 2)
    assert np.all((a["mqar/gma/acc"] >= 0) & (a["mqar/gma/acc"] <= 1))
    assert a["mqar/gma/acc_curve"].shape == (2, 2, 2)
    _draw("gma-recall", a, meta, tmp_path)


@pytest.mark.slow
def test_gmm_runs_and_draws(tmp_path):
    over = dict(mixers=("gma",), d_model=8, heads=2, mlp_hidden=16, K=4, steps=10, batch=8,
                L=8, n_train=64, n_test=32, order=6, seeds=2)
    a, meta, _ = run_simulation("gma-gmm", "quick", over, results_dir=tmp_path, progress=False)
    for c in ("A", "B"):
        assert a[f"{c}/gma/acc"].shape == (2,) and a[f"{c}/gma/acc_limit"].shape == (2,)
        # the Bayes classifier with known means is at least as good as the Prop. 2.1 limit
        assert float(a[f"{c}/acc_bayes"]) >= float(a[f"{c}/acc_softmax_limit"]) - 0.1
    _draw("gma-gmm", a, meta, tmp_path)


def test_lm_point_recompiles_after_a_non_finite_forward(monkeypatch):
    """A non-finite GMA forward (a faulty compiled program, docs/topics/gma.md) is retried
    with fresh compilation and the persistent cache off for that point only; the third
    failure raises; any other error is not retried."""
    import jax

    from gmtheory.simulations import gma_sims

    calls, cache_on = [], []

    def flaky(cfg, point, key):
        calls.append(1)
        cache_on.append(jax.config.jax_enable_compilation_cache)
        if len(calls) < 2:
            raise FloatingPointError("gma-lm gma: validation bits/byte is not finite")
        return {"val_bpb": np.ones((1, 1))}

    before = jax.config.jax_enable_compilation_cache
    cleared = []
    # the rest of this worker's tests keep their compiled programs
    monkeypatch.setattr(jax, "clear_caches", lambda: cleared.append(1))
    monkeypatch.setattr(gma_sims, "_lm_point_once", flaky)
    with pytest.warns(RuntimeWarning, match="recompiling"):
        out = gma_sims._lm_point(None, {"mixer": "gma"}, None)
    assert int(out["attempts"]) == 2 and cache_on == [before, False] and cleared == [1]
    assert jax.config.jax_enable_compilation_cache == before

    def always(cfg, point, key):
        raise ValueError("gma_attention: 3 non-finite value(s) in the result although ...")

    monkeypatch.setattr(gma_sims, "_lm_point_once", always)
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="non-finite"):
        gma_sims._lm_point(None, {"mixer": "gma"}, None)
    assert jax.config.jax_enable_compilation_cache == before

    def bad_input(cfg, point, key):
        raise ValueError("x: must be finite")

    monkeypatch.setattr(gma_sims, "_lm_point_once", bad_input)
    with pytest.raises(ValueError, match="x: must be finite"):
        gma_sims._lm_point(None, {"mixer": "gma"}, None)
