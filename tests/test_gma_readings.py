"""The readings of a trained GMA layer's routing (gmtheory.gma_analysis: usage and token
entropy, dead components, byte categories, contingency, NMI, the per-layer report).  They
are not theory values, so no check of ``gmtheory verify`` compares them; each is compared
here with an independent computation (SciPy, scikit-learn, Python's own character classes)
or with its defining extreme cases."""

import string

import jax
import numpy as np
import pytest
from scipy.stats import entropy

from gmtheory import gma
from gmtheory import gma_analysis as A

rng = np.random.default_rng(0)


def _probs(shape):
    p = rng.random(shape)
    return p / p.sum(-1, keepdims=True)


def test_usage_and_token_entropy_against_scipy():
    r = _probs((2, 50, 5))
    pooled = r.reshape(-1, 5).mean(0)
    assert A.usage_entropy(r) == pytest.approx(entropy(pooled) / np.log(5), rel=1e-6)
    assert float(A.usage_entropy_array(r)) == pytest.approx(A.usage_entropy(r))
    per_token = entropy(r.reshape(-1, 5), axis=1) / np.log(5)
    assert A.token_entropy(r) == pytest.approx(per_token.mean(), rel=1e-6)
    onehot = np.eye(5)[rng.integers(0, 5, 40)]
    assert A.token_entropy(onehot) == pytest.approx(0.0, abs=1e-12)
    assert A.usage_entropy(np.full((10, 5), 0.2)) == pytest.approx(1.0)
    assert A.usage_entropy(np.tile(np.eye(5)[0], (10, 1))) == pytest.approx(0.0, abs=1e-12)


def test_dead_fraction_counts_components_below_a_hundredth_of_the_uniform_share():
    r = np.zeros((100, 4))
    r[:, 0], r[:, 1] = 0.5, 0.5 - 1e-4
    r[:, 2] = 1e-4                     # mean 1e-4 < 0.01 / 4: dead; column 3: dead
    assert A.dead_fraction(r) == pytest.approx(0.5)
    assert A.dead_fraction(np.full((10, 4), 0.25)) == 0.0


def test_byte_categories_against_python():
    b = np.arange(256)
    cat = A.byte_categories(b)
    for i in range(128):
        c = chr(i)
        want = (0 if c in string.ascii_lowercase else 1 if c in string.ascii_uppercase
                else 2 if c in string.digits else 3 if c in " \t\n\r\x0b\x0c"
                else 4 if c in string.punctuation else 5)
        assert cat[i] == want, (i, c)
    assert np.all(cat[128:] == 5)


def test_contingency_and_nmi_against_numpy_and_scikit_learn():
    from sklearn.metrics import normalized_mutual_info_score

    a, b = rng.integers(0, 4, 500), rng.integers(0, 3, 500)
    hist, _, _ = np.histogram2d(a, b, bins=[np.arange(5), np.arange(4)])
    assert np.array_equal(A.contingency(a, b, 4, 3), hist)
    c = (a + rng.integers(0, 2, 500)) % 4                # dependent on a
    for x, y in ((a, b), (a, c), (a, a)):
        assert A.normalised_mutual_information(x, y) == pytest.approx(
            normalized_mutual_info_score(x, y), abs=1e-12)
    assert A.normalised_mutual_information(a, np.zeros_like(a)) == 0.0


def test_responsibility_report_reads_the_layers_routing():
    params = gma.init(jax.random.PRNGKey(0), 8, heads=2, K=4)
    x = jax.random.normal(jax.random.PRNGKey(1), (2, 16, 8))
    cats = rng.integers(0, 3, (2, 16))
    rep = A.responsibility_report(params, x, cats, 3, key=jax.random.PRNGKey(2), shuffles=2)
    _, rk, _ = gma.routes(params, x)
    for h in range(2):
        assert rep["usage_entropy"][h] == pytest.approx(A.usage_entropy(rk[h]), rel=1e-6)
        assert rep["dead_fraction"][h] == pytest.approx(A.dead_fraction(rk[h]))
        top = np.asarray(rk[h]).argmax(-1)
        assert rep["nmi"][h] == pytest.approx(
            A.normalised_mutual_information(top, cats, 4, 3), abs=1e-9)
    assert len(rep["nmi_shuffled"]) == 2


def test_limit_variance_is_the_value_covariance_when_routing_is_uniform():
    """gma_analysis.limit_variance (the delta-method lim L E|o_L(q) - o(q)|^2) where it has a
    closed form: with one component per head every token's responsibility is 1, so the
    layer averages its values and the constant is tr(B^T Cov(x) B), B = sum_h Wv_h Wo_h,
    Cov(x) the mixture's covariance, at every query."""
    from gmtheory import GaussianMixture

    mix = GaussianMixture([0.3, 0.7], [[1.0, -0.5, 0.2], [-0.4, 0.8, 0.0]],
                          [np.diag([1.0, 0.5, 2.0]), 0.7 * np.eye(3)])
    params = gma.init(jax.random.key(2), 3, heads=2, K=1, d_v=2, dtype=np.float64)
    q = np.asarray(jax.random.normal(jax.random.key(3), (4, 3)))
    mom = A.limit_moments(params, mix, order=12)
    got = np.asarray(A.limit_variance(params, q, mix, mom, order=12))
    w, m, C = (np.asarray(v) for v in (mix.weights, mix.means, mix.covs))
    mean = w @ m
    cov = sum(wk * (Ck + np.outer(mk, mk)) for wk, mk, Ck in zip(w, m, C, strict=True))
    cov = cov - np.outer(mean, mean)
    H, dv = params.Wv.shape[0], params.Wv.shape[2]
    B = sum(np.asarray(params.Wv[h]) @ np.asarray(params.Wo).reshape(H, dv, -1)[h]
            for h in range(H))
    np.testing.assert_allclose(got, np.full(4, np.trace(B.T @ cov @ B)), rtol=1e-10)
