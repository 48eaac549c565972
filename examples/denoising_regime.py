"""Explore a denoising regime: how many softmax heads does the Bayes denoiser need?

Two Gaussian classes with equal-norm means m1, m2 and covariance gamma^2 I are observed
through noise of variance xi^2 (paper Section 4, docs/topics/denoising.md).  Theorem 4.1
(docs/topics/denoising.md#thm-41-two-heads-one-head-linear-attention) says:

* one population head realises the Bayes denoiser f* exactly iff gamma^2 = xi^2;
* two heads always suffice (App. C.6 construction);
* linear attention keeps a positive gap R(A*) - R(f*).

Change GAMMA, XIS and the means below, and see where one head stops being enough.
Run: python examples/denoising_regime.py [--quick]
"""

import sys

import jax
import jax.numpy as jnp

import gmtheory as g
from gmtheory import denoising as D

g.enable_x64()
quick = "--quick" in sys.argv
GAMMA = 1.0
XIS = (0.5, 1.0, 2.0) if quick else (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
m1, m2 = jnp.array([2.0, 1.0]), jnp.array([-1.0, 2.0])   # equal norms, not collinear
mix = g.GaussianMixture.shared([0.5, 0.5], jnp.stack([m1, m2]), GAMMA**2 * jnp.eye(2))

print(f"{'xi':>5} {'best one head':>14} {'two heads':>10} {'linear gap':>11}")
for i, xi in enumerate(XIS):
    one = D.single_head_search(mix, xi, starts=2 if quick else 8,
                               key=jax.random.key(i), order=16)
    heads = D.two_head_construction(m1, m2, GAMMA, xi)
    mz = D.noisy_mixture(mix, xi)
    two = D.excess_risk(lambda q, mz=mz, h=heads: D.heads_output(mz, h, q), mix, xi, order=16)
    gap = D.linear_gap(mix, xi, order=16)[0]
    print(f"{xi:5.2f} {one.excess:14.2e} {float(two):10.1e} {float(gap):11.3f}")
print(f"one head is exact only at xi = gamma = {GAMMA} (Thm 4.1 (ii)); two heads always")
