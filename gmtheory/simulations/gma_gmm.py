"""``gma-gmm`` (issue 14): in-context GMM classification, cases A (fixed means, labels
permuted per prompt) and B (means redrawn per prompt): trained softmax and GMA, the
trained GMA model's infinite-prompt limit, the softmax-attention limit (Prop. 2.1
operator) and the Bayes classifier with known means.  Model fields, matched parameter
counts and batched training are those of the other GMA experiments
(:mod:`gmtheory.simulations.gma_sims`).

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
from ..gma_analysis import head_features, prompt_limit
from ..mixture import GaussianMixture
from ..operators import softmax_limit_blocked
from ..problems import stream_key
from ..quadrature import expect_mixture
from ..stats import mean_se
from ._base import Simulation, register
from .gma_sims import GMAModelConfig, masked_ce, matched_models, train_seeds

__all__ = ["GMMConfig"]


@dataclass(frozen=True)
class GMMConfig(GMAModelConfig):
    """In-context classification of Gaussian-mixture points (:func:`gmtheory.tasks.gmm_icl`),
    case A (means fixed, labels permuted per prompt) and B (means redrawn per prompt).

    One bidirectional block (so the trained model's infinite-prompt limit is the layer's
    limit followed by the MLP and the head), softmax and GMA mixers at equal parameter
    count, minibatches from a seeded pool of ``n_train`` prompts per case.  Reported:
    test accuracy at the training prompt length ``L``; the trained GMA model's accuracy
    at L = infinity (moments ``E[r_k v^T]``, ``E[r_k]`` of the LayerNorm'd token
    embeddings by Gauss-Hermite quadrature per prompt,
    :func:`gmtheory.gma_analysis.prompt_limit`); the Prop. 2.1 softmax-attention limit on
    the raw tokens (scores ``x . q / var``, values the label;
    :func:`gmtheory.operators.softmax_limit_blocked`); and the Bayes classifier with the
    prompt's means known.

    Quick profile (~25 s on 2 cores): d = 2, 3 classes, L = 16, 200 steps of 16 prompts
    from a pool of 8192, width 32, 3 seeds.  It shows the A/B contrast at one (L, d);
    it cannot say how the gap depends on L, d or the number of classes (the paper
    profile: L = 128, 3000 steps, width 64).
    """

    cases: tuple[str, ...] = ("A", "B")
    d: int = 2
    n_classes: int = 3
    sep: float = 2.0
    var: float = 0.25
    L: int = 16
    n_train: int = 8192
    n_test: int = 512
    order: int = 16


def _gmm_points(cfg):
    return [{"case": c, "mixer": m} for c in cfg.cases for m in cfg.mixers]


@functools.cache
def _gmm_loss(batch):
    """Cross-entropy at the query of ``batch`` random prompts of the pool."""
    def loss(model, data, key):
        idx = jax.random.randint(key, (batch,), 0, data["inputs"].shape[0])
        logits = model(data["inputs"][idx])[:, -1]
        return masked_ce(logits, data["label"][idx], jnp.ones((batch,)))
    return loss


@functools.cache
def _gmm_draw(n, L, d, C, sep, var):
    """``key, redraw -> prompts``: one compiled sampler for both cases."""
    return jax.jit(lambda key, redraw: T.gmm_icl(key, n, L, case=redraw, d=d, n_classes=C,
                                                 sep=sep, var=var))


def _gmm_pools(cfg, case):
    """Training pool (``n_train`` prompts) and test prompts (``n_test``), drawn in one
    call from the case's seed stream."""
    draw = _gmm_draw(cfg.n_train + cfg.n_test, cfg.L, cfg.d, cfg.n_classes, float(cfg.sep),
                     float(cfg.var))
    p = draw(stream_key(cfg.seed, f"gma-gmm-{case}"), jnp.asarray(case == "B"))
    train = {"inputs": p["inputs"][: cfg.n_train], "label": p["label"][: cfg.n_train]}
    test = {k: v[cfg.n_train:] for k, v in p.items()}
    return train, test


@jax.jit
def _gmm_acc(models, inputs, label):
    return jax.vmap(lambda m: jnp.mean(jnp.argmax(m(inputs)[:, -1], -1) == label))(models)


def _query_logits_limit(model, q_tok, moments):
    """Logits of a one-block GMA model at query token ``q_tok`` ``(d_in,)`` when the
    prompt is infinite: the mixer output is its limit, the rest of the block is exact."""
    blk = model.blocks[0]
    h = model.embed_inputs(q_tok[None, None])[0]                 # (1, d_model)
    att = prompt_limit(blk.mixer.gma, blk.ln1(h), moments)
    x = h + att
    x = x + blk.mlp(blk.ln2(x))
    return (model.ln_f(x) @ model.head + model.head_b)[0]


@functools.partial(jax.jit, static_argnames=("order", "var"))
def _gma_limit_acc(models, test, order, var):
    """Accuracy of each seed's model at L = infinity on the test prompts' queries: per
    prompt, the moments ``E[r_k v^T]``, ``E[r_k]`` over its mixture of tokens
    ``(x, onehot(perm[k]), 0)``, ``x ~ N(m_k, var I)`` with equal class weights, by
    :func:`gmtheory.quadrature.expect_mixture` (``order^d`` Gauss-Hermite nodes per
    component; accumulated in float64 when enabled, then cast to the model's dtype)."""
    C, d = test["means"].shape[1:]

    def one_prompt(model, means, perm, q_tok):
        blk = model.blocks[0]
        dt = means.dtype

        def moments_at(x, k):                                    # nodes of component k
            x = x.astype(dt)
            lab = jnp.broadcast_to(jax.nn.one_hot(perm[k], C, dtype=dt), (x.shape[0], C))
            tok = jnp.concatenate([x, lab, jnp.zeros((x.shape[0], 1), dt)], 1)
            t = blk.ln1(model.embed_inputs(tok[None]))[0]
            rk, v = head_features(blk.mixer.gma, t)            # (H, J, K), (H, J, dv)
            return jnp.einsum("hnk,hnd->nhkd", rk, v), jnp.swapaxes(rk, 0, 1)

        mix = GaussianMixture(jnp.full((C,), 1.0 / C, dt), means,
                              jnp.broadcast_to(var * jnp.eye(d, dtype=dt), (C, d, d)))
        moments = jax.tree.map(lambda a: a.astype(dt),
                               expect_mixture(moments_at, mix, order, component=True))
        return jnp.argmax(_query_logits_limit(model, q_tok, moments))

    def acc(model):
        pred = jax.lax.map(lambda a: one_prompt(model, *a),
                           (test["means"], test["perm"], test["inputs"][:, -1]))
        return jnp.mean(pred == test["label"])
    return jax.vmap(acc)(models)


def _joint_mixture(means, perm, var):
    """Tokens ``(x, onehot(perm[k]))`` of component ``k`` as a Gaussian mixture in
    ``R^(d + C)``: means ``(m_k, e_perm[k])``, covariances ``diag(var I_d, 0)`` (PSD)."""
    C, d = means.shape
    mu = jnp.concatenate([means, jax.nn.one_hot(perm, C, dtype=means.dtype)], 1)
    cov = jnp.diag(jnp.concatenate([jnp.full((d,), var, means.dtype),
                                    jnp.zeros((C,), means.dtype)]))
    return GaussianMixture(jnp.full((C,), 1.0 / C, means.dtype), mu,
                           jnp.broadcast_to(cov, (C, d + C, d + C)))


def _reference_accuracies(cfg, test):
    """Accuracies of the Prop. 2.1 softmax-attention limit and of Bayes on the test
    prompts.  The limit reads the joint tokens ``(x, label one-hot)`` with scores
    ``x . q / var`` (``U = diag(I_d / var, 0)``) and values the label part (``V = [0, I_C]``):
    ``T(q) = sum_k alpha_k(q) e_perm[k]``, a label distribution; its argmax is the
    prediction."""
    d, C = cfg.d, cfg.n_classes
    U = jnp.zeros((d + C, d + C)).at[:d, :d].set(jnp.eye(d) / cfg.var)
    V = jnp.zeros((C, d + C)).at[:, d:].set(jnp.eye(C))
    q = test["inputs"][:, -1, :d].astype(jnp.float64)
    zq = jnp.concatenate([q, jnp.zeros((q.shape[0], C), q.dtype)], 1)

    def op(means, perm, z):
        mix = _joint_mixture(means.astype(z.dtype), perm, cfg.var)
        return softmax_limit_blocked(mix, U.astype(z.dtype), V.astype(z.dtype), z[None])[0]

    pred_op = jnp.argmax(jax.vmap(op)(test["means"], test["perm"], zq), -1)
    bayes = jnp.argmin(jnp.sum((test["means"] - q[:, None]) ** 2, -1), -1)
    pred_bayes = jnp.take_along_axis(test["perm"], bayes[:, None], 1)[:, 0]
    return (float(jnp.mean(pred_op == test["label"])),
            float(jnp.mean(pred_bayes == test["label"])))


def _gmm_point(cfg, point, key):
    case, mixer = point["case"], point["mixer"]
    mcfg = matched_models(cfg, (mixer,), d_in=T.gmm_token_dim(cfg.d, cfg.n_classes),
                    n_out=cfg.n_classes, causal=False)[mixer]
    train_pool, test = _gmm_pools(cfg, case)
    res, clock = train_seeds(mcfg, _gmm_loss(cfg.batch), key, cfg.seeds, steps=cfg.steps,
                             lr=cfg.lr, data=train_pool, desc=f"gma-gmm {case} {mixer}",
                             tag=["gma-gmm", case, mixer])
    acc = _gmm_acc(res.params, test["inputs"], test["label"])
    out = {"acc": np.asarray(acc), "final_loss": np.asarray(res.loss[-1]),
           "sec_per_step": np.asarray(clock.seconds_per_step()),
           "params": np.asarray(GM.param_count(mcfg))}
    if mixer == "gma":
        out["acc_limit"] = np.asarray(_gma_limit_acc(res.params, test, cfg.order,
                                                     float(cfg.var)))
    op, bayes = _reference_accuracies(cfg, test)
    out["acc_softmax_limit"] = np.asarray(op)
    out["acc_bayes"] = np.asarray(bayes)
    return out


def _gmm_assemble(cfg, points, results):
    arrays = {}
    for p, r in zip(points, results, strict=True):
        for k, v in r.items():
            if k in ("acc_softmax_limit", "acc_bayes"):
                arrays[f"{p['case']}/{k}"] = v
            else:
                arrays[f"{p['case']}/{p['mixer']}/{k}"] = v
    arrays["mixers"] = np.asarray(cfg.mixers)
    arrays["cases"] = np.asarray(cfg.cases)
    arrays["chance"] = np.asarray(1.0 / cfg.n_classes)
    return arrays


def _gmm_summary(cfg, a):
    lines = []
    for c in cfg.cases:
        parts = []
        for m in cfg.mixers:
            mu, se = mean_se(a[f"{c}/{m}/acc"])
            parts.append(f"trained {m} {mu:.3f}±{se:.3f}")
        if f"{c}/gma/acc_limit" in a:
            mu, se = mean_se(a[f"{c}/gma/acc_limit"])
            parts.append(f"trained GMA at L=inf {mu:.3f}±{se:.3f}")
        parts.append(f"softmax limit (Prop. 2.1) {float(a[f'{c}/acc_softmax_limit']):.3f}")
        parts.append(f"Bayes {float(a[f'{c}/acc_bayes']):.3f}")
        lines.append(f"case {c} (L={cfg.L}, {cfg.seeds} seeds, mean±SE): " + ", ".join(parts))
    for m in cfg.mixers:
        lines.append(f"{m}: params {int(a[f'{cfg.cases[0]}/{m}/params'])}, "
                     f"{1e3 * float(np.mean([a[f'{c}/{m}/sec_per_step'] for c in cfg.cases])):.1f}"
                     " ms/step (all seeds together)")
    return lines


register(Simulation(
    name="gma-gmm",
    description="In-context GMM classification (cases A, B): trained softmax and GMA vs "
                "GMA's infinite-prompt limit, the Prop. 2.1 softmax limit and Bayes "
                "(issue 14)",
    config_cls=GMMConfig,
    points=_gmm_points,
    run_point=_gmm_point,
    assemble=_gmm_assemble,
    summary=_gmm_summary,
))
