"""Add a check of your own to `gmtheory verify`.

A check is a function that returns an Outcome made of comparisons of declared kinds:
``agreement`` (two independent computations), ``upper_bound`` / ``lower_bound`` (a
measured value against a proven bound) or ``count`` (an exact integer).  Its tolerance
comes from float64 round-off, quadrature order or a Monte Carlo standard error, set before
the result is seen.  Here: linear attention's infinite-prompt limit V E[x x^T] U z against
a Monte Carlo estimate on one long prompt, within 5 standard errors.

Run: python examples/add_a_check.py [--quick]
"""

import sys

import jax
import jax.numpy as jnp

import gmtheory as g
from gmtheory.stats import mean_se
from gmtheory.verify import CHECKS, Outcome, agreement, format_table, register_check, run_checks

g.enable_x64()
L = 20_000 if "--quick" in sys.argv else 1_000_000


@register_check("example.linear-limit-mc",
                "Linear attention on a long prompt approaches V E[xx^T] U z (Monte Carlo).",
                "examples/add_a_check.py")
def linear_limit_mc():
    mix = g.GaussianMixture.isotropic([0.6, 0.4], jnp.array([[1.0, -1.0], [-2.0, 0.5]]),
                                      [0.5, 1.5])
    U, V, z = jnp.eye(2), jnp.array([[1.0, 0.5], [0.0, 1.0]]), jnp.array([0.3, -0.7])
    exact = g.linear_attention_limit(mix, U, V, z)
    x, _ = mix.sample(jax.random.key(42), L)
    per_token = (x @ V.T) * (x @ U @ z)[:, None]         # V x x^T U z, one row per token
    est, se = mean_se(per_token, axis=0)
    z_score = float(jnp.max(jnp.abs(est - exact) / se))
    return Outcome(agreement(z_score, 5.0, "Monte Carlo: |estimate - limit| / SE; "
                             "P(|N(0,1)| > 5) = 6e-7 per coordinate", name="max z-score"),
                   details={"estimate": est, "limit": exact})


results = run_checks([CHECKS["example.linear-limit-mc"]], progress=False)
print(format_table(results))
