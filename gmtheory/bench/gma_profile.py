"""``gmtheory bench gma-profile``: where GMA's forward time goes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .. import gma
from .._xla import jit_long
from ..stats import fit_loglog
from ._runner import progress_bar, time_fn

__all__ = ["bench_gma_profile", "format_gma_profile"]


def bench_gma_profile(*, quick: bool = False, repeats: int = 10,
                      progress: bool = False) -> dict:
    """Where GMA's forward time goes (K = 16, d_model = 64, 4 heads, float32): the whole
    layer (bidirectional; causal with chunk 128), the routing (projections and
    responsibilities of all heads, :func:`gmtheory.gma.routes`), the bidirectional
    contraction, and one head's responsibilities and projection, for N = 2048 ... 65536
    (``quick``: to 8192)."""
    key = jax.random.key(0)
    d, H, K = 64, 4, 16
    params = gma.init(key, d, heads=H, K=K)
    fns = {
        "forward_bidirectional": jit_long(lambda p, x: gma.gma_attention(p, x)),
        "forward_causal": jit_long(lambda p, x: gma.gma_attention(p, x, causal=True, chunk=128)),
        "routing_all_heads": jit_long(lambda p, x: gma.routes(p, x)),
        "responsibilities_1head": jit_long(lambda p, x: gma.responsibilities(p, x @ p.Wq[0], 0)),
        "projection_1head": jit_long(lambda p, x: x @ p.Wq[0]),
    }
    contract = jit_long(lambda rq, rk, v: gma.bidirectional_contraction(rq, rk, v))
    rows = []
    Ns = (2048, 8192) if quick else (2048, 8192, 32768, 65536)
    for N in progress_bar("gma-profile", progress, iterable=Ns):
        x = jax.random.normal(key, (1, N, d), jnp.float32)
        row = {"N": N, **{k: time_fn(f, params, x, repeats=repeats) for k, f in fns.items()}}
        rq, rk, v = fns["routing_all_heads"](params, x)
        row["contraction_bidirectional"] = time_fn(contract, rq, rk, v, repeats=repeats)
        rows.append(row)
    Ns = np.array([r["N"] for r in rows], float)
    slopes = {k: fit_loglog(Ns, [r[k] for r in rows]).slope for k in rows[0] if k != "N"}
    return {"rows": rows, "slopes": slopes, "repeats": repeats, "backend": jax.default_backend()}


def format_gma_profile(res: dict) -> str:
    keys = [k for k in res["rows"][0] if k != "N"]
    lines = ["GMA forward profile (K=16, d_model=64, 4 heads, float32; ms, median of "
             f"{res['repeats']}; ns/token in brackets)"]
    for k in keys:
        cells = ", ".join(f"N={r['N']}: {1e3 * r[k]:.2f} [{1e9 * r[k] / r['N']:.0f}]"
                          for r in res["rows"])
        lines.append(f"{k:<27} slope {res['slopes'][k]:.3f}; {cells}")
    return "\n".join(lines)

