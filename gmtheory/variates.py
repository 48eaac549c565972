"""Gamma and chi-squared variates from a program that compiles small.

:func:`jax.random.gamma` draws each variate in its own rejection loop with its own key,
which XLA compiles to a large program: a jitted ``jax.random.gamma`` of 1000 variates
takes about 1.5 s to compile on one CPU core, against 0.3 s for ``jax.random.normal``.
The ICL simulators draw ``chi^2`` variates inside every trial
(:func:`gmtheory.icl.sample_statistics`, the Bartlett factor of the dMMSE), so each
program that holds a trial paid that compile, several times over.

:func:`gamma` is Marsaglia and Tsang's exact rejection sampler (ACM TOMS 26, 2000),
vectorised: each round draws one block of uniforms for every entry still waiting (one
threefry call in the loop body), and the loop ends when every entry has accepted
(acceptance is at least 95 % per round for shape >= 1, so a round count grows like the
log of the number of entries).  Shapes below 1 use ``Gamma(a) = Gamma(a + 1) U^(1/a)``,
and shape 0 gives 0 (the ``chi^2_0`` of a one-token prompt).  The law is exactly the
gamma law; the numbers differ from ``jax.random.gamma``'s for the same key.
``tests/test_variates.py`` compares it with scipy's distribution functions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["gamma", "chi2"]


def gamma(key, a, shape) -> jax.Array:
    """Gamma(``a``, 1) variates of ``shape`` (``a`` broadcast to it; every ``a >= 0``).

    A negative or non-finite ``a`` gives NaN at that entry (under ``jit`` no error can
    be raised; the NaN reaches the caller's result rather than hiding)."""
    shape = tuple(shape)
    a = jnp.broadcast_to(jnp.asarray(a, dtype=jnp.result_type(float)), shape)
    dt = a.dtype
    boost = a < 1.0
    dd = jnp.where(boost, a + 1.0, a) - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * dd)
    tiny = jnp.finfo(dt).tiny

    def body(state):
        i, x, u_boost, done = state
        u = jax.random.uniform(jax.random.fold_in(key, i), (3, *shape), dt, minval=tiny)
        z = jnp.sqrt(2.0).astype(dt) * jax.scipy.special.erfinv(2.0 * u[0] - 1.0)
        v = (1.0 + c * z) ** 3
        logv = jnp.log(jnp.where(v > 0, v, 1.0))
        ok = (v > 0) & (jnp.log(u[1]) < 0.5 * z * z + dd - dd * v + dd * logv)
        return (i + 1, jnp.where(done | ~ok, x, dd * v), jnp.where(i == 0, u[2], u_boost),
                done | ok)

    bad = ~(jnp.isfinite(a) & (a >= 0))          # NaN out, never an endless loop
    init = (jnp.int32(0), jnp.zeros(shape, dt), jnp.zeros(shape, dt), bad)
    _, x, u_boost, _ = jax.lax.while_loop(lambda s: ~jnp.all(s[3]), body, init)
    x = jnp.where(boost, x * u_boost ** (1.0 / jnp.where(boost & (a > 0), a, 1.0)), x)
    return jnp.where(bad, jnp.nan, jnp.where(a > 0, x, jnp.zeros((), dt)))


def chi2(key, df, shape) -> jax.Array:
    """``chi^2_df`` variates of ``shape`` (``df`` broadcast to it; every ``df >= 0``)."""
    return 2.0 * gamma(key, jnp.asarray(df, dtype=jnp.result_type(float)) / 2.0, shape)
