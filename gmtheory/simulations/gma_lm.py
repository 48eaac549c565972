"""``gma-lm``: a causal byte-level LM on the Python standard library's sources, trained for
the five mixers of :mod:`gmtheory.gma_models` on the shared model fields and training of
:mod:`gmtheory.simulations.gma_sims`: validation bits per byte against steps and
wall-clock beside byte n-gram count models, and the responsibility analysis of the GMA
model's first layer (:func:`gmtheory.gma_analysis.responsibility_report`), trained and
untrained.

Documentation: ``docs/topics/gma.md#gma-in-use-experiments``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import gma_models as GM
from .. import tasks as T
from ..gma_analysis import BYTE_CATEGORIES, byte_categories, responsibility_report
from ..problems import stream_key
from ..stats import mean_se
from ._base import Simulation, register
from .gma_sims import (
    LN2,
    GMAModelConfig,
    peak_rss_mb,
    seq_run,
    untrained_models,
)

__all__ = ["LMConfig", "lm_corpus", "lm_data", "lm_responsibilities", "lm_baselines",
           "NGRAM_ORDERS"]


@dataclass(frozen=True, kw_only=True)
class LMConfig(GMAModelConfig):
    """Causal byte-level LM on the Python standard library's top-level ``.py`` files
    (:func:`gmtheory.tasks.stdlib_corpus`: files whose name hashes to 0 mod 8 held out).

    Quick profile (~17 s on 2 cores alone; less after ``gma-recall``, whose compiled
    programs it reuses): 2048 training windows of 32 bytes at seeded random offsets in the first
    1 MB of the training files, 128 fixed validation windows spread over 200 kB of the
    held-out files, one block of width 32, 150 steps of 16 windows, 3 seeds, validation
    every 30 steps.  It shows the learning curves separating early (from 8 bits per byte
    at initialisation towards the unigram/bigram level) and the responsibilities of a
    barely trained GMA layer; it *cannot* show the asymptotic ranking of the mixers (the
    paper profile: every non-overlapping 512-byte window of the corpus, 4 blocks of width
    256, 20000 steps).  The opt-in cpu profile (every 256-byte window, two blocks of width
    64, five mixers, 3500 steps of 8, every mixer behind the same kernel-4 short
    convolution ``conv``; 29 min on 2 cores without it) is committed and feeds the
    README's claim table, whose responsibilities row judges the trained first GMA layer
    against the same layer untrained (``gma/resp_nmi_untrained``).
    """

    max_train_bytes: int
    max_val_bytes: int
    width: int
    records: int
    n_train: int       # 0: every non-overlapping window
    n_val: int
    conv: int          # kernel of the short convolution before every mixer (0: none)


@functools.lru_cache(maxsize=2)
def lm_corpus(max_train_bytes: int, max_val_bytes: int):
    return T.stdlib_corpus(max_train_bytes=max_train_bytes or None,
                           max_val_bytes=max_val_bytes or None)


def _windows(buf, starts, width):
    w = np.stack([buf[s: s + width + 1] for s in starts]).astype(np.int32)
    return w[:, :-1], w[:, 1:]


def _val_starts(cfg, n_bytes):
    """The validation windows' first bytes: ``n_val`` windows spread over the buffer."""
    return np.linspace(0, n_bytes - cfg.width - 2, cfg.n_val).astype(np.int64)


#: context lengths (bytes) of the n-gram baselines of gma-lm
NGRAM_ORDERS = (1, 2, 3, 4, 5)


def lm_baselines(cfg) -> dict:
    """Bits per byte of byte n-gram count models (:func:`gmtheory.tasks.ngram_bits_per_byte`,
    1-5 bytes of context) counted on the whole training split the run draws its windows
    from (``max_train_bytes``: with ``n_train = 0``, as in the cpu profile, exactly the
    bytes the mixers train on; the quick profile's 2048 windows are a sample of it) and
    scored on the bytes its validation windows predict (their contexts may reach up to 5
    bytes before a window, which the mixers do not see).  Keys ``ngram/orders``,
    ``ngram/bpb``."""
    corpus = lm_corpus(cfg.max_train_bytes, cfg.max_val_bytes)
    tr, va = corpus["train"], corpus["val"]
    pos = (_val_starts(cfg, len(va))[:, None] + 1 + np.arange(cfg.width)[None]).ravel()
    k_max = max(NGRAM_ORDERS)
    bpb = []
    for k in NGRAM_ORDERS:
        bits = T.ngram_bits_per_byte(tr, va, k)          # positions k, k + 1, ...
        bpb.append(float(np.mean(bits[pos[pos >= k_max] - k])))
    return {"ngram/orders": np.asarray(NGRAM_ORDERS), "ngram/bpb": np.asarray(bpb)}


def lm_data(cfg, corpus):
    tr, va = corpus["train"], corpus["val"]
    if cfg.n_train:
        starts = np.sort(np.asarray(jax.random.randint(
            stream_key(cfg.seed, "gma-lm-windows"), (cfg.n_train,), 0,
            len(tr) - cfg.width - 1)))
    else:
        starts = np.arange(0, len(tr) - cfg.width - 1, cfg.width)
    x, y = _windows(tr, starts, cfg.width)
    vs = _val_starts(cfg, len(va))
    vx, vy = _windows(va, vs, cfg.width)
    return {"tokens": x, "label": y, "val_tokens": vx, "val_label": vy}


def _lm_points(cfg):
    return [{"mixer": m} for m in cfg.mixers]


def _lm_point(cfg, point, key):
    """One mixer of gma-lm.  A non-finite validation loss raises instead of being written:
    in 2026-12 a faulty compiled GMA forward (XLA:CPU left part of the causal chunk's
    output unwritten) gave NaN; the root cause is fixed in
    :func:`gmtheory.gma._causal_chunk_math` and tested under ``MALLOC_PERTURB_``
    (docs/topics/gma.md), so the point is no longer recompiled and retried."""
    mixer = point["mixer"]
    corpus = lm_corpus(cfg.max_train_bytes, cfg.max_val_bytes)
    data = lm_data(cfg, corpus)
    res, clock, mcfg = seq_run(cfg, mixer, data, key, causal=True, width=cfg.width,
                               desc=f"gma-lm {mixer}", tag=["gma-lm", mixer],
                               model_kw={"conv": int(cfg.conv)})
    out = {"val_bpb": np.asarray(res.history["val_ce"]).T / LN2,     # (seeds, records)
           "val_bpb0": np.asarray(res.initial["val_ce"]) / LN2,
           "steps": np.asarray(res.steps), "wall": np.asarray(clock.times),
           "sec_per_step": np.asarray(clock.seconds_per_step()),
           "params": np.asarray(GM.param_count(mcfg)),
           "peak_rss_mb": np.asarray(peak_rss_mb()),
           "python": np.asarray(corpus["python"]),
           "train_files": np.asarray(corpus["train_files"]),
           "val_files": np.asarray(corpus["val_files"]),
           "train_bytes": np.asarray(len(corpus["train"])),
           "val_bytes": np.asarray(len(corpus["val"]))}
    bad = ~np.isfinite(out["val_bpb"])
    if bad.any():  # never a silent NaN
        seeds, recs = np.nonzero(bad)
        raise FloatingPointError(
            f"gma-lm {mixer}: validation bits/byte is not finite for seeds {sorted(set(seeds))} "
            f"at records {sorted(set(recs))} although the training loss stayed finite; rerun "
            "(finished points are kept) and report it with the jaxlib version "
            "(docs/topics/gma.md).")
    if mixer == "gma":
        nmi_key = stream_key(cfg.seed, "gma-lm-nmi-shuffles")
        out.update(lm_responsibilities(res.params, data["val_tokens"], cfg.seeds, nmi_key))
        # the null: the same layer before training (its routing already depends on the
        # bytes, which with their positions alone set the first layer's input)
        null = lm_responsibilities(untrained_models(mcfg, key, cfg.seeds),
                                   data["val_tokens"], cfg.seeds, None)
        out["resp_nmi_untrained"] = null["resp_nmi"]
    return out


def lm_responsibilities(models, val_tokens, seeds, key):
    """Responsibility report of the first GMA layer of each seed, on the validation
    windows (keys: the LayerNorm'd residual stream entering the layer; categories: the
    byte at each position); ``key=None``: without the shuffled-category NMI."""
    x = jnp.asarray(val_tokens)
    cats = byte_categories(np.asarray(x))
    rows: dict[str, list] = {}
    for s in range(seeds):
        m = jax.tree.map(lambda a, s=s: a[s], models)
        z = m.blocks[0].mix_input(GM.mixer_outputs(m, x)[0])
        rep = responsibility_report(m.blocks[0].mixer.gma, z, cats, len(BYTE_CATEGORIES),
                                    key=None if key is None else jax.random.fold_in(key, s))
        for k, v in rep.items():
            rows.setdefault(k, []).append(v)
    out = {f"resp_{k}": np.stack(v) for k, v in rows.items()}          # (seeds, heads, ...)
    out["resp_category_counts"] = np.bincount(cats.ravel(), minlength=len(BYTE_CATEGORIES))
    return out


def _lm_assemble(cfg, points, results):
    arrays = {}
    for p, r in zip(points, results, strict=True):
        for k, v in r.items():
            if k in ("python", "train_files", "val_files", "train_bytes", "val_bytes"):
                arrays[k] = v
            else:
                arrays[f"{p['mixer']}/{k}"] = v
    arrays["mixers"] = np.asarray(cfg.mixers)
    arrays["categories"] = np.asarray(BYTE_CATEGORIES)
    arrays.update(lm_baselines(cfg))
    return arrays


def _lm_summary(cfg, a):
    lines = [f"corpus: Python {a['python']} stdlib, {int(a['train_bytes'])} training bytes "
             f"({len(a['train_files'])} files), {int(a['val_bytes'])} validation bytes "
             f"({len(a['val_files'])} held-out files)"]
    for m in cfg.mixers:
        final = a[f"{m}/val_bpb"][:, -1]
        mu, se = mean_se(final)
        lines.append(f"{m:9s} validation bits/byte at step {int(a[f'{m}/steps'][-1])}: "
                     f"{mu:.3f}±{se:.3f} ({len(final)} seeds); params "
                     f"{int(a[f'{m}/params'])}, {1e3 * float(a[f'{m}/sec_per_step']):.1f} "
                     f"ms/step (all seeds together)")
    if "gma/resp_usage_entropy" in a:
        for k in ("usage_entropy", "token_entropy", "dead_fraction", "nmi", "nmi_untrained",
                  "nmi_shuffled"):
            if f"gma/resp_{k}" not in a:
                continue
            v = a[f"gma/resp_{k}"]                   # (seeds, heads)
            lines.append(f"gma layer 1 {k}: mean over heads and seeds {float(np.mean(v)):.3f}"
                         f" (per head: {np.round(np.mean(v, 0), 3).tolist()})")
    return lines


register(Simulation(
    name="gma-lm",
    description="Byte-level causal LM on the Python standard library: validation bits/byte "
                "vs steps and wall-clock for four mixers; GMA responsibility analysis "
                "(issue 14)",
    config_cls=LMConfig,
    points=_lm_points,
    run_point=_lm_point,
    assemble=_lm_assemble,
    summary=_lm_summary,
    data=lambda cfg: T.stdlib_corpus_identity(),   # the corpus is the interpreter's stdlib
))
