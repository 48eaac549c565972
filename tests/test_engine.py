"""The shared engines: training loop, statistics, verdicts, and results tied to their code."""

import dataclasses
import functools
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import gmtheory
from gmtheory import cache, stats, training
from gmtheory.verify import Outcome, agreement, count, lower_bound, upper_bound

# ----------------------------------------------------------------- training engine ----

TARGET = jnp.array([1.0, -2.0, 0.5])


def _loss(p, data, k):
    x = jax.random.normal(k, (16, 3))
    return jnp.mean((x @ p["w"] - x @ data) ** 2)


def _run(**kw):
    return training.train(_loss, {"w": jnp.zeros(3)}, optax.adam(5e-2), steps=120,
                          key=jax.random.key(7), data=TARGET, record_every=10,
                          block_records=2, progress=False,
                          metrics_fn=lambda p, d: {"err": jnp.linalg.norm(p["w"] - d)}, **kw)


def test_train_records_and_learns():
    r = _run()
    assert r.loss.shape == (12,) and r.history["err"].shape == (12,)
    np.testing.assert_array_equal(r.steps, 10 * np.arange(1, 13))
    assert r.history["err"][-1] < 0.5 * float(r.initial["err"])
    # same seed, same numbers
    np.testing.assert_array_equal(_run().params["w"], r.params["w"])


def test_killed_run_resumes_to_the_same_parameters(tmp_path):
    class Killed(Exception):
        pass

    def kill_after_block_2(info):
        if info["block"] == 2:
            raise Killed

    ckpt = tmp_path / "run.npz"
    with pytest.raises(Killed):
        _run(checkpoint=ckpt, callback=kill_after_block_2)
    assert ckpt.exists()
    resumed = _run(checkpoint=ckpt)
    assert resumed.resumed_from == 60  # 3 blocks of 2 records of 10 steps
    whole = _run()
    np.testing.assert_array_equal(resumed.params["w"], whole.params["w"])
    np.testing.assert_array_equal(resumed.loss, whole.loss)
    np.testing.assert_array_equal(resumed.history["err"], whole.history["err"])
    # a checkpoint of another run (other data) is not picked up
    other = training.train(_loss, {"w": jnp.zeros(3)}, optax.adam(5e-2), steps=120,
                           key=jax.random.key(7), data=2 * TARGET, record_every=10,
                           block_records=2, progress=False, checkpoint=ckpt)
    assert other.resumed_from == 0


def test_checkpoint_scope_names_each_call(tmp_path):
    with training.checkpoint_scope(tmp_path / "pt"):
        _run()
        _run()
    assert sorted(p.name for p in (tmp_path / "pt").iterdir()) == ["train-000.npz",
                                                                   "train-001.npz"]


def test_nan_guard_names_the_step_and_keeps_finite_parameters():
    # log of a coordinate that gradient descent drives negative: step 0 -> 0.3, step 1 ->
    # -2.03 (finite parameters, but the loss there is NaN), so step 2 is the first bad one
    with pytest.raises(training.NonFiniteError, match="non-finite at step 2") as err:
        training.train(lambda p, d, k: jnp.log(p["w"][0]), {"w": jnp.array([1.0, 0.0])},
                       optax.sgd(0.7), steps=20, record_every=5, progress=False)
    assert np.all(np.isfinite(err.value.params["w"]))
    np.testing.assert_allclose(err.value.params["w"][0], 0.3 - 0.7 / 0.3)


@pytest.mark.parametrize("batched", [True, "map"])
def test_nan_guard_batched_names_the_model(batched):
    w0 = jnp.array([[1.0, 0.0], [5.0, 0.0]])   # model 1 never goes negative
    with pytest.raises(training.NonFiniteError, match=r"models \[0\]") as err:
        training.train(lambda p, d, k: jnp.log(p["w"][0]), {"w": w0}, optax.sgd(0.7),
                       steps=20, record_every=5, batched=batched, progress=False)
    assert err.value.seeds == [0]


@pytest.mark.parametrize("batched", [True, "map"])
def test_batched_equals_separate_runs(batched):
    keys = jax.random.split(jax.random.key(3), 3)
    p0 = {"w": jnp.zeros((3, 3))}
    rb = training.train(_loss, p0, optax.adam(5e-2), steps=40, key=keys, data=TARGET,
                        record_every=10, batched=batched, progress=False,
                        metrics_fn=lambda p, d: {"err": jnp.sum((p["w"] - d) ** 2)})
    assert rb.loss.shape == rb.history["err"].shape == (4, 3)   # (records, models)
    for i in range(3):
        ri = training.train(_loss, {"w": jnp.zeros(3)}, optax.adam(5e-2), steps=40,
                            key=keys[i], data=TARGET, record_every=10, progress=False,
                            metrics_fn=lambda p, d: {"err": jnp.sum((p["w"] - d) ** 2)})
        np.testing.assert_allclose(rb.params["w"][i], ri.params["w"], rtol=1e-12)
        np.testing.assert_allclose(rb.history["err"][:, i], ri.history["err"], rtol=1e-10)
    with pytest.raises(ValueError, match="batched"):
        training.train(_loss, p0, optax.adam(5e-2), steps=40, key=keys, batched="pmap")


def test_a_weak_typed_parameter_compiles_the_block_once():
    # a Python float in an initialiser makes a weak-typed leaf; the first block returns it
    # strong, and without canonicalising the inputs the second block compiled again
    def loss(p, _data, k):
        return jnp.sum((p["w"] - 1.0) ** 2) + p["e"] ** 2

    compiles = []
    with jax.log_compiles(True):
        import logging

        class _H(logging.Handler):
            def emit(self, record):
                if "one_block" in record.getMessage() and "Compiling" in record.getMessage():
                    compiles.append(record)

        h = _H()
        logging.getLogger("jax").addHandler(h)
        try:
            training.clear_programs()
            training.train(loss, {"w": jnp.zeros(3), "e": jnp.asarray(0.5) * 1.0},
                           optax.adam(0.01), steps=40, record_every=10, block_records=1,
                           progress=False)
        finally:
            logging.getLogger("jax").removeHandler(h)
    assert len(compiles) == 1


def test_population_gd_is_plain_gradient_descent():
    """The paper's protocol: analytic gradient, optax.sgd, no sampling."""
    A = jnp.array([[2.0, 0.3], [0.3, 1.0]])

    def vg(p, data, k):
        return 0.5 * p @ A @ p, A @ p

    r = training.train(None, jnp.array([1.0, -1.0]), optax.sgd(0.1), value_and_grad_fn=vg,
                       steps=50, progress=False)
    p = jnp.array([1.0, -1.0])
    for _ in range(50):
        p = p - 0.1 * (A @ p)
    # eager Python steps against XLA's fused scan: equal to float64 round-off
    np.testing.assert_allclose(r.params, p, rtol=1e-13, atol=1e-16)


def test_train_bad_input():
    with pytest.raises(ValueError, match="record_every"):
        training.train(_loss, {"w": jnp.zeros(3)}, optax.sgd(1e-2), steps=10, record_every=3)
    with pytest.raises(ValueError, match="exactly one"):
        training.train(None, {"w": jnp.zeros(3)}, optax.sgd(1e-2), steps=10)


def test_minimize_lbfgs_multistart():
    def f(x, d):  # two minima: x = +-1, the one at -1 lower by d
        return (x["a"] ** 2 - 1) ** 2 + d * x["a"]

    res = training.minimize_lbfgs(f, {"a": jnp.array(0.9)}, 0.1,
                                  starts=[{"a": jnp.array(-0.9)}])
    assert float(res.x["a"]) < 0 and res.fun == min(res.funs) and len(res.funs) == 2


# ----------------------------------------------------------------- statistics -----------


def test_stats_fits_and_thresholds():
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    fit = stats.fit_loglog(x, 3 * x**-0.5)
    assert abs(fit.slope + 0.5) < 1e-12 and fit.r2 > 1 - 1e-12 and fit.n == 4
    fit = stats.fit_semilog(np.arange(5.0), np.exp(-0.3 * np.arange(5.0)))
    assert abs(fit.slope + 0.3) < 1e-12
    m, se = stats.mean_se(np.array([[1.0, 2.0], [3.0, 6.0]]), axis=0)
    np.testing.assert_allclose(m, [2.0, 4.0])
    np.testing.assert_allclose(se, [1.0, 2.0])  # std ddof=1 / sqrt(2)
    assert stats.bonferroni_z(1, 0.05) == pytest.approx(1.959964, abs=1e-6)
    assert stats.bonferroni_z(12, 0.01) > stats.bonferroni_z(1, 0.01)
    with pytest.raises(ValueError, match="positive"):
        stats.fit_loglog([1, 2], [0, 1])


def test_linear_fit_student_thresholds_and_z_against_scipy():
    """fit_linear: exact on a line, and on noisy points the slope's SE is the textbook
    s / sqrt(sum (x - mean x)^2); bonferroni_t is Student t's two-sided quantile at
    alpha / m (scipy.stats.t), tends to bonferroni_z as dof grows, and grows with m."""
    from scipy import stats as st

    x = np.arange(6.0)
    fit = stats.fit_linear(x, 2.0 - 0.7 * x)
    assert abs(fit.slope + 0.7) < 1e-13 and abs(fit.intercept - 2.0) < 1e-13
    y = 1.0 + 0.5 * x + np.array([0.1, -0.2, 0.05, 0.3, -0.1, -0.15])
    fit = stats.fit_linear(x, y)
    resid = y - fit.intercept - fit.slope * x
    se = np.sqrt(resid @ resid / (x.size - 2) / np.sum((x - x.mean()) ** 2))
    assert fit.slope == pytest.approx(np.polyfit(x, y, 1)[0], rel=1e-12)
    assert fit.stderr == pytest.approx(se, rel=1e-12) and fit.n == 6
    for m, dof, alpha in ((1, 5, 0.05), (4, 15, 0.05), (12, 3, 0.01)):
        assert stats.bonferroni_t(m, dof, alpha) == pytest.approx(
            st.t.ppf(1 - alpha / (2 * m), dof), rel=1e-12)
    assert stats.bonferroni_t(3, 1e7, 0.01) == pytest.approx(stats.bonferroni_z(3, 0.01),
                                                             rel=1e-6)
    assert stats.bonferroni_t(8, 10) > stats.bonferroni_t(2, 10)
    # z_score: |a - b| over the combined SE, element-wise (a 3-4-5 triangle)
    np.testing.assert_allclose(stats.z_score([1.0, 7.0], [4.0, 4.0], 3.0, [4.0, 0.0]),
                               [0.6, 1.0], rtol=1e-15)

# ----------------------------------------------------------------- verdicts -------------


def test_verdicts_follow_the_comparisons():
    assert Outcome(agreement(1e-13, 1e-12, "round-off")).verdict() == "PASS"
    assert Outcome(agreement(1e-11, 1e-12, "round-off")).verdict() == "FAIL"
    assert Outcome(lower_bound(0.03, 1e-3, "bounded away")).verdict() == "PASS"
    assert Outcome(upper_bound(0.03, 1e-3, "bound")).verdict() == "FAIL"
    assert Outcome(count(3, 3, "rank")).verdict() == "PASS"
    assert Outcome(count(2, 3, "rank")).verdict() == "FAIL"
    paper = agreement(0.4, 0.1, "slope", finding="the rate is only asymptotic")
    assert Outcome(agreement(0, 1e-12, "exact"), paper).verdict() == "FINDING"
    # a finding never hides a failure of the independent computations
    assert Outcome(agreement(1, 1e-12, "exact"), paper).verdict() == "FAIL"
    assert Outcome(agreement(float("nan"), 1.0, "nan")).verdict() == "FAIL"
    with pytest.raises(ValueError, match="at least one"):
        Outcome()
    assert not hasattr(Outcome(agreement(0, 1, "x")), "passed")


def test_the_row_shows_the_comparison_that_failed():
    from gmtheory.verify import Check, format_table
    from gmtheory.verify._registry import _result

    check = Check("x.01", "claim", "docs/checks.md", lambda: None)
    ok = agreement(0, 1e-12, "exact", name="holds")
    bad = upper_bound(2.0, 1.0, "bound", name="breaks")
    paper = agreement(0.4, 0.1, "slope", name="paper", finding="'printed claim' (Sec. 1)")
    for o, verdict, shown in ((Outcome(ok, bad), "FAIL", "breaks"),
                              (Outcome(ok, paper), "FINDING", "paper"),
                              (Outcome(ok, paper, bad), "FAIL", "breaks"),
                              (Outcome(ok, ok), "PASS", "holds")):
        r = _result(check, o, 0.1)
        assert (r.verdict, r.headline_name) == (verdict, shown)
        assert r.comparisons[r.headline]["name"] == shown
        row = format_table([r]).splitlines()[1]
        assert row.endswith(shown) and f"{r.measured:.3g}" in row
        verbose = format_table([r], verbose=True)
        assert all(c["expectation"] in verbose for c in r.comparisons)


def test_weighted_loglog_fit_uses_the_point_errors():
    x = np.array([1.0, 10, 100, 1000])
    y = 3 * x**-0.5
    fit = stats.fit_loglog_weighted(x, y, 0.01 * y)
    assert abs(fit.slope + 0.5) < 1e-12
    # with equal relative errors s the slope's SE is s / sqrt(Sxx) in log x
    lx = np.log(x)
    assert abs(fit.stderr - 0.01 / np.sqrt(np.sum((lx - lx.mean()) ** 2))) < 1e-12
    # a point with a huge error barely moves the slope
    y2 = y.copy()
    y2[-1] *= 5
    se = 0.01 * y2
    se[-1] = 1e6
    assert abs(stats.fit_loglog_weighted(x, y2, se).slope + 0.5) < 1e-6


def test_inverse_extrapolation_is_exact_on_a_line_and_propagates_the_errors(key):
    x = np.array([16.0, 32.0])
    a, se = stats.extrapolate_inverse(x, 0.3 + 2.0 / x, [0.01, 0.02])
    assert abs(a - 0.3) < 1e-12
    # two points: a = (x2 y2 - x1 y1) / (x2 - x1), so se = sqrt(x1^2 s1^2 + x2^2 s2^2) / 16
    assert abs(se - np.hypot(16 * 0.01, 32 * 0.02) / 16) < 1e-12
    # the SE is the spread of the estimate: 4000 noisy replicates at four x
    x4 = np.array([8.0, 16, 32, 64])
    s4 = np.array([0.02, 0.01, 0.01, 0.005])
    noise = np.asarray(jax.random.normal(key, (4000, 4))) * s4
    est = np.array([stats.extrapolate_inverse(x4, 1.0 - 3.0 / x4 + e, s4)[0] for e in noise])
    _, se4 = stats.extrapolate_inverse(x4, 1.0 - 3.0 / x4, s4)
    assert abs(est.mean() - 1.0) < 4 * se4 / np.sqrt(4000)
    assert abs(est.std(ddof=1) / se4 - 1) < 0.05        # SE of a sample sd: 1/sqrt(2n) ~ 1 %
    with pytest.raises(ValueError, match="2 distinct x"):
        stats.extrapolate_inverse([16, 16], [1, 1], [1, 1])


def test_extrapolation_at_every_point_and_the_inverse_variance_pool(key):
    x = np.array([16.0, 32.0, 64.0])
    lim = np.array([[0.1, 0.2], [0.3, 0.4]])
    y = lim[None] + 2.0 / x[:, None, None]
    se = np.full(y.shape, 0.01)
    keep = np.array([[True, False], [True, True]])
    a, s = stats.extrapolate_inverse_each(x, y, se, keep=keep)
    assert np.allclose(a[keep], lim[keep], atol=1e-12) and np.isnan(a[0, 1]) and np.isnan(s[0, 1])
    ref = stats.extrapolate_inverse(x, y[:, 1, 0], se[:, 1, 0])
    assert (a[1, 0], s[1, 0]) == pytest.approx(ref)
    y_bad = y.copy()
    y_bad[0, 1, 1] = np.nan                 # a kept point's NaN raises, never dropped
    with pytest.raises(ValueError, match="finite y"):
        stats.extrapolate_inverse_each(x, y_bad, se, keep=keep)
    # the pool: one quantity measured with different SEs; its SE is the spread of the pool
    sig = np.array([0.01, 0.02, 0.04])
    draws = 0.5 + np.asarray(jax.random.normal(key, (4000, 3))) * sig
    m, pse = stats.inverse_variance_mean(draws[0], sig)
    assert pse == pytest.approx(1 / np.sqrt(np.sum(sig**-2)))
    pooled = np.array([stats.inverse_variance_mean(d, sig)[0] for d in draws])
    assert abs(pooled.mean() - 0.5) < 4 * pse / np.sqrt(4000)
    assert abs(pooled.std(ddof=1) / pse - 1) < 0.05
    assert np.isnan(stats.inverse_variance_mean([0.5, np.nan], [0.1, 0.1])[0])
    with pytest.raises(ValueError, match="same positive number"):
        stats.inverse_variance_mean([], [])
    with pytest.raises(ValueError, match="finite positive"):
        stats.inverse_variance_mean([0.5, 0.6], [0.1, np.inf])


def test_every_check_declares_kinds():
    from gmtheory.verify import KINDS, all_checks

    assert len(all_checks()) >= 54
    ids = {c.id for c in all_checks()}
    for num in ("19", "23", "33"):  # the paper-figure checks (docs/checks.md)
        assert any(i.split(".")[1].startswith(num) for i in ids), num
    assert set(KINDS) == {"agreement", "upper_bound", "lower_bound", "count"}


# ----------------------------------------------------------------- results know code ----

def _copy_package(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    shutil.copytree(Path(gmtheory.__file__).parent, pkg,
                    ignore=shutil.ignore_patterns("__pycache__", "data", "*.png"))
    monkeypatch.setattr(cache, "PACKAGE_ROOT", pkg)
    cache._FP_CACHE.clear()
    return pkg


def test_fingerprint_follows_imports(tmp_path, monkeypatch):
    fp = cache.source_fingerprint("gmtheory.simulations.gated_experts")
    assert "simulations/gated_experts.py" in fp.files and "operators.py" in fp.files
    assert not any(f.startswith(("verify/", "figures/")) or f == "cli.py" for f in fp.files)
    pkg = _copy_package(tmp_path, monkeypatch)
    assert cache.source_fingerprint("gmtheory.simulations.gated_experts") == fp
    with open(pkg / "operators.py", "a") as fh:
        fh.write("\n# edited\n")
    new = cache.source_fingerprint("gmtheory.simulations.gated_experts")
    assert new.digest != fp.digest
    assert cache.changed_files(fp.as_dict(), new) == ["operators.py"]


def test_changed_code_recomputes_and_reuse_stale_warns(tmp_path, monkeypatch):
    import gmtheory.simulations as sims
    from gmtheory.simulations import get_simulation, run_simulation

    pkg = _copy_package(tmp_path, monkeypatch)
    sim = get_simulation("gated-experts")
    calls = []

    @functools.wraps(sim.run_point)
    def counted(*a):
        calls.append(1)
        return sim.run_point(*a)

    monkeypatch.setitem(sims.SIMULATIONS, sim.name, dataclasses.replace(sim, run_point=counted))
    over = {"grid": 9}
    res = tmp_path / "res"
    a1, m1, stem = run_simulation(sim.name, overrides=over, results_dir=res, progress=False)
    run_simulation(sim.name, overrides=over, results_dir=res, progress=False)
    assert len(calls) == 1                                  # cached
    with open(pkg / "simulations" / "gated_experts.py", "a") as fh:
        fh.write("\n# a change to the simulation's source\n")
    with pytest.warns(cache.StaleResultWarning, match="simulations/gated_experts.py"):
        a2, m2, _ = run_simulation(sim.name, overrides=over, results_dir=res, progress=False,
                                   reuse_stale=True)
    assert len(calls) == 1 and m2["fingerprint"] == m1["fingerprint"]
    a3, m3, stem3 = run_simulation(sim.name, overrides=over, results_dir=res, progress=False)
    assert len(calls) == 2 and stem3 == stem                # recomputed in place
    assert m3["fingerprint"]["digest"] != m1["fingerprint"]["digest"]
    for k in a1:
        np.testing.assert_array_equal(a1[k], a3[k])


def test_jaxlib_xla_flags_and_data_are_in_the_cache_key(tmp_path, monkeypatch):
    """A result computed under another jaxlib, other XLA_FLAGS or other data files is a
    cache miss: they change the numbers, so they are part of the key (issue 26)."""
    import jaxlib

    import gmtheory.simulations as sims
    from gmtheory import tasks
    from gmtheory.simulations import get_simulation, run_simulation

    sim = get_simulation("gated-experts")
    calls, data = [], {"v": 1}

    @functools.wraps(sim.run_point)
    def counted(*a):
        calls.append(1)
        return sim.run_point(*a)

    monkeypatch.setitem(sims.SIMULATIONS, sim.name, dataclasses.replace(
        sim, run_point=counted, data=lambda cfg: dict(data)))
    res = tmp_path / "res"

    def run():
        return run_simulation(sim.name, overrides={"grid": 9}, results_dir=res,
                              progress=False)

    _, m0, stem0 = run()
    run()
    assert len(calls) == 1                                   # a hit
    assert m0["environment"] == cache.environment_identity()
    monkeypatch.setenv("XLA_FLAGS", (cache.os.environ.get("XLA_FLAGS", "")
                                     + " --xla_cpu_enable_fast_math=false").strip())
    _, m1, stem1 = run()
    assert len(calls) == 2 and stem1 != stem0                # other flags: a miss
    monkeypatch.setattr(jaxlib.version, "__version__", "0.0.0+other")
    _, m2, stem2 = run()
    assert len(calls) == 3 and stem2 not in (stem0, stem1)   # other jaxlib: a miss
    assert m2["environment"]["jaxlib"] == "0.0.0+other"
    data["v"] = 2
    run()
    assert len(calls) == 4                                   # other data: a miss
    # gma-lm declares its corpus (the interpreter's stdlib files) as its data
    root = tmp_path / "lib"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    ident = tasks.stdlib_corpus_identity(root)
    (root / "a.py").write_text("x = 2\n")
    assert tasks.stdlib_corpus_identity(root) != ident
    assert get_simulation("gma-lm").data is not None


def test_cli_figures_reuse_stale(tmp_path, monkeypatch, capsys):
    from gmtheory.cli import main

    pkg = _copy_package(tmp_path, monkeypatch)
    args = ["figures", "gated-experts", "--out", str(tmp_path / "f"), "--results",
            str(tmp_path / "r"), "--no-progress"]
    assert main(args) == 0
    with open(pkg / "mixture.py", "a") as fh:
        fh.write("\n# edited\n")
    with pytest.warns(cache.StaleResultWarning, match="mixture.py"):
        assert main(args + ["--reuse-stale"]) == 0


def test_hyperparameters_are_data_a_second_run_compiles_nothing(tmp_path, capsys):
    """#30, #45 item 5: the learning rate travels in the optimiser state (training.hyper)
    and the loss's settings in a module, so another learning rate reuses the compiled
    programs: of LDA's population gradient descent and its SGD simulation, of the GMA
    trainers (gma-gmm), of the denoising heads and of clean-context."""
    from gmtheory import lda, profiling
    from gmtheory.simulations import run_simulation

    prob = lda.config("C1")
    th = lda.LDAParams(0.1 * jnp.eye(2), jnp.full(2, 0.1), jnp.full(2, -0.1),
                       jnp.asarray(0.2))
    first, _ = lda.gradient_descent(prob, th, 1e-3, 40, record_every=10, order=24,
                                    progress=False)
    with profiling.compile_stats() as st:
        second, _ = lda.gradient_descent(prob, th, 2e-3, 40, record_every=10, order=24,
                                         progress=False)
    assert st.programs == 0 and st.cache_hits == 0, st.as_dict()
    # and the new value is used: a twice larger step moves twice as far at first order
    moved = [float(jnp.linalg.norm(p.v21 - th.v21)) for p in (first, second)]
    assert 1.8 < moved[1] / moved[0] < 2.2

    # whole training simulations: LDA's SGD, the GMA trainers (gma_sims.default_optimizer)
    # and clean-context (a loss module, Adam's rate as data, a module-level L-BFGS objective)
    sims = [("lda-sgd", {"seeds": 2, "steps": 40, "eval_every": 20, "early_steps": 20,
                         "early_every": 2}, 0.01),
            ("gma-gmm", {"seeds": 1, "mixers": ("gma",), "cases": ("A",), "ds": (2,),
                         "steps": 20, "batch": 4, "n_train": 64, "n_test": 16}, 0.003),
            ("clean-context", {"seeds": 1, "L": 12, "steps": 10, "batch": 4, "pool": 8,
                               "test": 8}, 0.01)]
    for name, over, lr in sims:
        a, _, _ = run_simulation(name, "quick", {**over, "lr": lr},
                                 results_dir=tmp_path / f"{name}-1", progress=False)
        with profiling.compile_stats() as st:
            b, _, _ = run_simulation(name, "quick", {**over, "lr": 2 * lr},
                                     results_dir=tmp_path / f"{name}-2", progress=False)
        assert st.programs == 0 and st.cache_hits == 0, (name, st.as_dict())
        assert any(not np.array_equal(a[k], b[k]) for k in a), f"{name}: lr was not used"
    # the denoising heads (denoising.train_heads: a loss module, step size and clip as data)
    from gmtheory import denoising

    mix, xi = denoising.figure2_mixture()
    kw = {"seeds": 2, "steps": 20, "eval_every": 10, "batch": 8, "order": 6, "progress": False}
    denoising.train_heads(mix, xi, jax.random.key(0), lr=2e-3, **kw)
    with profiling.compile_stats() as st:
        denoising.train_heads(mix, xi, jax.random.key(0), lr=4e-3, clip=5.0, **kw)
    assert st.programs == 0 and st.cache_hits == 0, st.as_dict()
    with pytest.raises(TypeError, match="lr: not a parameter of sgd"):
        training.hyper(optax.sgd, lr=0.1)
    # progress=False hides the training engine's bars too
    assert "step/s" not in capsys.readouterr().err


def test_control_variate_mean_is_unbiased_and_tighter():
    """f = 2 + c + noise with a control c of mean zero: the regression estimator's SE is that
    of the noise alone (~0.1/sqrt(n)) where the plain mean's is ~1/sqrt(n), and over 200
    repetitions its estimates lie within 4 SE of 2 on average (z-scores of mean ~0, sd ~1)."""
    from gmtheory import stats
    rng = np.random.default_rng(0)
    zs = []
    for _ in range(200):
        c = rng.normal(size=400)
        f = 2 + c + 0.1 * rng.normal(size=400)
        m, se = stats.control_variate_mean(f, c[:, None])
        assert 0.08 / 20 < se < 0.12 / 20
        zs.append((m - 2) / se)
    assert abs(np.mean(zs)) < 4 / np.sqrt(200) and 0.8 < np.std(zs) < 1.2
    with pytest.raises(ValueError, match="controls"):
        stats.control_variate_mean(np.ones(5), np.ones((4, 1)))
    assert np.isnan(stats.control_variate_mean(np.r_[np.nan, np.ones(9)], np.ones((10, 1)))[0])
