"""GMA in use (issue 14): recall, byte-level language modelling and in-context GMM
classification, each trained for the four mixers of :mod:`gmtheory.gma_models`.

All three run every seed of a sweep point at once (``train(batched=...)``: the seeds in
``vmap``, split over the visible devices by :func:`gmtheory.training.train`; softmax on
CPU one seed after another in the same program, :func:`_seed_loop`), with AdamW,
warm-up then cosine decay and gradient clipping (:func:`default_optimizer`)
and the training engine's NaN guard, checkpoints and progress bar.  The mixers are
compared at equal parameter count (:func:`gmtheory.gma_models.matched_configs`: the MLP
width of each mixer is set so that its model has the softmax model's count).  Training
and test data come from named seed streams (:func:`gmtheory.problems.stream_key`), so
every mixer sees the same examples; the model initialisation and the minibatches come
from the point's own key.  Time per step is measured between the ends of the first and
the last block of the training loop (so it excludes compilation), for all seeds together.

* ``gma-recall`` — accuracy against sequence length on ListOps (bidirectional, mean-pooled
  classification) and MQAR (causal, accuracy at the query positions).
* ``gma-lm`` — causal byte-level LM on the standard library's sources:
  :mod:`gmtheory.simulations.gma_lm`, on the shared fields and training of this module.
* ``gma-gmm`` — in-context GMM classification and denoising:
  :mod:`gmtheory.simulations.gma_gmm`, on the shared model fields and training of this
  module (and ``gma-ablations``: :mod:`gmtheory.simulations.gma_ablations`).

Documentation: ``docs/topics/gma.md#gma-in-use-experiments``.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import gma_models as GM
from .. import tasks as T
from ..problems import stream_key
from ..stats import mean_se
from ..training import hyper, train
from ._base import SimConfig, Simulation, register

__all__ = ["GMAModelConfig", "RecallConfig", "train_seeds", "default_optimizer", "StepClock",
           "matched_models", "masked_ce", "peak_rss_mb", "untrained_models", "seq_ce",
           "seq_run", "recall_baselines", "LN2"]

LN2 = float(np.log(2.0))


# ---------------------------------------------------------------------------- shared
def default_optimizer(lr: float, steps: int):
    """:func:`gmtheory.gma_models.make_optimizer`'s AdamW (warm-up ``max(1, steps // 20)``
    steps, below ``steps``; cosine to 1 % of ``lr``) with ``lr`` as data
    (``hyper(warmup_cosine_adamw, ...)``): runs differing only in ``lr`` share a program."""
    steps = int(steps)
    return hyper(GM.warmup_cosine_adamw, learning_rate=float(lr), end_fraction=0.01,
                 steps=steps, warmup=min(max(1, steps // 20), max(steps - 1, 0)))


class StepClock:
    """``train`` callback: wall-clock time at the end of every block."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.times: list[float] = []
        self.steps: list[int] = []

    def __call__(self, info):
        self.times.append(time.perf_counter() - self.t0)
        self.steps.append(int(info["step"]))

    def seconds_per_step(self) -> float:
        """Time per step past the first block (which includes the compilation)."""
        if len(self.times) < 2:
            return float("nan")
        return (self.times[-1] - self.times[0]) / (self.steps[-1] - self.steps[0])


def train_seeds(mcfg: GM.ModelConfig, loss_fn, key, seeds: int, *, steps: int, lr: float,
                data=None, records: int = 10, metrics_fn=None, desc: str = "gma", tag=None,
                init=None, optimizer=None):
    """Build ``seeds`` models of ``mcfg`` and train them at once; returns
    ``(TrainResult, StepClock)``.  One record per block (``records`` of them).  ``init``:
    optional ``(models, key) -> models`` applied to the built models (leading seed axis)
    before training, e.g. to seed GMA's means (:func:`gmtheory.gma_models.seed_gma_means`
    under ``vmap``); ``optimizer``: in place of :func:`default_optimizer`."""
    k_init, k_train = jax.random.split(key)
    params = untrained_models(mcfg, key, seeds)
    if init is not None:
        params = init(params, jax.random.fold_in(k_init, 1))
    clock = StepClock()
    opt = optimizer if optimizer is not None else default_optimizer(lr, steps)
    res = train(loss_fn, params, opt, steps=steps,
                key=jax.random.split(k_train, seeds), data=data,
                record_every=steps // records, block_records=1, metrics_fn=metrics_fn,
                batched=_seed_loop(mcfg), callback=clock, desc=desc, tag=tag)
    return res, clock


def _seed_loop(mcfg: GM.ModelConfig):
    """How the seeds train together (:func:`gmtheory.training.train`'s ``batched``): softmax
    on CPU one seed after another inside the program (``"map"``; measured at MQAR N = 256,
    width 64, 3 seeds: 0.21 s a step against 0.31 s under ``vmap``, whose batched score
    matmuls XLA:CPU runs slowly), every other mixer and every accelerator under ``vmap``
    (the SSM's fused scan: 0.23 s under ``vmap`` against 0.27 s one after another)."""
    return "map" if mcfg.mixer == "softmax" and jax.default_backend() == "cpu" else True


def untrained_models(mcfg: GM.ModelConfig, key, seeds: int):
    """The ``seeds`` models (leading seed axis) that :func:`train_seeds` starts from with
    ``key``, before any ``init``: the untrained null of an analysis of trained models."""
    return _builder(mcfg)(jax.random.split(jax.random.split(key)[0], seeds))


@functools.cache
def _builder(mcfg: GM.ModelConfig):
    """``keys -> models`` (leading seed axis), compiled once per configuration."""
    return jax.jit(jax.vmap(lambda k: GM.build(mcfg, k)))


def _seed(model, s):
    return jax.tree.map(lambda a: a[s], model)


def _base_model(cfg, **kw) -> GM.ModelConfig:
    return GM.ModelConfig(mixer="softmax", d_model=cfg.d_model, depth=cfg.depth,
                          heads=cfg.heads, mlp_hidden=cfg.mlp_hidden, K=cfg.K,
                          features=cfg.features, **kw)


def matched_models(cfg, mixers, **kw):
    base = _base_model(cfg, **kw)
    return GM.matched_configs(base, mixers)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB (``getrusage``; NaN where the
    platform has none).  A high-water mark: recorded after each point, it bounds that
    point's memory from above."""
    try:
        import resource
    except ImportError:           # not on Windows
        return float("nan")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def masked_ce(logits, labels, weight):
    lp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
    nll = -jnp.take_along_axis(lp, jnp.maximum(labels, 0)[..., None], -1)[..., 0]
    return jnp.sum(nll * weight) / jnp.maximum(jnp.sum(weight), 1.0)


# ------------------------------------------------------- shared sequence-labelling run
# ListOps, MQAR and the byte LM are all "sequence labelling": int tokens (B, W) and a
# label per position (-1: no target).  With the same model configuration, width W,
# batch, steps and learning rate they run the *same* compiled program per mixer (the
# engine caches it on the loss's static fields and the optimiser), which is what
# keeps the quick profiles of gma-recall and gma-lm inside their CPU budget.
VOCAB = 256


class SeqLoss(eqx.Module):
    """Masked cross-entropy over the labelled positions of ``batch`` random rows of
    ``data["tokens"]``; ``masked``: padding (token 0) is masked out of the keys
    (bidirectional models; causal models need no mask for trailing padding).  A module
    whose static fields key the engine's compiled program: equal settings, one program."""

    batch: int = eqx.field(static=True)
    masked: bool = eqx.field(static=True)

    def __call__(self, model, data, key):
        idx = jax.random.randint(key, (self.batch,), 0, data["tokens"].shape[0])
        return seq_ce(model, data["tokens"][idx], data["label"][idx], self.masked)[0]


def seq_ce(model, tokens, label, masked):
    logits = model(tokens, tokens > 0 if masked else None)
    w = (label >= 0).astype(jnp.float32)
    hit = (jnp.argmax(logits, -1) == label).astype(jnp.float32)
    return masked_ce(logits, label, w), jnp.sum(hit * w) / jnp.maximum(jnp.sum(w), 1.0)


def _seq_metrics_masked(model, data):
    ce, acc = seq_ce(model, data["val_tokens"], data["val_label"], True)
    return {"val_ce": ce, "val_acc": acc}


def _seq_metrics(model, data):
    ce, acc = seq_ce(model, data["val_tokens"], data["val_label"], False)
    return {"val_ce": ce, "val_acc": acc}


def seq_run(cfg, mixer, data, key, *, causal, width, desc, tag, steps=None, model_kw=None,
            loss=None, init=None, optimizer=None):
    """Train ``cfg.seeds`` models of one mixer on sequence-labelling ``data`` for ``steps``
    (default ``cfg.steps``); validation cross-entropy (nats) and accuracy at every
    record.  ``model_kw``: extra :class:`~gmtheory.gma_models.ModelConfig` fields;
    ``loss``: a loss in place of the masked cross-entropy; ``init``: as in
    :func:`train_seeds`; ``optimizer``: as there."""
    mcfg = matched_models(cfg, (mixer,), vocab=VOCAB, n_out=VOCAB, causal=causal,
                          max_len=width, **(model_kw or {}))[mixer]
    data = {k: jnp.asarray(v) for k, v in data.items()}
    res, clock = train_seeds(mcfg, loss or SeqLoss(int(cfg.batch), not causal), key, cfg.seeds,
                             steps=steps or cfg.steps, lr=cfg.lr, data=data,
                             records=cfg.records,
                             metrics_fn=_seq_metrics if causal else _seq_metrics_masked,
                             desc=desc, tag=tag, init=init, optimizer=optimizer)
    return res, clock, mcfg


def _pad(a, n, value):
    return np.pad(a, [(0, 0), (0, n - a.shape[1])], constant_values=value)


# ------------------------------------------------------------------ shared model fields
@dataclass(frozen=True, kw_only=True)
class GMAModelConfig(SimConfig):
    """The fields the three GMA experiments share: the seeds trained at once, the mixers
    compared, the model (:class:`gmtheory.gma_models.ModelConfig`: width ``d_model``,
    ``depth`` blocks of ``heads`` heads, MLP width ``mlp_hidden``, ``K`` GMA components,
    ``features`` random features of FAVOR+) and the optimiser (``steps`` of ``batch``
    sequences, AdamW peaking at ``lr``: :func:`default_optimizer`)."""

    seeds: int
    mixers: tuple[str, ...]  # "ssm" in paper
    d_model: int
    depth: int
    heads: int
    mlp_hidden: int
    K: int
    features: int
    steps: int
    batch: int
    lr: float


# --------------------------------------------------------------------------- gma-recall
@dataclass(frozen=True, kw_only=True)
class RecallConfig(GMAModelConfig):
    """ListOps and MQAR accuracy against sequence length, four mixers.

    Quick profile (shares its four compiled programs with ``gma-lm``'s quick profile):
    ListOps and MQAR (4 pairs, 16 keys) at N = 32, one block of width 32, 150 steps of 16
    sequences, 3 seeds, every model *causal* (ListOps read at its last token); with one
    length per task the figure draws learning curves.  It shows the pipeline end to end,
    the relative speed of the mixers and which mixers start to learn MQAR within 150
    steps.  At these sizes ListOps stays near its majority-class rate for every mixer, so
    the quick profile *cannot* rank the mixers on long-context classification, test the
    bidirectional GMA form on it, or show a trend with length (it ran N = 16 too until
    2026-12, which showed none and cost a cold ``make reproduce`` about 12 s).
    The paper profile (ListOps N = 500, 1000, 2000 bidirectional, read at its first
    token, as in LRA's lengths; MQAR N = 256..2048 with 16 pairs; width 128, 2 blocks,
    5000 steps) is sized for one GPU.  Its cpu profile decided nothing (every mixer at the
    task's trivial rule) and was dropped (issue 44): the claim table quotes its record
    (``simulations/committed/gma-recall/retired/cpu``); ``gma-mqar`` decides recall.
    """

    tasks: tuple[str, ...]
    listops_lengths: tuple[int, ...]
    listops_causal: bool
    mqar_lengths: tuple[int, ...]
    mqar_pairs: int
    mqar_keys: int
    listops_steps: int    # ListOps' training steps (0: ``steps``, as MQAR)
    width: int           # every sequence padded to this (0: each to its own N)
    records: int
    n_train: int
    n_test: int         # evaluated in one batch every record (softmax: N^2 scores each)

    def __post_init__(self):
        if "mqar" in self.tasks and T.mqar_vocab(self.mqar_keys) > VOCAB:
            # an id past the embedding table would be clamped by JAX, silently
            raise ValueError(f"mqar_keys: MQAR uses 1 + 2 mqar_keys token ids, at most the "
                             f"models' vocabulary of {VOCAB}; got mqar_keys="
                             f"{self.mqar_keys} ({T.mqar_vocab(self.mqar_keys)} ids). Use "
                             f"mqar_keys <= {(VOCAB - 1) // 2}.")
        if self.listops_steps and self.listops_steps < self.records:
            raise ValueError(f"listops_steps: must be 0 (as steps) or at least records="
                             f"{self.records}, got {self.listops_steps}.")


def _recall_lengths(cfg, task):
    return cfg.listops_lengths if task == "listops" else cfg.mqar_lengths


def _recall_points(cfg):
    return [{"task": t, "N": int(n), "mixer": m} for t in cfg.tasks
            for n in _recall_lengths(cfg, t) for m in cfg.mixers]


def _recall_data(cfg, task, N, split):
    """Tokens and per-position labels: ListOps' answer at its last token (causal) or its
    first (bidirectional), MQAR's values at its query positions.  Drawn once per process
    for all mixers (read-only arrays)."""
    n = cfg.n_train if split == "train" else cfg.n_test
    return _recall_data_cached(cfg.seed, task, N, split, n, cfg.width or N,
                               cfg.listops_causal, cfg.mqar_pairs, cfg.mqar_keys)


@functools.lru_cache(maxsize=8)
def _recall_data_cached(seed, task, N, split, n, width, listops_causal, mqar_pairs, mqar_keys):
    key = stream_key(seed, f"gma-recall-{task}-{N}-{split}")
    out = _recall_arrays(key, task, N, n, width, listops_causal, mqar_pairs, mqar_keys)
    for a in out:
        a.flags.writeable = False
    return out


def _recall_arrays(key, task, N, n, width, listops_causal, mqar_pairs, mqar_keys):
    if task == "listops":
        d = T.listops(key, n, N)
        lab = np.full((n, width), -1, np.int32)
        at = d["length"] - 1 if listops_causal else np.zeros(n, np.int64)
        lab[np.arange(n), at] = d["label"]
        return _pad(d["tokens"], width, 0), lab
    d = T.mqar(key, n, N, mqar_pairs, mqar_keys, vocab=VOCAB)
    return _pad(d["tokens"], width, 0), _pad(d["label"], width, -1)


def _recall_point(cfg, point, key):
    task, N, mixer = point["task"], point["N"], point["mixer"]
    causal = task == "mqar" or cfg.listops_causal
    tr, trl = _recall_data(cfg, task, N, "train")
    te, tel = _recall_data(cfg, task, N, "test")
    data = {"tokens": tr, "label": trl, "val_tokens": te, "val_label": tel}
    res, clock, mcfg = seq_run(cfg, mixer, data, key, causal=causal, width=cfg.width or N,
                               desc=f"gma-recall {task} N={N} {mixer}",
                               tag=["gma-recall", task, N, mixer],
                               steps=cfg.listops_steps if task == "listops" else None)
    if task == "listops":
        chance = np.bincount(tel[tel >= 0], minlength=10).max() / cfg.n_test
    else:
        chance = 1.0 / cfg.mqar_keys
    return {"acc": np.asarray(res.history["val_acc"][-1]),          # (seeds,)
            "acc_curve": np.asarray(res.history["val_acc"]).T,       # (seeds, records)
            "steps": np.asarray(res.steps), "final_loss": np.asarray(res.loss[-1]),
            "sec_per_step": np.asarray(clock.seconds_per_step()),
            "params": np.asarray(GM.param_count(mcfg)), "chance": np.asarray(chance),
            "peak_rss_mb": np.asarray(peak_rss_mb())}


def _recall_assemble(cfg, points, results):
    out = {}
    for p, r in zip(points, results, strict=True):
        pre = f"{p['task']}/{p['mixer']}/"
        for k, v in r.items():
            out.setdefault(pre + k, []).append(np.asarray(v))
    arrays = {k: np.stack(v) for k, v in out.items()}
    for t in cfg.tasks:
        arrays[f"{t}/N"] = np.asarray(_recall_lengths(cfg, t))
    arrays["mixers"] = np.asarray(cfg.mixers)
    arrays["tasks"] = np.asarray(cfg.tasks)
    arrays.update(recall_baselines(cfg))
    return arrays


def recall_baselines(cfg) -> dict:
    """What a rule without recall or token mixing scores on the run's own test data, per
    task and length (mean and SE over the test sequences): MQAR's most-frequent-value
    rule (:func:`gmtheory.tasks.mqar_frequent_value`) and ListOps' root-operator rule
    (:func:`gmtheory.tasks.listops_root_rule`, fitted on the training data).  Keys
    ``TASK/rule``, ``TASK/rule_se`` (lengths,) and ``TASK/rule_name``."""
    out = {}
    for t in cfg.tasks:
        mu, se = [], []
        for N in _recall_lengths(cfg, t):
            te, tel = _recall_data(cfg, t, N, "test")
            if t == "mqar":
                acc = T.mqar_frequent_value(te, tel, cfg.mqar_keys)
            else:
                tr, trl = _recall_data(cfg, t, N, "train")
                acc = T.listops_root_rule(tr, trl, te, tel)
            m, e = mean_se(acc)
            mu.append(m)
            se.append(e)
        out[f"{t}/rule"], out[f"{t}/rule_se"] = np.asarray(mu), np.asarray(se)
        out[f"{t}/rule_name"] = np.asarray("most frequent value" if t == "mqar"
                                           else "root operator's majority label")
    return out


def _recall_summary(cfg, a):
    lines = []
    for t in cfg.tasks:
        for m in cfg.mixers:
            acc = a[f"{t}/{m}/acc"]                      # (lengths, seeds)
            cells = []
            for n, row in zip(a[f"{t}/N"], acc, strict=True):
                mu, se = mean_se(row)
                cells.append(f"N={int(n)}: {mu:.3f}±{se:.3f}")
            lines.append(f"{t:8s} {m:9s} test acc (mean±SE, {acc.shape[1]} seeds) "
                         + ", ".join(cells)
                         + f"; params {int(a[f'{t}/{m}/params'][0])}, "
                         f"{1e3 * float(np.mean(a[f'{t}/{m}/sec_per_step'])):.1f} ms/step "
                         "(all seeds together)")
        lines.append(f"{t:8s} chance (MQAR) / majority-class rate (ListOps): "
                     + ", ".join(f"{float(c):.3f}" for c in a[f"{t}/{cfg.mixers[0]}/chance"]))
    return lines


register(Simulation(
    name="gma-recall",
    description="ListOps and MQAR accuracy vs sequence length for softmax, elu+1 linear, "
                "FAVOR+ and GMA mixers at equal parameter count (issue 14)",
    config_cls=RecallConfig,
    points=_recall_points,
    run_point=_recall_point,
    assemble=_recall_assemble,
    summary=_recall_summary,
))
