"""The softmax head on in-context regression (gmtheory.icl_softmax): padding, the reduced
linear form, the derived optimum's limits and bad input."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory import icl
from gmtheory import icl_softmax as S


def test_padded_prompts_read_only_their_tokens():
    d, ell, L = 5, 7, 12
    b = S.sample_prompts(jax.random.key(0), d, L, 0.2, 9)
    p = S.init_softmax_head(jax.random.key(1), d, scale=0.5)
    G = jax.random.normal(jax.random.key(2), (d, d + 1))
    cut = (b["X"][:, :ell], b["y"][:, :ell], b["xq"])
    np.testing.assert_allclose(S.softmax_head(p, b["X"], b["y"], b["xq"], ell),
                               S.softmax_head(p, *cut), rtol=1e-12)
    np.testing.assert_allclose(S.linear_head(G, b["X"], b["y"], b["xq"], ell),
                               S.linear_head(G, *cut), rtol=1e-12)


def test_linear_head_is_the_reduced_form_scored_by_test_error():
    """Monte Carlo of the linear head agrees with icl.test_error (the exact error of the
    same Gamma) within 4 SE."""
    d, ell = 6, 12
    G = 0.3 * jax.random.normal(jax.random.key(3), (d, d + 1))
    b = S.sample_prompts(jax.random.key(4), d, ell, 0.3, 40000)
    sq = np.asarray((b["yq"] - S.linear_head(G, b["X"], b["y"], b["xq"])) ** 2)
    exact = float(icl.test_error(G, ell, 0.3))
    assert abs(sq.mean() - exact) <= 4 * sq.std(ddof=1) / math.sqrt(sq.size)


def test_optimum_tends_to_linear_attention_at_alpha_over_e():
    for alpha in (0.5, 3.0, 40.0):
        inf = S.softmax_head_optimum(alpha, 0.2)
        assert inf["t"] == 1.0
        assert inf["error"] == pytest.approx(icl.limit_large(alpha / math.e, 0.2), rel=1e-12)
        big = S.softmax_head_optimum(alpha, 0.2, d=10**6)
        assert big["error"] == pytest.approx(inf["error"], rel=1e-5)
        assert big["t"] == pytest.approx(1.0, abs=1e-3)


def test_isotropic_head_has_the_stated_score_scale_and_gain():
    d, t, g = 9, 0.7, 0.4
    p = S.isotropic_params(d, t, g)
    assert float(p["A"][0, 0]) ** 2 / d == pytest.approx(t)
    assert float(p["e"]) * math.sqrt(t * d) / d == pytest.approx(g)


@pytest.mark.parametrize("call, match", [
    (lambda: S.softmax_head_optimum(0.0, 0.1), "alpha"),
    (lambda: S.softmax_head_optimum(1.0, -0.1), "rho"),
    (lambda: S.softmax_head_optimum(1.0, 0.1, d=2.5), "d"),
    (lambda: S.isotropic_params(8, -1.0, 0.5), "t"),
    (lambda: S.isotropic_variance(5.0, 1.0, 0.1, d=8), "t"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_limit_matrices_shapes():
    p = S.init_softmax_head(jax.random.key(0), 4)
    U, V = S.softmax_limit_matrices(p)
    assert U.shape == (5, 5) and V.shape == (1, 5)
    assert jnp.all(U[:, 4] == 0)      # the query's label slot is empty


# --- the exact isotropic head at every prompt length -------------------------------------

_EXACT_CASES = [(3.3, 0.4, 10, 0.1, 10), (1.0, 0.8, 8, 0.3, 8), (6.0, 0.3, 1024, 0.1, 128),
                (2.0, 0.5, 2, 0.1, 1), (10.0, 0.2, 16, 0.1, 2), (4.0, 0.6, 8, 0.1, 4)]


@pytest.fixture
def x64():
    import gmtheory
    was = jax.config.jax_enable_x64
    gmtheory.enable_x64()
    yield
    jax.config.update("jax_enable_x64", was)


@pytest.mark.parametrize("key", ["r", "r_small_d", "v", "z"])
def test_exact_quadrature_converged(x64, monkeypatch, key):
    """Doubling each quadrature size moves the exact error by less than the stated bound
    (1e-9 at d >= 8, 1e-6 below, EXACT_QUADRATURE_ERROR)."""
    base = [S.finite_prompt_error(*c) for c in _EXACT_CASES]
    monkeypatch.setitem(S.EXACT_NODES, key, 2 * S.EXACT_NODES[key])
    for c, b in zip(_EXACT_CASES, base, strict=True):
        bound = 1e-9 if c[4] >= 8 else S.EXACT_QUADRATURE_ERROR
        assert abs(S.finite_prompt_error(*c) - b) < bound, c


def test_search_rule_is_close_to_the_exact_one(x64):
    """The optimisers search on SEARCH_NODES at d >= 2: both errors (one head at its best
    g, the pair at its best e) within 5e-7 of EXACT_NODES at tilts 1e-3 to 12 for d >= 8
    and within 2.5e-6 below (the worst cases measured), far below what the checks resolve."""
    def both(t, ell, d, nodes):
        P, Q = S._exact_pq(t, ell, 0.1, d, nodes=nodes)
        b, H = S._two_head_form(t, ell, 0.1, d, nodes=nodes)
        return np.array([1.1 - P * P / Q, 1.1 - b @ np.linalg.solve(H, b)])
    assert S._search_nodes(1) is S.EXACT_NODES
    for d, ell in [(8, 64), (64, 1024), (2, 8), (2, 1024)]:
        for t in (1e-3, 1.0, 12.0):
            diff = both(t, ell, d, S.SEARCH_NODES) - both(t, ell, d, S.EXACT_NODES)
            assert np.all(np.abs(diff) < (5e-7 if d >= 8 else 2.5e-6)), (d, ell, t, diff)


def test_fast_tilt_kernel_is_the_direct_one(x64):
    """Below FAST_TILT the matrix-product form of the softmax moments equals the direct one
    (five exponentials per node) on the same nodes, to float64 round-off amplified by the
    power phi^(l-1) (relative 1e-9 at l = 2^16; measured 3e-11), and the dispatcher
    switches to the direct form above it."""
    ks = jnp.asarray(np.linspace(0.01, S.FAST_TILT, 25))
    nv, nz = S.EXACT_NODES["v"], S.EXACT_NODES["z"]
    for ell in (2, 3, 8, 64, 1024, 2**16):
        direct = np.asarray(S._tilt_direct(ks, float(ell), float(ell), nv, nz))
        fast = np.asarray(S._tilt_fast(ks, float(ell), float(ell), nv, nz))
        np.testing.assert_allclose(fast, direct, rtol=1e-9, err_msg=f"l = {ell}")
    k = np.array([1.0, S.FAST_TILT + 5.0, 40.0])
    both = S._tilt_moments(k, 8, nv, nz)
    direct = np.asarray(S._tilt_direct(jnp.asarray(k), 8.0, 8.0, nv, nz))
    np.testing.assert_allclose(both, direct, rtol=1e-9)
    assert np.all(np.isfinite(both))


def test_exact_error_at_small_tilt_is_the_plain_mean(x64):
    """At small t with the value scale e fixed the head outputs e times the mean label
    (error rho + 1 + e^2 (1 + rho)/l: each label has variance |w|^2/d + rho and is
    uncorrelated with y_q) plus the tilt's first order: softmax(k z) ~ (1 + k (z - mean
    z))/l gives E sum p_i z_i = k (1 - 1/l), so the error moves by -2 e sqrt(t/d) (1 - 1/l),
    up to O(t)."""
    ell, rho, d, e, t = 12, 0.2, 9, 0.7, 1e-10
    exact = S.finite_prompt_error(t, e * math.sqrt(t / d), ell, rho, d)
    first = rho + 1 + e * e * (1 + rho) / ell - 2 * e * math.sqrt(t / d) * (1 - 1 / ell)
    assert exact == pytest.approx(first, abs=1e-9)


def test_exact_error_agrees_with_monte_carlo_of_the_head(x64):
    """Independent: the d-dimensional head (softmax_head) on sampled prompts, 4 SE."""
    for t, g, ell, rho, d in [(1.0, 0.8, 8, 0.1, 8), (3.0, 0.45, 12, 0.1, 3)]:
        b = S.sample_prompts(jax.random.key(7), d, ell, rho, 200_000)
        sq = np.asarray((b["yq"] - S.softmax_head(S.isotropic_params(d, t, g), b["X"],
                                                  b["y"], b["xq"])) ** 2)
        se = sq.std(ddof=1) / math.sqrt(sq.size)
        assert abs(sq.mean() - S.finite_prompt_error(t, g, ell, rho, d)) <= 4 * se


def test_exact_optimum_beats_the_delta_method_and_meets_it_at_long_prompts(x64):
    """The delta method's head is one isotropic head, so its exact error is >= the exact
    optimum; at long prompts the two optima agree to the delta method's O(1/l)."""
    for ell, d in [(10, 10), (80, 10), (2048, 256)]:
        o = S.finite_prompt_optimum(ell, 0.1, d)
        dm = S.softmax_head_optimum(ell / d, 0.1, d)
        at_dm = S.finite_prompt_error(dm["t"], dm["g"], ell, 0.1, d)
        assert o["error"] <= at_dm + 1e-9
        if ell >= 2048:      # the delta method's next order, O(1/ESS) of its variance term
            allow = 3 * dm["g"] ** 2 * dm["V"] * math.exp(dm["t"]) / ell
            assert abs(o["error"] - dm["error"]) < allow
    assert S.finite_prompt_optimum(8, 0.1, 8)["t"] > 2.5     # the short-prompt tilt


@pytest.mark.parametrize("call, match", [
    (lambda: S.finite_prompt_error(1.0, 0.5, 1, 0.1, 4), "ell"),
    (lambda: S.finite_prompt_error(1.0, 0.5, 8, 0.1, 0), "d"),
    (lambda: S.finite_prompt_error(float("nan"), 0.5, 8, 0.1, 4), "t"),
    (lambda: S.finite_prompt_error(1.0, 0.5, 8, -1.0, 4), "rho"),
])
def test_exact_bad_input(x64, call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("name, args", [
    ("finite_prompt_error", (1.0, 0.5, 8, 0.1, 4)), ("finite_prompt_optimum", (8, 0.1, 4)),
    ("two_head_error", (1.0, (0.5, -0.5), 8, 0.1, 4)), ("two_head_optimum", (8, 0.1, 4)),
])
def test_float32_is_refused_by_the_function_called(name, args):
    with jax.enable_x64(False), pytest.raises(RuntimeError, match=f"^{name}: .*float64"):
        getattr(S, name)(*args)


def test_two_heads_cross_moment_is_one_and_the_mean_head_cancels(x64):
    """Stein's lemma with the softmax's shift invariance: E[(sum_j z_j)(sum_i p_i z_i)] = 1
    at every tilt, so H12 = H22 and the best pair has e2 = -e1 (quadrature to 1e-9)."""
    for t, ell, d in [(0.3, 8, 8), (2.0, 16, 4), (5.0, 64, 16)]:
        m3 = S._moments(t, ell, 0.1, d)[3]
        assert m3 == pytest.approx(1.0, abs=1e-9)
        b, H = S._two_head_form(t, ell, 0.1, d)
        e = np.linalg.solve(H, b)
        assert e[1] == pytest.approx(-e[0], rel=1e-7)
    o = S.two_head_optimum(8, 0.1, 8)
    assert o["e"][1] == pytest.approx(-o["e"][0], rel=1e-7)


def test_two_heads_reduce_to_one_and_agree_with_monte_carlo(x64):
    t, g, ell, rho, d = 1.5, 0.6, 12, 0.1, 6
    e1 = g * math.sqrt(d / t)
    assert S.two_head_error(t, (e1, 0.0), ell, rho, d) == pytest.approx(
        S.finite_prompt_error(t, g, ell, rho, d), abs=1e-12)
    e = (e1, -0.7 * e1)
    b = S.sample_prompts(jax.random.key(11), d, ell, rho, 60_000)
    one = S.softmax_head(S.isotropic_params(d, t, g), b["X"], b["y"], b["xq"])
    sq = np.asarray((b["yq"] - one + 0.7 * e1 * jnp.mean(b["y"], axis=1)) ** 2)
    se = sq.std(ddof=1) / math.sqrt(sq.size)
    assert abs(sq.mean() - S.two_head_error(t, e, ell, rho, d)) <= 4 * se


def test_two_heads_approach_linear_attention(x64):
    """The best pair lies below one head, and above linear attention's exact optimum (it
    becomes linear attention on centred tokens as t -> 0)."""
    rho = 0.1
    for ell, d in [(8, 8), (64, 16)]:
        b, H = S._two_head_form(1e-3, ell, rho, d)      # at or above the pair's infimum
        two = rho + 1 - b @ np.linalg.solve(H, b)
        gam = jnp.zeros((d, d + 1)).at[:, :d].set(
            jnp.eye(d) / ((1 + rho) * d / ell + 1 + 1 / ell))
        lin = float(icl.test_error(gam, ell, rho))
        assert lin < two < S.finite_prompt_optimum(ell, rho, d)["error"]


def test_isotropic_error_is_minimised_at_the_optimum_gain():
    """isotropic_error over the gain g at the optimum tilt t*: the zero head (g = 0) scores
    rho + 1 (the trivial rule's error on unit-variance labels), and a numerical minimisation
    over g lands on softmax_head_optimum's g* = 1/(1 + V*) and its error rho + V*/(1 + V*)."""
    from scipy.optimize import minimize_scalar

    for alpha, rho, d in ((1.0, 0.1, None), (4.0, 0.25, 16), (8.0, 0.05, 64)):
        opt = S.softmax_head_optimum(alpha, rho, d)
        assert S.isotropic_error(opt["t"], 0.0, alpha, rho, d) == pytest.approx(1 + rho,
                                                                                 rel=1e-15)
        r = minimize_scalar(lambda g, t=opt["t"], a=alpha, p=rho, n=d:
                            S.isotropic_error(t, g, a, p, n), bounds=(0.0, 2.0),
                            method="bounded", options={"xatol": 1e-12})
        assert r.x == pytest.approx(opt["g"], abs=1e-6)
        assert r.fun == pytest.approx(opt["error"], rel=1e-12)
