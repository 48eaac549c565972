"""``gmtheory bench``: throughput measured against a baseline in the same process.

Methodology: jit, one warm-up call, ``block_until_ready``, median of ``repeats``.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from .cache import atomic_write_bytes
from .mixture import GaussianMixture
from .operators import online_softmax, softmax_limit_blocked
from .stats import fit_loglog

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


def _bar(name: str, progress: bool, **kw):
    """The progress bar of ``gmtheory bench NAME`` (stderr; hidden by ``--no-progress``)."""
    return tqdm(desc=f"bench {name}", disable=not progress, leave=False, **kw)


def _exp_bound(tokens, u, V, *, chunk: int):
    """The exp-bound limit of finite-prompt softmax attention: per chunk of tokens, the
    two matmuls and one ``exp`` per score, ``out = sum_chunks exp(u X^T) (X V^T)``, and
    nothing else (no running max, no rescaling, no normalisation: it overflows for large
    scores and is not attention; it times what any exact softmax must do)."""
    L, n = tokens.shape[0], u.shape[0]
    n_chunks = L // chunk

    def body(i, acc):
        blk = jax.lax.dynamic_slice_in_dim(tokens, i * chunk, chunk, axis=0)
        return acc + jnp.exp(u @ blk.T) @ (blk @ V.T)

    acc = jax.lax.fori_loop(0, n_chunks, body, jnp.zeros((n, V.shape[0]), tokens.dtype))
    tail = tokens[n_chunks * chunk:]                      # static: L need not divide
    return acc + jnp.exp(u @ tail.T) @ (tail @ V.T) if tail.shape[0] else acc


def _xla_attention(tokens, u, V):
    """``jax.nn.dot_product_attention`` (XLA implementation) on the same queries and
    tokens: queries ``u`` (already multiplied by ``U``), keys ``tokens``, values
    ``tokens V^T``, scale 1."""
    q, k, v = u[None, :, None], tokens[None, :, None], (tokens @ V.T)[None, :, None]
    return jax.nn.dot_product_attention(q, k, v, scale=1.0, implementation="xla")[0, :, 0]


def _compiled(fn, *args):
    """AOT-compiled ``fn`` and its compiled temporary memory (bytes; NaN if unknown)."""
    c = jax.jit(fn).lower(*args).compile()
    return c, _temp_bytes(c)


def bench_operator(quick: bool = False, repeats: int = 5, dtype=jnp.float32,
                   progress: bool = False, queries: int = 1000, tokens: int | None = None,
                   closed_queries: int | None = None, chunks=(512, 1024, 2048)) -> dict:
    """Closed-form and finite-prompt attention throughput, with three baselines timed in
    the same process.

    * closed form (Prop. 2.1): ``10^6`` queries, K = 16, d = 32 (``quick``: 10^5);
    * finite-prompt softmax attention (:func:`gmtheory.operators.online_softmax`, the
      fastest of ``chunks``): ``queries = 10^3`` queries x ``tokens = 10^6`` tokens,
      d = 16 (``quick``: 10^5 tokens), reported as a fraction of the throughput of

      - the **exp-bound limit**: a program that does only the two matmuls and one
        ``exp`` per score, in the same chunks (fastest chunk);
      - ``jax.nn.dot_product_attention`` (XLA implementation) on the same queries and
        tokens, at the largest token count ``tokens / 2^j`` whose compiled temporary
        memory times ``MEMORY_SAFETY`` fits the available memory (it materialises every
        score); the operator is timed again at that count, and the agreement of the two
        is their max |difference| over max |output|;
      - one dense matmul of equal flop count (``4 n L d``).

    Every program is compiled ahead of time, its temporary memory read from XLA's
    memory analysis, and timed as the median of ``repeats`` after a warm-up
    (compilation excluded).
    """
    key = jax.random.key(0)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    res = {"dtype": jnp.dtype(dtype).name, "backend": jax.default_backend(),
           "devices": len(jax.devices()), "repeats": repeats}
    n, d = int(queries), 16
    L = int(tokens or (10**5 if quick else 10**6))
    chunks = tuple(c for c in chunks if c <= L) or (L,)
    bar = _bar("operator", progress, total=3 + 2 * len(chunks))

    # closed form
    K, dc = 16, 32
    nq = int(closed_queries or (10**5 if quick else 10**6))
    w = jnp.full((K,), 1.0 / K, dtype)
    means = jax.random.normal(k1, (K, dc), dtype)
    covs = jnp.broadcast_to(0.1 * jnp.eye(dc, dtype=dtype), (K, dc, dc))
    mix = GaussianMixture(w, means, covs)
    U = 0.1 * jax.random.normal(k2, (dc, dc), dtype)
    V = jnp.eye(dc, dtype=dtype)
    z = jax.random.normal(k3, (nq, dc), dtype)
    t = time_fn(softmax_limit_blocked, mix, U, V, z, repeats=repeats)
    bar.update()
    res["closed_form"] = {"queries": nq, "K": K, "d": dc, "seconds": t, "queries_per_s": nq / t}

    # finite prompt: the operator and the exp-bound program, each at its fastest chunk
    toks = jax.random.normal(k4, (L, d), dtype)
    u = 0.1 * jax.random.normal(k2, (n, d), dtype)
    Vd = jnp.eye(d, dtype=dtype)
    op, xb = {}, {}
    for c in chunks:
        f, mem = _compiled(lambda t_, u_, c=c: online_softmax(t_, u_, Vd, chunk=c)[0], toks, u)
        op[c] = (time_fn(f, toks, u, repeats=repeats), mem, f)
        bar.update()
        g, mem = _compiled(lambda t_, u_, c=c: _exp_bound(t_, u_, Vd, chunk=c), toks, u)
        xb[c] = (time_fn(g, toks, u, repeats=repeats), mem)
        bar.update()
    best = min(op, key=lambda c: op[c][0])
    best_xb = min(xb, key=lambda c: xb[c][0])
    t_op = op[best][0]
    flops = 4.0 * n * L * d
    N = int(round((flops / 2.0) ** (1.0 / 3.0)))
    A = jax.random.normal(k1, (N, N), dtype)
    B = jax.random.normal(k2, (N, N), dtype)
    mm = jax.jit(jnp.matmul)
    t_mm = time_fn(mm, A, B, repeats=repeats) * flops / (2.0 * N**3)
    bar.update()
    res["finite_prompt"] = {
        "queries": n, "tokens": L, "d": d, "best_chunk": best, "seconds": t_op,
        "temp_bytes": op[best][1], "gflops": flops / t_op / 1e9,
        "chunk_seconds": {str(c): op[c][0] for c in chunks},
        "exp_bound_seconds": xb[best_xb][0], "exp_bound_chunk": best_xb,
        "exp_bound_chunk_seconds": {str(c): xb[c][0] for c in chunks},
        "fraction_of_exp_bound": xb[best_xb][0] / t_op,
        "matmul_equal_flops_seconds": t_mm, "matmul_gflops": flops / t_mm / 1e9,
        "fraction_of_matmul": t_mm / t_op, "matmul_size": N,
    }

    # jax.nn.dot_product_attention (XLA) at the most tokens that fit in memory
    have = available_memory_bytes()
    res["xla_attention"] = tried = {"available_bytes": have, "not_run": []}
    Lx = L
    while True:
        tx = toks[:Lx]
        g, mem = _compiled(lambda t_, u_: _xla_attention(t_, u_, Vd), tx, u)
        if MEMORY_SAFETY * mem <= have:
            break
        tried["not_run"].append({"tokens": Lx, "temp_bytes": mem})
        del g
        if Lx // 2 < 1:
            g = None
            break
        Lx //= 2
    if g is not None:
        cx = min(best, Lx)
        f, mem_op = (op[best][2], op[best][1]) if Lx == L else _compiled(
            lambda t_, u_: online_softmax(t_, u_, Vd, chunk=cx)[0], tx, u)
        t_x = time_fn(g, tx, u, repeats=repeats)
        t_o = t_op if Lx == L else time_fn(f, tx, u, repeats=repeats)
        ref, out = np.asarray(g(tx, u), np.float64), np.asarray(f(tx, u), np.float64)
        tried.update({
            "tokens": Lx, "seconds": t_x, "temp_bytes": mem, "operator_seconds": t_o,
            "operator_chunk": cx, "operator_temp_bytes": mem_op,
            "fraction_of_xla": t_x / t_o,
            "max_rel_diff": float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))})
    bar.close()
    return res


def format_operator(res: dict) -> str:
    c, f, x = res["closed_form"], res["finite_prompt"], res["xla_attention"]
    mib = 2.0**-20
    lines = [
        f"backend {res['backend']} ({res['devices']} device(s)), dtype {res['dtype']}, "
        f"median of {res.get('repeats', '?')} after a warm-up (compilation excluded)",
        f"closed form (Prop. 2.1): {c['queries']:,} queries, K={c['K']}, d={c['d']}: "
        f"{c['seconds']:.3f} s  ->  {c['queries_per_s']:.3g} queries/s",
        f"finite-prompt softmax (online_softmax): {f['queries']:,} queries x {f['tokens']:,} "
        f"tokens, d={f['d']} (chunk {f['best_chunk']}): {f['seconds']:.3f} s = "
        f"{f['gflops']:.1f} GFLOP/s, temp {f['temp_bytes'] * mib:.1f} MiB",
        f"exp-bound limit (2 matmuls + 1 exp per score, chunk {f['exp_bound_chunk']}): "
        f"{f['exp_bound_seconds']:.3f} s -> operator at {f['fraction_of_exp_bound']:.2f} "
        "of it",
        f"dense matmul, same flops ({f['matmul_size']}^3 scaled): "
        f"{f['matmul_equal_flops_seconds']:.3f} s = {f['matmul_gflops']:.1f} GFLOP/s -> "
        f"operator at {f['fraction_of_matmul']:.2f} of it",
    ]
    for r in x["not_run"]:
        lines.append(f"jax.nn.dot_product_attention (xla) at {r['tokens']:,} tokens: not run, "
                     f"needs {MEMORY_SAFETY:g} x {r['temp_bytes'] / 2**30:.1f} GiB temp, "
                     f"{x['available_bytes'] / 2**30:.1f} GiB available")
    if "seconds" in x:
        lines.append(
            f"jax.nn.dot_product_attention (xla), same {f['queries']:,} queries x "
            f"{x['tokens']:,} tokens: {x['seconds']:.3f} s, temp "
            f"{x['temp_bytes'] * mib:.1f} MiB; operator there {x['operator_seconds']:.3f} s, "
            f"temp {x['operator_temp_bytes'] * mib:.1f} MiB -> operator "
            + (f"{x['fraction_of_xla']:.2f}x faster" if x["fraction_of_xla"] >= 1 else
               f"at {x['fraction_of_xla']:.2f} of its speed")
            + f"; max |diff| / max |out| {x['max_rel_diff']:.1e}")
    return "\n".join(lines)


BENCHES = {"operator": (bench_operator, format_operator)}


# ------------------------------------------------------------------------------ GMA
def _temp_bytes(compiled) -> float:
    """XLA's temporary-memory estimate of a compiled executable (NaN if not reported)."""
    try:
        return float(compiled.memory_analysis().temp_size_in_bytes)
    except Exception:  # backend without memory analysis
        return float("nan")


def available_memory_bytes() -> float:
    """Memory the OS can still give this process (``MemAvailable``), or inf if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return 1024.0 * float(line.split()[1])
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return float("inf")


# Peak resident memory over XLA's compiled temporary-memory estimate; measured 1.75 for
# xla softmax forward+backward at N = 8192 on the CPU (7.2 GiB peak for a 4.1 GiB
# estimate), so a case is run only if twice its estimate is available.
MEMORY_SAFETY = 2.0


def _gma_methods(params, heads, dh):
    from . import gma

    def split(x, W):
        return (x @ W).reshape(x.shape[0], x.shape[1], heads, dh)

    def softmax_xla(p, x):
        q, k, v = split(x, p["q"]), split(x, p["k"]), split(x, p["v"])
        y = jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="xla")
        return y.reshape(x.shape)

    def linear_elu(p, x):
        q = jax.nn.elu(split(x, p["q"])) + 1
        k = jax.nn.elu(split(x, p["k"])) + 1
        v = split(x, p["v"])
        S = jnp.cumsum(jnp.einsum("bnhd,bnhe->bnhde", k, v), axis=1)
        z = jnp.cumsum(k, axis=1)
        y = jnp.einsum("bnhd,bnhde->bnhe", q, S) / (jnp.einsum("bnhd,bnhd->bnh", q, z)[..., None]
                                                    + 1e-6)
        return y.reshape(x.shape)

    def gma_cumsum(p, x):
        rq, rk, v = gma.routes(p, x)
        S = jnp.cumsum(rk[..., :, None] * v[..., None, :], axis=2)  # (H,B,N,K,dv): N K dv
        n = jnp.cumsum(rk, axis=2)
        y = jnp.einsum("hbnk,hbnkd->hbnd", rq, S) / (jnp.einsum("hbnk,hbnk->hbn", rq, n)[..., None]
                                                    + 1e-6)
        H, B, N, dv = y.shape
        return jnp.transpose(y, (1, 2, 0, 3)).reshape(B, N, H * dv) @ p.Wo

    return {
        "gma-causal": (params, lambda p, x: gma.gma_attention(p, x, causal=True, chunk=128)),
        "gma-bidirectional": (params, lambda p, x: gma.gma_attention(p, x)),
        "gma-causal-cumsum": (params, gma_cumsum),
        "softmax-xla-causal": (None, softmax_xla),
        "linear-elu-causal": (None, linear_elu),
    }


def bench_gma(quick: bool = False, repeats: int = 10, dtype=jnp.float32,
              progress: bool = False, Ns=None, methods=None, partial=None) -> dict:
    """GMA vs xla softmax, elu+1 linear attention and naive cumsum GMA (the GMA benchmarks,
    docs/topics/gma.md#gaussian-mixture-attention-gmtheorygma).

    d_model = 64, 4 heads; forward and forward+backward; median of ``repeats`` after a
    warm-up; compiled temporary memory from XLA's memory analysis. A case whose
    estimate times ``MEMORY_SAFETY`` exceeds the memory available is not run and is
    listed under ``"skipped"`` (on a 24 GiB machine: xla softmax at N = 16384).
    ``Ns`` overrides the sequence lengths (default 2^9..2^16, ``quick``: 2^9..2^12) and
    ``methods`` restricts the methods (default: all five). With ``partial`` (a path),
    each finished case is written there atomically and a rerun with the same repeats,
    dtype and backend reuses those cases instead of measuring them again; the file is
    removed when the run completes.
    """
    from . import gma

    d_model, heads = 64, 4
    dh = d_model // heads
    Ns = list(Ns or [2**k for k in range(9, 13 if quick else 17)])
    Ks = (16,) if quick else (16, 64)
    key = jax.random.key(0)
    base = {n: 0.125 * jax.random.normal(jax.random.fold_in(key, i), (d_model, d_model), dtype)
            for i, n in enumerate("qkv")}
    known = list(_gma_methods(gma.init(key, d_model, heads=heads, K=Ks[0]), heads, dh))
    unknown = sorted(set(methods or ()) - set(known))
    if unknown:
        raise ValueError(f"methods: unknown {unknown}; choose from {known}.")
    cases = []
    for K in Ks:
        params = gma.init(key, d_model, heads=heads, K=K, dtype=dtype)
        for name, (p, f) in _gma_methods(params, heads, dh).items():
            if name.startswith(("softmax", "linear")) and K != Ks[0]:
                continue
            if methods is not None and name not in methods:
                continue
            for N in Ns:
                if name.startswith("softmax") and N > 2**14:
                    continue  # fwd+bwd estimate >= 64 GiB beyond 2^14: not even compiled
                if name == "gma-causal-cumsum" and N * K * dh * heads > 2**27:
                    continue
                cases.append((name, K, base if p is None else p, f, N))
    header = {"backend": jax.default_backend(), "dtype": jnp.dtype(dtype).name,
              "repeats": repeats}
    done = _load_partial(partial, header)
    rows, skipped = [], []
    for name, K, p, f, N in _bar("gma", progress, iterable=cases):
        ident = (name, K if name.startswith("gma") else None, N)
        if ident in done:  # measured by an interrupted earlier run
            kind, entry = done[ident]
            (skipped if kind == "skipped" else rows).append(entry)
            continue
        if partial is not None and (rows or skipped):
            atomic_write_bytes(Path(partial), json.dumps(
                {**header, "rows": rows, "skipped": skipped}).encode())
        x = jax.random.normal(jax.random.fold_in(key, N), (1, N, d_model), dtype)
        kind, row = _measure_gma_case(name, K, p, f, N, x, repeats)
        (skipped if kind == "skipped" else rows).append(row)
    if partial is not None and Path(partial).exists():
        Path(partial).unlink()
    return summarise_gma({"rows": rows, "skipped": skipped, "Ns": Ns, "Ks": list(Ks), **header})


def _measure_gma_case(name, K, p, f, N, x, repeats) -> tuple[str, dict]:
    """One case of :func:`bench_gma`: ``("rows", row)`` with times and compiled temporary
    memory, or ``("skipped", row)`` when the memory estimate does not fit."""
    # compiled once, ahead of time: the executable whose memory is reported is timed
    fwd = jax.jit(lambda p_, x_: f(p_, x_)).lower(p, x).compile()
    fb = jax.jit(jax.grad(lambda p_, x_: jnp.sum(f(p_, x_) ** 2))).lower(p, x).compile()
    row = {"method": name, "K": K if name.startswith("gma") else None, "N": N,
           "fwd_temp_bytes": _temp_bytes(fwd), "fwdbwd_temp_bytes": _temp_bytes(fb)}
    need = MEMORY_SAFETY * max(row["fwd_temp_bytes"], row["fwdbwd_temp_bytes"])
    have = available_memory_bytes()
    if need > have:  # running it would get the process OOM-killed
        return "skipped", {**row, "needed_bytes": need, "available_bytes": have}
    row["fwd_s"] = time_fn(fwd, p, x, repeats=repeats)
    row["fwdbwd_s"] = time_fn(fb, p, x, repeats=repeats)
    return "rows", row


def _load_partial(path, header: dict) -> dict:
    """Cases of an interrupted ``bench_gma`` run, by (method, K, N), if its header matches."""
    if path is None or not Path(path).exists():
        return {}
    try:
        old = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError):
        return {}  # unreadable: measure everything again
    if any(old.get(k) != v for k, v in header.items()):
        return {}
    return {(e["method"], e["K"], e["N"]): (kind, e)
            for kind in ("rows", "skipped") for e in old.get(kind, ())}


GOAL_N = 16384  # the N of GMA's speed and memory goals (docs/topics/gma.md)
SLOPE_MIN_N = 2048  # slopes are fitted over N >= this


def summarise_gma(res: dict) -> dict:
    """Slopes, crossover and goal ratios of a ``bench_gma`` result, from its rows alone.

    Slopes are log-log fits over N >= 2048. The ratios are taken at ``GOAL_N`` when both
    methods were measured there, otherwise at the largest N both were measured at (the
    quick profile stops at 4096). Recomputing this from a saved JSON gives the same
    summary as the run that wrote it.
    """
    rows, K0 = res["rows"], res["Ks"][0]
    res = {**res, "slopes": {}}

    def series(method, K, field):
        pts = [(r["N"], r[field]) for r in rows if r["method"] == method and r["K"] == K]
        return np.array(pts, float).T if pts else np.zeros((2, 0))

    def at(n, vals, N):
        return vals[n == N][0]

    def ref_N(common):
        return GOAL_N if GOAL_N in common else max(common)

    big = [n for n in res["Ns"] if n >= SLOPE_MIN_N]
    res["slope_Ns"] = big
    for r in sorted({(r["method"], r["K"] or 0) for r in rows}):
        K = r[1] or None
        for field in ("fwd_s", "fwdbwd_s", "fwdbwd_temp_bytes"):
            n, t = series(r[0], K, field)
            sel = np.isin(n, big) & np.isfinite(t) & (t > 0)
            if sel.sum() >= 2:
                res["slopes"][f"{r[0]}[K={K}] {field}"] = fit_loglog(n[sel], t[sel]).slope
    n_s, t_s = series("softmax-xla-causal", None, "fwdbwd_s")
    n_g, t_g = series("gma-causal", K0, "fwdbwd_s")
    common = [n for n in n_g if n in n_s]
    faster = [n for n in common if at(n_g, t_g, n) < at(n_s, t_s, n)]
    res["crossover_N"] = float(min(faster)) if faster else None
    if common:
        ref = ref_N(common)
        res["ratio_N"] = ref
        res["softmax_over_gma_fwdbwd"] = float(at(n_s, t_s, ref) / at(n_g, t_g, ref))
    n_c, m_c = series("gma-causal-cumsum", K0, "fwdbwd_temp_bytes")
    n_m, m_g = series("gma-causal", K0, "fwdbwd_temp_bytes")
    common = [n for n in n_c if n in n_m]
    if common:
        ref = ref_N(common)
        res["memory_ratio_N"] = ref
        res["cumsum_over_chunked_memory"] = float(at(n_c, m_c, ref) / at(n_m, m_g, ref))
    return res


def format_gma(res: dict) -> str:
    lines = [f"backend {res['backend']}, dtype {res['dtype']}, median of {res['repeats']}; "
             "d_model 64, 4 heads",
             f"{'method':<22} {'K':>4} {'N':>7} {'fwd s':>9} {'fwd+bwd s':>10} {'temp MiB':>9}"]
    for r in res["rows"]:
        lines.append(f"{r['method']:<22} {r['K'] or '-':>4} {r['N']:>7} {r['fwd_s']:9.4f} "
                     f"{r['fwdbwd_s']:10.4f} {r['fwdbwd_temp_bytes'] / 2**20:9.1f}")
    for r in res.get("skipped", ()):
        lines.append(f"{r['method']:<22} {r['K'] or '-':>4} {r['N']:>7}  not run: needs about "
                     f"{r['needed_bytes'] / 2**30:.1f} GiB ({MEMORY_SAFETY:g} x XLA's "
                     f"{r['fwdbwd_temp_bytes'] / 2**30:.1f} GiB estimate), "
                     f"{r['available_bytes'] / 2**30:.1f} GiB available")
    sn = res.get("slope_Ns") or [SLOPE_MIN_N]
    lines.append(f"log-log slopes over N = {min(sn)}..{max(sn)} ({len(sn)} sizes; goal <= 1.15 "
                 "for GMA" + ("" if len(sn) > 2 else "; two sizes only, so indicative: run "
                              "without --quick for the goal") + "):")
    for k, v in sorted(res["slopes"].items()):
        lines.append(f"  {k:<48} {v:+.3f}")
    cross = res["crossover_N"]
    lines.append("crossover N (causal GMA fwd+bwd faster than xla softmax): "
                 + ("none measured" if cross is None else f"{cross:g}"))
    if "ratio_N" in res:
        lines.append(f"xla softmax / causal GMA fwd+bwd time at N = {res['ratio_N']:g}: "
                     f"{res['softmax_over_gma_fwdbwd']:.1f}x (goal >= 10 at N = {GOAL_N}"
                     + ("" if res["ratio_N"] == GOAL_N else
                        f"; N = {res['ratio_N']:g} is the largest N measured for both")
                     + ")")
    if "memory_ratio_N" in res:
        lines.append(f"cumsum / chunked causal GMA fwd+bwd temp memory at N = "
                     f"{res['memory_ratio_N']:g}: {res['cumsum_over_chunked_memory']:.1f}x "
                     f"(goal >= 3 at N = {GOAL_N})")
    return "\n".join(lines)


BENCHES["gma"] = (bench_gma, format_gma)


def plot_gma(res: dict, path) -> None:
    """Time (forward+backward) and compiled temporary memory against N, log–log, with
    N^1 and N^2 guides; each legend entry carries its log-log slope from ``res['slopes']``
    (fitted over ``res['slope_Ns']``), and the titles count the GMA forms that meet the
    slope goal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .figures import style_path

    goal = 1.15                                     # time/memory slope goal (docs/topics/gma.md)
    sn = res.get("slope_Ns") or [SLOPE_MIN_N]
    slopes = res["slopes"]
    with plt.style.context(str(style_path())):
        fig, axes = plt.subplots(1, 2, figsize=(13, 6.4))
        keys = sorted({(r["method"], r["K"] or 0) for r in res["rows"]})
        for metric, ax, scale in (("fwdbwd_s", axes[0], 1.0),
                                  ("fwdbwd_temp_bytes", axes[1], 2.0**-20)):
            for i, (method, K) in enumerate(keys):
                pts = sorted((r["N"], r[metric]) for r in res["rows"]
                             if r["method"] == method and (r["K"] or 0) == K)
                n, y = (np.array(v, float) for v in zip(*pts, strict=True))
                s = slopes.get(f"{method}[K={K or None}] {metric}")
                lab = method + (f" (K={K})" if K else "") + ("" if s is None else
                                                             f": slope {s:.2f}")
                ax.loglog(n, y * scale, "o" + ("--" if K == 64 else "-"), ms=3, label=lab,
                          color=f"C{i % 8}")
            # guides: N below every curve; N^2 above the steepest (softmax) curve's start
            n0 = min(r["N"] for r in res["rows"])
            nn = np.geomspace(n0, max(r["N"] for r in res["rows"]), 20)
            y_lo = 0.4 * min(r[metric] for r in res["rows"] if r["N"] == n0) * scale
            ax.loglog(nn, y_lo * nn / n0, color="0.45", lw=1.2, ls=(0, (1, 1.5)),
                      label="∝ N guide")
            y_hi = 1.5 * max(r[metric] for r in res["rows"] if r["N"] == n0) * scale
            top = nn <= n0 * 2**5.5
            ax.loglog(nn[top], y_hi * (nn[top] / n0) ** 2, color="0.45", lw=1.2, ls="-.",
                      label="∝ N² guide")
            ax.axvspan(min(sn), max(sn), color="0.96", zorder=0,
                       label=f"slope fit range N = {min(sn)}–{max(sn)}")
            ax.set_xlabel("sequence length N")
            gma = {k: v for k, v in slopes.items() if k.startswith("gma") and
                   k.endswith(" " + metric)}
            soft = [v for k, v in slopes.items() if k.startswith("softmax")
                    and k.endswith(" " + metric)]
            what = ("forward + backward time" if metric == "fwdbwd_s"
                    else "compiled temporary memory")
            ax.set_title(f"{what}: log-log slope of the {len(gma)} GMA forms "
                         f"{min(gma.values()):.2f}–{max(gma.values()):.2f}"
                         + (f", softmax {soft[0]:.2f}" if soft else "")
                         + f"\nslope goal ≤ {goal:g} for GMA: met by "
                         f"{sum(v <= goal for v in gma.values())} of {len(gma)}", fontsize=10)
        axes[0].set_ylabel(f"forward + backward time (s, median of {res['repeats']} runs)")
        axes[1].set_ylabel("compiled temporary memory (MiB)")
        for ax in axes:
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
        note = (f"d_model 64, 4 heads, {res['dtype']}, backend {res['backend']}, "
                f"median of {res['repeats']} runs after warm-up; slopes fitted over "
                f"N = {min(sn)}–{max(sn)} ({len(sn)} sizes).")
        skipped = [f"{r['method']} at N = {r['N']} (needs ~{r['needed_bytes'] / 2**30:.0f} GiB, "
                   f"{r['available_bytes'] / 2**30:.0f} GiB available)"
                   for r in res.get("skipped", ())]
        if skipped:
            note += " Not run, too large for memory: " + "; ".join(skipped) + "."
        fig.tight_layout()
        fig.text(0.01, -0.01, note, fontsize=9, style="italic", va="top")
        fig.savefig(path)
        plt.close(fig)


def bench_lda(quick: bool = False, repeats: int = 3, order: int | None = None,
              progress: bool = False) -> dict:
    """Population gradient descent on C1 (Fig. 1 protocol): wall time of ``10^5`` steps
    (``quick``: ``2*10^4``) through the training engine (:func:`gmtheory.lda.gradient_descent`,
    i.e. :func:`gmtheory.training.train`: ``lax.scan`` in blocks; the time of a whole call,
    so whatever the engine traces or compiles per call is included), against baselines in
    the same process: the same jitted step called from a Python loop (one dispatch per
    step; 2000 steps, scaled to the same count), and autodiff of an
    x-space tensor Gauss–Hermite risk in a scan (what a direct implementation would
    do; fixed nodes, so no sharp-gate alignment either).  float64, analytic
    Lemma B.10 gradients, Gauss–Hermite order 64 (d = 2: 4096 nodes per class)."""
    from . import lda

    prob = lda.config("C1")
    steps = 20_000 if quick else 100_000
    order = order or lda.DEFAULT_ORDER
    th0 = lda.table3_start("theta2", prob)
    lr = 1e-4
    bar = _bar("lda", progress, total=3)  # scan, Python loop, autodiff baseline
    t0 = time.perf_counter()
    jax.block_until_ready(lda.gradient_descent(prob, th0, lr, steps, steps, order,
                                               progress=False))
    first = time.perf_counter() - t0
    scan_s = time_fn(lambda: lda.gradient_descent(prob, th0, lr, steps, steps, order,
                                                  progress=False), repeats=repeats)
    bar.update()

    # Baseline 1, kept as a hand-written update on purpose (issue #12 keeps the benchmark's
    # own baselines): its point is one Python-level dispatch per step, which is what the
    # engine's lax.scan removes; routing it through gmtheory.training.train would remove
    # exactly the cost it measures.
    @jax.jit
    def step(th):
        g = lda.grad(prob, th, order)
        return jax.tree.map(lambda a, b: a - lr * b, th, g)

    n_loop = 2000

    def loop():
        th = th0
        for _ in range(n_loop):
            th = step(th)
        return th

    loop_s = time_fn(loop, repeats=1) * steps / n_loop
    bar.update()

    # Baseline 2, kept as a plain autodiff loop on purpose (issue #12 keeps the benchmark's
    # own baselines): what a direct implementation would write, jax.grad of an x-space
    # tensor-GH risk (fixed nodes, same order) in a bare lax.scan, without the engine's NaN
    # guard or checkpoints; its point is the cost of the gradient, not of the engine.
    from .quadrature import gauss_hermite_rule

    t, om = gauss_hermite_rule(order, 2)
    Xc = [prob.m_pos + t @ prob.chol.T, prob.m_neg + t @ prob.chol.T]

    def risk_x(th):
        return sum(p * om @ jax.nn.softplus(-c * lda.predictor(prob, th, x))
                   for c, p, x in ((1.0, prob.pi_pos, Xc[0]), (-1.0, 1 - prob.pi_pos, Xc[1])))

    @jax.jit
    def ad_run(th):
        def body(th, _):
            return jax.tree.map(lambda a, b: a - lr * b, th, jax.grad(risk_x)(th)), None
        return jax.lax.scan(body, th, None, length=steps)[0]

    ad_s = time_fn(ad_run, th0, repeats=1)
    bar.close()
    return {"steps": steps, "order": order, "scan_s": scan_s, "first_call_s": first,
            "python_loop_s_scaled": loop_s, "speedup_vs_loop": loop_s / scan_s,
            "autodiff_tensor_s": ad_s, "speedup_vs_autodiff": ad_s / scan_s,
            "us_per_step": 1e6 * scan_s / steps, "backend": jax.default_backend(),
            "devices": jax.device_count(), "target_s_for_1e5": 60.0}


def format_lda(res: dict) -> str:
    per_1e5 = res["scan_s"] * 1e5 / res["steps"]
    return "\n".join([
        f"LDA population GD on C1 (float64, GH order {res['order']}, analytic gradients), "
        f"backend {res['backend']}",
        f"{res['steps']:,} steps through the training engine (lax.scan blocks): "
        f"{res['scan_s']:.2f} s "
        f"({res['us_per_step']:.0f} us/step; first call incl. compilation "
        f"{res['first_call_s']:.2f} s)",
        f"baseline, jitted step from a Python loop: {res['python_loop_s_scaled']:.2f} s for the "
        f"same count -> scan is {res['speedup_vs_loop']:.2f}x faster (the step dominates)",
        f"baseline, autodiff of an x-space tensor-GH risk in a scan: "
        f"{res['autodiff_tensor_s']:.2f} s -> {res['speedup_vs_autodiff']:.2f}x",
        f"10^5 steps: {per_1e5:.1f} s (target < {res['target_s_for_1e5']:.0f} s): "
        + ("met" if per_1e5 < res["target_s_for_1e5"] else "MISSED"),
    ])


BENCHES["lda"] = (bench_lda, format_lda)


def bench_gma_profile(quick: bool = False, repeats: int = 10, progress: bool = False) -> dict:
    """Where GMA's forward time goes (K = 16, d_model = 64, 4 heads, float32): the whole
    layer (bidirectional; causal with chunk 128), the routing (projections and
    responsibilities of all heads, :func:`gmtheory.gma.routes`), the bidirectional
    contraction, and one head's responsibilities and projection, for N = 2048 ... 65536
    (``quick``: to 8192)."""
    from . import gma

    key = jax.random.key(0)
    d, H, K = 64, 4, 16
    params = gma.init(key, d, heads=H, K=K)
    fns = {
        "forward_bidirectional": jax.jit(lambda p, x: gma.gma_attention(p, x)),
        "forward_causal": jax.jit(lambda p, x: gma.gma_attention(p, x, causal=True, chunk=128)),
        "routing_all_heads": jax.jit(lambda p, x: gma.routes(p, x)),
        "responsibilities_1head": jax.jit(lambda p, x: gma.responsibilities(p, x @ p.Wq[0], 0)),
        "projection_1head": jax.jit(lambda p, x: x @ p.Wq[0]),
    }
    contract = jax.jit(lambda rq, rk, v: gma.bidirectional_contraction(rq, rk, v))
    rows = []
    Ns = (2048, 8192) if quick else (2048, 8192, 32768, 65536)
    for N in _bar("gma-profile", progress, iterable=Ns):
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


BENCHES["gma-profile"] = (bench_gma_profile, format_gma_profile)


AUTHORS_ICL_SECONDS = {10: 18.0, 32: 260.0, 64: 4393.0}


def _timed_process(cmd, cwd, env=None) -> tuple[float, str]:
    """Wall time of ``cmd`` as a whole process (interpreter start, imports, compilation and
    all) and its last output line; raises with the output's tail if it fails."""
    import subprocess

    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode:
        tail = (r.stdout + r.stderr)[-2000:]
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed in {cwd} (exit {r.returncode}):\n"
                           f"{tail}")
    lines = (r.stdout + r.stderr).strip().splitlines()
    return dt, lines[-1] if lines else ""


def _peer_quick_figure(peer, d: int, workdir) -> tuple[float, str]:
    """The authors' ``run.py --d=d`` from ``workdir``, a fresh copy of ``peer`` (their
    ``code/`` folder or the folder above it): seconds of the whole process."""
    import shutil
    import sys

    src = Path(peer)
    for cand in (src, src / "code"):
        if (cand / "quick_and_easy_figure" / "run.py").exists():
            src = cand
            break
    else:
        raise ValueError(f"--peer: {peer!s} has no quick_and_easy_figure/run.py (pass the "
                         "authors' code folder, e.g. shared/external/lu2025-quick-figure/code).")
    dst = Path(workdir) / f"peer_d{d}"
    shutil.copytree(src, dst)
    run_dir = dst / "quick_and_easy_figure"
    (run_dir / "saved_data").mkdir(exist_ok=True)
    return _timed_process([sys.executable, "run.py", f"--d={d}", f"--name=bench_d{d}"], run_dir)


def _our_quick_figure_process(d: int, trials: int, draws: int) -> float:
    """Our quick figure at ``d`` as a whole process, with the persistent XLA cache off
    (compilation included, as for the authors' script)."""
    import sys

    env = {**os.environ, "GMTHEORY_NO_JAX_CACHE": "1", "JAX_ENABLE_COMPILATION_CACHE": "false"}
    code = (f"from gmtheory import icl; icl.quick_figure({d}, trials={trials}, "
            f"draws={draws}); print('done')")
    return _timed_process([sys.executable, "-c", code], os.getcwd(), env)[0]


ICL_GOALS = {10: ("ratio", 3.0), 32: ("ratio", 20.0), 64: ("seconds", 120.0)}


def bench_icl(quick: bool = False, repeats: int = 1, dims=None, trials: int = 20,
              draws: int = 1000, progress: bool = False, peer=None) -> dict:
    """The authors' CPU quick figure (:func:`gmtheory.icl.quick_figure`,
    docs/topics/icl.md#the-authors-quick-figure) at
    d = 10, 32, 64 (``quick``: d = 10; with ``peer``: d = 10, 32): wall time (first run in
    the process, compilation included), the agreement with the authors' saved means and
    with the asymptotic theory.

    ``peer``: the authors' code folder.  Each d then also runs their ``run.py`` from a
    temporary copy of it and ours as a separate process with the XLA cache off, both timed
    as whole processes on this machine in this run, and reports the ratio (goals: >= 3x at
    d = 10, >= 20x at d = 32, d = 64 in <= 120 s).  Without ``peer`` the ratio is to the
    times that the authors report for their login node (not this machine)."""
    import tempfile

    from . import icl

    dims = dims or ((10,) if quick else (10, 32) if peer else (10, 32, 64))
    out = {"kappas": icl.QUICK_FIGURE["kappas"], "trials": trials, "draws": draws, "rows": [],
           "peer": None if peer is None else str(peer), "cpus": os.cpu_count(),
           "loadavg_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="gmtheory-peer-") as tmp:
        for d in _bar("icl", progress, iterable=dims):
            t0 = time.perf_counter()
            row = icl.quick_figure(d, trials=trials, draws=draws)
            row["seconds"] = time.perf_counter() - t0
            row["authors_seconds"] = AUTHORS_ICL_SECONDS.get(d)
            if peer is not None:
                row["process_seconds"] = _our_quick_figure_process(d, trials, draws)
                row["peer_seconds"], row["peer_output"] = _peer_quick_figure(peer, d, tmp)
                row["peer_ratio"] = row["peer_seconds"] / row["process_seconds"]
            row["loadavg"] = os.getloadavg()[0]
            out["rows"].append(row)
    return out


def format_icl(res: dict) -> str:
    lines = [f"linear-attention ICL quick figure: 12 kappa in [0.2, 32], alpha = tau = 10, "
             f"rho = 0.01, lambda = 1e-6, {res['trials']} trials, dMMSE {res['draws']} draws"]
    if "loadavg_start" in res:
        lines.append(f"{res.get('cpus', '?')} CPUs; 1-min load average {res['loadavg_start']:.1f}"
                     " at the start (other work on the machine slows both sides alike only "
                     "roughly)")
    for r in res["rows"]:
        a_s = r["authors_seconds"]
        if "peer_seconds" in r:
            kind, goal = ICL_GOALS.get(r["d"], ("ratio", float("nan")))
            met = (r["peer_ratio"] >= goal) if kind == "ratio" else (r["process_seconds"]
                                                                     <= goal)
            goal_s = (f"goal >= {goal:g}x" if kind == "ratio" else f"goal <= {goal:g} s")
            ratio = (f"; same machine, whole processes, compilation included: ours "
                     f"{r['process_seconds']:.1f} s, authors' run.py {r['peer_seconds']:.1f} s"
                     f" -> {r['peer_ratio']:.1f}x ({goal_s}: {'met' if met else 'NOT met'})")
        else:
            ratio = (f"; authors report {a_s:.0f} s on their login node (another machine) -> "
                     f"{a_s / r['seconds']:.1f}x" if a_s else "")
            kind, goal = ICL_GOALS.get(r["d"], ("ratio", None))
            if kind == "seconds":
                ratio += (f" (goal <= {goal:g} s on this machine: "
                          f"{'met' if r['seconds'] <= goal else 'NOT met'})")
        load = f" (load {r['loadavg']:.1f})" if "loadavg" in r else ""
        lines.append(f"d = {r['d']}{load}: {r['seconds']:.1f} s in this process (first call, "
                     f"compilation included){ratio}; max CG residual "
                     f"{r['max_cg_residual']:.1e}")
        lines.append("  kappa   g_task (ours +- SE)   authors    z     ridgeless theory (d->inf)")
        for i, k in enumerate(res["kappas"]):
            a = r.get("authors_g_task", [np.nan] * 12)[i]
            z = r.get("z_vs_authors", [np.nan] * 12)[i]
            lines.append(f"  {k:5.1f}   {r['g_task'][i]:.4f} +- {r['g_task_se'][i]:.4f}   "
                         f"{a:.4f}  {z:+5.2f}   {r['theory_g_task_ridgeless'][i]:.4f}")
        if "z_vs_authors" in r:
            lines.append(f"  max |z| vs the authors' saved means: g_task "
                         f"{np.max(np.abs(r['z_vs_authors'])):.2f}, dMMSE gap "
                         f"{np.max(np.abs(r['z_dmmse_vs_authors'])):.2f}")
    return "\n".join(lines)


BENCHES["icl"] = (bench_icl, format_icl)
