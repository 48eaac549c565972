import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory import approx as A
from gmtheory.simulations import run_simulation


def test_relu_constant_is_the_sup():
    # c = max_u u/(1+e^u), checked against a dense grid independent of brentq
    u = np.linspace(1e-6, 10, 2_000_001)
    assert abs(A.RELU_C - np.max(u / (1 + np.exp(u)))) < 1e-11


def test_relu_goes_through_attention_and_is_exact_formula():
    t = jnp.linspace(-3, 3, 101)
    np.testing.assert_allclose(A.relu(t, 7.0), t * jax.nn.sigmoid(7.0 * t), rtol=1e-13,
                               atol=1e-15)


def test_constructions_match_ideal_limits():
    x = jax.random.uniform(jax.random.key(0), (50, 5))
    np.testing.assert_allclose(A.max_one_head(x, 1e6), x.max(1), atol=1e-5)
    out, res = A.max_relu_tree(x, 1e7)
    np.testing.assert_allclose(out, x.max(1), atol=1e-6)
    assert res.heads == 4 and res.layers == 3
    err = A.min_one_head(x, 50.0) - x.min(1)
    assert float(err.min()) >= 0 and float(err.max()) <= A.max_one_head_bound(5, 50.0)
    mn, _ = A.min_relu_tree(x, 1e7)
    np.testing.assert_allclose(mn, x.min(1), atol=1e-6)
    sq, res = A.square(jnp.array([0.0, 0.25, 0.5, 1.0]), 3)
    np.testing.assert_allclose(sq, [0.0, 0.0625, 0.25, 1.0], atol=1e-4)  # dyadic points
    assert res == A.Resources(9, 3, A.beta_for_levels(3))
    xy, res = A.multiply(jnp.array([0.3]), jnp.array([0.7]), 6)
    assert abs(float(xy[0]) - 0.21) <= A.multiply_bound(6)
    rec, _ = A.reciprocal_pl(jnp.array([0.25, 0.5, 1.0]), 0.25, 3, 1e9)
    np.testing.assert_allclose(rec, [4.0, 2.0, 1.0], atol=1e-6)  # knots are exact


def test_bad_inputs():
    with pytest.raises(ValueError, match="beta: must be a positive"):
        A.relu(jnp.ones(3), -1.0)
    with pytest.raises(ValueError, match="p: need at least 2 anchors"):
        A.interpolation_head(jnp.ones(3), -1, 1, 1, 10.0)
    with pytest.raises(ValueError, match="a, b: need a < b"):
        A.interpolation_head(jnp.ones(3), 1, -1, 5, 10.0)
    with pytest.raises(ValueError, match="x: expected shape"):
        A.max_one_head(jnp.ones(3), 1.0)
    with pytest.raises(ValueError, match="a: need 0 < a < 1"):
        A.reciprocal_pl(jnp.ones(3), 0.0, 4, 10.0)
    with pytest.raises(ValueError, match="t: contains"):
        A.relu(jnp.array([jnp.nan]), 1.0)
    with pytest.raises(ValueError, match="x, y: shapes"):
        A.multiply(jnp.ones(3), jnp.ones(2), 2)


def test_trained_pipeline_small(tmp_path):
    a, _, _ = run_simulation("approx-trained", overrides={"steps": 50, "seeds": 2, "levels": (1,),
                                                          "pieces": (4,)},
                             results_dir=tmp_path, progress=False)
    assert a["square/sup"].shape == (1, 2) and np.all(np.isfinite(a["square/sup"]))
    np.testing.assert_allclose(a["square/constructive"], [0.0625], rtol=1e-3)
