import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gmtheory as g
from gmtheory import denoising as D
from gmtheory import stats


def _mix(pi1=0.5, gamma=1.0):
    return g.GaussianMixture.shared([pi1, 1 - pi1], jnp.array([[3.0, 0.0], [0.0, 3.0]]),
                                    gamma**2 * jnp.eye(2))


def test_bad_inputs():
    with pytest.raises(ValueError, match="xi: the noise level"):
        D.bayes_denoiser(_mix(), -1.0, jnp.zeros((1, 2)))
    het = g.GaussianMixture([0.5, 0.5], jnp.zeros((2, 2)), jnp.stack([jnp.eye(2), 2 * jnp.eye(2)]))
    with pytest.raises(ValueError, match="shared by all components"):
        D.bayes_denoiser(het, 1.0, jnp.zeros((1, 2)))
    with pytest.raises(ValueError, match="equal norms"):
        D.two_head_construction(jnp.array([1.0, 0]), jnp.array([0, 2.0]), 1.0, 1.0)
    with pytest.raises(ValueError, match="distinct"):
        D.two_head_construction(jnp.array([1.0, 0]), jnp.array([1.0, 0]), 1.0, 1.0)
    with pytest.raises(ValueError, match="gamma\\^2 = xi\\^2"):
        D.single_head_construction(1.0, 2.0, 2)
    with pytest.raises(ValueError, match="z: expected shape"):
        D.bayes_denoiser(_mix(), 1.0, jnp.zeros((4, 3)))


def test_tweedie_heteroscedastic_matches_gh():
    """Tweedie works for any covariances: compare with a GH posterior mean."""
    mix = g.GaussianMixture([0.3, 0.7], jnp.array([[1.0, 0.0], [-1.0, 0.5]]),
                            jnp.stack([jnp.eye(2), jnp.array([[0.5, 0.2], [0.2, 0.8]])]))
    xi = 0.9
    z = jnp.array([[0.3, -0.2], [1.5, 1.0]])
    tw = D.tweedie_denoiser(mix, xi, z)
    for i, q in enumerate(z):
        f = lambda x, q=q: jnp.exp(-jnp.sum((x - q) ** 2, 1) / (2 * xi**2))[:, None] * \
            jnp.concatenate([jnp.ones((x.shape[0], 1)), x], 1)
        r = g.expect_mixture(f, mix, order=60)
        np.testing.assert_allclose(tw[i], r[1:] / r[0], rtol=1e-10)


def test_linear_risk_matches_monte_carlo():
    mix, xi = _mix(0.3), 2.0
    A = jnp.array([[0.5, 0.1], [0.0, 0.4]])
    x, _ = mix.sample(jax.random.key(0), 400_000)
    z = x + xi * jax.random.normal(jax.random.key(1), x.shape)
    e = jnp.sum((x - z @ A.T) ** 2, 1)
    mean, se = stats.mean_se(e)
    assert stats.z_score(mean, float(D.linear_risk(mix, xi, A)), se) < 5


def test_u_lambda_is_fixed_point():
    for lam in (1.01, 1.2, 2.0, 5.0):
        u = D.u_lambda(lam)
        assert abs(u - np.tanh(lam**2 * u)) < 1e-14 and 0 < u <= 1  # u = 1.0 in float64 at lam=5
    assert D.u_lambda(0.9) == 0.0 and D.u_lambda(1.0) == 0.0


def test_residual_icl_finite_prompt_batched():
    mix, xi = _mix(0.4), 2.0
    mz = D.noisy_mixture(mix, xi)
    P = D.residual_icl_parameters(1.0, xi, 2)
    toks = jnp.stack([mz.sample(jax.random.key(i), 50)[0] for i in range(3)])
    out = D.residual_icl(mz, P, jnp.ones((5, 2)), prompt=toks)
    assert out.shape == (3, 5, 2)
    np.testing.assert_allclose(out[1], D.residual_icl(mz, P, jnp.ones((5, 2)), prompt=toks[1]),
                               rtol=1e-13)


def test_iterates_quick_profile(tmp_path):
    from gmtheory.simulations import run_simulation

    a, _, _ = run_simulation("denoise-iterates", overrides={"n_critical": 1000, "n_lambda": 20},
                             results_dir=tmp_path, progress=False)
    assert np.all(np.abs(a["weak/traj"][-1]) < 1e-6)
    lam = float(a["strong/lambda"])
    np.testing.assert_allclose(np.abs(a["strong/traj"][-1][:, 1]), 3 * D.u_lambda(lam),
                               rtol=1e-10)


@pytest.mark.xdist_group("small-runs")
def test_fig2_pipeline_small(shared_results):
    from _shared import DENOISE_SMALL

    from gmtheory.simulations import get_simulation, parse_overrides, run_simulation

    over = parse_overrides(get_simulation("denoise-fig2").config_cls, DENOISE_SMALL)
    a, _, _ = run_simulation("denoise-fig2", overrides=over, results_dir=shared_results,
                             progress=False)           # also test_devices' one-device run
    assert a["excess"].shape == (4, 3)
    assert np.all(a["excess"][:, -1] < a["excess"][:, 0])  # SGD decreases the excess


def test_icl_pipeline_small(tmp_path):
    from gmtheory.simulations import run_simulation

    a, _, _ = run_simulation("icl-denoising",
                             overrides={"steps": 30, "Ls": (16, 64), "seeds": 1, "batch": 4,
                                        "eval_prompts": 16},
                             results_dir=tmp_path, progress=False)
    assert a["softmax/excess"].shape == (2, 1)
    # Prop. 4.4 parameters: finite-prompt excess shrinks with L
    assert a["prop44_excess"][1] < a["prop44_excess"][0]
    assert np.all(a["mean_linear_gap"] > 0)
    from gmtheory.simulations import get_simulation, make_config

    sim = get_simulation("icl-denoising")
    lines = sim.summary(make_config(sim, "quick", {"Ls": (16, 64)}), a)
    assert any("residual coefficient" in line for line in lines)


def test_clean_context_pipeline_small(tmp_path):
    from gmtheory.simulations import run_simulation

    a, _, _ = run_simulation("clean-context",
                             overrides={"d": 4, "centres": 3, "L": 20, "steps": 5, "batch": 4,
                                        "pool": 12, "test": 8, "seeds": 1},
                             results_dir=tmp_path, progress=False)
    # the oracle Bayes predictor beats every trained model on the same test prompts
    for key in ("softmax-fresh", "linear-pool"):
        assert np.all(a[f"{key}/test_mse"] > a[f"{key}/bayes_mse"])
    assert float(a["iso_head_excess"]) > 0


def test_figure2_parameters_defined_once():
    mix, xi = D.figure2_mixture()
    np.testing.assert_array_equal(mix.means, jnp.array([D.FIG2.m1, D.FIG2.m2]))
    np.testing.assert_array_equal(mix.covs[0], D.FIG2.gamma**2 * jnp.eye(2))
    assert xi == D.FIG2.xi and float(mix.weights[0]) == D.FIG2.pi1
    assert float(D.figure2_mixture(0.3)[0].weights[0]) == 0.3


def test_excess_risk_pythagoras_and_zero_at_bayes():
    """E|AZ - f*|^2 = R(A) - R(f*) (two quadratures of different integrands), and f* has
    zero excess."""
    mix, xi = _mix(0.3), 2.0
    A = jnp.array([[0.5, 0.1], [0.0, 0.4]])
    lhs = D.excess_risk(lambda q: q @ A.T, mix, xi, 40)
    rhs = D.linear_risk(mix, xi, A) - D.bayes_risk(mix, xi, 40)
    assert abs(float(lhs - rhs)) < 1e-9
    assert float(D.excess_risk(lambda q: D.bayes_denoiser(mix, xi, q), mix, xi, 10)) < 1e-25


def test_single_head_search_exact_at_gamma_eq_xi_and_reproducible():
    mix, xi = _mix(0.4, gamma=1.0), 1.0  # gamma^2 = xi^2: one head is exact
    s = 2.0
    fit = D.single_head_search(mix, xi, 2, jax.random.key(3), order=16,
                               init=(jnp.eye(2) / s, 0.5 * jnp.eye(2)))
    assert isinstance(fit, D.SingleHeadFit) and fit.excesses.shape == (3,)
    assert fit.excess < 1e-12 and fit.excess == fit.excesses.min()
    assert fit.U.shape == fit.V.shape == (2, 2)
    again = D.single_head_search(mix, xi, 2, jax.random.key(3), order=16,
                                 init=(jnp.eye(2) / s, 0.5 * jnp.eye(2)))
    np.testing.assert_array_equal(fit.excesses, again.excesses)
    with pytest.raises(ValueError, match="starts"):
        D.single_head_search(mix, xi, 0, jax.random.key(0))


def test_train_heads_seeds_batched_and_reproducible():
    mix, xi = D.figure2_mixture()
    kw = dict(seeds=2, steps=60, eval_every=20, order=8, progress=False)
    run = D.train_heads(mix, xi, jax.random.key(5), **kw)
    assert run.excess.shape == (2, 4) and run.U.shape == (2, 2, 2, 2)
    np.testing.assert_array_equal(run.steps, [0, 20, 40, 60])
    assert np.all(run.excess[:, -1] < run.excess[:, 0])
    again = D.train_heads(mix, xi, jax.random.key(5), **kw)
    np.testing.assert_array_equal(run.excess, again.excess)
    # the initial excess is the GH excess of the N(0, 0.1^2) initial heads of each seed
    k_init = jax.random.split(jax.random.split(jax.random.key(5), 2)[1])[0]
    ku, kv = jax.random.split(k_init)
    U0, V0 = 0.1 * jax.random.normal(ku, (2, 2, 2)), 0.1 * jax.random.normal(kv, (2, 2, 2))
    mz = D.noisy_mixture(mix, xi)
    e0 = D.excess_risk(lambda q: D.heads_output(mz, [(U0[0], V0[0]), (U0[1], V0[1])], q),
                       mix, xi, 8)
    np.testing.assert_allclose(run.excess[1, 0], e0, rtol=1e-12)
