"""The small GMA experiments of issue 27 (``gma-ablations``): each row's mechanism tested
on its own, cheaply, and the whole experiment end to end at tiny overrides (one compiled
model configuration for all rows that train; the rest under ``-m slow``)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

from gmtheory import gma
from gmtheory import gma_models as GM
from gmtheory.gma_analysis import usage_entropy_array
from gmtheory.simulations import run_simulation
from gmtheory.simulations.gma_ablations import linear_router_gap, usage_entropy_loss
from gmtheory.simulations.gma_sims import seq_ce
from gmtheory.training import set_progress

matplotlib.use("Agg")

TINY = dict(mixers=("gma",), d_model=8, depth=1, heads=2, mlp_hidden=16, K=4, features=4,
            steps=8, batch=4, records=2, seeds=2, width=16, n_train=32, n_val=8,
            max_train_bytes=20_000, max_val_bytes=5_000, copy_data=4, router_samples=256)


@pytest.fixture(autouse=True)
def _quiet():
    set_progress(False)
    yield
    set_progress(True)


def _lm_model(key, **kw):
    cfg = GM.ModelConfig(mixer="gma", causal=True, d_model=8, depth=2, heads=2, mlp_hidden=16,
                         K=4, vocab=32, n_out=32, max_len=12, **kw)
    return GM.build(cfg, key)


def test_isotropic_variance_is_a_linear_router_and_per_component_scales_are_not():
    """With one scale for every component and dimension, the log-responsibility ratios are
    affine in z, so the least-squares linear router is exact (float64 round-off); with
    scales per component they are quadratic, and the best linear router misses."""
    with jax.enable_x64(True):
        p = gma.init(jax.random.key(0), 3, heads=1, K=5, d_r=3, dtype=jnp.float64)
        z = jax.random.normal(jax.random.key(1), (512, 3), jnp.float64)
        iso = p._replace(rho=jnp.full_like(p.rho, -0.4))
        aniso = p._replace(rho=jax.random.normal(jax.random.key(2), p.rho.shape, jnp.float64))
        g_iso, g_aniso = linear_router_gap(iso, z), linear_router_gap(aniso, z)
    assert g_iso["max_abs"] < 1e-12 and g_iso["log_ratio_residual"] < 1e-12
    assert g_aniso["max_abs"] > 0.05 and g_aniso["log_ratio_residual"] > 0.05


def test_slot_normalisation_reaches_the_layer():
    """ModelConfig(normalisation="slot") runs GMA's per-slot read-out: the model's mixer
    output is the layer's with normalisation="slot", and differs from "query"."""
    key = jax.random.key(3)
    x = jax.random.normal(key, (2, 12, 8))
    outs = {}
    for norm in ("query", "slot"):
        m = _lm_model(key, normalisation=norm)
        mix = m.blocks[0].mixer
        outs[norm] = mix(x)
        ref = gma.gma_attention(mix.gma, x, causal=True, chunk=min(mix.chunk, 12),
                                normalisation=norm)
        np.testing.assert_allclose(outs[norm], ref, rtol=1e-6, atol=1e-6)
    assert float(jnp.max(jnp.abs(outs["query"] - outs["slot"]))) > 1e-3
    with pytest.raises(ValueError, match="normalisation"):
        GM.ModelConfig(normalisation="key")


def test_usage_entropy_loss_is_cross_entropy_minus_the_weighted_entropy():
    """The auxiliary loss against the two terms computed apart (the entropy by
    gma_analysis.usage_entropy_array on gma.routes of each layer's normalised input)."""
    key = jax.random.key(4)
    model = _lm_model(key)
    toks = jax.random.randint(key, (6, 12), 0, 32)
    data = {"tokens": toks, "label": jnp.roll(toks, -1, 1)}
    k = jax.random.key(5)
    idx = jax.random.randint(k, (4,), 0, 6)

    @eqx.filter_jit
    def apart(model):
        ce = seq_ce(model, toks[idx], data["label"][idx], False)[0]
        ents = []
        for blk, x in zip(model.blocks, GM.mixer_outputs(model, toks[idx]), strict=True):
            _, rk, _ = gma.routes(blk.mixer.gma, blk.ln1(x))
            ents += [usage_entropy_array(rk[h]) for h in range(rk.shape[0])]
        return ce, jnp.mean(jnp.stack(ents))

    # each side compiled once (op by op, the eager computations took 25 s in the suite)
    ce, ent = apart(model)
    val_grad = jax.jit(jax.value_and_grad(lambda m: usage_entropy_loss(4, 0.5)(m, data, k)))
    got, g = val_grad(model)
    np.testing.assert_allclose(float(got), float(ce) - 0.5 * float(ent), rtol=1e-5)
    assert float(jnp.max(jnp.abs(g.blocks[0].mixer.gma.mu))) > 0      # the term trains mu


def test_kmeans_means_are_projected_tokens_of_the_residual_stream():
    """k-means++ seeds every mean at a data point: each seeded mean of each layer is the
    projection of one of the normalised residual-stream vectors entering that layer."""
    key = jax.random.key(6)
    model = _lm_model(key)
    toks = jax.random.randint(key, (4, 12), 0, 32)
    seeded = GM.seed_gma_means(model, toks, jax.random.key(7))
    for i, blk in enumerate(seeded.blocks):
        z = blk.ln1(GM.mixer_outputs(seeded, toks)[i]).reshape(-1, 8)
        for h in range(2):
            pts = z @ blk.mixer.gma.Wk[h]                               # (48, d_r)
            d = jnp.min(jnp.sum((blk.mixer.gma.mu[h][:, None] - pts[None]) ** 2, -1), 1)
            assert float(jnp.max(d)) < 1e-10
    assert not np.allclose(seeded.blocks[0].mixer.gma.mu, model.blocks[0].mixer.gma.mu)
    # the seeded model keeps every leaf's dtype: a float64 mean in a float32 model compiled a
    # second training program and trained in mixed precision
    assert ([x.dtype for x in jax.tree.leaves(seeded)]
            == [x.dtype for x in jax.tree.leaves(model)])
    with pytest.raises(ValueError, match="tokens"):
        gma.kmeanspp_means(model.blocks[0].mixer.gma, jnp.zeros((3, 5)), key)


def test_bad_config():
    from gmtheory.simulations import get_simulation, make_config

    def cfg(name, **kw):
        return make_config(get_simulation(name), overrides=kw)

    with pytest.raises(ValueError, match="experiments"):
        cfg("gma-ablations", experiments=("dropout",))
    with pytest.raises(ValueError, match="copy_data"):
        cfg("gma-ablations", copy_data=32)
    with pytest.raises(ValueError, match="sharp_tau0"):
        cfg("gma-ablations", sharp_tau0=0.0)
    with pytest.raises(ValueError, match="copy_symbols"):
        cfg("gma-ablations", copy_symbols=300)
    with pytest.raises(ValueError, match="listops_steps"):
        cfg("gma-recall", listops_steps=-5)


def test_copy_and_router_rows_run_and_draw(tmp_path):
    """Two rows end to end (one compiled model); the trained LM rows run under -m slow,
    their mechanisms are tested above."""
    from gmtheory.figures import get_figure

    cfg = dict(TINY, experiments=("selective-copy", "isotropic-router"))
    a, meta, _ = run_simulation("gma-ablations", "quick", cfg, results_dir=tmp_path,
                                progress=False)
    assert a["isotropic-router/iso_max_abs"].shape == (2,)
    assert np.all(a["isotropic-router/iso_max_abs"] < 1e3 * a["isotropic-router/eps"])
    assert np.all(a["isotropic-router/aniso_max_abs"] > 0.05)
    acc = a["selective-copy/gma/acc"]
    assert acc.shape == (2,) and np.all((acc >= 0) & (acc <= 1))
    assert float(a["selective-copy/chance"]) == 1 / 8
    fig = get_figure("gma-ablations").draw(a, meta)
    fig.savefig(tmp_path / "a.png")


@pytest.mark.slow
def test_every_row_runs(tmp_path):
    a, _, _ = run_simulation("gma-ablations", "quick", TINY, results_dir=tmp_path,
                             progress=False)
    for k in ("slot-normalisation/slot/val_bpb", "usage-entropy-loss/aux/dead_fraction",
              "kmeans-init/kmeans/val_bpb"):
        assert np.all(np.isfinite(a[k]))
    assert np.all(a["kmeans-init/kmeans/dead_fraction"] >= 0)
    # the read-out row's baselines: byte count models on the same bytes (issue 44)
    bpb = a["slot-normalisation/ngram/bpb"]
    assert bpb.shape == (5,) and bpb[1] < bpb[0] < 8.0
