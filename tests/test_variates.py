"""gmtheory.variates: the gamma and chi-squared variates follow their laws exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from gmtheory import variates


@pytest.mark.parametrize("a", [0.3, 0.5, 1.0, 2.5, 40.5])
def test_gamma_follows_the_gamma_law(a):
    # Kolmogorov-Smirnov against scipy's gamma CDF, 40000 draws from one fixed key: a
    # correct sampler fails this with probability 1e-4 per shape (threshold set first)
    x = np.asarray(jax.jit(lambda k: variates.gamma(k, a, (40000,)))(jax.random.key(7)))
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    assert stats.kstest(x, stats.gamma(a).cdf).pvalue > 1e-4


def test_chi2_takes_a_shape_per_entry_and_df_zero_gives_zero():
    df = jnp.array([0.0, 1.0, 7.0])
    x = np.asarray(variates.chi2(jax.random.key(3), df, (20000, 3)))
    assert np.all(x[:, 0] == 0.0)
    for j in (1, 2):
        assert stats.kstest(x[:, j], stats.chi2(float(df[j])).cdf).pvalue > 1e-4


def test_a_bad_shape_gives_nan_not_an_endless_loop():
    x = np.asarray(variates.gamma(jax.random.key(0), jnp.array([-1.0, jnp.nan, 2.0]), (3,)))
    assert np.isnan(x[0]) and np.isnan(x[1]) and np.isfinite(x[2])


def test_same_key_same_numbers():
    a = variates.gamma(jax.random.key(1), 3.0, (5,))
    b = jax.jit(lambda k: variates.gamma(k, 3.0, (5,)))(jax.random.key(1))
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12)
