"""Check the closed form of softmax attention on a Gaussian mixture of your own.

Prop. 2.1 (docs/topics/operator.md#prop-21-softmax-gated-affine-experts): on an infinite
prompt drawn from a Gaussian mixture, softmax attention is
V sum_k alpha_k(z) (m_k + Gamma_k U z).  This script

1. builds a heteroscedastic 3-component mixture in d = 3 (edit it),
2. evaluates the closed form at a few queries,
3. evaluates the same expectation independently by Gauss-Hermite quadrature
   (E[w(x) V x] / E[w(x)] with w(x) = exp(x^T U z)),
4. samples finite prompts of growing length L and fits the log-log slope of the error,
   which the central limit theorem puts at -1/2.

Run: python examples/your_own_mixture.py [--quick]
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np

import gmtheory as g
from gmtheory.stats import fit_loglog, mean_se

g.enable_x64()
quick = "--quick" in sys.argv
key = jax.random.key(0)

mix = g.GaussianMixture(
    weights=[0.5, 0.3, 0.2],
    means=jnp.array([[1.0, 0.0, 0.0], [-1.0, 1.0, 0.5], [0.0, -1.0, 1.0]]),
    covs=jnp.stack([jnp.eye(3), jnp.diag(jnp.array([0.5, 1.0, 0.2])), 0.3 * jnp.eye(3)]),
)
U = 0.4 * jnp.eye(3)                 # scores z'^T U z
V = jnp.eye(3)                       # values V z'
z = jnp.array([[0.5, 0.2, -0.3], [1.0, -1.0, 0.0]])

closed = g.softmax_attention_limit(mix, U, V, z)
num = g.expect_mixture(lambda x: jnp.exp(x @ U @ z.T)[..., None] * (x @ V.T)[:, None, :],
                       mix, order=20)
den = g.expect_mixture(lambda x: jnp.exp(x @ U @ z.T), mix, order=20)
quad = num / den[:, None]
gap = float(jnp.max(jnp.abs(closed - quad)))
print(f"closed form vs Gauss-Hermite: max |difference| = {gap:.1e}")

Ls = [100, 1_000, 10_000] if quick else [100, 1_000, 10_000, 100_000]
reps = 16 if quick else 64
rms = []
for L in Ls:
    errs = []
    for r in range(reps):
        tokens, _ = mix.sample(jax.random.fold_in(key, L * 1000 + r), L)
        errs.append(float(jnp.sum((g.softmax_attention(tokens, U, V, z) - closed) ** 2)))
    m, se = mean_se(np.array(errs))
    rms.append(np.sqrt(m))
    print(f"L = {L:>7,}: root-mean-square error {rms[-1]:.3e}  ({reps} prompts)")
fit = fit_loglog(Ls, rms)
print(f"fitted slope {fit.slope:+.3f} ± {fit.stderr:.3f} (theory: -0.5)")
