"""icl-nonlinear-kappa: the paired sampler's law, exact identities of the c1 = 0 case, the
transition-point estimators, the theory, and a small end-to-end sweep with its figure (the
check icl.08 runs in test_checks.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory import icl
from gmtheory.simulations import get_simulation, make_config, run_simulation
from gmtheory.simulations import icl_nonlinear_kappa as nk


@pytest.mark.parametrize("name", ["relu", "abs"])
def test_paired_statistics_have_the_law_of_the_direct_construction(name):
    """h, x_q, y_q of both targets against (d/l) sum y_i x_i, (1/l) sum y_i^2 built from
    explicit tokens: coordinate means and second moments, and the correlation between the
    task-direction component and s2 (which the noise projection shortcut must get right)."""
    d, ell, n, rho = 5, 7, 200_000, 0.3
    mom = nk.target_moments(name, rho)
    c1, rho_eff = mom["c1"], mom["rho_eff"]
    w = icl.sample_pool(jax.random.key(0), d, 1)[0]
    W = jnp.broadcast_to(w, (n, d))
    fidx = list(nk.FUNCTIONS).index(name)
    h, xq, yq = nk.paired_statistics(jax.random.key(1), W, ell, rho, fidx, c1, rho_eff)
    X = jax.random.normal(jax.random.key(2), (n, ell, d)) / jnp.sqrt(d)
    z = X @ w
    eps = jax.random.normal(jax.random.key(3), (n, ell))
    f = jnp.abs if name == "abs" else (lambda t: jnp.maximum(t, 0.0))
    xd = jax.random.normal(jax.random.key(4), (n, d)) / jnp.sqrt(d)
    ed = jax.random.normal(jax.random.key(5), (n,))
    for i, (y, yqd) in enumerate(((f(z) + jnp.sqrt(rho) * eps, f(xd @ w) + jnp.sqrt(rho) * ed),
                                  (c1 * z + jnp.sqrt(rho_eff) * eps,
                                   c1 * (xd @ w) + jnp.sqrt(rho_eff) * ed))):
        direct = jnp.concatenate([d / ell * jnp.einsum("nl,nld->nd", y, X),
                                  jnp.mean(y * y, 1, keepdims=True)], 1)
        along = lambda hh: (hh[:, :d] @ w / jnp.linalg.norm(w)) * hh[:, d]
        pairs = [(h[i], direct), (along(h[i])[:, None], along(direct)[:, None]),
                 (jnp.stack([yq[i], xq[:, 0]], 1), jnp.stack([yqd, xd[:, 0]], 1))]
        for a, b in pairs:
            for power in (1, 2):            # first and second moments, per coordinate
                va, vb = np.asarray(a) ** power, np.asarray(b) ** power
                se = np.sqrt((va.var(0) + vb.var(0)) / n)
                # ~70 comparisons in all at 5 SE: P(any |N(0, 1)| > 5) ~ 4e-5
                assert np.all(np.abs(va.mean(0) - vb.mean(0)) < 5 * se + 1e-12), \
                    (name, i, power, va.mean(0), vb.mean(0), se)


def test_c1_zero_identities():
    """|z| (c1 = 0): the equivalent model's labels are pure noise, so its ICL and IDG errors
    are the same number for every Gamma; and no Gamma beats the predictor 0 (error m2)."""
    r = nk.paired_trials(jax.random.key(7), 6, 2.0, 3.0, 0.5, "abs", 0.1, 1e-6, 3)
    m2 = nk.target_moments("abs", 0.1)["m2"]
    np.testing.assert_allclose(r["equivalent_icl"], r["equivalent_idg"], rtol=1e-12)
    assert np.all(r["nonlinear_idg"] >= m2) and np.all(r["nonlinear_icl"] >= m2)
    assert np.all(r["residual"] < 1e-9)


def test_half_point_interpolates_in_log_kappa_with_a_delta_method_se():
    kappas = np.array([0.1, 0.2, 0.5, 1.0, 2.0])
    g = np.array([4.0, 3.5, 2.5, 1.5, 0.4])
    se = np.array([0.1, 0.2, 0.15, 0.1, 0.05])
    k, s = nk.half_point(kappas, g, se, 0.2)          # half of 3.5 = 1.75 in (0.5, 1)
    t = (2.5 - 1.75) / (2.5 - 1.5)
    assert k == pytest.approx(np.exp(np.log(0.5) + t * np.log(2.0)), rel=1e-12)
    # the delta-method SE equals the one from numerical derivatives of the estimator
    grad = []
    for i in range(len(g)):
        gp, gm = g.copy(), g.copy()
        gp[i] += 1e-6
        gm[i] -= 1e-6
        grad.append((nk.half_point(kappas, gp, se, 0.2)[0]
                     - nk.half_point(kappas, gm, se, 0.2)[0]) / 2e-6)
    assert s == pytest.approx(np.sqrt(np.sum((np.array(grad) * se) ** 2)), rel=1e-6)
    assert np.isnan(nk.half_point(kappas, g, se, 0.3)[0])       # kappa_ref not on the grid


def test_half_point_theory_and_theory():
    alpha, tau, rho = 10.0, 2.0, 0.01
    mom = nk.target_moments("relu", rho)
    rp = mom["rho_eff"] / mom["c1"] ** 2
    k = nk.half_point_theory(alpha, tau, rp, 0.2)
    g = lambda kap: np.subtract(*nk.theory("relu", alpha, tau, kap, rho))
    assert g(k) == pytest.approx(0.5 * g(0.2), rel=1e-9)
    assert g(1.0) == pytest.approx(mom["c1"] ** 2 * icl.g_task_ridgeless(alpha, tau, 1.0, rp),
                                   rel=1e-12)
    e = nk.theory("abs", alpha, tau, 0.3, rho)
    assert e[0] == e[1] == pytest.approx(nk.target_moments("abs", rho)["m2"] * tau / (tau - 1))


def test_simulated_rule_and_bad_input():
    assert not nk.simulated(16, 2.0, 0.1)        # k = 1
    assert nk.simulated(24, 2.0, 0.1)            # k = 2, 576 prompts per task
    assert not nk.simulated(24, 2.0, 46.4)       # 1.03 prompts per task
    with pytest.raises(ValueError, match="unknown target"):
        nk.paired_trials(jax.random.key(0), 4, 2.0, 2.0, 1.0, "cube", 0.1, 1e-3, 1)
    with pytest.raises(ValueError, match="pad_to"):
        nk.paired_trials(jax.random.key(0), 4, 2.0, 2.0, 1.0, "relu", 0.1, 1e-3, 1,
                         pad_to=(1, 1))


@pytest.mark.xdist_group("icl-nonlinear-kappa")
def test_quick_sweep_summary_and_figure(shared_results):
    """The quick run that check icl.08 and the figure read (computed once per worker, in the
    check's xdist group): shapes, ridge residuals, the theory's half point, the summary and
    the figure's nine panels, and the dMMSE of the nonlinear targets (its in-distribution
    error is the label noise: the posterior finds the pool task)."""
    import matplotlib

    matplotlib.use("Agg")
    from gmtheory.figures import get_figure

    a, meta, _ = run_simulation("icl-nonlinear-kappa", "quick", results_dir=shared_results,
                                progress=False)
    cfg = nk.NonlinearKappaConfig(**meta["config"])
    assert a["nonlinear_g_mean"].shape == (len(cfg.ds), len(cfg.alphas), len(cfg.fs),
                                           len(cfg.kappas))
    assert np.nanmax(a["residual"]) < 1e-9
    assert np.all(np.isfinite(a["half_theory"][:, 0]))
    lines = get_simulation("icl-nonlinear-kappa").summary(cfg, a)
    assert any("kappa_1/2" in ln for ln in lines)
    assert any("c1 = 0" in ln for ln in lines)
    assert any(ln.startswith("dMMSE") for ln in lines)
    dm = a["dmmse"]                                            # (f, kappa, test, (m, se))
    assert dm.shape == (len(cfg.dmmse_fs), len(cfg.kappas), 2, 2)
    ok = np.isfinite(dm[..., 1, 0])
    z = (dm[..., 1, 0][ok] - cfg.rho) / dm[..., 1, 1][ok]
    assert np.all(np.abs(z) < 5), z
    fig = get_figure("icl-nonlinear-kappa").draw(a, meta)
    assert len(fig.axes) == 9


@pytest.mark.parametrize("sets, match", [({"dmmse_fs": ("relu", "cube")}, "dmmse_fs"),
                                         ({"dmmse_draws": 1}, "dmmse_draws")])
def test_bad_dmmse_settings_are_named(sets, match):
    sim = get_simulation("icl-nonlinear-kappa")
    cfg = make_config(sim, overrides=sets)
    with pytest.raises(ValueError, match=match):
        sim.points(cfg)


def test_c1_zero_moments_and_config():
    """icl-c1-zero's even targets: c1 and E y^3 z are exactly 0, m2 = E f^2 + rho in closed
    form (E z^2 = 1, E z^4 = 3), the formula's two branches; odd targets, tau = 1, a single
    d, one trial, a negative or NaN noise and a non-positive alpha or lambda are refused
    with the field named."""
    from gmtheory.simulations.icl_c1_zero import C1ZeroConfig, even_moments, predicted

    for name, m2 in (("abs", 1.1), ("z2", 3.1)):
        mom = even_moments(name, 0.1)
        assert mom["c1"] == 0.0 and mom["Ey3z"] == 0.0
        assert mom["m2"] == pytest.approx(m2, rel=1e-12)
    assert predicted(2.0, 3.0) == pytest.approx(3.0) and predicted(2.0, 0.5) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="tau"):
        predicted(2.0, 1.0)
    with pytest.raises(ValueError, match="f:"):
        even_moments("relu", 0.1)
    with pytest.raises(ValueError, match="rho"):
        even_moments("abs", float("nan"))
    base = dict(seed=0, ds=(8, 16), fs=("abs",), taus=(3.0,), alpha=2.0, rho=0.1, lam=1e-6,
                trials=4)
    assert C1ZeroConfig(**base).trials == 4
    for bad, field in (({"fs": ("relu",)}, "fs"), ({"taus": (1.0,)}, "taus"),
                       ({"ds": (8,)}, "ds"), ({"trials": 1}, "trials"),
                       ({"rho": -0.1}, "rho"), ({"alpha": float("nan")}, "alpha"),
                       ({"lam": 0.0}, "lam")):
        with pytest.raises(ValueError, match=field):
            C1ZeroConfig(**{**base, **bad})
