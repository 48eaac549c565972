"""The model family of gmtheory.gma_models: mixers, masks, causality, parameter matching."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gmtheory import gma, gma_models
from gmtheory.training import train

BASE = gma_models.ModelConfig(mixer="softmax", causal=True, d_model=16, depth=2, heads=2,
                              mlp_hidden=32, n_out=7, vocab=11, max_len=24, K=4, features=16,
                              chunk=8)


@pytest.mark.parametrize("mixer", gma_models.MIXERS)
def test_causal_models_do_not_look_ahead(mixer):
    cfg = dataclasses.replace(BASE, mixer=mixer)
    model = gma_models.build(cfg, jax.random.key(0), jnp.float64)
    m = jax.jit(lambda x: model(x))   # one program, not one per primitive (cold compile time)
    x = jax.random.randint(jax.random.key(1), (3, 24), 0, 11)
    y = m(x)
    assert y.shape == (3, 24, 7) and y.dtype == jnp.float64
    for t in (5, 17, 23):
        x2 = x.at[:, t:].set((x[:, t:] + 3) % 11)
        y2 = m(x2)
        np.testing.assert_allclose(y2[:, :t], y[:, :t], rtol=1e-12, atol=1e-12)
        assert float(jnp.max(jnp.abs(y2[:, t] - y[:, t]))) > 1e-6


@pytest.mark.parametrize("mixer", gma_models.MIXERS)
def test_padding_is_ignored_bidirectionally(mixer):
    cfg = dataclasses.replace(BASE, mixer=mixer, causal=False)
    model = gma_models.build(cfg, jax.random.key(2), jnp.float64)
    m = jax.jit(lambda x, mask: model(x, mask))
    x = jax.random.randint(jax.random.key(3), (2, 24), 1, 11)
    mask = jnp.arange(24)[None] < jnp.array([24, 15])[:, None]
    y = m(x, mask)
    x2 = jnp.where(mask, x, (x + 5) % 11)
    np.testing.assert_allclose(m(x2, mask)[1, :15], y[1, :15], rtol=1e-12, atol=1e-12)
    # and every real token sees the others: changing token 0 changes the last real output
    x3 = x.at[:, 0].set((x[:, 0] + 1) % 11)
    assert float(jnp.max(jnp.abs(m(x3, mask)[1, 14] - y[1, 14]))) > 1e-6


def test_kernel_mixers_match_their_quadratic_forms():
    cfg = dataclasses.replace(BASE, mixer="linear", causal=True, d_model=8, heads=2)
    mix = gma_models.Mixer(cfg, jax.random.key(4), jnp.float64)
    x = jax.random.normal(jax.random.key(5), (2, 19, 8), jnp.float64)
    q, k, v = jnp.split(x @ mix.Wqkv, 3, axis=-1)
    q, k, v = (a.reshape(2, 19, 2, 4) for a in (q, k, v))
    fq, fk = jax.nn.elu(q) + 1, jax.nn.elu(k) + 1
    A = jnp.einsum("bnhd,bmhd->bhnm", fq, fk) * jnp.tril(jnp.ones((19, 19)))
    y = jnp.einsum("bhnm,bmhd->bnhd", A, v) / (A.sum(-1).transpose(0, 2, 1)[..., None] + 1e-6)
    np.testing.assert_allclose(mix(x), y.reshape(2, 19, 8) @ mix.Wo, rtol=1e-11, atol=1e-12)
    g = dataclasses.replace(cfg, mixer="gma")
    gm = gma_models.Mixer(g, jax.random.key(6), jnp.float64)
    np.testing.assert_allclose(gm(x), gma.naive_attention(gm.gma, x, causal=True),
                               rtol=1e-11, atol=1e-12)


def test_favor_features_estimate_the_softmax_kernel():
    """FAVOR+ is unbiased: phi(x) = exp(w.x - |x|^2/2)/sqrt(m) gives E[phi(q).phi(k)] =
    exp(q.k) (here x = q / dh^{1/4}).  With m = 4096 orthogonal features each pair is
    within 5 standard errors, the i.i.d. variance exp(2 q.k)(exp(|q+k|^2) - 1)/m being an
    upper bound for orthogonal features; _favor's features are these up to a per-query
    factor (its stabilising shift)."""
    dh, m = 4, 4096
    omega = gma_models.favor_features(jax.random.key(7), 1, m, dh, jnp.float64)
    q = 0.5 * jax.random.normal(jax.random.key(8), (1, 1, 20, dh), jnp.float64)
    k = 0.5 * jax.random.normal(jax.random.key(9), (1, 1, 20, dh), jnp.float64)
    s = dh ** -0.25
    phi = lambda x: jnp.exp(x @ omega[0].T - 0.5 * jnp.sum(x * x, -1, keepdims=True)) / m**0.5
    qs, ks = q[0, 0] * s, k[0, 0] * s
    est = phi(qs) @ phi(ks).T
    exact = jnp.exp(qs @ ks.T)
    plus = jnp.sum((qs[:, None] + ks[None]) ** 2, -1)
    sd = jnp.sqrt(jnp.exp(2 * qs @ ks.T) * (jnp.exp(plus) - 1) / m)
    assert float(jnp.max(jnp.abs(est - exact) / sd)) < 5.0


    fq, fk = gma_models.favor_map(q, k, omega)
    np.testing.assert_allclose(fk[0, 0], phi(ks), rtol=1e-12)
    c = fq[0, 0] / phi(qs)
    np.testing.assert_allclose(c, c[:, :1] * jnp.ones_like(c), rtol=1e-10)


def test_matched_parameter_counts():
    cfgs = gma_models.matched_configs(BASE)
    counts = {m: gma_models.param_count(c) for m, c in cfgs.items()}
    ref = counts["softmax"]
    for m, n in counts.items():
        assert abs(n - ref) <= BASE.depth * (2 * BASE.d_model + 1), (m, n, ref)
    assert cfgs["gma"].mlp_hidden < BASE.mlp_hidden  # GMA's mixture parameters cost MLP


def test_frozen_and_decayed_parameters():
    cfg = dataclasses.replace(BASE, mixer="performer", depth=1)
    keys = jax.random.split(jax.random.key(10), 2)
    p0 = jax.vmap(lambda k: gma_models.build(cfg, k))(keys)
    x = jax.random.randint(jax.random.key(11), (4, 24), 0, 11)

    def loss(p, d, k):
        lg = p(d)
        return optax.softmax_cross_entropy_with_integer_labels(lg[:, :-1], d[:, 1:] % 7).mean()

    res = train(loss, p0, gma_models.make_optimizer(1e-2, 20), steps=20, key=keys, data=x,
                batched=True, progress=False, checkpoint=False, record_every=5)
    assert np.all(res.loss[-1] < res.loss[0])
    np.testing.assert_array_equal(res.params.blocks[0].mixer.omega, p0.blocks[0].mixer.omega)
    assert not np.allclose(res.params.blocks[0].mixer.Wqkv, p0.blocks[0].mixer.Wqkv)
    g = gma_models.build(dataclasses.replace(BASE, mixer="gma"), jax.random.key(0))
    dm = gma_models.decay_mask(g)
    assert dm.blocks[0].mixer.gma.Wq and not dm.blocks[0].mixer.gma.mu
    assert not dm.blocks[0].mixer.gma.log_tau and dm.blocks[0].mlp.W1
    assert not dm.blocks[0].mlp.b1 and not dm.blocks[0].ln1.gamma


def test_continuous_inputs_and_config_errors():
    cfg = gma_models.ModelConfig(mixer="gma", causal=False, d_model=8, heads=2, depth=1,
                                 mlp_hidden=8, n_out=3, d_in=6, K=3)
    m = gma_models.build(cfg, jax.random.key(0))
    assert m(jnp.ones((2, 5, 6))).shape == (2, 5, 3)
    with pytest.raises(ValueError, match="mixer"):
        gma_models.ModelConfig(mixer="mamba", vocab=3)
    with pytest.raises(ValueError, match="vocab, d_in"):
        gma_models.ModelConfig(vocab=3, d_in=2)
    with pytest.raises(ValueError, match="d_model"):
        gma_models.ModelConfig(vocab=3, d_model=10, heads=4)


def test_token_ids_out_of_range_are_refused_or_nan():
    """An id outside 0..vocab-1 is never clamped to a valid row: concrete ids raise a
    message naming the vocabulary, traced ones embed as NaN (the NaN guard reports it)."""
    model = gma_models.build(BASE, jax.random.key(0), jnp.float64)
    ok = jnp.zeros((1, 5), jnp.int32).at[0, 1].set(10)
    assert bool(jnp.all(jnp.isfinite(model(ok))))
    for bad in (11, -1):
        x = ok.at[0, 2].set(bad)
        with pytest.raises(ValueError, match="0..10"):
            model(x)
        out = jax.jit(lambda t: model(t))(x)
        assert bool(jnp.all(jnp.isnan(out[0, 2]))), bad   # (a masked NaN key may spread)


def test_short_convolution_is_causal_and_depthwise():
    """``causal_conv`` is the per-channel convolution of numpy with the kernel reversed
    (y[t] = sum_j w[j] x[t - k + 1 + j]), sees no later token, and a model with ``conv``
    keeps its causality and adds depth * k * d parameters to every mixer alike."""
    x = jax.random.normal(jax.random.key(0), (2, 9, 3), jnp.float64)
    w = jax.random.normal(jax.random.key(1), (4, 3), jnp.float64)
    y = gma_models.causal_conv(x, w)
    ref = np.stack([[np.convolve(np.asarray(x[b, :, c]), np.asarray(w[::-1, c]))[:9]
                     for c in range(3)] for b in range(2)]).transpose(0, 2, 1)
    np.testing.assert_allclose(y, ref, rtol=1e-13, atol=1e-13)
    y2 = gma_models.causal_conv(x.at[:, 5:].set(0.0), w)
    np.testing.assert_array_equal(y2[:, :5], y[:, :5])
    cfg = dataclasses.replace(BASE, conv=4)
    for mixer in ("softmax", "gma"):
        c0 = dataclasses.replace(BASE, mixer=mixer)
        assert (gma_models.param_count(dataclasses.replace(c0, conv=4))
                - gma_models.param_count(c0)) == BASE.depth * 4 * BASE.d_model
    model = gma_models.build(cfg, jax.random.key(0), jnp.float64)
    tok = jax.random.randint(jax.random.key(2), (2, 24), 0, 11)
    out = model(tok)
    np.testing.assert_allclose(model(tok.at[:, 12:].set(3))[:, :12], out[:, :12],
                               rtol=1e-12, atol=1e-12)
    # without it, the blocks hold no kernel and read ln1(x) as before
    plain = gma_models.build(BASE, jax.random.key(0), jnp.float64)
    assert all(b.conv is None for b in plain.blocks)
    h = plain.embed_inputs(tok)
    np.testing.assert_array_equal(plain.blocks[0].mix_input(h), plain.blocks[0].ln1(h))
    with pytest.raises(ValueError, match="conv"):
        dataclasses.replace(BASE, conv=-1)
    with pytest.raises(ValueError, match="pos_scale"):
        dataclasses.replace(BASE, pos_scale=float("nan"))
    big = gma_models.build(dataclasses.replace(BASE, pos_scale=1.0), jax.random.key(0))
    small = gma_models.build(BASE, jax.random.key(0))
    np.testing.assert_allclose(big.pos, 10 * small.pos, rtol=1e-6)


def test_warmup_cosine_is_optax_schedule_with_traceable_rates():
    """gma_models.warmup_cosine (its rates may be traced: hyperparameters as data) equals
    optax's warmup_cosine_decay_schedule with end_value = end_fraction * lr, through the
    warm-up, the decay and after the last step; a warm-up outside [0, steps) is refused."""
    import optax

    lr, end, steps, warmup = 3e-3, 0.1, 400, 40
    ours = gma_models.warmup_cosine(jnp.asarray(lr), jnp.asarray(end), steps=steps,
                                    warmup=warmup)
    ref = optax.warmup_cosine_decay_schedule(0.0, lr, warmup, steps, end_value=lr * end)
    counts = np.arange(0, steps + 50)
    np.testing.assert_allclose([float(ours(c)) for c in counts],
                               [float(ref(c)) for c in counts], rtol=1e-5, atol=1e-9)
    for bad in (-1, steps):
        with pytest.raises(ValueError, match="^warmup:"):
            gma_models.warmup_cosine(lr, end, steps=steps, warmup=bad)


PERFORMER_UNINIT_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from gmtheory import gma, gma_models as GM
H, B, N, dh, m = 2, 128, 32, 16, 16
k = jax.random.split(jax.random.key(0), 4)
q, kk, v = (jax.random.normal(k[i], (H, B, N, dh), jnp.float32) for i in range(3))
om = GM.favor_features(k[3], H, m, dh)
cc = lambda a, b, c: gma.causal_contraction(a, b, c, chunk=32, normalisation="query",
                                            eps=1e-6)
fused = np.asarray(jax.jit(lambda q, kk, v, om: cc(*GM.favor_map(q, kk, om), v))(q, kk, v, om))
fq, fk = (np.asarray(a, np.float64) for a in jax.jit(GM.favor_map)(q, kk, om))
ref = np.asarray(jax.jit(cc)(fq, fk, np.asarray(v, np.float64)))
np.testing.assert_allclose(fused, ref, rtol=1e-4, atol=1e-5)
print("ok")
"""


def test_performer_read_out_reads_no_uninitialised_memory():
    """FAVOR+ features and the causal read-out compiled together at batch 128 (gma-recall's
    evaluation) equal the two computed apart (the read-out in float64), with fresh heap
    memory filled with garbage (MALLOC_PERTURB_): the form with a broadcast row sum read
    memory it never wrote (gma_models.favor_map)."""
    import os
    import subprocess
    import sys

    for fill in ("1", "170"):
        env = {**os.environ, "MALLOC_PERTURB_": fill, "GMTHEORY_NO_JAX_CACHE": "1"}
        out = subprocess.run([sys.executable, "-c", PERFORMER_UNINIT_SCRIPT], env=env,
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]
