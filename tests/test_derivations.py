import jax
import jax.numpy as jnp
import numpy as np
import sympy

import gmtheory as g
from gmtheory.derivations.attention_mgf import derive, prop21_function, write_markdown


def test_residuals_are_zero():
    d = derive()
    for k, v in d.items():
        if k.endswith("_residual"):
            vals = list(v) if isinstance(v, sympy.MatrixBase) else [v]
            assert all(e == 0 for e in vals), k


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
    p = write_markdown(tmp_path / "d.md")
    text = p.read_text()
    assert "$$" in text and "Prop. 2.1" in text


def test_lda_derivation_residuals_are_zero():
    from gmtheory.derivations import lda_effective

    for k, v in lda_effective.derive().items():
        if k.endswith("_residual"):
            vals = list(v) if isinstance(v, sympy.MatrixBase) else [v]
            assert all(e == 0 for e in vals), k
