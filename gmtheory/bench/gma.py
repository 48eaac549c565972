"""``gmtheory bench gma``: GMA against xla softmax, elu+1 linear attention and naive cumsum
GMA, forward and forward+backward, with compiled temporary memory (resumable)."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from .. import gma
from .._xla import jit_long
from ..cache import atomic_write_bytes
from ..stats import fit_loglog
from ._runner import (
    MEMORY_SAFETY,
    available_memory_bytes,
    progress_bar,
    temp_memory_bytes,
    time_runs,
)

__all__ = ["bench_gma", "format_gma", "summarise_gma", "fit_ranges", "GOAL_N", "SLOPE_MIN_N",
           "GMA_FORMS", "run_spread", "SPREAD", "markdown_gma"]


def _gma_methods(params, heads, dh):
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


def bench_gma(*, quick: bool = False, repeats: int = 10, dtype=jnp.float32,
              progress: bool = False, Ns=None, methods=None, partial=None) -> dict:
    """GMA vs xla softmax, elu+1 linear attention and naive cumsum GMA (the GMA benchmarks,
    docs/topics/gma.md#gaussian-mixture-attention-gmtheorygma).

    d_model = 64, 4 heads; forward and forward+backward; median of ``repeats`` after a
    warm-up (every run's time is kept, ``fwd_s_runs`` and ``fwdbwd_s_runs``, for the
    spread); compiled temporary memory from XLA's memory analysis. A case whose
    estimate times ``MEMORY_SAFETY`` exceeds the memory available is not run and is
    listed under ``"skipped"`` (on a 24 GiB machine: xla softmax at N = 16384).
    ``Ns`` overrides the sequence lengths (default 2^9..2^16, ``quick``: 2^9..2^12) and
    ``methods`` restricts the methods (default: all five). With ``partial`` (a path),
    each finished case is written there atomically and a rerun with the same repeats,
    dtype and backend reuses those cases instead of measuring them again; the file is
    removed when the run completes.
    """
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
              "repeats": repeats, "fused_min_n": dict(gma.FUSED_MIN_N)}
    done = _load_partial(partial, header)
    rows, skipped = [], []
    for name, K, p, f, N in progress_bar("gma", progress, iterable=cases):
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
    fwd = jit_long(lambda p_, x_: f(p_, x_)).lower(p, x).compile()
    fb = jit_long(jax.grad(lambda p_, x_: jnp.sum(f(p_, x_) ** 2))).lower(p, x).compile()
    row = {"method": name, "K": K if name.startswith("gma") else None, "N": N,
           "fwd_temp_bytes": temp_memory_bytes(fwd), "fwdbwd_temp_bytes": temp_memory_bytes(fb)}
    need = MEMORY_SAFETY * max(row["fwd_temp_bytes"], row["fwdbwd_temp_bytes"])
    have = available_memory_bytes()
    if need > have:  # running it would get the process OOM-killed
        return "skipped", {**row, "needed_bytes": need, "available_bytes": have}
    for key, c in (("fwd_s", fwd), ("fwdbwd_s", fb)):
        row[f"{key}_runs"] = time_runs(c, p, x, repeats=repeats)
        row[key] = float(np.median(row[f"{key}_runs"]))
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
SLOPE_MIN_N = 2048  # a method with one form at every N: slopes fitted over N >= this
# the methods that call gma_attention, which switches form at gma.FUSED_MIN_N[direction]
GMA_FORMS = {"gma-causal": "causal", "gma-bidirectional": "bidirectional"}


def fit_ranges(method: str, Ns, fused_min_n=None) -> list[tuple[str, list[int]]]:
    """The sequence lengths of ``Ns`` over which ``method``'s log-log slopes are fitted, as
    ``[(form, Ns), ...]``: one range per form of the computation, never across a switch.

    The methods of :data:`GMA_FORMS` give ``("unfused", N < switch)`` and ``("fused",
    N >= switch)``, the switch being ``fused_min_n[direction]`` (the thresholds the run
    used; default :data:`gmtheory.gma.FUSED_MIN_N`, the rule of
    :func:`gmtheory.gma.uses_fused`); every other method, one form at every N, gives
    ``[("", N >= SLOPE_MIN_N)]``.  Ranges with no size are left out.
    """
    Ns = sorted(int(n) for n in Ns)
    if method not in GMA_FORMS:
        ranges = [("", [n for n in Ns if n >= SLOPE_MIN_N])]
    else:
        thresholds = gma.FUSED_MIN_N if fused_min_n is None else fused_min_n
        try:
            switch = int(thresholds[GMA_FORMS[method]])
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"fused_min_n: expected a threshold for {GMA_FORMS[method]!r} "
                             f"like {gma.FUSED_MIN_N}, got {fused_min_n!r}.") from None
        ranges = [("unfused", [n for n in Ns if n < switch]),
                  ("fused", [n for n in Ns if n >= switch])]
    return [(form, ns) for form, ns in ranges if ns]


def slope_key(method, K, form, field) -> str:
    return f"{method}[K={K}{', ' + form if form else ''}] {field}"


def summarise_gma(res: dict) -> dict:
    """Slopes, crossover and goal ratios of a ``bench_gma`` result, from its rows alone.

    Slopes are least-squares log-log fits of the medians (:func:`gmtheory.stats.fit_loglog`)
    over each range of :func:`fit_ranges`, with the thresholds the run recorded
    (``res["fused_min_n"]``): a GMA form's unfused and fused sizes are fitted apart, never
    across ``FUSED_MIN_N``.  Each slope is ``{"slope", "se", "N": [first, last], "sizes"}``
    (``se`` None for a fit of two sizes), keyed ``method[K=K, form] field``.  The ratios
    are taken at ``GOAL_N`` when both methods were measured there, otherwise at the largest
    N both were measured at (the quick profile stops at 4096).  Recomputing this from a
    saved JSON gives the same summary as the run that wrote it.
    """
    rows, K0 = res["rows"], res["Ks"][0]
    res = {**res, "slopes": {}}
    res.pop("slope_Ns", None)  # one fit range for all: the summary before the forms were split

    def series(method, K, field):
        pts = [(r["N"], r[field]) for r in rows if r["method"] == method and r["K"] == K]
        return np.array(pts, float).T if pts else np.zeros((2, 0))

    def at(n, vals, N):
        return vals[n == N][0]

    def ref_N(common):
        return GOAL_N if GOAL_N in common else max(common)

    for r in sorted({(r["method"], r["K"] or 0) for r in rows}):
        K = r[1] or None
        for field in ("fwd_s", "fwdbwd_s", "fwdbwd_temp_bytes"):
            n, t = series(r[0], K, field)
            for form, span in fit_ranges(r[0], n, res.get("fused_min_n")):
                sel = np.isin(n, span) & np.isfinite(t) & (t > 0)
                if sel.sum() < 2:
                    continue
                fit = fit_loglog(n[sel], t[sel])
                res["slopes"][slope_key(r[0], K, form, field)] = {
                    "slope": fit.slope, "se": fit.stderr if np.isfinite(fit.stderr) else None,
                    "N": [int(n[sel].min()), int(n[sel].max())], "sizes": fit.n}
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


SPREAD = (25, 75)  # percentiles of the repeats shown as the spread: the interquartile range


def run_spread(row: dict, field: str = "fwdbwd_s"):
    """The ``SPREAD`` percentiles ``(low, high)`` of a row's repeated times ``field``
    (``"fwd_s"`` or ``"fwdbwd_s"``), or None for a row that kept only the median."""
    if field not in ("fwd_s", "fwdbwd_s"):
        raise ValueError(f"field: expected 'fwd_s' or 'fwdbwd_s', got {field!r}.")
    runs = row.get(f"{field}_runs")
    return tuple(float(v) for v in np.percentile(runs, SPREAD)) if runs else None


def format_gma(res: dict) -> str:
    lines = [f"backend {res['backend']}, dtype {res['dtype']}, median of {res['repeats']}; "
             "d_model 64, 4 heads; IQR: interquartile range of the fwd+bwd runs / median",
             f"{'method':<22} {'K':>4} {'N':>7} {'fwd s':>9} {'fwd+bwd s':>10} {'IQR %':>6} "
             f"{'temp MiB':>9}"]
    for r in res["rows"]:
        q = run_spread(r)
        iqr = "-" if q is None else f"{100 * (q[1] - q[0]) / r['fwdbwd_s']:.0f}"
        lines.append(f"{r['method']:<22} {r['K'] or '-':>4} {r['N']:>7} {r['fwd_s']:9.4f} "
                     f"{r['fwdbwd_s']:10.4f} {iqr:>6} {r['fwdbwd_temp_bytes'] / 2**20:9.1f}")
    for r in res.get("skipped", ()):
        lines.append(f"{r['method']:<22} {r['K'] or '-':>4} {r['N']:>7}  not run: needs about "
                     f"{r['needed_bytes'] / 2**30:.1f} GiB ({MEMORY_SAFETY:g} x XLA's "
                     f"{r['fwdbwd_temp_bytes'] / 2**30:.1f} GiB estimate), "
                     f"{r['available_bytes'] / 2**30:.1f} GiB available")
    fmin = res.get("fused_min_n") or gma.FUSED_MIN_N
    lines.append("log-log slopes ± SE of the medians (goal <= 1.15 for GMA); GMA's unfused "
                 f"and fused forms fitted apart (fused from N = {fmin['causal']} causal, "
                 f"{fmin['bidirectional']} bidirectional), other methods over N >= "
                 f"{SLOPE_MIN_N}; a fit of two sizes has no SE and is indicative only:")
    for k, v in sorted(res["slopes"].items()):
        se = "" if v["se"] is None else f" ± {v['se']:.3f}"
        lines.append(f"  {k:<52} {v['slope']:+.3f}{se:<8} N = {v['N'][0]}..{v['N'][1]} "
                     f"({v['sizes']} sizes)")
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



def markdown_gma(res: dict) -> str:
    """The Markdown tables of docs/topics/gma.md#benchmark, rendered from a saved
    ``bench_gma`` result (``python -m gmtheory.tables``): the slopes of each GMA form ± SE
    with its fit range, the other methods' fwd+bwd slopes, the per-token fwd+bwd time
    (temporary memory) at each N, the goal ratios and the run's provenance."""
    res = summarise_gma(res)
    sl = res["slopes"]

    def fmt(v):
        if v is None:
            return "—"
        se = v["se"]
        se = "" if se is None else (" ± <0.01" if se < 0.005 else f" ± {se:.2f}")
        return f"{v['slope']:.2f}{se}"

    out = ["| form | fit range | fwd | fwd+bwd | temp memory |", "|---|---|---|---|---|"]
    for form in ("fused", "unfused"):
        for method in ("gma-causal", "gma-bidirectional"):
            for K in res["Ks"]:
                v = {f: sl.get(slope_key(method, K, form, f))
                     for f in ("fwd_s", "fwdbwd_s", "fwdbwd_temp_bytes")}
                if v["fwdbwd_s"] is None:
                    continue
                n = v["fwdbwd_s"]["N"]
                out.append(f"| {method[4:]}, K = {K}, {form} | {n[0]}…{n[1]} "
                           f"({v['fwdbwd_s']['sizes']} sizes) | {fmt(v['fwd_s'])} | "
                           f"{fmt(v['fwdbwd_s'])} | {fmt(v['fwdbwd_temp_bytes'])} |")
    others = []
    for method in ("gma-causal-cumsum", "linear-elu-causal", "softmax-xla-causal"):
        for K in (res["Ks"] if method == "gma-causal-cumsum" else [None]):
            v = sl.get(slope_key(method, K, "", "fwdbwd_s"))
            if v is not None:
                k = f", K = {K}" if K else ""
                others.append(f"{method}{k} {fmt(v)} ({v['N'][0]}…{v['N'][1]})")
    out += ["", "Other methods (one form at every N), fwd+bwd, fitted over N ≥ "
            f"{SLOPE_MIN_N}: " + "; ".join(others) + ".", ""]
    Ns = sorted({r["N"] for r in res["rows"]})
    out += ["Per-token forward+backward time in µs (temporary memory in MiB):", "",
            "| method | " + " | ".join(str(n) for n in Ns) + " |",
            "|---|" + "---|" * len(Ns)]
    skipped = {(r["method"], r["K"], r["N"]) for r in res.get("skipped", ())}
    for method in ("gma-causal", "gma-bidirectional", "gma-causal-cumsum", "linear-elu-causal",
                   "softmax-xla-causal"):
        for K in (res["Ks"] if method.startswith("gma") else [None]):
            by_n = {r["N"]: r for r in res["rows"] if r["method"] == method and r["K"] == K}
            if not by_n:
                continue
            cells = []
            for n in Ns:
                r = by_n.get(n)
                mib = None if r is None else r["fwdbwd_temp_bytes"] / 2**20
                cells.append("not run" if (method, K, n) in skipped else "—" if r is None else
                             f"{1e6 * r['fwdbwd_s'] / n:.1f} ({mib:.0f})")
            k = f", K = {K}" if K else ""
            out.append(f"| {method}{k} | " + " | ".join(cells) + " |")
    out.append("")
    if res.get("softmax_over_gma_fwdbwd") is not None:
        out.append(f"Causal GMA (K = {res['Ks'][0]}) fwd+bwd is "
                   f"{res['softmax_over_gma_fwdbwd']:.0f}× faster than XLA softmax at N = "
                   f"{int(res['ratio_N'])}; the chunked causal form uses "
                   f"{res['cumsum_over_chunked_memory']:.0f}× less temporary memory than the "
                   f"cumsum form at N = {int(res['memory_ratio_N'])}; the crossover with "
                   f"softmax is at N = {int(res['crossover_N'])}.")
    prov = res.get("provenance")
    if prov:
        out.append(f"Measured at commit `{prov['git'][:10]}` (source fingerprint "
                   f"`{res['fingerprint']['digest']}`), {prov['jax_backend']}, jax "
                   f"{prov['jax']}.")
    return "\n".join(out) + "\n"
