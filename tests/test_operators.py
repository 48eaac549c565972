import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gmtheory as g
from gmtheory.problems import random_attention, random_mixture


@pytest.fixture
def problem(key):
    mix = random_mixture(key, 3, 3)
    U, V, z = random_attention(jax.random.fold_in(key, 1), mix, 5, max_quad=1.0)
    return mix, U, V, z


def test_finite_prompt_chunking_exact(problem, key):
    """The chunked online softmax equals a dense softmax on the same tokens."""
    mix, U, V, z = problem
    x, _ = mix.sample(jax.random.fold_in(key, 2), 5003)  # not a multiple of the chunk
    dense = jax.nn.softmax((z @ U.T) @ x.T, axis=1) @ x @ V.T
    for chunk in (1, 7, 1000, 5003, 10**6):
        np.testing.assert_allclose(g.softmax_attention(x, U, V, z, chunk=chunk), dense,
                                   rtol=1e-12, atol=1e-13)


def test_finite_prompt_batched(problem, key):
    mix, U, V, z = problem
    xs = jnp.stack([mix.sample(jax.random.fold_in(key, i), 300)[0] for i in range(3)])
    out = g.softmax_attention(xs, U, V, z)
    assert out.shape == (3, 5, 3)
    np.testing.assert_allclose(out[1], g.softmax_attention(xs[1], U, V, z), rtol=1e-13)
    zb = jnp.stack([z, 2 * z, -z])
    outb = g.softmax_attention(xs, U, V, zb)
    np.testing.assert_allclose(outb[2], g.softmax_attention(xs[2], U, V, -z), rtol=1e-13)
    lin = g.linear_attention(xs, U, V, zb)
    ref = (zb[0] @ U.T) @ xs[0].T @ xs[0] @ V.T / 300
    np.testing.assert_allclose(lin[0], ref, rtol=1e-12)


def test_large_scores_finite(problem):
    mix, U, V, z = problem
    out = g.softmax_attention_limit(mix, 1e3 * U, V, z)
    assert np.all(np.isfinite(out))
    x = jnp.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    out = g.softmax_attention(x, 1e4 * jnp.eye(3), jnp.eye(3), jnp.array([[1.0, 0, 0]]))
    np.testing.assert_allclose(out, [[1.0, 0.0, 0.0]])


def test_gates_sum_to_one_and_single_query(problem):
    mix, U, V, z = problem
    a = g.attention_gates(mix, U, z)
    np.testing.assert_allclose(a.sum(1), 1.0, atol=1e-14)
    single = g.softmax_attention_limit(mix, U, V, z[0])
    assert single.shape == (3,)
    np.testing.assert_allclose(single, g.softmax_attention_limit(mix, U, V, z)[0], rtol=1e-14)


def test_query_blocking_matches(problem, key):
    from gmtheory import operators

    mix, U, V, _ = problem
    z = jax.random.normal(key, (operators.QUERY_BLOCK + 17, 3))
    big = g.softmax_attention_limit(mix, U, V, z)
    small = jnp.concatenate([g.softmax_attention_limit(mix, U, V, z[:100]),
                             g.softmax_attention_limit(mix, U, V, z[100:])])
    np.testing.assert_allclose(big, small, rtol=1e-13)


def test_public_cores_match_the_checked_operators(problem, key):
    """The unchecked cores that bench uses are the operators' own computations."""
    from gmtheory import operators

    mix, U, V, z = problem
    np.testing.assert_allclose(operators.softmax_limit_blocked(mix, U, V, z),
                               g.softmax_attention_limit(mix, U, V, z), rtol=1e-14)
    toks, _ = mix.sample(key, 3000)
    for chunk in (1000, 3000):  # several chunks (running log-sum-exp) and one block
        out, se = operators.online_softmax(toks, z @ U.T, V, chunk=chunk)
        np.testing.assert_allclose(out, g.softmax_attention(toks, U, V, z), rtol=1e-12)
        np.testing.assert_array_equal(se, 0.0)
    _, se = operators.online_softmax(toks, z @ U.T, V, chunk=1000, with_se=True)
    _, se_ref = g.softmax_attention(toks, U, V, z, chunk=1000, return_se=True)
    np.testing.assert_allclose(se, se_ref, rtol=1e-12)


def test_bad_inputs_named(problem):
    mix, U, V, z = problem
    with pytest.raises(ValueError, match="U: expected shape"):
        g.softmax_attention_limit(mix, jnp.eye(2), V, z)
    with pytest.raises(ValueError, match="V: expected shape"):
        g.softmax_attention_limit(mix, U, jnp.eye(2), z)
    with pytest.raises(ValueError, match="z: expected shape"):
        g.softmax_attention_limit(mix, U, V, jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="z: contains"):
        g.softmax_attention_limit(mix, U, V, jnp.full((1, 3), jnp.nan))
    with pytest.raises(ValueError, match="U: contains"):
        g.linear_attention_limit(mix, U.at[0, 0].set(jnp.inf), V, z)
    with pytest.raises(ValueError, match="mixture: expected"):
        g.softmax_attention_limit("not a mixture", U, V, z)
    with pytest.raises(ValueError, match="tokens: the prompt is empty"):
        g.softmax_attention(jnp.zeros((0, 3)), U, V, z)
    with pytest.raises(ValueError, match="tokens: contains"):
        g.softmax_attention(jnp.full((4, 3), jnp.nan), U, V, z)
    with pytest.raises(ValueError, match="mixture: eq. \\(3\\)"):
        g.softmax_attention_limit_shared(mix, U, V, z)


def test_ess_single_gaussian_closed_form(key):
    cov = jnp.array([[2.0, 0.3], [0.3, 1.0]])
    mix = g.GaussianMixture(jnp.ones(1), jnp.array([[0.5, -1.0]]), cov[None])
    U = jnp.array([[0.3, 0.1], [-0.2, 0.4]])
    z = jax.random.normal(key, (6, 2))
    u = z @ U.T
    expected = 1000 * jnp.exp(-jnp.einsum("ni,ij,nj->n", u, cov, u))
    np.testing.assert_allclose(g.effective_sample_size(mix, U, z, 1000), expected, rtol=1e-12)
    V = jnp.eye(2)
    var = g.finite_prompt_variance(mix, U, V, z).sum(1)
    pred = jnp.exp(jnp.einsum("ni,ij,nj->n", u, cov, u)) * (
        jnp.trace(cov) + jnp.sum((u @ cov) ** 2, 1))
    np.testing.assert_allclose(var, pred, rtol=1e-12)


def test_empirical_ess_converges(problem, key):
    mix, U, V, z = problem
    x, _ = mix.sample(jax.random.fold_in(key, 5), 200_000)
    emp = g.empirical_ess(x, U, z) / 200_000
    pred = g.effective_sample_size(mix, U, z, 1.0)
    np.testing.assert_allclose(emp, pred, rtol=0.05)


def test_prompt_errors_of_both_operators_read_one_draw(problem, key):
    """kind=(linear, softmax) reads each prompt with both operators: the same errors as
    one call per kind with the same key (max_tokens=200 splits the 4 prompts into two
    batches); a kind that is neither names the argument."""
    from gmtheory.problems import prompt_sq_errors

    mix, U, V, z = problem
    both = prompt_sq_errors(key, mix, U, V, z, L=100, reps=4, kind=("linear", "softmax"),
                            max_tokens=200)
    for k, e in zip(("linear", "softmax"), both, strict=True):
        one = prompt_sq_errors(key, mix, U, V, z, L=100, reps=4, kind=k, max_tokens=200)
        assert e.shape == (4, 5)
        np.testing.assert_allclose(e, one, rtol=1e-12, atol=1e-300)
    for bad in ("relu", (), 3):
        with pytest.raises(ValueError, match="kind"):
            prompt_sq_errors(key, mix, U, V, z, L=100, reps=4, kind=bad)
