"""``gma-ablations`` (issue 27, item 3): the small experiments that the GMA reference lists
beside the main tasks, each one row of one table.

* ``selective-copy`` — selective copying (:func:`gmtheory.tasks.selective_copy`): data
  tokens scattered among blanks, copied in order at the marker positions; test accuracy
  per mixer, chance ``1 / copy_symbols``.
* ``slot-normalisation`` — GMA's two read-outs on the byte LM: query normalisation
  ``r_q^T S / r_q^T n`` against per-slot means ``r_q^T diag(n + c)^-1 S``
  (:func:`gmtheory.gma.gma_attention`); validation bits per byte.
* ``isotropic-router`` — the reference's pitfall "an isotropic variance shared by all
  components reduces GMA to a linear router", *measured*: on routing vectors ``z`` drawn
  from ``N(0, I)``, the best linear router (least squares of the log-responsibility
  ratios ``log r_c(z) - log r_0(z)`` on ``[z, 1]``) reproduces GMA's responsibilities to
  round-off when every component has one scale ``sigma``, and does not when the scales
  differ per component and dimension (the quadratic term no longer cancels).
* ``usage-entropy-loss`` and ``kmeans-init`` — dead components: GMA started at a sharp
  temperature (``sharp_tau0``), trained as is, with the usage-entropy auxiliary loss
  ``- aux_weight * mean_layers,heads H(mean_n r_n) / log K`` added to the cross-entropy,
  or with its means seeded by k-means++ on the normalised residual stream
  (:func:`gmtheory.gma_models.seed_gma_means`); dead fraction, usage entropy (of the first
  layer, on the validation windows) and validation bits per byte.

All rows train ``seeds`` models at once through :func:`gmtheory.simulations.gma_sims.
train_seeds` on the byte-LM windows of ``gma-lm`` (or the selective-copy sequences) with
the same width, model fields and optimiser, so in one process they reuse the compiled
programs of ``gma-recall`` and ``gma-lm``'s quick profiles where the configuration is
the same.  Documentation: ``docs/topics/gma.md#small-experiments``.
"""

from __future__ import annotations

from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import gma
from .. import gma_models as GM
from .. import tasks as T
from ..gma_analysis import usage_entropy_array
from ..problems import stream_key
from ..stats import mean_se
from ._base import Simulation, register
from .gma_lm import lm_baselines, lm_corpus, lm_data, lm_responsibilities
from .gma_sims import LN2, GMAModelConfig, seq_ce, seq_run

__all__ = ["AblationConfig", "EXPERIMENTS", "UsageEntropyLoss", "linear_router_gap",
           "usage_entropy_loss"]

EXPERIMENTS = ("selective-copy", "slot-normalisation", "isotropic-router",
               "usage-entropy-loss", "kmeans-init")


@dataclass(frozen=True, kw_only=True)
class AblationConfig(GMAModelConfig):
    """The small GMA experiments of the reference (module docstring).

    Quick profile: the byte-LM and selective-copy sequences at width 32, one block of width
    32, 150 steps of 16 sequences, 3 seeds (the ``gma-lm`` quick model and optimiser).  It
    shows each effect's direction at a size where the models barely train; it cannot say
    how the effects scale with length or width.
    """

    experiments: tuple[str, ...]
    max_train_bytes: int
    max_val_bytes: int
    width: int
    records: int
    n_train: int
    n_val: int
    copy_data: int        # data tokens to copy (the sequence is width - copy_data + copy_data)
    copy_symbols: int
    sharp_tau0: float   # starting temperature of the dead-component rows
    aux_weight: float
    router_K: int         # isotropic-router: components, routing dimension, samples
    router_dim: int
    router_samples: int

    def __post_init__(self):
        bad = sorted(set(self.experiments) - set(EXPERIMENTS))
        if bad or not self.experiments:
            raise ValueError(f"experiments: expected a non-empty subset of {EXPERIMENTS}, got "
                             f"{self.experiments!r}.")
        if not 1 <= self.copy_data < self.width:
            raise ValueError(f"copy_data: must be in [1, width={self.width}), got "
                             f"{self.copy_data}.")
        if not 1 <= self.copy_symbols <= 254:           # symbols, blank and marker < 256
            raise ValueError(f"copy_symbols: must be in [1, 254], got {self.copy_symbols}.")
        for name in ("sharp_tau0",):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: must be positive, got {getattr(self, name)}.")
        if not self.aux_weight >= 0:
            raise ValueError(f"aux_weight: must be >= 0, got {self.aux_weight}.")
        for name in ("router_K", "router_dim"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name}: must be >= 2, got {getattr(self, name)}.")
        if self.router_samples < 4 * self.router_dim:
            raise ValueError(f"router_samples: need >= 4 router_dim = {4 * self.router_dim} "
                             f"for the least-squares fit, got {self.router_samples}.")


# ------------------------------------------------------------------------ the router
def linear_router_gap(params: gma.GMAParams, z, head: int = 0) -> dict:
    """How far the best *linear* router is from GMA's responsibilities of ``head`` on
    routing vectors ``z`` ``(n, d_r)``: least squares of ``l_c(z) - l_0(z)`` (the
    responsibilities' log-ratios, ``c = 1..K-1``) on ``[z, 1]``, then
    ``softmax([0, fit])``.  Returns the largest absolute error of the responsibilities
    and the relative residual of the fitted log-ratios."""
    r = gma.responsibilities(params, z, head)
    p = jax.tree.map(lambda a: a[head], params)
    # the log-ratios from the logits, not log r (a responsibility may underflow to 0)
    logits = gma.log_responsibility_logits(p.mu, p.rho, p.mix_logits, z, p.lowrank)
    logits = logits / jnp.exp(p.log_tau)
    ratio = logits[:, 1:] - logits[:, :1]                        # (n, K - 1)
    X = jnp.concatenate([z, jnp.ones((z.shape[0], 1), z.dtype)], 1)
    coef, *_ = jnp.linalg.lstsq(X, ratio)
    fit = X @ coef
    r_lin = jax.nn.softmax(jnp.concatenate([jnp.zeros_like(fit[:, :1]), fit], 1), -1)
    gap = {"max_abs": float(jnp.max(jnp.abs(r_lin - r))),
            "log_ratio_residual": float(jnp.linalg.norm(fit - ratio)
                                        / jnp.linalg.norm(ratio - jnp.mean(ratio, 0)))}
    if not all(np.isfinite(v) for v in gap.values()):
        raise FloatingPointError(f"linear_router_gap: non-finite result {gap}; rescale z or "
                                 "raise the temperature.")
    return gap


def _router_point(cfg, key):
    """GMA layers with one shared scale (``rho`` equal everywhere) and with scales drawn
    per component and dimension, in float64 where x64 is enabled."""
    dt = jnp.float64 if jax.config.jax_enable_x64 else jnp.float32
    k_p, k_rho, k_z = jax.random.split(key, 3)
    out = {"iso_max_abs": [], "iso_residual": [], "aniso_max_abs": [], "aniso_residual": []}
    for s in range(cfg.seeds):
        ks = jax.random.fold_in(k_p, s)
        p = gma.init(ks, cfg.router_dim, heads=1, K=cfg.router_K, d_r=cfg.router_dim,
                     dtype=dt)
        z = jax.random.normal(jax.random.fold_in(k_z, s), (cfg.router_samples,
                                                           cfg.router_dim), dt)
        iso = p._replace(rho=jnp.full_like(p.rho, 0.3),
                         mix_logits=jax.random.normal(jax.random.fold_in(ks, 7),
                                                      p.mix_logits.shape, dt))
        aniso = iso._replace(rho=jax.random.normal(jax.random.fold_in(k_rho, s),
                                                   p.rho.shape, dt))
        for name, q in (("iso", iso), ("aniso", aniso)):
            g = linear_router_gap(q, z)
            out[f"{name}_max_abs"].append(g["max_abs"])
            out[f"{name}_residual"].append(g["log_ratio_residual"])
    res = {k: np.asarray(v) for k, v in out.items()}
    res["eps"] = np.asarray(float(jnp.finfo(dt).eps))
    return res


# --------------------------------------------------------------- the trained rows
class UsageEntropyLoss(eqx.Module):
    """Cross-entropy of ``batch`` random rows minus ``weight`` times the mean normalised
    usage entropy ``H(mean_n r_n) / log K`` of every GMA layer's key responsibilities on
    them (each head; :func:`gmtheory.gma_analysis.usage_entropy_array`): the auxiliary loss
    against dead components.  ``batch`` is static (a shape); ``weight`` is data, so the
    training engine runs one compiled program for every weight."""

    batch: int = eqx.field(static=True)
    weight: jax.Array

    def __call__(self, model, data, key):
        idx = jax.random.randint(key, (self.batch,), 0, data["tokens"].shape[0])
        tokens, label = data["tokens"][idx], data["label"][idx]
        ce = seq_ce(model, tokens, label, False)[0]
        ents = []
        for blk, x in zip(model.blocks, GM.mixer_outputs(model, tokens), strict=True):
            if blk.mixer.kind == "gma":
                _, rk, _ = gma.routes(blk.mixer.gma, blk.mix_input(x))        # (H, B, N, K)
                ents += [usage_entropy_array(rk[h]) for h in range(rk.shape[0])]
        return ce - self.weight * jnp.mean(jnp.stack(ents)) if ents else ce


def usage_entropy_loss(batch: int, weight: float) -> UsageEntropyLoss:
    """:class:`UsageEntropyLoss` for ``batch`` rows and auxiliary ``weight``."""
    return UsageEntropyLoss(int(batch), jnp.asarray(weight, jnp.float32))


def _lm_row(cfg, key, data, desc, *, model_kw=None, loss=None, init=None):
    res, clock, _ = seq_run(cfg, "gma", data, key, causal=True, width=cfg.width, desc=desc,
                            tag=["gma-ablations", desc], model_kw=model_kw, loss=loss,
                            init=init)
    out = {"val_bpb": np.asarray(res.history["val_ce"])[-1] / LN2,          # (seeds,)
           "sec_per_step": np.asarray(clock.seconds_per_step())}
    rep = lm_responsibilities(res.params, data["val_tokens"], cfg.seeds,
                              stream_key(cfg.seed, "gma-ablations-nmi"))
    for k in ("dead_fraction", "usage_entropy"):
        out[k] = np.mean(rep[f"resp_{k}"], 1)                                 # (seeds,)
    return out


def _seed_means(data, n: int = 512):
    """``init`` for :func:`train_seeds`: k-means++ means from ``n`` training windows."""
    tokens = jnp.asarray(data["tokens"][:n])

    def init(models, key):
        seeds = jax.tree.leaves(models)[0].shape[0]
        one = lambda m, k: GM.seed_gma_means(m, tokens, k)         # noqa: E731
        return jax.vmap(one)(models, jax.random.split(key, seeds))
    return init


def _copy_point(cfg, key):
    n_blank = cfg.width - cfg.copy_data
    split = {s: T.selective_copy(stream_key(cfg.seed, f"gma-ablations-copy-{s}"), n,
                                 n_blank, cfg.copy_data, cfg.copy_symbols)
             for s, n in (("train", cfg.n_train), ("test", cfg.n_val))}
    data = {"tokens": split["train"]["tokens"], "label": split["train"]["label"],
            "val_tokens": split["test"]["tokens"], "val_label": split["test"]["label"]}
    out = {}
    for i, m in enumerate(cfg.mixers):
        res, _, _ = seq_run(cfg, m, data, jax.random.fold_in(key, i), causal=True,
                            width=cfg.width, desc=f"gma-ablations copy {m}",
                            tag=["gma-ablations", "copy", m])
        out[f"{m}/acc"] = np.asarray(res.history["val_acc"])[-1]
    out["chance"] = np.asarray(1.0 / cfg.copy_symbols)
    return out


def _point(cfg, point, key):
    name = point["experiment"]
    if name == "isotropic-router":
        return _router_point(cfg, key)
    if name == "selective-copy":
        return _copy_point(cfg, key)
    data = lm_data(cfg, lm_corpus(cfg.max_train_bytes, cfg.max_val_bytes))
    if name == "slot-normalisation":
        out = {f"{norm}/{k}": v for norm in ("query", "slot")
               for k, v in _lm_row(cfg, key, data, f"slot {norm}",
                                   model_kw={"normalisation": norm}).items()}
        return {**out, **lm_baselines(cfg)}   # what byte counts alone reach (issue 44)
    sharp = {"tau0": cfg.sharp_tau0}
    if name == "usage-entropy-loss":
        base = _lm_row(cfg, key, data, "sharp", model_kw=sharp)
        aux = _lm_row(cfg, key, data, "sharp+aux", model_kw=sharp,
                      loss=usage_entropy_loss(cfg.batch, cfg.aux_weight))
        return {**{f"base/{k}": v for k, v in base.items()},
                **{f"aux/{k}": v for k, v in aux.items()}}
    row = _lm_row(cfg, key, data, "sharp+kmeans", model_kw=sharp, init=_seed_means(data))
    return {f"kmeans/{k}": v for k, v in row.items()}


def _points(cfg):
    return [{"experiment": e} for e in cfg.experiments]


def _assemble(cfg, points, results):
    arrays = {f"{p['experiment']}/{k}": np.asarray(v)
              for p, r in zip(points, results, strict=True) for k, v in r.items()}
    arrays["experiments"] = np.asarray(cfg.experiments)
    arrays["mixers"] = np.asarray(cfg.mixers)
    return arrays


def _ms(v, f=".3f"):
    mu, se = mean_se(np.asarray(v, float))
    return f"{mu:{f}} ± {se:{f}}"


def summary_rows(cfg, a) -> list[tuple[str, str]]:
    """``(experiment, result)`` rows: the table of docs/topics/gma.md."""
    rows = []
    if "selective-copy/chance" in a:
        cells = ", ".join(f"{m} {_ms(a[f'selective-copy/{m}/acc'])}" for m in cfg.mixers)
        rows.append(("selective copying (acc.)",
                     f"{cells}; chance {float(a['selective-copy/chance']):.3f}"))
    if "slot-normalisation/query/val_bpb" in a:
        grams = ""
        if "slot-normalisation/ngram/bpb" in a:
            grams = "; byte n-gram models (bytes of context: bits/byte) " + ", ".join(
                f"{int(k)}: {float(v):.2f}" for k, v in zip(
                    a["slot-normalisation/ngram/orders"], a["slot-normalisation/ngram/bpb"],
                    strict=True))
        rows.append(("GMA read-out (val. bits/byte)",
                     f"query normalisation {_ms(a['slot-normalisation/query/val_bpb'])}, "
                     f"per-slot means {_ms(a['slot-normalisation/slot/val_bpb'])}{grams}"))
    if "isotropic-router/iso_max_abs" in a:
        g = lambda k: float(np.max(a[f"isotropic-router/{k}"]))              # noqa: E731
        rows.append(("best linear router vs GMA (max |Δr|)",
                     f"one shared scale {g('iso_max_abs'):.1e} (log-ratio residual "
                     f"{g('iso_residual'):.1e}); per-component scales {g('aniso_max_abs'):.2f}"
                     f" (residual {g('aniso_residual'):.2f})"))
    for exp, arms in (("usage-entropy-loss", ("base", "aux")), ("kmeans-init", ("kmeans",))):
        for arm in arms:
            key = f"{exp}/{arm}/dead_fraction"
            if key not in a:
                continue
            label = {"base": f"sharp τ0 = {cfg.sharp_tau0:g}",
                     "aux": f"+ usage-entropy loss (weight {cfg.aux_weight:g})",
                     "kmeans": "+ k-means++ means"}[arm]
            rows.append((f"dead components: {label}",
                         f"dead fraction {_ms(a[key])}, usage entropy "
                         f"{_ms(a[f'{exp}/{arm}/usage_entropy'])}, val. bits/byte "
                         f"{_ms(a[f'{exp}/{arm}/val_bpb'])}"))
    return rows


def _summary(cfg, a):
    return [f"{name}: {text}" for name, text in summary_rows(cfg, a)]


register(Simulation(
    name="gma-ablations",
    description="Small GMA experiments of the reference: selective copying, slot vs query "
                "normalisation, the isotropic-variance linear router, and dead components "
                "with a usage-entropy loss or k-means++ means (issue 27)",
    config_cls=AblationConfig,
    points=_points,
    run_point=_point,
    assemble=_assemble,
    summary=_summary,
    data=lambda cfg: T.stdlib_corpus_identity(),
))
