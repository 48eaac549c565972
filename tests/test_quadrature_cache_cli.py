import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gmtheory as g
from gmtheory.cache import load_result, save_result
from gmtheory.cli import main


def test_gauss_hermite_polynomial_exactness():
    mean, cov = jnp.array([0.3, -1.0]), jnp.array([[2.0, 0.5], [0.5, 1.0]])
    # E[x x^T] = cov + m m^T; exact for degree <= 2*order-1
    val = g.expect_gaussian(lambda x: x[:, :, None] * x[:, None, :], mean, cov, order=3)
    np.testing.assert_allclose(val, cov + jnp.outer(mean, mean), rtol=1e-13)
    proj = g.expect_gaussian_projected(lambda y: y[:, 0] ** 2, mean, cov,
                                       jnp.array([[1.0], [1.0]]), order=3)
    np.testing.assert_allclose(proj, jnp.sum(cov) + jnp.sum(mean) ** 2, rtol=1e-13)
    with pytest.raises(ValueError, match="order"):
        g.gauss_hermite_rule(100, 5)


def test_one_dimensional_rules_against_closed_forms():
    """The piecewise Gauss-Legendre rule (hermite's) and the sinh-trapezoid rule (lda's
    gate axis) against closed forms of normal expectations.  Piecewise GL converges
    geometrically on each smooth piece, but a piece is 40 long and the density varies on
    a scale of 1: order 40 is not converged (3e-10 off for E relu; hermite's adaptive loop
    doubles the order from 32), order 128 is, so it is held to 1e-12 (round-off of a few
    hundred float64 terms is ~1e-14).  The sinh trapezoid converges geometrically in n,
    its tails beyond 14/kappa' are below 1e-40: at n = 600 held to 1e-10."""
    from scipy.stats import norm

    from gmtheory.quadrature import normal_rule, sinh_trapezoid_rule

    t, w = normal_rule(128, breaks=(0.0,))
    assert abs(w @ np.maximum(t, 0.0) - 1 / np.sqrt(2 * np.pi)) < 1e-12   # E relu(z)
    t, w = normal_rule(128, breaks=(0.5,))
    assert abs(w @ (t > 0.5) - norm.sf(0.5)) < 1e-12                     # E 1{z > 1/2}
    t, w = normal_rule(8)                                                  # plain GH
    assert abs(w @ t**4 - 3.0) < 1e-12
    for kappa, c in ((1.0, 0.0), (50.0, 0.7), (800.0, -1.3)):
        t, w = sinh_trapezoid_rule(c, kappa, 600)
        # E Phi(kappa (z - c)) = Phi(-kappa c / sqrt(1 + kappa^2)) for z ~ N(0, 1)
        exact = norm.cdf(-kappa * c / np.sqrt(1 + kappa**2))
        assert abs(float(w @ norm.cdf(kappa * (np.asarray(t) - c))) - exact) < 1e-10


def test_legendre_chi2_and_cached_hermite_rules_integrate_polynomials_exactly():
    """gauss_legendre_nodes (degree <= 2n - 1 on [-1, 1]), chi2_rule (the moments of
    chi^2_d / d: E s = 1, E s^2 = 1 + 2/d, E s^3 = (d + 2)(d + 4)/d^2, degree <= 2n - 1
    exact; d = 1 and d = 500) and gauss_hermite_nodes (the cached NumPy copy of
    gauss_hermite_rule, read-only) to float64 round-off."""
    from gmtheory.quadrature import (
        chi2_rule,
        gauss_hermite_nodes,
        gauss_hermite_rule,
        gauss_legendre_nodes,
    )

    x, w = gauss_legendre_nodes(6)
    for k in range(12):
        assert abs(w @ x**k - (2 / (k + 1) if k % 2 == 0 else 0.0)) < 1e-14
    for d in (1, 500):
        s, w = chi2_rule(3, d)
        assert abs(w.sum() - 1) < 1e-14 and abs(w @ s - 1) < 1e-13
        assert abs(w @ s**2 - (1 + 2 / d)) < 1e-12
        assert abs(w @ s**3 - (d + 2) * (d + 4) / d**2) < 1e-12
    nodes, weights = gauss_hermite_nodes(5, 2)
    ref_n, ref_w = gauss_hermite_rule(5, 2)
    np.testing.assert_array_equal(nodes, np.asarray(ref_n))
    np.testing.assert_array_equal(weights, np.asarray(ref_w))
    assert not nodes.flags.writeable
    assert abs(weights @ (nodes[:, 0] ** 2 * nodes[:, 1] ** 4) - 3.0) < 1e-12   # E z1^2 z2^4


def test_projected_mixture_expectation_is_the_full_one():
    """expect_mixture_projected of a function of P^T x equals expect_mixture of the same
    function of x (a full-dimensional tensor grid), with and without lift and per
    component; E (P^T x)^2 also has a closed form, sum_k pi_k (p^T m_k)^2 + p^T C_k p."""
    from gmtheory.quadrature import expect_mixture, expect_mixture_projected

    mix = g.GaussianMixture([0.3, 0.7], [[1.0, -0.5, 0.2], [-0.4, 0.8, 0.0]],
                            [np.diag([1.0, 0.5, 2.0]), [[1.0, 0.3, 0.0], [0.3, 1.0, 0.1],
                                                         [0.0, 0.1, 0.7]]])
    P = np.array([[0.6], [0.8], [0.0]])
    full = float(expect_mixture(lambda x: jnp.sin(x @ P[:, 0]) + (x @ P[:, 0]) ** 2, mix, 24))
    proj = float(expect_mixture_projected(lambda y: jnp.sin(y[:, 0]) + y[:, 0] ** 2, mix, P,
                                          60))
    lift = float(expect_mixture_projected(lambda x: jnp.sin(x @ P[:, 0]) + (x @ P[:, 0]) ** 2,
                                          mix, P, 60, lift=True))
    assert abs(proj - full) < 1e-12 and abs(lift - full) < 1e-12
    second = float(expect_mixture_projected(lambda y, k: y[:, 0] ** 2 * (k + 1), mix, P, 10,
                                            component=True))
    p = P[:, 0]
    exact = sum(w * (k + 1) * ((p @ m) ** 2 + p @ C @ p) for k, (w, m, C) in
                enumerate(zip(np.asarray(mix.weights), np.asarray(mix.means),
                              np.asarray(mix.covs), strict=True)))
    assert abs(second - exact) < 1e-12


def test_fingerprint_follows_a_subpackage():
    """A simulation that imports ``gmtheory.lda`` (a package) depends on the modules that
    the package re-exports from, so an edit of lda/landscape.py invalidates its results."""
    from gmtheory.cache import source_fingerprint

    files = source_fingerprint("gmtheory.simulations.lda_sims").files
    assert {"lda/problem.py", "lda/landscape.py", "lda/dynamics.py"} <= set(files)


def test_monte_carlo_se_covers(key):
    mix = g.GaussianMixture.isotropic([0.4, 0.6], jnp.array([[1.0], [-2.0]]), [1.0, 0.5])
    est, se = g.monte_carlo(lambda x: x[:, 0] ** 2, mix.sample, key, 200_000, batch=50_000)
    exact = g.expect_mixture(lambda x: x[:, 0] ** 2, mix, order=5)
    assert abs(float(est - exact)) < 5 * float(se)
    assert 0 < float(se) < 0.02


def test_cache_atomic_corrupt_stale(tmp_path):
    stem = tmp_path / "r"
    save_result(stem, {"a": np.arange(3)}, {"key": "k1"})
    arrays, meta = load_result(stem, "k1")
    assert meta["provenance"]["gmtheory"] == g.__version__
    np.testing.assert_array_equal(arrays["a"], np.arange(3))
    assert load_result(stem, "other") is None  # stale
    stem.with_suffix(".npz").write_bytes(b"garbage")
    assert load_result(stem, "k1") is None  # corrupt
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.slow   # resuming recomputes only the missing points: also test_robustness's
# stale-claim and full-disk tests, on the same small sweep
def test_sweep_resumes(tmp_path, monkeypatch, capsys):
    import gmtheory.simulations as sims
    from gmtheory.simulations import get_simulation, run_simulation

    sim = get_simulation("prompt-convergence")
    from _shared import PROMPT_SMALL

    over = sims.parse_overrides(sim.config_cls, PROMPT_SMALL)
    a1, m1, stem = run_simulation("prompt-convergence", overrides=over, results_dir=tmp_path,
                                  progress=False)
    # simulate an interrupted sweep: drop the final result and one point
    stem.with_suffix(".json").unlink()
    pts = sorted((stem.parent / (stem.name + ".points")).glob("point-*.json"))
    pts[1].unlink()
    calls = []
    orig = sim.run_point
    import dataclasses

    monkeypatch.setitem(sims.SIMULATIONS, "prompt-convergence", dataclasses.replace(
        sim, run_point=lambda *a: calls.append(a[1]) or orig(*a)))
    a2, _, _ = run_simulation("prompt-convergence", overrides=over, results_dir=tmp_path,
                              progress=False)
    assert len(calls) == 1 and calls[0] == m1["points"][1]
    for k in a1:
        np.testing.assert_array_equal(a1[k], a2[k])  # same seed -> same numbers


def test_parse_overrides_errors():
    from gmtheory.simulations import get_simulation, parse_overrides

    cls = get_simulation("prompt-convergence").config_cls
    assert parse_overrides(cls, ["reps=5,Ls=10,20"]) == {"reps": 5, "Ls": (10, 20)}
    with pytest.raises(ValueError, match="unknown parameter 'bogus'"):
        parse_overrides(cls, ["bogus=1"])
    with pytest.raises(ValueError, match="--set reps"):
        parse_overrides(cls, ["reps=abc"])


def test_cli_errors_and_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("verify", "figures", "run", "reproduce", "bench", "derive"):
        assert cmd in out
    assert main(["figures", "nope"]) == 2
    assert "unknown name 'nope'" in capsys.readouterr().err
    assert main(["verify", "--only", "zzz-nothing"]) == 2
    assert main(["bench", "lda", "--sizes", "512"]) == 2
    assert "--sizes: only the gma benchmark" in capsys.readouterr().err
    assert main(["bench", "gma", "--sizes", "512,big"]) == 2
    assert "--sizes: expected comma-separated integers" in capsys.readouterr().err


def test_cli_verify_json(tmp_path):
    path = tmp_path / "v.json"
    assert main(["verify", "--only", "operator.03", "--json", str(path), "--no-progress"]) == 0
    data = json.loads(path.read_text())
    (c,) = data["checks"]
    assert c["passed"] and c["verdict"] == "PASS" and c["kind"] == "agreement"
    assert c["measured"] <= c["threshold"]
    assert all({"kind", "measured", "threshold", "why", "holds"} <= set(x)
               for x in c["comparisons"])


def test_figures_written(tmp_path):
    assert main(["figures", "gated-experts", "--out", str(tmp_path / "f"), "--results",
                 str(tmp_path / "r"), "--no-progress"]) == 0
    png = tmp_path / "f" / "gated-experts.png"
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_prng_is_explicit():
    """Same seed, same numbers: the simulation problem is a function of the seed."""
    from gmtheory.problems import make_problem

    a = make_problem(3, 3, 3, 4, 1.0)
    b = make_problem(3, 3, 3, 4, 1.0)
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)
