"""gmtheory.icl: bad input, the simulator's building blocks, and device sharding (the
theory checks run as `verify` checks in test_checks.py)."""

import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory import icl


@pytest.mark.parametrize("call, match", [
    (lambda: icl.e_icl_ridgeless(-1.0, 2.0, 1.0, 0.1), "alpha"),
    (lambda: icl.e_icl_ridge(2.0, 2.0, 1.0, 0.1, 0.0), "lam"),
    (lambda: icl.test_error(jnp.ones((3, 3)), 5, 0.1), "Gamma"),
    (lambda: icl.test_error_nonlinear(jnp.ones((3, 4)), 5, {"c1": 1.0}), "moments"),
    (lambda: icl.dmmse_error(jax.random.key(0), jnp.ones((2, 3)), 4, 0.1, draws=8,
                             test="ood"), "test"),
    (lambda: icl.g_task_trials(jax.random.key(0), 4, alpha=2.0, tau=2.0, kappa=1.0, rho=0.1,
                               lam=1e-3, trials=2, devices=99), "devices"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_fast_sampler_matches_direct_construction():
    """The O(l + d) statistics have the law of (d/l) sum y_i x_i and (1/l) sum y_i^2."""
    d, ell, n, rho = 5, 7, 200_000, 0.1
    key = jax.random.key(0)
    w = icl.sample_pool(key, d, 1)[0]
    W = jnp.broadcast_to(w, (n, d))
    h, _, _ = icl.sample_statistics(jax.random.key(1), W, ell, rho)
    X = jax.random.normal(jax.random.key(2), (n, ell, d)) / jnp.sqrt(d)
    y = X @ w + jnp.sqrt(rho) * jax.random.normal(jax.random.key(3), (n, ell))
    direct = jnp.concatenate([d / ell * jnp.einsum("nl,nld->nd", y, X),
                              jnp.mean(y * y, 1, keepdims=True)], 1)
    for stat in (lambda a: a.mean(0), lambda a: (a * a).mean(0)):
        a, b = stat(h), stat(direct)
        se = jnp.sqrt((jnp.var(h, 0) + jnp.var(direct, 0)) / n) * (1 + 3 * jnp.abs(h).max())
        assert np.all(np.abs(np.asarray(a - b)) < 5 * np.asarray(se) + 1e-12)


def test_cg_and_cholesky_match_an_explicit_ridge_solve():
    d, n, lam = 4, 600, 1e-2
    ell, k, _ = icl.sizes(d, 2.0, 3.0, 1.0)
    pool = icl.sample_pool(jax.random.key(4), d, k)
    h, xq, yq = icl.sample_statistics(jax.random.key(5), jnp.tile(pool, (n // k, 1)), ell, 0.1)
    F = jnp.einsum("nd,ne->nde", xq, h).reshape(n, -1)
    G = jnp.linalg.solve(F.T @ F / n + lam * jnp.eye(F.shape[1]), F.T @ yq / n)
    cg, res = icl.ridge_cg(h, xq, yq, lam, tol=1e-12, maxiter=500)
    chol, _ = icl.ridge_solve(h, xq, yq, lam, tol=1e-12, maxiter=500)
    assert float(res) < 1e-11
    np.testing.assert_allclose(cg.ravel(), G, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(chol.ravel(), G, rtol=1e-10, atol=1e-12)


@pytest.mark.slow   # the 1-vs-4-device path of every simulation: tests/test_devices.py
def test_sharded_trials_equal_single_device(tmp_path):
    """A small sweep on 4 virtual CPU devices gives the single-device numbers: the same keys
    per trial, so equal up to the conjugate-gradient tolerance (relative residual 1e-10;
    the reduction order differs between the two compilations, so not bit for bit)."""
    code = textwrap.dedent("""
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
        import jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        from gmtheory import icl
        assert jax.device_count() == 4
        for kappa in (0.5, 2.0):
            kw = dict(alpha=3.0, tau=2.0, kappa=kappa, rho=0.1, lam=1e-4, trials=6)
            one = icl.g_task_trials(jax.random.key(3), 6, devices=1, **kw)
            four = icl.g_task_trials(jax.random.key(3), 6, devices=4, **kw)
            for a, b in zip(one[:2] + one[3:], four[:2] + four[3:]):
                a, b = np.asarray(a), np.asarray(b)
                assert np.max(np.abs(a - b)) <= 1e-7 * np.max(np.abs(a)), (a, b)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-2000:]


def test_sweep_skips_points_whose_rounding_moves_tau():
    """n = round(tau d^2 / k) k: with k close to tau d^2 the simulated tau is far from the
    nominal one (alpha = 6, tau = 1.2, kappa = 16 at d = 10 runs at tau = 1.6); such points
    are not run, exact ones are."""
    from gmtheory.simulations.icl_sims import effective_sizes

    (a, t, k), ok = effective_sizes(10, 6.0, 1.2, 16.0)
    assert not ok and t == pytest.approx(1.6)
    assert effective_sizes(40, 6.0, 1.2, 16.0)[1]
    (a, t, k), ok = effective_sizes(16, 1.0, 1.25, np.inf)
    assert ok and np.isinf(k) and a == 1.0


def test_icl_sweeps_at_several_d_small(tmp_path):
    """The several-d sweeps assemble (d, series, x) arrays with NaN where a point is not run,
    compare with the theory at the simulated sizes, and run dMMSE at the largest d only."""
    from gmtheory.simulations import get_simulation, make_config, run_simulation

    over = {"ds": (4, 8), "alphas": (6.0,), "kappas": (0.5, 2.0), "trials": 2,
            "dmmse_draws": 20}
    a, _, _ = run_simulation("icl-gtask", overrides=over, results_dir=tmp_path, progress=False)
    assert a["sim_mean"].shape == a["rel_gap"].shape == (2, 1, 2)
    assert a["sim"].shape == (2, 1, 2, 2)
    # d = 4, alpha = 6, kappa = 2: k = 8, n = round(19.2 / 8) 8 = 16 -> tau 1.0, not run
    assert np.isnan(a["sim_mean"][0, 0, 1]) and np.all(np.isfinite(a["sim_mean"][1]))
    assert np.all(np.isfinite(a["dmmse_mean"])) and int(a["dmmse_d"]) == 8
    sim = get_simulation("icl-gtask")
    lines = sim.summary(make_config(sim, "quick", over), a)
    assert any("not simulated" in line and "d = 4" in line for line in lines)
    assert any("common points" in line for line in lines)


def test_a_traced_target_index_is_the_same_target(key):
    """targets[target] (one compilation for every target) gives the numbers of f=target."""
    fs = (jnp.tanh, jnp.sign)
    kw = dict(alpha=2.0, tau=2.0, kappa=np.inf, rho=0.1, lam=1e-3, trials=2)
    by_index = icl.g_task_trials(key, 4, targets=fs, target=1, **kw)
    direct = icl.g_task_trials(key, 4, f=jnp.sign, **kw)
    for a, b in zip(by_index, direct, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    with pytest.raises(ValueError, match="targets, target"):
        icl.g_task_trials(key, 4, targets=fs, **kw)
    with pytest.raises(ValueError, match="target: an index"):
        icl.g_task_trials(key, 4, targets=fs, target=2, **kw)


def test_dense_dmmse_is_the_linear_dmmse_for_an_identity_target():
    """The token-by-token dMMSE (any f) against the sufficient-statistics dMMSE (linear f)
    on the same pool, IDG test (both draw the task from the pool, so both estimate the same
    expectation): within 4 SE of the difference; and with one task in the pool the
    posterior is certain, so the IDG error is the label noise rho for a nonlinear f."""
    d, ell, rho, k = 6, 12, 0.3, 20
    pool = icl.sample_pool(jax.random.key(3), d, k)
    dense = icl.dmmse_errors(jax.random.key(4), pool, ell, rho, draws=2000, f=lambda z: z)
    exact = icl.dmmse_errors(jax.random.key(5), pool, ell, rho, draws=2000)
    (m1, s1), (m2, s2) = dense["idg"], exact["idg"]
    assert abs(m1 - m2) <= 4 * np.hypot(s1, s2), (dense, exact)
    one = icl.dmmse_errors(jax.random.key(6), pool[:1], ell, rho, draws=2000, f=jnp.tanh)
    m, s = one["idg"]
    assert abs(m - rho) <= 4 * s and s < 0.05 * rho
    with pytest.raises(TypeError, match="f:"):
        icl.dmmse_errors(jax.random.key(0), pool, ell, rho, draws=8, f="relu")


@pytest.mark.parametrize("sets, match", [({"lam_fs": ("cube",)}, "lam_fs"),
                                         ({"lams": (0.0, 0.1)}, "lams"),
                                         ({"lam_tau": 1.0}, "lam_tau")])
def test_bad_ridge_sweep_settings_are_named(sets, match):
    from gmtheory.simulations import get_simulation, make_config

    sim = get_simulation("icl-equivalence")
    with pytest.raises(ValueError, match=match):
        sim.points(make_config(sim, overrides=sets))


def test_authors_protocol_config_names_the_dimensions_they_saved():
    from gmtheory.simulations import get_simulation, make_config

    sim = get_simulation("icl-authors")
    with pytest.raises(ValueError, match="ds: the authors saved"):
        make_config(sim, overrides={"ds": (12,)})
    with pytest.raises(ValueError, match="trials, draws"):
        make_config(sim, overrides={"trials": 1})


@pytest.mark.parametrize("d, kappa", [(6, 1.5), (6, np.inf), (20, 0.8)])
def test_pretrain_is_one_trial_of_the_batched_simulator(d, kappa):
    """icl.pretrain (one run, eager) and icl.g_task_trials (the jitted, batched simulator the
    figures and checks use) are two implementations of one estimator: with trial t's key
    (fold_in(key, t)) they draw the same pool and prompts, so pretrain's Gamma, scored by the
    exact test errors, gives each trial's e_ICL and e_IDG to round-off (a direct solve at
    d = 6, CG at d = 20; a finite pool and a fresh task per prompt)."""
    key = jax.random.key(11)
    kw = dict(alpha=2.0, tau=2.0, kappa=kappa, rho=0.1, lam=1e-3)
    e_icl, e_idg, res, _ = icl.g_task_trials(key, d, trials=2, **kw)
    ell = icl.sizes(d, kw["alpha"], kw["tau"], kappa)[0]
    for t in range(2):
        run, pool = icl.pretrain(jax.random.fold_in(key, t), d, **kw)
        assert run.residual < 1e-8 and float(res[t]) < 1e-8
        np.testing.assert_allclose(float(icl.test_error(run.Gamma, ell, kw["rho"])),
                                   float(e_icl[t]), rtol=1e-8)
        if pool is not None:
            idg = icl.test_error(run.Gamma, ell, kw["rho"], pool.mean(0), pool.T @ pool / len(pool))
            np.testing.assert_allclose(float(idg), float(e_idg[t]), rtol=1e-8)
