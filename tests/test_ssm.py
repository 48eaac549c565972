"""The selective state-space mixer (gmtheory.ssm) against a sequential reference written
here from the recurrence, in float64 NumPy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory import ssm


def _reference(p, x, causal, mask=None):
    """h_t = exp(dt_t A) h_{t-1} + dt_t B_t u_t, y_t = C_t h_t + D u_t, token by token."""
    P = {k: np.asarray(getattr(p, k), np.float64) for k in ("W_in", "W_x", "W_dt", "b_dt",
                                                             "A_log", "D", "W_out")}
    x = np.asarray(x, np.float64)
    Bsz, N, _ = x.shape
    di, n = P["A_log"].shape
    rank = P["W_dt"].shape[0]
    silu = lambda v: v / (1 + np.exp(-v))                      # noqa: E731
    A = -np.exp(P["A_log"])
    out = np.zeros((Bsz, N, x.shape[2]))
    for b in range(Bsz):
        xz = x[b] @ P["W_in"]
        u, z = silu(xz[:, :di]), xz[:, di:]
        proj = u @ P["W_x"]
        r, Bm, Cm = proj[:, :rank], proj[:, rank:rank + n], proj[:, rank + n:]
        dt = np.log1p(np.exp(r @ P["W_dt"] + P["b_dt"]))
        if mask is not None:
            dt = dt * mask[b][:, None]
        y = np.zeros((N, di))
        orders = [range(N)] + ([] if causal else [range(N - 1, -1, -1)])
        for order in orders:
            h = np.zeros((di, n))
            for t in order:
                h = np.exp(dt[t][:, None] * A) * h + (dt[t] * u[t])[:, None] * Bm[t][None]
                y[t] += h @ Cm[t]
        out[b] = ((y + P["D"] * u) * silu(z)) @ P["W_out"]
    return out


# Compiled once per shape: eager, lax.associative_scan dispatches (and, with a cold XLA
# cache, compiles) each of its dozens of slices and updates as a program of its own (159 s
# for the prefix test on 2 cores, cold).
_mixer = jax.jit(ssm.ssm_mixer, static_argnames=("causal", "scan"))


@pytest.fixture(scope="module")
def params():
    return ssm.init(jax.random.key(0), 8, n=4, dt_min=0.05, dt_max=0.5)


def test_parallel_scan_is_the_sequential_recurrence():
    ka, kb = jax.random.split(jax.random.key(1))
    a = jax.random.uniform(ka, (3, 37, 5, 2), minval=0.5, maxval=1.0)
    b = jax.random.normal(kb, (3, 37, 5, 2))
    par, seq = jax.jit(ssm.parallel_scan)(a, b), jax.jit(ssm.sequential_scan)(a, b)
    # float32: the two orders of 37 multiply-adds differ by a few ulps of |h| <= 37 max|b|
    np.testing.assert_allclose(par, seq, rtol=0, atol=50 * np.finfo(np.float32).eps
                               * float(jnp.max(jnp.abs(seq))))


@pytest.mark.parametrize("causal", [True, False])
def test_mixer_is_the_reference_recurrence(params, causal):
    x = jax.random.normal(jax.random.key(2), (2, 23, 8))
    ref = _reference(params, x, causal)
    for scan in ("parallel", "fused"):
        y = _mixer(params, x, causal=causal, scan=scan)
        # float32 against float64: relative 1e-5 of the output scale (a few hundred ulps
        # through two projections, a scan of 23 steps and the gate)
        np.testing.assert_allclose(y, ref, rtol=0, atol=1e-5 * np.max(np.abs(ref)))


def test_causal_reads_only_the_prefix_and_padding_carries_the_state(params):
    x = jax.random.normal(jax.random.key(3), (1, 12, 8))
    x2 = x.at[:, 8:].set(5.0)
    y, y2 = _mixer(params, x), _mixer(params, x2)
    np.testing.assert_allclose(y[:, :8], y2[:, :8], rtol=1e-6)
    yb, yb2 = (_mixer(params, v, causal=False) for v in (x, x2))
    assert float(jnp.max(jnp.abs(yb[:, :8] - yb2[:, :8]))) > 1e-3   # reads the suffix
    # padded tail (mask False): the real tokens' outputs, both directions, are those of the
    # unpadded sequence
    mask = jnp.arange(12)[None] < 8
    for causal in (True, False):
        for scan in ("parallel", "fused"):
            short = _mixer(params, x[:, :8], causal=causal, scan=scan)
            padded = _mixer(params, x2, causal=causal, mask=mask, scan=scan)
            np.testing.assert_allclose(padded[:, :8], short, rtol=1e-5, atol=1e-6)


def test_bad_input(params):
    with pytest.raises(ValueError, match="x: expected"):
        ssm.ssm_mixer(params, jnp.zeros((2, 5, 7)))
    with pytest.raises(ValueError, match="mask: expected"):
        ssm.ssm_mixer(params, jnp.zeros((2, 5, 8)), mask=jnp.ones((2, 4), bool))
    with pytest.raises(ValueError, match="scan: expected"):
        ssm.ssm_mixer(params, jnp.zeros((2, 5, 8)), scan="sequential")
    with pytest.raises(ValueError, match="n, rank"):
        ssm.init(jax.random.key(0), 8, n=0)
