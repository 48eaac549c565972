"""``gmtheory bench``: throughput measured against a baseline in the same process.

Methodology: jit, one warm-up call, ``block_until_ready``, median of ``repeats``.
"""

from __future__ import annotations

import statistics
import time

import jax
import jax.numpy as jnp

from .mixture import GaussianMixture
from .operators import _softmax_limit, _softmax_scan

__all__ = ["time_fn", "bench_operator", "BENCHES"]


def time_fn(fn, *args, repeats: int = 5) -> float:
    """Median wall time of ``fn(*args)`` after one warm-up (blocks until ready)."""
    jax.block_until_ready(fn(*args))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench_operator(quick: bool = False, repeats: int = 5, dtype=jnp.float32) -> dict:
    """Closed-form and finite-prompt attention throughput.

    * closed form (Prop. 2.1): ``10^6`` queries, K = 16, d = 32 (``quick``: 10^5);
    * finite-prompt softmax attention: ``10^3`` queries x ``10^6`` tokens, d = 16
      (``quick``: 10^5 tokens), reported as a fraction of the throughput of one
      dense matmul with the same flop count (``4 n L d``), timed in the same run.
    """
    key = jax.random.key(0)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    res = {"dtype": jnp.dtype(dtype).name, "backend": jax.default_backend(),
           "devices": len(jax.devices())}

    # closed form
    K, d, nq = 16, 32, (10**5 if quick else 10**6)
    w = jnp.full((K,), 1.0 / K, dtype)
    means = jax.random.normal(k1, (K, d), dtype)
    covs = jnp.broadcast_to(0.1 * jnp.eye(d, dtype=dtype), (K, d, d))
    mix = GaussianMixture(w, means, covs)
    U = 0.1 * jax.random.normal(k2, (d, d), dtype)
    V = jnp.eye(d, dtype=dtype)
    z = jax.random.normal(k3, (nq, d), dtype)
    t = time_fn(_softmax_limit, mix, U, V, z, repeats=repeats)
    res["closed_form"] = {"queries": nq, "K": K, "d": d, "seconds": t, "queries_per_s": nq / t}

    # finite prompt vs matmul of equal flops
    n, L, d = 1000, (10**5 if quick else 10**6), 16
    toks = jax.random.normal(k4, (L, d), dtype)
    u = 0.1 * jax.random.normal(k2, (n, d), dtype)
    Vd = jnp.eye(d, dtype=dtype)
    best = None
    for chunk in (512, 1024, 2048):
        f = jax.jit(lambda t_, u_, c=chunk: _softmax_scan(t_, u_, Vd, chunk=c, with_se=False)[0])
        tt = time_fn(f, toks, u, repeats=repeats)
        if best is None or tt < best[1]:
            best = (chunk, tt)
    flops = 4.0 * n * L * d
    N = int(round((flops / 2.0) ** (1.0 / 3.0)))
    A = jax.random.normal(k1, (N, N), dtype)
    B = jax.random.normal(k2, (N, N), dtype)
    mm = jax.jit(jnp.matmul)
    t_mm = time_fn(mm, A, B, repeats=repeats) * flops / (2.0 * N**3)
    res["finite_prompt"] = {
        "queries": n, "tokens": L, "d": d, "best_chunk": best[0], "seconds": best[1],
        "gflops": flops / best[1] / 1e9, "matmul_equal_flops_seconds": t_mm,
        "matmul_gflops": flops / t_mm / 1e9, "fraction_of_matmul": t_mm / best[1],
        "matmul_size": N,
    }
    return res


def format_operator(res: dict) -> str:
    c, f = res["closed_form"], res["finite_prompt"]
    return "\n".join([
        f"backend {res['backend']} ({res['devices']} device(s)), dtype {res['dtype']}",
        f"closed form (Prop. 2.1): {c['queries']:,} queries, K={c['K']}, d={c['d']}: "
        f"{c['seconds']:.3f} s  ->  {c['queries_per_s']:.3g} queries/s",
        f"finite-prompt softmax: {f['queries']:,} queries x {f['tokens']:,} tokens, d={f['d']} "
        f"(chunk {f['best_chunk']}): {f['seconds']:.3f} s = {f['gflops']:.1f} GFLOP/s",
        f"dense matmul, same flops ({f['matmul_size']}^3 scaled): "
        f"{f['matmul_equal_flops_seconds']:.3f} s = {f['matmul_gflops']:.1f} GFLOP/s",
        f"fraction of matmul throughput: {f['fraction_of_matmul']:.2f} (goal >= 0.5)",
    ])


BENCHES = {"operator": (bench_operator, format_operator)}
