"""Every derivation residual is 0, and the library's closed forms equal the lambdified
derivations at seeded random points."""

import math

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest
import sympy
from scipy.special import erf

import gmtheory as g
from gmtheory import approx, denoising, hermite, icl
from gmtheory.derivations import MODULES, failing, residuals, write_all
from gmtheory.derivations import denoising as dd
from gmtheory.derivations import hermite_closed_forms as hcf
from gmtheory.derivations import icl_asymptotics as ia
from gmtheory.derivations import nonlinearity_noise as nn
from gmtheory.derivations import relu_softmax as rs
from gmtheory.derivations.attention_mgf import prop21_function, write_markdown

# sympy derives every module once per process (~20 s): one xdist worker takes them all
# (make test runs pytest with --dist loadgroup)
pytestmark = pytest.mark.xdist_group("sympy")


@pytest.fixture(scope="module")
def res():
    return residuals()


@pytest.mark.parametrize("module", list(MODULES))
def test_residuals_are_zero(res, module):
    mine = {k: v for k, v in res.items() if k.startswith(module + ".")}
    if module != "hermite_closed_forms":
        assert len(mine) >= 5, module
    assert failing(mine) == [], module


def _rotation(rng, d=3):
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def _spd(rng, d, floor=0.2):
    A = rng.standard_normal((d, d))
    return A @ A.T / d + floor * np.eye(d)


# --------------------------------------------------------------------- attention / LDA
def test_lambdified_prop21_matches_library(key):
    f = prop21_function()
    for i in range(5):
        k = jax.random.fold_in(key, i)
        ks = jax.random.split(k, 8)
        A1, A2 = jax.random.normal(ks[0], (2, 2)), jax.random.normal(ks[1], (2, 2))
        G1, G2 = A1 @ A1.T + 0.1 * jnp.eye(2), A2 @ A2.T + 0.1 * jnp.eye(2)
        m1, m2 = jax.random.normal(ks[2], (2,)), jax.random.normal(ks[3], (2,))
        U, V = 0.5 * jax.random.normal(ks[4], (2, 2)), jax.random.normal(ks[5], (2, 2))
        z = jax.random.normal(ks[6], (2,))
        pi1 = float(jax.random.uniform(ks[7], minval=0.1, maxval=0.9))
        mix = g.GaussianMixture([pi1, 1 - pi1], jnp.stack([m1, m2]), jnp.stack([G1, G2]))
        np.testing.assert_allclose(f(pi1, m1, m2, G1, G2, U, V, z),
                                   g.softmax_attention_limit(mix, U, V, z), rtol=1e-12)


def test_markdown_written(tmp_path):
    text = write_markdown(tmp_path / "d.md").read_text()
    assert "$$" in text and "Prop. 2.1" in text


# ------------------------------------------------------------------------- denoising
def test_bayes_denoiser_is_eq10():
    f = dd.bayes_denoiser_function()
    rng = np.random.default_rng(10)
    for _ in range(10):
        G, m, xi = _spd(rng, 2), rng.standard_normal((2, 2)) * 2, rng.uniform(0.3, 2.0)
        pi1 = rng.uniform(0.1, 0.9)
        mix = g.GaussianMixture.shared([pi1, 1 - pi1], m, G)
        z = rng.standard_normal(2) * 2
        np.testing.assert_allclose(denoising.bayes_denoiser(mix, xi, z),
                                   f(pi1, m[0], m[1], G, xi, z), rtol=1e-11, atol=1e-12)


def test_two_head_construction_is_the_derived_one():
    two, opp = dd.two_head_function(), dd.opposite_heads_function()
    rng = np.random.default_rng(11)
    for _ in range(5):
        p, th = rng.uniform(0.5, 3.0), rng.uniform(0.3, 2.8)          # equal norms, angle th
        q, w = p * math.cos(th), p * math.sin(th)
        gamma, xi = rng.uniform(0.2, 2.0, size=2)
        Q = _rotation(rng)
        m1, m2 = Q @ np.array([p, 0, 0]), Q @ np.array([q, w, 0])
        lib = denoising.two_head_construction(m1, m2, gamma, xi)
        for (Ul, Vl), (Ud, Vd) in zip(lib, two(p, q, w, gamma, xi), strict=True):
            np.testing.assert_allclose(Ul, Q @ Ud @ Q.T, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(Vl, Q @ Vd @ Q.T, rtol=1e-9, atol=1e-12)
        r = rng.uniform(0.5, 3.0)
        m, n = r * Q[:, 0], Q[:, 1]
        lib = denoising.two_head_construction(m, -m, gamma, xi, n=n)
        for (Ul, Vl), (Ud, Vd) in zip(lib, opp(r, gamma, xi), strict=True):
            np.testing.assert_allclose(Ul, Q @ Ud @ Q.T, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(Vl, Q @ Vd @ Q.T, rtol=1e-9, atol=1e-12)


def test_linear_optimum_is_the_normal_equations():
    f = dd.linear_optimum_function()
    rng = np.random.default_rng(12)
    for _ in range(5):
        mix = g.GaussianMixture.shared([0.3, 0.7], rng.standard_normal((2, 2)), _spd(rng, 2))
        xi = rng.uniform(0.3, 2.0)
        Sx = np.asarray(mix.second_moment())
        np.testing.assert_allclose(denoising.linear_optimum(mix, xi), f(Sx, xi), rtol=1e-12)


@pytest.mark.parametrize("lam", [1.2, 1.5, 2.0, 3.0])
def test_u_lambda_is_the_stable_fixed_point(lam):
    F, u, lam_s = dd.transition_map()
    G = sympy.lambdify([u, lam_s], F - u, "mpmath")
    with mpmath.workdps(40):
        root = mpmath.findroot(lambda v: G(v, mpmath.mpf(lam)), 0.9)
    assert abs(denoising.u_lambda(lam) - float(root)) < 1e-13
    assert lam**2 * (1 - float(root) ** 2) < 1                     # stability
    assert denoising.u_lambda(0.9) == 0.0 and denoising.u_lambda(1.0) == 0.0


# ------------------------------------------------------------------------------- ICL
def test_marchenko_pastur_root_and_derivative():
    M, dM = ia.M_kappa_function(), ia.dM_kappa_function()
    rng = np.random.default_rng(13)
    x, kappa = rng.uniform(0.01, 5, 20), np.exp(rng.uniform(-2, 3, 20))
    for xi, ki in zip(x, kappa, strict=True):
        np.testing.assert_allclose(icl.M_kappa(xi, ki), M(xi, ki), rtol=1e-12)
        np.testing.assert_allclose(icl.dM_kappa(xi, ki), dM(xi, ki), rtol=1e-10)


def test_ridge_epsilon_solves_the_derived_equation():
    F, root_inf, err = (ia.ridge_equation_function(), ia.ridge_root_kappa_inf_function(),
                        ia.ridge_error_function())
    rng = np.random.default_rng(14)
    for _ in range(6):
        a, t, r, lam = rng.uniform(0.5, 5), rng.uniform(0.2, 5), rng.uniform(0.01, 1), \
            10 ** rng.uniform(-4, 0)
        k = float(np.exp(rng.uniform(-1, 2)))
        eps = icl.ridge_epsilon(a, t, k, r, lam)
        assert abs(F(eps, a, t, k, r, lam)) < 1e-9 * (1 + t * lam / eps)
        eps_inf = icl.ridge_epsilon(a, t, np.inf, r, lam)
        np.testing.assert_allclose(eps_inf, root_inf(a, t, r, lam), rtol=1e-9)
        np.testing.assert_allclose(icl.e_icl_ridge(a, t, np.inf, r, lam),
                                   err(eps_inf, a, t, r), rtol=1e-9)


def test_large_limit():
    f = ia.limit_function()
    for a, r in [(0.5, 0.1), (2.0, 0.01), (10.0, 1.0)]:
        np.testing.assert_allclose(icl.limit_large(a, r), f(a, r), rtol=1e-14)
        # the ridge error at large tau, kappa = inf and small lambda approaches it
        near = icl.e_icl_ridge(a, 1e7, np.inf, r, 1e-9)
        assert abs(near - f(a, r)) < 1e-5


def test_exact_errors_match_library():
    fn, fl = nn.exact_error_function(), nn.test_error_function()
    rng = np.random.default_rng(15)
    mom = hermite.label_moments("relu", 0.1)
    for _ in range(5):
        G = rng.standard_normal((2, 3)) * 0.7
        mu, R, ell, rho = rng.standard_normal(2), _spd(rng, 2), int(rng.integers(3, 40)), 0.3
        np.testing.assert_allclose(icl.test_error_nonlinear(G, ell, mom, mu, R),
                                   fn(G, ell, mom, mu, R), rtol=1e-12)
        np.testing.assert_allclose(icl.test_error(G, ell, rho, mu, R),
                                   fl(G, ell, rho, mu, R), rtol=1e-12)


# ------------------------------------------------------------------------- Hermite
def test_erf_square_is_derived_and_matches_quadrature():
    val = 2 / math.pi * math.asin(2 / 3)
    assert abs(hcf.numeric()["erf"]["m2"] - val) < 1e-15
    assert abs(hermite.second_moment(erf) - val) < 1e-11
    for a, b in [(0.5, 2.0), (1.3, 0.7)]:
        quad = hermite.expectation(lambda z, a=a, b=b: erf(a * z) * erf(b * z))[0]
        assert abs(float(nn.erf_product_expectation(a, b)) - quad) < 1e-11


# ------------------------------------------------------------------ ReLU -> softmax
def test_relu_constant_is_lambert_w():
    assert abs(rs.relu_constant() - approx.RELU_C) < 1e-15
    beta = 7.0
    u_star = 1 + float(mpmath.lambertw(1 / math.e).real)
    t = jnp.array([u_star / beta, -u_star / beta])
    err = np.abs(np.asarray(approx.relu(t, beta)) - np.maximum(np.asarray(t), 0))
    np.testing.assert_allclose(err, approx.relu_bound(beta), rtol=1e-12)


@pytest.mark.parametrize("n", [2, 5, 16])
def test_max_one_head_worst_family(n):
    beta = 3.0
    w = rs.max_worst_family(n)
    # the maximiser of derivations/relu_softmax.md, section 1
    x = jnp.array([[0.0] + [-(1 + w) / beta] * (n - 1)])
    gap = float(0.0 - approx.max_one_head(x, beta)[0])
    np.testing.assert_allclose(gap, w / beta, rtol=1e-12)
    assert gap <= approx.max_one_head_bound(n, beta)


def test_interpolation_bound_is_the_derived_one():
    f = rs.interpolation_bound()
    rng = np.random.default_rng(16)
    for _ in range(10):
        a = rng.uniform(-2, 0)
        b, p, beta = a + rng.uniform(0.5, 3), int(rng.integers(3, 60)), 10 ** rng.uniform(0, 3)
        np.testing.assert_allclose(approx.interpolation_bound(a, b, p, beta), f(a, b, p, beta),
                                   rtol=1e-12)


# --------------------------------------------------------------------------- output
def test_write_all_folder_and_single_file(tmp_path):
    out = write_all(tmp_path / "derivations")
    names = {p.name for p in out.iterdir()}
    assert {f"{m}.md" for m in MODULES} | {"README.md", "four-forms.md"} <= names
    index = (out / "README.md").read_text()
    assert all(f"({m}.md)" in index for m in MODULES) and "**no**" not in index
    assert "| residual | value |" in (out / "denoising.md").read_text()
    one = write_all(tmp_path / "all.md")
    text = one.read_text()
    assert one.is_file() and "Four forms per result" in text and "tanh" in text


def test_numeric_residual_fallback():
    from gmtheory.derivations._common import NumericResidual, is_zero, numeric_residual

    x = sympy.Symbol("x")
    expr = sympy.asin(x) - sympy.atan(x / sympy.sqrt(1 - x**2))   # 0 on (-1, 1)
    r = numeric_residual(expr, [x], lambda rng: [rng.uniform(-0.99, 0.99)], points=10)
    assert isinstance(r, NumericResidual) and is_zero(r) and r.value <= 1e-30
    assert not is_zero(numeric_residual(expr + x * 1e-20, [x],
                                        lambda rng: [rng.uniform(0.1, 0.9)], points=3))


def test_cancel_finds_zero_only_where_it_is():
    """The zero shortcut of ``_common.cancel`` (numerator over a common denominator expands
    to 0) returns 0 for identities and sympy.cancel's normal form for everything else, so
    a false identity still leaves a nonzero residual."""
    from gmtheory.derivations._common import cancel

    a, b, c = sympy.symbols("a b c", positive=True)
    zero = 1 / (a + b) - b / (a * (a + b)) - (a - b) / (a * (a + b))
    assert cancel(zero) == 0
    wrong = 1 / (a + b) - 1 / a + c / (a * (a + b))          # zero only when c = b
    assert cancel(wrong) == sympy.cancel(wrong) != 0
    assert sympy.simplify(cancel(wrong) - (c - b) / (a * (a + b))) == 0
    m = cancel(sympy.Matrix([[zero, wrong]]))
    assert m[0, 0] == 0 and m[0, 1] == sympy.cancel(wrong)
    assert cancel([zero, wrong]) == [0, sympy.cancel(wrong)]
