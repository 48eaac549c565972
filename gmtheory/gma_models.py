"""A small sequence-model family whose mixer is chosen by a config field (issue 14).

Embedding (tokens or continuous vectors, optional learned positions) -> ``depth`` blocks
``x + mixer(LN(x))``, ``x + MLP(LN(x))`` -> final LayerNorm -> linear head (logits at
every position; the task's loss pools or picks positions).  Mixers:

* ``"softmax"`` — multi-head ``jax.nn.dot_product_attention`` (XLA, materialised scores);
* ``"linear"`` — elu+1 kernel attention (Katharopoulos et al.);
* ``"performer"`` — FAVOR+ positive orthogonal random features (Choromanski et al.),
  ``features`` per head, drawn once at initialisation and not trained;
* ``"gma"`` — :func:`gmtheory.gma.gma_attention` (K Gaussian components per head);
* ``"ssm"`` — :func:`gmtheory.ssm.ssm_mixer`, a selective state-space mixer (Mamba-style:
  input-dependent ``dt``, ``B``, ``C``, a parallel scan; ``state`` dimensions per channel).

Every mixer runs causally (``causal=True``: prefix sums in a chunked scan for the kernel
mixers, a causal mask for softmax, a forward scan for the SSM) or bidirectionally (the SSM
adds a backward scan), and takes a padding mask.

Why Equinox: a model *is* a pytree of arrays (an ``eqx.Module`` with its configuration in
static fields), so it goes straight into :func:`gmtheory.training.train` as ``params`` —
optax, ``lax.scan`` blocks, ``vmap`` over seeds, checkpoints and sharding all see plain
arrays, with no ``split``/``merge`` of a separate state as Flax NNX needs, and without
the hand-written init/apply plumbing of a nested dict.  Frozen arrays (FAVOR+'s random
projection) are excluded from the optimiser by :func:`decay_mask` / :func:`trainable_mask`.

Equal parameter counts: :func:`matched_configs` shrinks each mixer's MLP width so that
every model has (within one MLP unit per block) the parameter count of the softmax model.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import gma, ssm

__all__ = ["ModelConfig", "Model", "MIXERS", "build", "param_count", "matched_configs",
           "decay_mask", "trainable_mask", "make_optimizer", "warmup_cosine_adamw",
           "warmup_cosine", "favor_features", "favor_map", "mixer_outputs", "seed_gma_means"]

MIXERS = ("softmax", "linear", "performer", "gma", "ssm")
EPS = 1e-6


def _check_token_ids(inputs, vocab: int) -> None:
    """Token ids given as concrete values must lie in ``0..vocab - 1`` (traced ones are
    checked by the NaN their embedding then carries)."""
    if isinstance(inputs, jax.core.Tracer):
        return
    ids = np.asarray(inputs)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        raise ValueError(f"inputs: token ids must lie in 0..{vocab - 1} (the model's vocab "
                         f"= {vocab}); got ids from {int(ids.min())} to {int(ids.max())}. "
                         "Size the model's vocab to the task (e.g. tasks.mqar_vocab(n_keys)) "
                         "or map the ids into range.")


@dataclass(frozen=True)
class ModelConfig:
    """Shape of a model.  ``vocab > 0``: token inputs; else ``d_in`` continuous inputs."""

    mixer: str = "gma"
    causal: bool = False
    d_model: int = 32
    depth: int = 2
    heads: int = 4
    mlp_hidden: int = 128
    n_out: int = 10
    vocab: int = 0
    d_in: int = 0
    max_len: int = 0          # learned positions for max_len tokens (0: none)
    K: int = 16               # GMA components per head
    features: int = 32        # FAVOR+ random features per head
    chunk: int = 64           # causal chunk of the kernel mixers
    tau0: float = 1.0         # GMA temperature tau0 * sqrt(d_r)
    state: int = 16           # SSM state dimensions per channel
    normalisation: str = "query"  # GMA read-out: "query" or "slot" (gma.gma_attention)
    conv: int = 0             # depthwise causal short convolution before every mixer (its
                              # kernel; 0: none), as Zoology/Based/Mamba blocks have
    pos_scale: float = 0.1    # std of the learned positions at initialisation (tokens: 1)

    def __post_init__(self):
        if self.mixer not in MIXERS:
            raise ValueError(f"mixer: must be one of {MIXERS}, got {self.mixer!r}.")
        if self.normalisation not in ("query", "slot"):
            raise ValueError(f"normalisation: must be 'query' or 'slot', got "
                             f"{self.normalisation!r}.")
        if self.d_model % self.heads:
            raise ValueError(f"d_model: must be a multiple of heads={self.heads}, got "
                             f"{self.d_model}.")
        if (self.vocab > 0) == (self.d_in > 0):
            raise ValueError("vocab, d_in: give exactly one of them (tokens or vectors).")
        for name in ("d_model", "depth", "heads", "mlp_hidden", "n_out", "K", "features",
                     "chunk", "state"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name}: must be a positive integer, got "
                                 f"{getattr(self, name)}.")
        if int(self.conv) < 0:
            raise ValueError(f"conv: the short convolution's kernel must be >= 0 (0: none), "
                             f"got {self.conv}.")
        if not (math.isfinite(self.pos_scale) and self.pos_scale >= 0):
            raise ValueError(f"pos_scale: must be a finite number >= 0, got {self.pos_scale}.")


def _normal(key, shape, scale, dtype):
    return scale * jax.random.normal(key, shape, dtype)


def favor_features(key, heads: int, m: int, dh: int, dtype=jnp.float32):
    """FAVOR+ orthogonal random projections ``(heads, m, dh)``: blocks of ``dh``
    orthonormal rows scaled by chi(dh)-distributed norms (Choromanski et al. 2021)."""
    def one(k):
        blocks = []
        n_blocks = -(-m // dh)
        for i in range(n_blocks):
            g = jax.random.normal(jax.random.fold_in(k, i), (dh, dh), dtype)
            q, r = jnp.linalg.qr(g)
            # signs of R's diagonal: without them LAPACK's Householder Q is not Haar
            # (its columns lean to one side) and the kernel estimate is biased
            blocks.append((q * jnp.sign(jnp.diag(r))[None]).T)
        w = jnp.concatenate(blocks)[:m]
        norms = jnp.linalg.norm(jax.random.normal(jax.random.fold_in(k, 10_000), (m, dh), dtype),
                                axis=1)
        return w * norms[:, None]
    return jnp.stack([one(jax.random.fold_in(key, h)) for h in range(heads)])


class Mixer(eqx.Module):
    """Multi-head token mixer: ``(B, N, d) -> (B, N, d)``."""

    kind: str = eqx.field(static=True)
    causal: bool = eqx.field(static=True)
    normalisation: str = eqx.field(static=True)
    heads: int = eqx.field(static=True)
    chunk: int = eqx.field(static=True)
    Wqkv: jax.Array | None
    Wo: jax.Array | None
    omega: jax.Array | None       # FAVOR+ projections (frozen)
    gma: gma.GMAParams | None
    ssm: ssm.SSMParams | None

    def __init__(self, cfg: ModelConfig, key, dtype=jnp.float32):
        d, H = cfg.d_model, cfg.heads
        self.kind, self.causal, self.heads, self.chunk = cfg.mixer, cfg.causal, H, cfg.chunk
        self.normalisation = cfg.normalisation
        k1, k2, k3 = jax.random.split(key, 3)
        self.gma = self.ssm = None
        if cfg.mixer in ("gma", "ssm"):
            self.Wqkv = self.Wo = self.omega = None
            if cfg.mixer == "gma":
                self.gma = gma.init(k1, d, heads=H, K=cfg.K, tau0=cfg.tau0, dtype=dtype)
            else:
                self.ssm = ssm.init(k1, d, n=cfg.state, dtype=dtype)
            return
        self.Wqkv = _normal(k1, (d, 3 * d), 1 / math.sqrt(d), dtype)
        self.Wo = _normal(k2, (d, d), 1 / math.sqrt(d), dtype)
        self.omega = (favor_features(k3, H, cfg.features, d // H, dtype)
                      if cfg.mixer == "performer" else None)

    def __call__(self, x, mask=None):
        if self.kind == "gma":
            return gma.gma_attention(self.gma, x, causal=self.causal,
                                     chunk=min(self.chunk, x.shape[1]), mask=mask,
                                     normalisation=self.normalisation)
        if self.kind == "ssm":
            return ssm.ssm_mixer(self.ssm, x, causal=self.causal, mask=mask)
        B, N, d = x.shape
        H = self.heads
        dh = d // H
        q, k, v = jnp.split(x @ self.Wqkv, 3, axis=-1)
        q, k, v = (a.reshape(B, N, H, dh) for a in (q, k, v))
        if self.kind == "softmax":
            m = None if mask is None else mask[:, None, None, :]
            y = jax.nn.dot_product_attention(q, k, v, mask=m, is_causal=self.causal)
            return y.reshape(B, N, d) @ self.Wo
        q, k, v = (jnp.moveaxis(a, 2, 0) for a in (q, k, v))  # (H, B, N, dh)
        if self.kind == "linear":
            fq, fk = jax.nn.elu(q) + 1.0, jax.nn.elu(k) + 1.0
        else:
            fq, fk = favor_map(q, k, jax.lax.stop_gradient(self.omega))
        if mask is not None:
            fk = fk * mask[None, :, :, None].astype(fk.dtype)
        if self.causal:
            y = gma.causal_contraction(fq, fk, v, chunk=min(self.chunk, N),
                                       normalisation="query", eps=EPS)
        else:
            y = gma.bidirectional_contraction(fq, fk, v, "query", EPS)
        return jnp.moveaxis(y, 0, 2).reshape(B, N, d) @ self.Wo


def favor_map(q, k, omega):
    """Positive random features ``exp(w^T x - |x|^2 / 2) / sqrt(m)`` of ``x = q / dh^{1/4}``.

    The query features subtract their per-token maximum (a factor that cancels in the
    query-normalised ratio).  The key features need no shift:
    ``w^T x - |x|^2 / 2 <= |w|^2 / 2`` for every ``x`` (equality at ``x = w``), so they are
    bounded by ``exp(max |w|^2 / 2)`` whatever the keys, and no key's feature depends on
    another key (causality holds exactly).
    """
    dh = q.shape[-1]
    m = omega.shape[1]
    s = dh ** -0.25
    # w^T x - |x|^2 / 2 as one product, [x, -|x|^2 / 2] . [w, 1]: written as a product minus
    # a broadcast row sum, XLA:CPU (jaxlib 0.10.2) compiled the causal read-out that
    # follows (gma.causal_contraction) at batch 128 so that it read memory it never wrote:
    # garbage outputs, different under MALLOC_PERTURB_ (the FAVOR+ test accuracies of 0.10
    # against 0.32 between identical runs; tests/test_gma_models.py)
    om = jnp.concatenate([omega, jnp.ones(omega.shape[:-1] + (1,), omega.dtype)], -1)
    aug = lambda x: jnp.concatenate([x, -0.5 * jnp.sum(x * x, -1, keepdims=True)], -1)  # noqa: E731
    pq = jnp.einsum("hbnd,hmd->hbnm", aug(q * s), om)
    pk = jnp.einsum("hbnd,hmd->hbnm", aug(k * s), om)
    pq = pq - jax.lax.stop_gradient(jnp.max(pq, -1, keepdims=True))
    return jnp.exp(pq) / math.sqrt(m), jnp.exp(pk) / math.sqrt(m)


class MLP(eqx.Module):
    W1: jax.Array
    b1: jax.Array
    W2: jax.Array
    b2: jax.Array

    def __init__(self, d, h, key, dtype=jnp.float32):
        k1, k2 = jax.random.split(key)
        self.W1 = _normal(k1, (d, h), 1 / math.sqrt(d), dtype)
        self.b1 = jnp.zeros((h,), dtype)
        self.W2 = _normal(k2, (h, d), 1 / math.sqrt(h), dtype)
        self.b2 = jnp.zeros((d,), dtype)

    def __call__(self, x):
        return jax.nn.gelu(x @ self.W1 + self.b1) @ self.W2 + self.b2


class LayerNorm(eqx.Module):
    gamma: jax.Array
    beta: jax.Array

    def __init__(self, d, dtype=jnp.float32):
        self.gamma = jnp.ones((d,), dtype)
        self.beta = jnp.zeros((d,), dtype)

    def __call__(self, x):
        mu = jnp.mean(x, -1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, -1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * self.gamma + self.beta


def causal_conv(x, w):
    """Depthwise causal convolution along the sequence: ``x`` (B, N, d), kernel ``w``
    (k, d); ``y[t] = sum_j w[j] x[t - k + 1 + j]`` with zeros before the first token, so a
    token sees itself and the ``k - 1`` before it, never a later one."""
    k = w.shape[0]
    xp = jnp.pad(x, ((0, 0), (k - 1, 0), (0, 0)))
    return sum(w[j] * xp[:, j:j + x.shape[1]] for j in range(k))


class Block(eqx.Module):
    """Pre-norm block: ``x + mixer(conv(ln1(x)))`` then ``x + mlp(ln2(x))``; the short
    convolution ``conv`` (``cfg.conv > 0``) is ``None`` otherwise."""

    ln1: LayerNorm
    mixer: Mixer
    ln2: LayerNorm
    mlp: MLP
    conv: jax.Array | None

    def __init__(self, cfg, key, dtype=jnp.float32):
        k1, k2 = jax.random.split(key)
        self.ln1, self.ln2 = LayerNorm(cfg.d_model, dtype), LayerNorm(cfg.d_model, dtype)
        self.mixer = Mixer(cfg, k1, dtype)
        self.mlp = MLP(cfg.d_model, cfg.mlp_hidden, k2, dtype)
        # its own stream (fold_in), so that a model without it draws what it drew before
        self.conv = (_normal(jax.random.fold_in(key, 7), (cfg.conv, cfg.d_model),
                             1 / math.sqrt(cfg.conv), dtype) if cfg.conv else None)

    def mix_input(self, x):
        """What the mixer reads: ``ln1(x)``, through the short convolution if there is one."""
        h = self.ln1(x)
        return h if self.conv is None else causal_conv(h, self.conv)

    def __call__(self, x, mask=None):
        x = x + self.mixer(self.mix_input(x), mask)
        return x + self.mlp(self.ln2(x))


class Model(eqx.Module):
    """The model: ``model(inputs, mask=None) -> logits (B, N, n_out)``.

    ``inputs``: int tokens ``(B, N)`` (``cfg.vocab > 0``) or vectors ``(B, N, d_in)``.
    """

    cfg: ModelConfig = eqx.field(static=True)
    embed: jax.Array
    pos: jax.Array | None
    blocks: tuple
    ln_f: LayerNorm
    head: jax.Array
    head_b: jax.Array

    def __init__(self, cfg: ModelConfig, key, dtype=jnp.float32):
        self.cfg = cfg
        ks = jax.random.split(key, cfg.depth + 3)
        d = cfg.d_model
        if cfg.vocab > 0:
            self.embed = _normal(ks[0], (cfg.vocab, d), 1.0, dtype)
        else:
            self.embed = _normal(ks[0], (cfg.d_in, d), 1 / math.sqrt(cfg.d_in), dtype)
        self.pos = (_normal(ks[1], (cfg.max_len, d), cfg.pos_scale, dtype) if cfg.max_len
                    else None)
        self.blocks = tuple(Block(cfg, ks[3 + i], dtype) for i in range(cfg.depth))
        self.ln_f = LayerNorm(d, dtype)
        self.head = _normal(ks[2], (d, cfg.n_out), 1 / math.sqrt(d), dtype)
        self.head_b = jnp.zeros((cfg.n_out,), dtype)

    def embed_inputs(self, inputs):
        if self.cfg.vocab > 0:
            _check_token_ids(inputs, self.cfg.vocab)
            # an id outside 0..vocab-1 embeds as NaN, which the training loop's NaN guard
            # reports (plain indexing would clamp it to the last row, or wrap a negative
            # one, silently); negative ids are sent out of range first
            ids = jnp.where(inputs < 0, self.cfg.vocab, inputs)
            x = jnp.take(self.embed, ids, axis=0, mode="fill", fill_value=jnp.nan)
        else:
            x = inputs.astype(self.embed.dtype) @ self.embed
        if self.pos is not None:
            x = x + self.pos[: x.shape[1]]
        return x

    def __call__(self, inputs, mask=None):
        x = self.embed_inputs(inputs)
        for b in self.blocks:
            x = b(x, mask)
        return self.ln_f(x) @ self.head + self.head_b


def build(cfg: ModelConfig, key, dtype=jnp.float32) -> Model:
    """A model of configuration ``cfg`` (float32 by default, also under ``enable_x64``)."""
    return Model(cfg, key, dtype)


def param_count(cfg: ModelConfig) -> int:
    """Trainable parameters (FAVOR+'s frozen projections excluded)."""
    shapes = jax.eval_shape(lambda k: Model(cfg, k), jax.random.key(0))
    mask = trainable_mask(shapes)
    return int(sum(np.prod(a.shape) for a, t in zip(jax.tree.leaves(shapes),
                                                     jax.tree.leaves(mask), strict=True) if t))


def matched_configs(base: ModelConfig, mixers=MIXERS) -> dict[str, ModelConfig]:
    """One config per mixer, each with the MLP width that brings its parameter count to
    that of the softmax model of ``base`` (within ``depth * (2 d + 1)`` parameters)."""
    ref = param_count(dataclasses.replace(base, mixer="softmax"))
    out = {}
    for m in mixers:
        cfg = dataclasses.replace(base, mixer=m)
        delta = param_count(cfg) - ref
        h = base.mlp_hidden - int(round(delta / (base.depth * (2 * base.d_model + 1))))
        out[m] = dataclasses.replace(cfg, mlp_hidden=max(1, h))
    return out


def _is_frozen_path(path) -> bool:
    return any(getattr(p, "name", None) == "omega" for p in path)


def trainable_mask(model):
    """A pytree of bools: False for frozen arrays (FAVOR+ projections)."""
    return jax.tree_util.tree_map_with_path(lambda path, a: not _is_frozen_path(path), model)


def decay_mask(model):
    """Weight decay on trainable weight matrices only: not on biases, LayerNorm gains,
    GMA's mixture parameters (means, scales, weights, temperature), the SSM's ``A_log``
    (as in Mamba) or frozen arrays."""
    def rule(path, a):
        names = [getattr(p, "name", None) for p in path]
        if "ssm" in names and "A_log" in names:
            return False
        if "omega" in names or "gma" in names and not any(n in ("Wq", "Wk", "Wv", "Wo")
                                                            for n in names):
            return False
        return jnp.ndim(a) >= 2 and "pos" not in names
    return jax.tree_util.tree_map_with_path(rule, model)


def make_optimizer(lr: float, steps: int, *, warmup: int | None = None,
                   weight_decay: float = 0.01, clip: float = 1.0):
    """AdamW with a linear warm-up then cosine decay, global-norm gradient clipping, and
    frozen arrays held fixed (their update is zeroed)."""
    import optax

    warmup = max(1, steps // 20) if warmup is None else int(warmup)
    sched = optax.warmup_cosine_decay_schedule(0.0, lr, warmup, steps, end_value=lr * 0.01)
    return _adamw_chain(sched, weight_decay, clip)


def _adamw_chain(schedule, weight_decay: float, clip: float):
    """Global-norm clipping, AdamW under ``schedule`` with decay on :func:`decay_mask`, and
    the frozen arrays' updates zeroed: the chain of both GMA optimisers."""
    import optax

    return optax.chain(
        optax.clip_by_global_norm(clip),
        optax.adamw(schedule, weight_decay=weight_decay, mask=decay_mask),
        optax.masked(optax.set_to_zero(), lambda p: jax.tree.map(lambda t: not t,
                                                                   trainable_mask(p))),
    )


def warmup_cosine_adamw(learning_rate, end_fraction, *, steps: int, warmup: int):
    """AdamW (decay 0.01 on :func:`decay_mask`), global-norm clipping at 1 and frozen arrays
    held fixed, as :func:`make_optimizer`, under a linear warm-up over ``warmup`` steps to
    ``learning_rate`` and then a cosine decay to ``end_fraction * learning_rate`` at
    ``steps``.  The schedule is written in ``jnp``, so ``learning_rate`` and
    ``end_fraction`` may be traced (hyperparameters as data: ``training.hyper(
    warmup_cosine_adamw, learning_rate=..., end_fraction=..., steps=..., warmup=...)``);
    the decay and the clipping norm are constants (as Python floats they keep every
    parameter's dtype)."""
    return _adamw_chain(warmup_cosine(learning_rate, end_fraction, steps=steps,
                                      warmup=warmup), 0.01, 1.0)


def warmup_cosine(learning_rate, end_fraction, *, steps: int, warmup: int):
    """``count -> rate``: linear from 0 to ``learning_rate`` over ``warmup`` steps, then a
    cosine to ``end_fraction * learning_rate`` at ``steps``, constant after (optax's
    ``warmup_cosine_decay_schedule`` with ``end_value = end_fraction * learning_rate``,
    written in ``jnp`` so that both rates may be traced)."""
    steps, warmup = int(steps), int(warmup)
    if not 0 <= warmup < steps:
        raise ValueError(f"warmup: must be in [0, steps={steps}), got {warmup}; the cosine "
                         "decay runs from the end of the warm-up to steps.")

    def schedule(count):
        c = jnp.asarray(count, jnp.float32)
        rise = learning_rate * c / max(warmup, 1)
        t = jnp.clip((c - warmup) / max(steps - warmup, 1), 0.0, 1.0)
        fall = learning_rate * (end_fraction + (1 - end_fraction) * 0.5
                                * (1 + jnp.cos(jnp.pi * t)))
        return jnp.where(c < warmup, rise, fall)

    return schedule


def seed_gma_means(model: Model, inputs, key, *, mask=None) -> Model:
    """``model`` with each GMA layer's means seeded by k-means++
    (:func:`gmtheory.gma.kmeanspp_means`) on the normalised residual stream entering it
    for ``inputs`` (real tokens only where ``mask``), layer by layer (a layer's inputs
    depend on the means seeded below it).  Other mixers are left as they are.  The means
    keep the layer's dtype (k-means++ runs in float64 where it is enabled): a float64 leaf
    in a float32 model would compile a second training program and train in mixed
    precision."""
    for i, blk in enumerate(model.blocks):
        if blk.mixer.kind != "gma":
            continue
        z = blk.mix_input(mixer_outputs(model, inputs, mask)[i])
        z = z.reshape(-1, z.shape[-1])
        if mask is not None:
            z = z[np.asarray(mask).reshape(-1)]
        old = blk.mixer.gma.mu
        mu = gma.kmeanspp_means(blk.mixer.gma, z, jax.random.fold_in(key, i)).astype(old.dtype)
        model = eqx.tree_at(lambda m, i=i: m.blocks[i].mixer.gma.mu, model, mu)
    return model


def mixer_outputs(model: Model, inputs, mask=None):
    """The residual stream entering each block: a list of ``(B, N, d)`` arrays (the
    first block's mixer reads ``blocks[0].ln1`` of the first one)."""
    x = model.embed_inputs(inputs)
    outs = []
    for b in model.blocks:
        outs.append(x)
        x = b(x, mask)
    return outs
