"""Attention-based LDA: input errors, quadrature against Monte Carlo, and the quick
profiles of the LDA simulations (the theorem checks run in test_checks.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory import lda
from gmtheory.simulations import lda_sims, run_simulation


@pytest.mark.parametrize("kwargs, match", [
    ({"cov": [[1.0, 2.0], [2.0, 1.0]]}, "cov"),                 # indefinite
    ({"cov": np.zeros((2, 2))}, "cov"),                         # singular
    ({"pi_pos": 1.2}, "pi_pos"),
    ({"pi_pos": 0.0}, "pi_pos"),
    ({"m_neg": [1.0, 0.0, 0.0]}, "m_neg"),
    ({"m_neg": [1.0, 0.0]}, "means must differ"),
    ({"m_pos": [np.nan, 0.0]}, "m_pos"),
    ({"m_pos": [1.0], "m_neg": [0.0], "cov": [[1.0]]}, "d >= 2"),
])
def test_bad_problem_raises(kwargs, match):
    args = {"m_pos": [1.0, 0.0], "m_neg": [0.0, 1.0], "cov": np.eye(2), "pi_pos": 0.6}
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        lda.LDAProblem(**args)


def test_unknown_names_raise():
    with pytest.raises(ValueError, match="config"):
        lda.config("C3")
    with pytest.raises(ValueError, match="Table 3"):
        lda.table3_start("theta3")
    with pytest.raises(ValueError, match="kind"):
        lda.prompt_predictor(lda.table3_start("theta2"), jnp.ones((4, 2)), jnp.ones(4),
                             jnp.ones((1, 2)), kind="relu")


def test_configs_match_table1():
    c1, c2 = lda.config("C1"), lda.config("C2")
    w, b = lda.bayes_score(c1)
    np.testing.assert_allclose(w, [1.0, -1.0], atol=1e-15)
    np.testing.assert_allclose(b, np.log(1.5), atol=1e-15)       # equal norms, Gamma = I
    w2, b2 = lda.bayes_score(c2)
    np.testing.assert_allclose(w2, 2 * np.eye(20)[0], atol=1e-15)
    assert abs(float(b2)) < 1e-15 and c2.symmetric and not c1.symmetric


@pytest.mark.parametrize("scale", [1.0, 30.0, 1e4])
def test_risk_matches_monte_carlo_even_for_sharp_gates(scale):
    prob = lda.config("C1")
    z = lda.Effective(jnp.array([0.8, -1.1]), jnp.asarray(0.3), jnp.asarray(0.9),
                      scale * jnp.array([0.6, 0.8]))
    X, Y = lda.sample(prob, jax.random.key(11), 1_000_000)
    loss = jax.nn.softplus(-Y * lda.effective_score(prob, z, X))
    se = float(loss.std()) / np.sqrt(loss.size)
    assert abs(float(lda.risk_eff(prob, z)) - float(loss.mean())) < 5 * se
    # the gate rule is converged: doubling its nodes changes nothing at 1e-12
    assert abs(float(lda.risk_eff(prob, z, gate_nodes=512) - lda.risk_eff(prob, z))) < 1e-12


def test_risk_works_in_high_dimension():
    prob = lda.config("C2")
    R = lda.risk(prob, lda.bayes_parameters(prob))
    np.testing.assert_allclose(R, lda.bayes_risk(prob), atol=1e-12)
    z0 = lda.Effective(jnp.zeros(20), jnp.zeros(()), jnp.zeros(()), jnp.zeros(20))
    np.testing.assert_allclose(lda.risk_eff(prob, z0), np.log(2), atol=1e-14)


def test_value_and_grad_matches_grad_and_plain_gh_risk():
    prob = lda.config("C1")
    th = lda.table3_start("theta2", prob)._replace(u12=jnp.array([0.3, -0.2]))
    val, g = lda.value_and_grad(prob, th, 48)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(lda.grad(prob, th, 48)), strict=True):
        np.testing.assert_array_equal(a, b)
    # the value is the risk on the gradient's own (plain GH) nodes, class-conditional form
    np.testing.assert_allclose(val, lda.risk(prob, th, 48, gate_nodes=None), rtol=0, atol=1e-14)


def test_gradient_descent_records_and_validates():
    prob = lda.config("C1")
    th = lda.table3_start("theta1", prob)
    thf, tr = lda.gradient_descent(prob, th, 1e-3, 40, record_every=10, order=24,
                                   progress=False)
    assert tr["dist_E1"].shape == (4,) and tr["theta"].shape == (4, 9)
    assert tr["grad_sq"].shape == (4,) and np.all(tr["grad_sq"] > 0)
    np.testing.assert_array_equal(tr["theta"][-1], lda.flatten(thf)[0])
    with pytest.raises(ValueError, match="record_every"):
        lda.gradient_descent(prob, th, 1e-3, 40, record_every=7)


def test_tail_excess_and_time_within():
    risk = np.array([[5.0, 4.0, 3.0, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(lda_sims.tail_excess(risk, 1.0, frac=0.4), [0.5, 0.0])
    np.testing.assert_allclose(lda_sims.tail_excess(risk, 0.0, frac=1e-9), [1.0, 1.0])
    t = lda_sims.time_within(10 * np.arange(1, 6), risk, 1.0, eps=np.array([1.6, 0.0]),
                             frac=0.4)
    # run 0, excess 4, 3, 2, 1, 0: tail means (last ceil(0.4 k)) 4, 3, 2.5, 1.5 -> 40
    assert t[0] == 40.0 and t[1] == 10.0
    assert np.isinf(lda_sims.time_within([1, 2], [[3.0, 3.0]], 0.0, eps=1.0)[0])
    with pytest.raises(ValueError, match="frac"):
        lda_sims.tail_excess(risk, 0.0, frac=0.0)


def test_sgd_noise_floor_scales_with_step_over_batch():
    prob = lda.config("C2")
    th = lda.bayes_parameters(prob)
    m1, sd1 = lda.sgd_noise_floor(prob, th, 1e-3, 64, order=24)
    m2, sd2 = lda.sgd_noise_floor(prob, th, 1e-3, 128, order=24)
    np.testing.assert_allclose([m2, sd2], [m1 / 2, sd1 / 2], rtol=1e-12)
    assert 0 < sd1 < m1
    with pytest.raises(ValueError, match="unstable"):
        lda.sgd_noise_floor(prob, th, 1e3, 64, order=24)


def test_fig1_quick_shape(tmp_path):
    # GH order 64 as in check lda.19: at |s| = 28 a lower order misplaces the slow mode
    a, _, _ = run_simulation("lda-fig1", "quick", {"steps": 400, "record_every": 10,
                                                   "fit_from": 100},
                             results_dir=tmp_path, progress=False)
    d1, d2 = a["theta1_dist"], a["theta2_dist"]
    assert d1.shape == d2.shape == (41,) and np.all(np.isfinite(d1)) and a["iters"][0] == 0
    f1, f2 = lda_sims.fig1_rates(a)
    # theta^(1): exponential at the rate of the slowest damped Hessian mode
    assert f1.r2 > 0.999 and abs(-f1.slope / float(a["theta1_rate_pred"]) - 1) < 1e-2
    assert d1[-1] < 1e-1 * d1[0] and f1.slope < f2.slope                 # Theta_1: faster
    # theta^(2): the damped part of the displacement decays, the flat part stays, and the
    # distance settles on the plateau predicted from it
    assert a["theta2_damped"][-1] < 1e-3 * a["theta2_damped"][0]
    assert abs(a["theta2_flat"][-1] / a["theta2_flat"][0] - 1) < 1e-3
    assert abs(d2[-1] / float(a["theta2_plateau_pred"]) - 1) < 1e-3
    assert int(a["theta2_n_flat"]) == 6                                  # d^2 + d (check 18)


@pytest.mark.xdist_group("lda-sgd")
def test_sgd_quick_shape(shared_results):
    """The quick run that check lda.23 and the figures read (computed once per worker, in
    the check's xdist group)."""
    a, meta, _ = run_simulation("lda-sgd", "quick", results_dir=shared_results,
                                progress=False)
    cfg = meta["config"]
    np.testing.assert_allclose(a["fig5_risk0"], np.log(2), atol=1e-12)   # w = 0: log 2
    ex = lda_sims.tail_excess(a["fig5_risk"], a["R_star"])
    assert np.all(ex < 0.01) and np.all(ex > 0)
    n_rec = cfg["steps"] // cfg["eval_every"]
    assert a["gaussian_risk"].shape == (cfg["seeds"], n_rec)
    assert a["fig5_floor"].shape == (cfg["seeds"],)
    assert np.all(a["fig5_floor_sd"] < a["fig5_floor"])
    # the dense early records are the same runs (same key) as the main records
    n_early = cfg["early_steps"] // cfg["early_every"]
    i = cfg["eval_every"] // cfg["early_every"] - 1         # the early record at step eval_every
    assert a["fig5_early_risk"].shape == (cfg["seeds"], n_early)
    assert a["early_iters"][i] == a["iters"][0]
    np.testing.assert_allclose(a["fig5_early_risk"][:, i], a["fig5_risk"][:, 0], rtol=1e-10)
    fits = lda_sims.fast_phase_rates(a)
    assert len(fits) == len(lda_sims.FAST_WINDOWS) and all(-f.slope > 0 for f in fits)


def test_finite_prompt_quick_shape(tmp_path):
    a, _, _ = run_simulation("lda-finite-prompt", "quick",
                             {"Ls": (256,), "seeds": 1, "steps": 400},
                             results_dir=tmp_path, progress=False)
    gap = float(a["linear_gap"])
    assert gap > 1e-3
    # no linear head beats the linear optimum (exact, up to the GH error ~1e-12)
    assert np.all(a["linear_excess_inf"] >= gap - 1e-10)
    assert a["softmax_excess_inf"][-1].mean() < gap


def test_finite_prompt_slope_uses_the_stated_range():
    # 1/L up to L = 256, then flat: the fit over L <= 256 sees the power law only
    Ls = np.array([16, 64, 256, 1024])
    y = np.array([1 / 16, 1 / 64, 1 / 256, 1 / 256])[:, None] * np.ones((1, 3))
    y[:, 0] *= 1.1                                   # one seed off: the median is used
    a = {"Ls": Ls, "softmax_excess_inf": y, "fit_max_L": 256}
    fit = lda_sims.finite_prompt_slope(a)
    assert fit.n == 3 and fit.slope == pytest.approx(-1.0, abs=1e-12)
    full = lda_sims.finite_prompt_slope(a, np.inf)
    assert full.n == 4 and full.slope > -1.0 and full.r2 < 1


def test_sweep_quick_shape(tmp_path):
    a, _, _ = run_simulation("lda-sweep", "quick", {"pi_pos": (0.5, 0.7, 0.9),
                                                    "separation": (1.0,), "steps": 500,
                                                    "d": (2,)},
                             results_dir=tmp_path, progress=False)
    lin = a["linear_excess"][0, 0]
    assert abs(lin[0]) < 1e-8 and np.all(np.diff(lin) > 0)   # gap 0 at b* = 0, grows
    assert np.all(a["softmax_excess"] < lin[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["lda-fig1", "lda-sgd", "lda-finite-prompt", "lda-sweep"])
def test_lda_paper_profiles(tmp_path, name):
    a, _, _ = run_simulation(name, "paper", results_dir=tmp_path, progress=False)
    assert all(np.all(np.isfinite(v)) for v in a.values() if np.asarray(v).dtype.kind == "f")


def _zeta(prob, seed):
    rng = np.random.default_rng(seed)
    return lda.Effective(jnp.asarray(rng.normal(size=prob.d)), jnp.asarray(rng.normal()),
                         jnp.asarray(rng.normal()), jnp.asarray(rng.normal(size=prob.d)))


@pytest.mark.parametrize("name", ["C1", "C2"])
def test_distances_to_E1_and_E2_are_the_nearest_points(name):
    """dist_E1 and dist_E2 (Thm 3.5's sets) against the distance to the nearest point of
    each set found by a numerical minimisation over the set's free coordinates (s for E1,
    r for E2, with p = sigma(s0) from the problem's log prior odds)."""
    from scipy.optimize import minimize, minimize_scalar

    prob = lda.config(name)
    w, b = (np.asarray(v) for v in lda.bayes_score(prob))
    p = 1 / (1 + np.exp(-float(prob.s0)))
    for seed in range(3):
        z = _zeta(prob, seed)
        zw, zb, zr, zs = (np.asarray(v) for v in z)
        fixed = np.sum((zw - w) ** 2)

        def to_e1(s, fixed=fixed, zb=zb, zr=zr, zs=zs):
            return np.sqrt(fixed + (zb - b) ** 2 + zr**2 + np.sum((zs - s) ** 2))

        def to_e2(r, fixed=fixed, zb=zb, zr=zr, zs=zs):
            return np.sqrt(fixed + (zb - (b - r * p)) ** 2 + (zr - r) ** 2 + np.sum(zs**2))

        e1 = minimize(to_e1, np.zeros(prob.d), method="BFGS", options={"gtol": 1e-12}).fun
        e2 = minimize_scalar(to_e2, bracket=(-10.0, 10.0), tol=1e-12).fun
        np.testing.assert_allclose(float(lda.dist_E1(prob, z)), e1, rtol=1e-8)
        np.testing.assert_allclose(float(lda.dist_E2(prob, z)), e2, rtol=1e-8)


def test_invariant_set_residual_is_the_largest_violation():
    """On T_K the residual is round-off; moving one block off T_K by eps makes it eps,
    whichever block moves (K = span{e0 + e1, Gamma (e0 + e1)} = span{e0, e1} in d = 5)."""
    d = 5
    basis = lda.krylov_basis(np.diag(np.arange(1.0, d + 1)), np.eye(d)[0] + np.eye(d)[1])
    assert basis.shape == (d, 2)
    Q = np.diag([0.0, 0.0, 1.0, 1.0, 1.0])               # the projector on K^perp
    rng = np.random.default_rng(0)
    on = lda.LDAParams(jnp.asarray(rng.normal(size=(d, d)) @ Q), jnp.zeros(d),
                       jnp.asarray(Q @ rng.normal(size=d)), jnp.zeros(()))
    assert float(lda.invariant_set_residual(on, basis)) < 1e-14
    eps, e0 = 0.37, np.eye(d)[0]
    for off in (on._replace(u12=on.u12.at[1].set(-eps)), on._replace(v22=jnp.asarray(eps)),
                on._replace(v21=on.v21 + eps * e0),
                on._replace(U11=on.U11 + eps * np.outer(np.eye(d)[3], e0))):
        np.testing.assert_allclose(float(lda.invariant_set_residual(off, basis)), eps,
                                   rtol=1e-12)


def _random_head(rng, d=2):
    """A head theta = (U11, u12, v21, v22) with standard normal entries."""
    return lda.LDAParams(jnp.asarray(rng.normal(size=(d, d))), jnp.asarray(rng.normal(size=d)),
                         jnp.asarray(rng.normal(size=d)), jnp.asarray(rng.normal()))


def test_linear_limit_weight_is_the_long_prompt_limit_of_linear_attention():
    """linear_limit_weight against linear attention (lda.prompt_predictor, kind="linear")
    on one prompt of 4 x 10^5 sampled tokens: w^T x within 5 Monte Carlo SEs (the SE of
    the prompt mean of each token's contribution) at three queries; the same prompt read
    by softmax attention with all scores 0 is the plain mean of the values."""
    prob = lda.config("C1")
    rng = np.random.default_rng(3)
    theta = _random_head(rng)
    X, Y = lda.sample(prob, jax.random.key(5), 400_000)
    x = jnp.asarray(rng.normal(size=(3, 2)))
    got = lda.prompt_predictor(theta, X, Y, x, kind="linear")
    want = x @ lda.linear_limit_weight(prob, theta)
    # per-token contributions to the 1/L-normalised sum, for the SE
    U11, u12, v21, v22 = theta
    contrib = ((x @ U11 @ X.T) + (x @ u12)[:, None] * Y[None]) * (X @ v21 + v22 * Y)[None]
    se = np.asarray(contrib.std(axis=1)) / np.sqrt(X.shape[0])
    assert np.all(np.abs(np.asarray(got - want)) < 5 * se), (got, want, se)
    zero = lda.LDAParams(jnp.zeros((2, 2)), jnp.zeros(2), v21, v22)
    np.testing.assert_allclose(lda.prompt_predictor(zero, X, Y, x),
                               jnp.full(3, jnp.mean(X @ v21 + v22 * Y)), rtol=1e-10)


def test_unflatten_inverts_flatten_in_the_paper_order():
    """theta -> vector -> theta is the identity, and the vector is (U11, u12, v21, v22) in
    the paper's order (row-major U11)."""
    theta = lda.LDAParams(jnp.arange(4.0).reshape(2, 2), jnp.array([4.0, 5.0]),
                          jnp.array([6.0, 7.0]), jnp.asarray(8.0))
    vec, _ = lda.flatten(theta)
    np.testing.assert_array_equal(vec, np.arange(9.0))
    back = lda.unflatten(theta, 2 * vec)
    for a, b in zip(back, theta, strict=True):
        np.testing.assert_array_equal(a, 2 * b)


def test_prompt_predictor_is_softmax_attention_on_the_label_augmented_tokens():
    """lda.prompt_predictor (kind="softmax") against operators.softmax_attention on tokens
    z_i = (x_i, y_i) with the query (x, 0): U = [[U11^T, 0], [u12^T, 0]] and V = [v21, v22]
    (Lemma B.1's parametrisation), a random head on 50 sampled tokens, to round-off."""
    from gmtheory.operators import softmax_attention

    prob = lda.config("C1")
    rng = np.random.default_rng(8)
    theta = _random_head(rng)
    X, Y = lda.sample(prob, jax.random.key(9), 50)
    x = jnp.asarray(rng.normal(size=(4, 2)))
    U = jnp.zeros((3, 3)).at[:2, :2].set(theta.U11.T).at[2, :2].set(theta.u12)
    V = jnp.concatenate([theta.v21, theta.v22[None]])[None]
    tokens = jnp.concatenate([X, Y[:, None]], 1)
    queries = jnp.concatenate([x, jnp.zeros((4, 1))], 1)
    np.testing.assert_allclose(lda.prompt_predictor(theta, X, Y, x),
                               softmax_attention(tokens, U, V, queries)[:, 0], rtol=1e-12)
