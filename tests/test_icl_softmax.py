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
    (lambda: S.isotropic_params(8, 4.0, 0.5), "t"),
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
