import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory import GaussianMixture
from gmtheory.problems import random_mixture
from gmtheory.stats import mean_se


def test_validation_messages():
    with pytest.raises(ValueError, match="weights: must sum to 1"):
        GaussianMixture([0.5, 0.6], jnp.zeros((2, 2)), jnp.stack([jnp.eye(2)] * 2))
    with pytest.raises(ValueError, match="weights: must be non-negative"):
        GaussianMixture([1.5, -0.5], jnp.zeros((2, 2)), jnp.stack([jnp.eye(2)] * 2))
    with pytest.raises(ValueError, match="means: expected shape"):
        GaussianMixture([0.5, 0.5], jnp.zeros((3, 2)), jnp.stack([jnp.eye(2)] * 2))
    with pytest.raises(ValueError, match="covs: expected shape"):
        GaussianMixture([0.5, 0.5], jnp.zeros((2, 2)), jnp.eye(2))
    with pytest.raises(ValueError, match=r"covs\[1\]: not symmetric"):
        GaussianMixture([0.5, 0.5], jnp.zeros((2, 2)),
                        jnp.stack([jnp.eye(2), jnp.array([[1.0, 0.5], [0.0, 1.0]])]))
    with pytest.raises(ValueError, match=r"covs\[0\]: not positive semi-definite"):
        GaussianMixture([1.0], jnp.zeros((1, 2)), jnp.array([[[1.0, 2.0], [2.0, 1.0]]]))
    with pytest.raises(ValueError, match="means: contains 1 non-finite"):
        GaussianMixture([1.0], jnp.array([[0.0, jnp.nan]]), jnp.eye(2)[None])
    with pytest.raises(ValueError, match="weights: contains"):
        GaussianMixture([jnp.inf], jnp.zeros((1, 2)), jnp.eye(2)[None])


def test_weights_tolerance_is_1e_8():
    GaussianMixture([0.5, 0.5 + 5e-9], jnp.zeros((2, 1)), jnp.ones((2, 1, 1)))
    with pytest.raises(ValueError):
        GaussianMixture([0.5, 0.5 + 5e-8], jnp.zeros((2, 1)), jnp.ones((2, 1, 1)))


def test_singular_allowed_but_density_raises():
    cov = jnp.array([[1.0, 0.0], [0.0, 0.0]])
    mix = GaussianMixture.shared([0.3, 0.7], jnp.array([[0.0, 1.0], [0.0, -1.0]]), cov)
    x, c = mix.sample(jax.random.key(0), 1000)
    # label coordinate is deterministic given the component
    np.testing.assert_allclose(x[:, 1], np.where(c == 0, 1.0, -1.0))
    with pytest.raises(ValueError, match="positive-definite"):
        mix.log_prob(x)
    with pytest.raises(ValueError, match="positive-definite"):
        mix.responsibilities(x)


def test_log_prob_matches_scipy(key):
    from scipy.stats import multivariate_normal

    mix = random_mixture(key, 3, 3)
    x = jax.random.normal(jax.random.fold_in(key, 1), (20, 3))
    ref = sum(float(mix.weights[k]) * multivariate_normal(np.asarray(mix.means[k]),
                                                          np.asarray(mix.covs[k])).pdf(x)
              for k in range(3))
    np.testing.assert_allclose(np.exp(mix.log_prob(x)), ref, rtol=1e-12)
    r = mix.responsibilities(x)
    np.testing.assert_allclose(r.sum(1), 1.0, atol=1e-14)


def test_moments_against_samples(key):
    mix = random_mixture(key, 3, 2)
    x, _ = mix.sample(jax.random.fold_in(key, 7), 400_000)
    m1, se = mean_se(np.asarray(x), axis=0)
    assert np.all(np.abs(m1 - np.asarray(mix.mean())) < 5 * se)
    # second moment: SE of x_i x_j estimated from the samples
    m2, se2 = mean_se(np.asarray(x[:, :, None] * x[:, None, :]), axis=0)
    assert np.all(np.abs(m2 - np.asarray(mix.second_moment())) < 5 * se2)
    np.testing.assert_allclose(mix.covariance(),
                               mix.second_moment() - jnp.outer(mix.mean(), mix.mean()))


def test_pytree_jit_vmap_grad(key):
    mix = random_mixture(key, 2, 2)
    leaves, tree = jax.tree_util.tree_flatten(mix)
    assert len(leaves) == 3

    @jax.jit
    def f(m, x):
        return m.log_prob(x).sum()

    x = jnp.ones((4, 2))
    assert np.isfinite(f(mix, x))
    g = jax.grad(lambda m: m.mean().sum())(mix)
    np.testing.assert_allclose(g.weights, mix.means.sum(1))
    batched = jax.vmap(lambda w: GaussianMixture.tree_unflatten(None, (w, mix.means, mix.covs))
                       .mean())(jnp.stack([mix.weights, mix.weights[::-1]]))
    assert batched.shape == (2, 2)


def test_constructors():
    m = jnp.array([[0.0, 1.0], [2.0, 3.0]])
    iso = GaussianMixture.isotropic([0.5, 0.5], m, [1.0, 2.0])
    np.testing.assert_allclose(iso.covs[1], 2.0 * jnp.eye(2))
    with pytest.raises(ValueError, match="variances"):
        GaussianMixture.isotropic([0.5, 0.5], m, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="cov: expected shape"):
        GaussianMixture.shared([0.5, 0.5], m, jnp.eye(3))


def test_sample_reproducible():
    mix = GaussianMixture.isotropic([0.5, 0.5], jnp.array([[0.0], [5.0]]), 1.0)
    a, _ = mix.sample(jax.random.key(3), 10)
    b, _ = mix.sample(jax.random.key(3), 10)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="key"):
        mix.sample(3, 10)
