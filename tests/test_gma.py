import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gmtheory import gma


def _params(K, lowrank=0, d_model=12, heads=2, dtype=jnp.float64, key=0):
    return gma.init(jax.random.key(key), d_model, heads=heads, K=K, lowrank_rank=lowrank,
                    dtype=dtype)


# every pair of (K and low rank, causal, normalisation) values in the default run (each
# case compiles two programs: the suite's time is compilation); the full product is -m slow
_PAIRWISE = {((1, 0), False, "query"), ((1, 0), True, "slot"), ((4, 2), False, "slot"),
             ((4, 2), True, "query"), ((64, 0), False, "query"), ((64, 0), True, "slot")}
CASES = [(K, lr, c, nm, 37, 8) if ((K, lr), c, nm) in _PAIRWISE
         else pytest.param(K, lr, c, nm, 37, 8, marks=pytest.mark.slow)
         for (K, lr), c, nm in itertools.product([(1, 0), (4, 2), (64, 0)], [False, True],
                                                 ["query", "slot"])]
CASES += [(4, 0, True, "query", 16, 16), (4, 0, True, "slot", 5, 128)]


@pytest.mark.parametrize("K,lowrank,causal,norm,N,chunk", CASES)
def test_matches_naive_float64(K, lowrank, causal, norm, N, chunk):
    p = _params(K, lowrank)
    x = jax.random.normal(jax.random.key(1), (3, N, 12))
    mask = jnp.arange(N)[None] < jnp.array([N, max(1, N - 7), 2])[:, None]
    # jitted: one program each instead of one per primitive (the suite's cold compile time)
    a = jax.jit(lambda p, x, m: gma.gma_attention(p, x, causal=causal, chunk=chunk, mask=m,
                                                  normalisation=norm))(p, x, mask)
    b = jax.jit(lambda p, x, m: gma.naive_attention(p, x, causal=causal, mask=m,
                                                    normalisation=norm))(p, x, mask)
    np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


def test_matches_naive_float32():
    p = _params(16, dtype=jnp.float32)
    x = jax.random.normal(jax.random.key(2), (2, 100, 12), jnp.float32)
    for causal in (False, True):
        a = jax.jit(lambda p, x, c=causal: gma.gma_attention(p, x, causal=c, chunk=32))(p, x)
        with jax.default_matmul_precision("highest"):
            b = jax.jit(lambda p, x, c=causal: gma.naive_attention(p, x, causal=c))(p, x)
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_responsibilities_match_explicit_gaussians():
    p = _params(5, lowrank=2)
    z = jax.random.normal(jax.random.key(3), (20, p.mu.shape[-1]))
    h = 1
    sigma = gma.SIGMA_MIN + jax.nn.softplus(p.rho[h])
    logp = []
    for c in range(5):
        Lam = jnp.diag(sigma[c] ** -2) + p.lowrank[h, c] @ p.lowrank[h, c].T
        diff = z - p.mu[h, c]
        logp.append(-0.5 * jnp.einsum("ni,ij,nj->n", diff, Lam, diff)
                    + 0.5 * jnp.linalg.slogdet(Lam)[1])
    logits = jax.nn.log_softmax(p.mix_logits[h])[None] + jnp.stack(logp, 1)
    ref = jax.nn.softmax(logits / jnp.exp(p.log_tau[h]), axis=1)
    np.testing.assert_allclose(gma.responsibilities(p, z, h), ref, rtol=1e-10, atol=1e-13)


def test_responsibility_gradient_formula():
    """dr_c/dz = (r_c / tau) (g_c - sum_j r_j g_j), g_c = -Lambda_c (z - mu_c)."""
    p = _params(6, lowrank=2)
    h = 0
    z = jax.random.normal(jax.random.key(4), (p.mu.shape[-1],))
    J = jax.jit(jax.jacfwd(lambda q: gma.responsibilities(p, q[None], h)[0]))(z)
    sigma = gma.SIGMA_MIN + jax.nn.softplus(p.rho[h])
    Lam = jax.vmap(lambda s, U: jnp.diag(s**-2) + U @ U.T)(sigma, p.lowrank[h])
    g = -jnp.einsum("kij,kj->ki", Lam, z[None] - p.mu[h])
    r = gma.responsibilities(p, z[None], h)[0]
    analytic = (r / jnp.exp(p.log_tau[h]))[:, None] * (g - r @ g)
    np.testing.assert_allclose(J, analytic, rtol=1e-9, atol=1e-12)


def test_affinity_nonnegative_low_rank_psd():
    p = _params(4)
    p = p._replace(Wk=p.Wq)  # W_q = W_k: A = R R^T is PSD
    x = jax.random.normal(jax.random.key(5), (1, 30, 12))
    rq, rk, _ = gma.routes(p, x, None)
    A = np.asarray(rq[0, 0] @ rk[0, 0].T)
    assert A.min() >= 0
    assert np.linalg.matrix_rank(A, tol=1e-10) <= 4
    ev = np.linalg.eigvalsh(0.5 * (A + A.T))
    assert ev.min() >= -1e-12 * ev.max()


def test_local_lipschitz_bound():
    """|r(z1) - r(z2)| <= B(R) |z1 - z2| on the ball |z| <= R, with
    B(R) = max_{c,c'} (|Lam_c - Lam_c'|_op R + |Lam_c mu_c - Lam_c' mu_c'|) / tau."""
    p = _params(5)
    h = 0
    d = p.mu.shape[-1]
    R = 2.0
    sigma = np.asarray(gma.SIGMA_MIN + jax.nn.softplus(p.rho[h]))
    p = p._replace(rho=p.rho.at[h].set(p.rho[h] + jax.random.normal(jax.random.key(6),
                                                                     p.rho[h].shape)))
    sigma = np.asarray(gma.SIGMA_MIN + jax.nn.softplus(p.rho[h]))
    lam, mu = sigma**-2, np.asarray(p.mu[h])
    B = max(np.max(np.abs(lam[a] - lam[b])) * R + np.linalg.norm(lam[a] * mu[a] - lam[b] * mu[b])
            for a in range(5) for b in range(5)) / float(np.exp(p.log_tau[h]))
    key = jax.random.key(7)
    u = jax.random.normal(key, (20000, d))
    u = u / jnp.linalg.norm(u, axis=1, keepdims=True) * R * jax.random.uniform(
        jax.random.fold_in(key, 1), (20000, 1)) ** (1 / d)
    z1, z2 = u[:10000], u[10000:]
    z2 = z1 + 0.01 * (z2 - z1)  # nearby pairs probe the local constant
    ratio = jnp.linalg.norm(gma.responsibilities(p, z1, h) - gma.responsibilities(p, z2, h),
                            axis=1) / jnp.linalg.norm(z1 - z2, axis=1)
    assert float(ratio.max()) <= B
    assert float(ratio.max()) > 1e-3 * B  # the bound is not vacuous by orders of magnitude


def test_bf16_long_sequence():
    """bf16 inputs over N = 1e5 keep relative error < 1e-2 against float64."""
    p32 = _params(8, d_model=8, heads=1, dtype=jnp.float32)
    x = jax.random.normal(jax.random.key(8), (1, 100_000, 8))
    p16 = jax.tree_util.tree_map(lambda a: a.astype(jnp.bfloat16), p32)
    x16 = x.astype(jnp.bfloat16)
    p64 = jax.tree_util.tree_map(lambda a: a.astype(jnp.float64), p16)
    for causal in (True, False):
        y16 = gma.gma_attention(p16, x16, causal=causal, chunk=256)
        assert y16.dtype == jnp.bfloat16
        y64 = gma.gma_attention(p64, x16.astype(jnp.float64), causal=causal, chunk=256)
        rel = float(jnp.linalg.norm(y16.astype(jnp.float64) - y64) / jnp.linalg.norm(y64))
        assert rel < 1e-2, (causal, rel)


def test_kmeanspp_init_and_errors():
    toks = jnp.concatenate([jax.random.normal(jax.random.key(9), (50, 12)) + 5.0 * i
                            for i in range(3)])
    p = gma.init(jax.random.key(10), 12, heads=2, K=3, tokens=toks, dtype=jnp.float64)
    proj = toks @ p.Wk[0]
    d2 = jnp.min(jnp.sum((proj[:, None] - p.mu[0][None]) ** 2, -1), 1)
    assert float(jnp.mean(d2)) < float(jnp.mean(jnp.sum((proj - proj.mean(0)) ** 2, 1)))
    x = jnp.ones((2, 5, 12))
    with pytest.raises(ValueError, match="normalisation"):
        gma.gma_attention(p, x, normalisation="bogus")
    with pytest.raises(ValueError, match="x: expected shape"):
        gma.gma_attention(p, jnp.ones((2, 5, 7)))
    with pytest.raises(ValueError, match="mask: expected shape"):
        gma.gma_attention(p, x, mask=jnp.ones((2, 4), bool))
    with pytest.raises(ValueError, match="K, heads"):
        gma.init(jax.random.key(0), 12, K=0)
    y = gma.gma_attention(p, x[0])  # unbatched input
    assert y.shape == (5, 12)


def test_bench_report_and_figure(tmp_path):
    from gmtheory.bench import GOAL_N, format_gma, plot_gma, summarise_gma

    # Synthetic rows with known answers: GMA time and memory linear in N, softmax time
    # quadratic and equal to GMA's at N = 512; the cumsum form needs 2x the chunked
    # form's memory up to GOAL_N and 4x beyond it, so the goal ratio must be read at
    # GOAL_N, not at the largest N.
    Ns = (512, 1024, 2048, 4096, GOAL_N, 2 * GOAL_N)
    rows = []
    for m, K in (("gma-causal", 16), ("softmax-xla-causal", None), ("gma-causal-cumsum", 16)):
        for N in Ns:
            if m.startswith("softmax") and N > GOAL_N:
                continue
            t = 1e-6 * N * (N / 512 if m.startswith("softmax") else 1)
            mem = 100.0 * N * ((2 if N <= GOAL_N else 4) if m.endswith("cumsum") else 1)
            rows.append({"method": m, "K": K, "N": N, "fwd_s": t, "fwdbwd_s": 2 * t,
                         "fwd_temp_bytes": mem, "fwdbwd_temp_bytes": mem})
    res = summarise_gma({"rows": rows, "Ns": list(Ns), "Ks": [16], "backend": "cpu",
                         "dtype": "float32", "repeats": 10})
    for form in ("unfused", "fused"):  # split at gma.FUSED_MIN_N["causal"] = 4096
        assert res["slopes"][f"gma-causal[K=16, {form}] fwdbwd_s"]["slope"] == \
            pytest.approx(1.0, abs=1e-12)
    assert res["slopes"]["softmax-xla-causal[K=None] fwdbwd_s"]["slope"] == \
        pytest.approx(2.0, abs=1e-12)
    assert res["crossover_N"] == 1024.0  # equal at 512 is not faster
    assert res["ratio_N"] == GOAL_N
    assert res["softmax_over_gma_fwdbwd"] == pytest.approx(GOAL_N / 512, rel=1e-12)
    assert res["memory_ratio_N"] == GOAL_N
    assert res["cumsum_over_chunked_memory"] == pytest.approx(2.0, rel=1e-12)
    text = format_gma(res)
    assert "crossover N" in text and "gma-causal" in text
    plot_gma(res, tmp_path / "b.png")
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


def test_bench_slopes_never_span_the_fused_switch(tmp_path):
    """Issue 27: a GMA slope is fitted over one form only.  Synthetic timings linear in N
    on each side of gma.FUSED_MIN_N but 8x cheaper past it: a fit across the switch would
    give a slope far below 1; the fits per form give exactly 1, over ranges that
    gma.uses_fused puts on one side.  The repeats' spread is kept and drawn."""
    from gmtheory.bench import format_gma, plot_gma, summarise_gma
    from gmtheory.bench.gma import fit_ranges, run_spread

    Ns = [2**k for k in range(9, 17)]
    rows = []
    for m, causal in (("gma-causal", True), ("gma-bidirectional", False)):
        for N in Ns:
            t = 1e-6 * N / (8 if gma.uses_fused(N, causal) else 1)
            rows.append({"method": m, "K": 16, "N": N, "fwd_s": t, "fwdbwd_s": 2 * t,
                         "fwdbwd_s_runs": [1.8 * t, 2 * t, 2.4 * t], "fwd_temp_bytes": 1e3 * N,
                         "fwdbwd_temp_bytes": 1e3 * N})
    res = summarise_gma({"rows": rows, "Ns": Ns, "Ks": [16], "backend": "cpu",
                         "dtype": "float32", "repeats": 3, "fused_min_n": gma.FUSED_MIN_N})
    for m, causal in (("gma-causal", True), ("gma-bidirectional", False)):
        for form in ("unfused", "fused"):
            fit = res["slopes"][f"{m}[K=16, {form}] fwdbwd_s"]
            assert fit["slope"] == pytest.approx(1.0, abs=1e-9) and fit["se"] < 1e-6
            ends = {gma.uses_fused(n, causal) for n in fit["N"]}
            assert ends == {form == "fused"}, (m, form, fit["N"])
            assert fit["sizes"] == sum(gma.uses_fused(n, causal) == (form == "fused")
                                       for n in Ns)
    assert not any(k.startswith("gma-causal[K=16] ") for k in res["slopes"])
    # the thresholds recorded with the run decide, not today's constant
    other = fit_ranges("gma-causal", Ns, {"causal": 1024, "bidirectional": 1024})
    assert other == [("unfused", [512]), ("fused", Ns[1:])]
    assert fit_ranges("linear-elu-causal", Ns) == [("", [n for n in Ns if n >= 2048])]
    with pytest.raises(ValueError, match="fused_min_n"):
        fit_ranges("gma-causal", Ns, {"bidirectional": 1024})
    with pytest.raises(ValueError, match="field"):
        run_spread(rows[0], "fwdbwd_temp_bytes")
    assert run_spread(rows[0]) == pytest.approx((1.9 * rows[0]["fwd_s"], 2.2 * rows[0]["fwd_s"]))
    assert " 15 " in format_gma(res).splitlines()[2]  # IQR: 15 % of the median
    plot_gma(res, tmp_path / "b.png")
    assert (tmp_path / "b.png").read_bytes()[:4] == b"\x89PNG"


def test_figure_index_lists_the_bench_figures():
    from gmtheory import tables
    from gmtheory.bench.plot import BENCH_FIGURES

    index = tables.figures_index()
    assert "bench-gma" in BENCH_FIGURES
    for name, f in BENCH_FIGURES.items():
        assert f"## {name}\n" in index and f"![{name}]({name}.png)" in index
        assert f"`{f.command}`" in index and f"--figure figures/{name}.png" in f.command
    site = tables.figures_index(png_prefix="figures/", report_link="report.md")
    assert "](topics/gma.md#benchmark)" in site and "](figures/bench-gma.png)" in site


def test_bench_runs_and_skips_what_does_not_fit(monkeypatch):
    from gmtheory import bench

    methods = ("gma-causal", "softmax-xla-causal")
    res = bench.bench_gma(quick=True, repeats=1, Ns=(512,), methods=methods)
    assert sorted(r["method"] for r in res["rows"]) == sorted(methods)
    assert all(r["fwd_s"] > 0 and r["fwdbwd_s"] > 0 and r["fwdbwd_temp_bytes"] > 0
               for r in res["rows"])
    assert all(len(r["fwd_s_runs"]) == len(r["fwdbwd_s_runs"]) == 1 for r in res["rows"])
    assert res["skipped"] == [] and res["ratio_N"] == 512
    # With no memory to spare every case is compiled and listed with its estimate, not run.
    monkeypatch.setattr(bench.gma, "available_memory_bytes", lambda: 0.0)
    res = bench.bench_gma(quick=True, repeats=1, Ns=(512,), methods=methods[:1])
    assert res["rows"] == [] and len(res["skipped"]) == 1
    assert all(r["needed_bytes"] == bench.MEMORY_SAFETY * max(r["fwd_temp_bytes"],
                                                                r["fwdbwd_temp_bytes"]) > 0
               for r in res["skipped"])
    text = bench.format_gma(res)
    assert text.count("not run: needs about") == 1 and "none measured" in text
    with pytest.raises(ValueError, match="methods: unknown"):
        bench.bench_gma(quick=True, Ns=(512,), methods=("softmax",))


def test_bench_resumes_from_partial_file(tmp_path, monkeypatch):
    """Cases already in the partial file are reused, not measured again; a file from a
    run with other settings is ignored; the file is gone once the run completes.  The
    resume logic only: each case's measurement is stubbed (it is exercised for real by
    test_bench_runs_and_skips_what_does_not_fit)."""
    import json

    import jax

    from gmtheory import bench

    measured = []

    def fake(name, K, p, f, N, x, repeats):
        measured.append(name)
        return "rows", {"method": name, "K": K if name.startswith("gma") else None, "N": N,
                        "fwd_s": 1.0, "fwdbwd_s": 2.0, "fwd_temp_bytes": 1.0,
                        "fwdbwd_temp_bytes": 1.0}

    monkeypatch.setattr(bench.gma, "_measure_gma_case", fake)
    part = tmp_path / "b.json.partial"
    done = {"method": "gma-causal", "K": 16, "N": 512, "fwd_s": 123.0, "fwdbwd_s": 456.0,
            "fwd_temp_bytes": 1.0, "fwdbwd_temp_bytes": 1.0}
    header = {"backend": jax.default_backend(), "dtype": "float32", "repeats": 1,
              "fused_min_n": gma.FUSED_MIN_N}
    methods = ("gma-causal", "linear-elu-causal")
    part.write_text(json.dumps({**header, "rows": [done], "skipped": []}))
    res = bench.bench_gma(quick=True, repeats=1, Ns=(512,), methods=methods, partial=part)
    rows = {r["method"]: r for r in res["rows"]}
    assert rows["gma-causal"] == done and measured == ["linear-elu-causal"]
    assert not part.exists()
    part.write_text(json.dumps({**header, "repeats": 7, "rows": [done], "skipped": []}))
    measured.clear()
    res = bench.bench_gma(quick=True, repeats=1, Ns=(512,), methods=methods, partial=part)
    assert all(r["fwd_s"] < 123.0 for r in res["rows"]) and not part.exists()
    assert sorted(measured) == sorted(methods)
    # An interruption during the second case leaves the first one on disk.

    def interrupted(name, *a):
        if name == "linear-elu-causal":
            raise KeyboardInterrupt
        return fake(name, *a)

    monkeypatch.setattr(bench.gma, "_measure_gma_case", interrupted)
    with pytest.raises(KeyboardInterrupt):
        bench.bench_gma(quick=True, repeats=1, Ns=(512,), methods=methods, partial=part)
    saved = json.loads(part.read_text())
    assert [r["method"] for r in saved["rows"]] == ["gma-causal"] and saved["repeats"] == 1


FUSED_CASES = [pytest.param(4, 2, False, "query", 37, 8, True, marks=pytest.mark.slow),
               (4, 2, False, "query", 37, 8, False), (4, 2, True, "query", 37, 8, True),
               (1, 0, True, "slot", 300, 64, False), (64, 0, False, "slot", 37, 8, False),
               (4, 0, True, "query", 5, 128, False), (16, 0, False, "query", 300, 64, False)]


@pytest.mark.parametrize("K,lowrank,causal,norm,N,chunk,grad", FUSED_CASES)
def test_fused_routing_matches_materialised_float64(K, lowrank, causal, norm, N, chunk, grad):
    """Routing fused into the chunked scan (issue 14 item 5) = the materialised form
    (padding masks, N not a multiple of the chunk, both normalisations, gradients)."""
    p = _params(K, lowrank)
    x = jax.random.normal(jax.random.key(1), (3, N, 12))
    mask = jnp.arange(N)[None] < jnp.array([N, max(1, N - 7), 2])[:, None]
    m = None if N == 300 else mask
    a = gma.gma_attention(p, x, causal=causal, chunk=chunk, mask=m, normalisation=norm,
                          fused=True)
    b = gma.gma_attention(p, x, causal=causal, chunk=chunk, mask=m, normalisation=norm,
                          fused=False)
    np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)
    if grad:
        f = lambda p, fz: jnp.sum(gma.gma_attention(p, x, causal=causal, chunk=chunk, mask=m,
                                                    normalisation=norm, fused=fz) ** 2)
        ga, gb = jax.grad(f)(p, True), jax.grad(f)(p, False)
        for u, w in zip(jax.tree.leaves(ga), jax.tree.leaves(gb), strict=True):
            np.testing.assert_allclose(u, w, rtol=1e-10, atol=1e-11)


def test_fused_form_chosen_by_length():
    assert not gma.uses_fused(1024, True) and gma.uses_fused(gma.FUSED_MIN_N["causal"], True)
    assert gma.uses_fused(10, False, fused=True) and not gma.uses_fused(10**6, True, False)
    with pytest.raises(ValueError, match="fused"):
        gma.gma_attention(_params(4), jnp.ones((4, 12)), fused="yes")


def test_causal_contraction_matches_prefix_sums():
    rq = jax.random.uniform(jax.random.key(0), (2, 29, 5))
    rk = jax.random.uniform(jax.random.key(1), (2, 29, 5))
    v = jax.random.normal(jax.random.key(2), (2, 29, 3))
    y = gma.causal_contraction(rq, rk, v, chunk=8)
    S = jnp.cumsum(rk[..., :, None] * v[..., None, :], axis=-3)
    n = jnp.cumsum(rk, axis=-2)
    ref = jnp.einsum("bnk,bnkd->bnd", rq, S) / (jnp.einsum("bnk,bnk->bn", rq, n)[..., None]
                                               + 1e-6)
    np.testing.assert_allclose(y, ref, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_fused_form_with_wider_params_than_inputs(causal):
    """float64 projections (gma.init's default under x64) with float32 inputs: the fused
    scan carries the routing's dtype (it once carried float32 and failed to trace, which
    broke `gmtheory bench gma`) and equals the materialised form."""
    p = gma.init(jax.random.key(0), 16, heads=2, K=4)
    assert p.Wq.dtype == jnp.float64
    x = jax.random.normal(jax.random.key(1), (1, 40, 16), jnp.float32)
    a = gma.gma_attention(p, x, causal=causal, chunk=8, fused=True)
    b = gma.gma_attention(p, x, causal=causal, chunk=8, fused=False)
    assert a.dtype == jnp.float32
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


UNINIT_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from gmtheory import gma
p = gma.init(jax.random.key(0), 32, heads=2, K=8)          # gma-lm's shapes: d_v = 16 > K
x = jax.random.normal(jax.random.key(1), (128, 32, 32))
for causal in (True, False):
    for norm in ("query", "slot"):
        for fused in (False, True):
            a = gma.gma_attention(p, x, causal=causal, chunk=32, normalisation=norm,
                                  fused=fused)
            b = jax.jit(lambda p, x: gma.naive_attention(p, x, causal=causal,
                                                         normalisation=norm))(p, x)
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-11,
                                       err_msg=f"causal={causal} {norm} fused={fused}")
print("ok")
"""


def test_no_uninitialised_memory_in_the_compiled_forward():
    """glibc's MALLOC_PERTURB_=1 fills fresh heap memory with 0xfe bytes (doubles of about
    -1e303): a compiled forward that reads memory it never wrote then gives garbage every
    time instead of in one process in four (the gma-lm NaN, docs/topics/gma.md; XLA:CPU
    left the causal chunk's output columns beyond K unwritten)."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MALLOC_PERTURB_": "1", "GMTHEORY_NO_JAX_CACHE": "1"}
    out = subprocess.run([sys.executable, "-c", UNINIT_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


def test_finite_prompt_outputs_forms_agree():
    """gma_analysis.finite_prompt_outputs: the unfused, fused and causal forms read the same
    keys (the queries come after the prompt, masked out as keys) in float64."""
    from gmtheory.gma_analysis import PROMPT_FORMS, finite_prompt_outputs

    p = gma.init(jax.random.key(5), 4, heads=2, K=3, dtype=jnp.float64)
    prompts = jax.random.normal(jax.random.key(6), (2, 50, 4), jnp.float64)
    q = jax.random.normal(jax.random.key(7), (3, 4), jnp.float64)
    outs = [finite_prompt_outputs(p, prompts, q, length=37, form=f) for f in PROMPT_FORMS]
    for o in outs[1:]:
        np.testing.assert_allclose(o, outs[0], rtol=1e-11, atol=1e-13)
    with pytest.raises(ValueError, match="form"):
        finite_prompt_outputs(p, prompts, q, form="sideways")
