"""Attention-based LDA experiments (paper Figs. 1, 4, 5; docs/topics/lda.md#figures) and two
beyond the paper: trained heads on finite prompts, and a (pi, separation, d) sweep.

Every training run goes through :func:`gmtheory.training.train`.

* ``lda-fig1``: population gradient descent on C1 (Gauss–Hermite risk; quick: step 0.5,
  paper: the paper's 1e-4) from the Table 3 starts, check lda.19's protocol: theta^(1)
  (near Theta_1) moved 1e-3 along the slowest damped Hessian direction, theta^(2) (near
  Theta_2), both plus N(0, eps^2) noise on every entry
  (:func:`gmtheory.lda.gradient_descent`); the displacement of theta^(2) is split into
  its damped and flat Hessian components.
* ``lda-sgd``: SGD on C2 (d = 20, step 1e-2) from the all-Gaussian start (Fig. 4) and
  the Fig. 5 start, seeds batched in one run (:func:`sgd_runs`), population risk by 2-D
  GH; success = tail-averaged excess (:func:`tail_excess`) within the run's SGD noise
  floor + 3 sd (:func:`sgd_epsilon`, :func:`gmtheory.lda.sgd_noise_floor`); the Fig. 5
  runs' first steps are also recorded densely (:func:`fast_phase_rates`).
* ``lda-finite-prompt``: a softmax and a linear head trained with optax Adam on sampled
  prompts of L tokens (seeds batched); excess risk with the infinite-prompt operator and
  on fresh prompts.
* ``lda-sweep``: final excess risk of a population-trained softmax head and of the best
  linear attention over a grid of class balance and separation (the problem is passed
  to the engine as data: one compiled program for the grid).

Length: just over 600 lines because the four experiments share the LDA problem set-up,
the optimisers and the statistics of the SGD runs (:func:`sgd_epsilon`,
:func:`tail_excess`, :func:`time_within`), which check lda.23 reads as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import lda, stats
from ..lda.dynamics import PopulationGradient
from ..training import hyper, train
from ._base import SimConfig, Simulation, assemble_grid, grid, register

__all__ = ["Fig1Config", "SGDConfig", "FinitePromptConfig", "SweepConfig", "fig1_rates",
           "sgd_runs", "tail_excess", "sgd_epsilon", "time_within", "TAIL_FRACTION",
           "FLOOR_Z", "FAST_WINDOWS", "fast_phase_rates", "finite_prompt_slope", "sweep_problem"]


def adam_cosine(learning_rate, decay_steps: int):
    """optax Adam with a cosine decay to 1 % of ``learning_rate`` over ``decay_steps``: the
    factory of :func:`_adam_cosine` (module level, so that the compiled program is shared)."""
    return optax.adam(optax.cosine_decay_schedule(learning_rate, decay_steps, alpha=1e-2))


def _adam_cosine(lr: float, steps: int):
    """:func:`adam_cosine` with the learning rate as data (:func:`training.hyper`): runs
    that differ only in ``lr`` share one compiled program."""
    return hyper(adam_cosine, learning_rate=float(lr), decay_steps=int(steps))


def _record_every(steps: int, records: int = 20) -> int:
    """The largest divisor of ``steps`` that gives at least ``records`` records."""
    target = max(1, steps // records)
    return max(k for k in range(1, target + 1) if steps % k == 0)


# ---------------------------------------------------------------- Figure 1 ------------

@dataclass(frozen=True, kw_only=True)
class Fig1Config(SimConfig):
    """Check lda.19's protocol: theta^(1) + ``amp`` along the slowest damped Hessian
    direction + N(0, noise^2) per entry; theta^(2) + N(0, noise^2) (Table 3).  The quick
    profile takes step 0.5 (5000x the paper's 1e-4: the same gradient flow in 5000x fewer
    iterations), so that the theta^(1) distance falls over several decades; the paper
    profile takes the paper's step.  Exponential fits start at iteration ``fit_from``."""

    steps: int
    record_every: int
    lr: float
    amp: float
    noise: float
    order: int
    fit_from: int


def _hessian_modes(prob, th, order):
    """Eigen-decomposition of grad^2 R(th) (eta form) and the mask of its damped
    (positive, > 1e-9 lambda_max) directions, as in checks 17-19."""
    ev, V = np.linalg.eigh(np.asarray(lda.hessian(prob, th, order, form="eta")))
    return ev, V, ev > 1e-9 * ev.max()


def _fig1_point(cfg, point, key):
    prob = lda.config("C1")
    start = point["start"]
    dist = lda.dist_E1 if start == "theta1" else lda.dist_E2
    th = lda.table3_start(start, prob)
    vec, unr = lda.flatten(th)
    ev, V, pos = _hessian_modes(prob, th, cfg.order)
    pert = cfg.noise * np.asarray(jax.random.normal(key, vec.shape, dtype=vec.dtype))
    if start == "theta1":       # along the slowest damped direction (check lda.19)
        pert = pert + cfg.amp * V[:, np.argmax(pos)]
    th0 = unr(vec + pert)
    _, tr = lda.gradient_descent(prob, th0, cfg.lr, cfg.steps, record_every=cfg.record_every,
                                 order=cfg.order)
    theta = np.concatenate([np.asarray(vec + pert)[None], np.asarray(tr["theta"])])
    modes = (theta - np.asarray(vec)) @ V                  # displacement in Hessian modes
    # the slowest damped mode decays by 1 - lr lambda per step (Hessian at the Table 3
    # point; check lda.19 takes it at the limit point, 3e-5 apart relatively here)
    ker = V[:, ~pos]
    plateau = dist(prob, lda.phi(prob, unr(vec + ker @ (ker.T @ pert))))
    return {"dist": np.concatenate([[float(dist(prob, lda.phi(prob, th0)))],
                                    np.asarray(tr["dist_E1" if start == "theta1"
                                                  else "dist_E2"])]),
            "risk": tr["risk"], "theta": theta,
            "damped": np.linalg.norm(modes[:, pos], axis=1),
            "flat": np.linalg.norm(modes[:, ~pos], axis=1),
            "eigenvalues": ev, "rate_pred": -np.log1p(-cfg.lr * ev[pos].min()),
            "plateau_pred": plateau, "n_flat": np.sum(~pos)}


def _fig1_assemble(cfg, points, res):
    out = {"iters": cfg.record_every * np.arange(cfg.steps // cfg.record_every + 1),
           "R_star": np.asarray(lda.bayes_risk(lda.config("C1"))),
           "fit_from": np.asarray(cfg.fit_from), "lr": np.asarray(cfg.lr),
           "amp": np.asarray(cfg.amp), "noise": np.asarray(cfg.noise),
           "order": np.asarray(cfg.order)}
    for p, r in zip(points, res, strict=True):
        for k, v in r.items():
            out[f"{p['start']}_{k}"] = v
    return out


def fig1_rates(a, fit_from=None):
    """Exponential fits ``log dist = c - rate * iteration`` over the iterations
    ``>= fit_from`` (default: the run's ``fit_from``) of the Fig. 1 run
    (:func:`gmtheory.stats.fit_semilog`): returns ``(fit_theta1, fit_theta2)`` for
    dist(Phi, E_1) from theta^(1) and dist(Phi, E_2) from theta^(2); the decay rate per
    iteration is ``-fit.slope``."""
    it = np.asarray(a["iters"], float)
    sel = it >= float(a["fit_from"] if fit_from is None else fit_from)
    return (stats.fit_semilog(it[sel], np.asarray(a["theta1_dist"])[sel]),
            stats.fit_semilog(it[sel], np.asarray(a["theta2_dist"])[sel]))


def _fig1_summary(cfg, a):
    f1, f2 = fig1_rates(a)
    d1, d2 = a["theta1_dist"], a["theta2_dist"]
    inc = np.linalg.norm(np.diff(a["theta1_theta"][1:], axis=0), axis=1)
    return [
        f"C1, population GD, step {cfg.lr:g}, {cfg.steps:,} iterations, GH order {cfg.order}; "
        f"theta^(1) + {cfg.amp:g} x slowest damped Hessian eigenvector + N(0, {cfg.noise:g}^2), "
        f"theta^(2) + N(0, {cfg.noise:g}^2); fits over iterations >= {cfg.fit_from:,}",
        f"theta^(1): dist(Phi, E_1) {d1[0]:.3g} -> {d1[-1]:.3g} "
        f"({np.log10(d1[0] / d1[-1]):.1f} decades); fitted rate {-f1.slope:.4g} "
        f"+- {f1.stderr:.2g}/iter (R^2 = {f1.r2:.6f}); Hessian predicts "
        f"{float(a['theta1_rate_pred']):.4g}",
        f"theta^(2): dist(Phi, E_2) {d2[0]:.3g} -> {d2[-1]:.3g} (end / start "
        f"{d2[-1] / d2[0]:.3f}); fitted rate {-f2.slope:.3g} +- {f2.stderr:.2g}/iter "
        f"(R^2 = {f2.r2:.3f}); plateau predicted from the {int(a['theta2_n_flat'])} flat "
        f"Hessian directions {float(a['theta2_plateau_pred']):.4g}",
        f"theta^(2) displacement from the Table 3 point: damped part "
        f"{a['theta2_damped'][0]:.3g} -> {a['theta2_damped'][-1]:.3g}, flat part "
        f"{a['theta2_flat'][0]:.3g} -> {a['theta2_flat'][-1]:.3g}",
        f"theta^(1) increments |theta_t - theta_(t-{cfg.record_every})|: first {inc[0]:.3g}, "
        f"last {inc[-1]:.3g} (geometric decay -> summable, converges to a point of Theta_1)",
    ]


register(Simulation(
    name="lda-fig1",
    description="Population GD on C1 from the Table 3 starts near Theta_1 and Theta_2 (Fig. 1).",
    config_cls=Fig1Config,
    points=lambda cfg: [{"start": "theta1"}, {"start": "theta2"}],
    run_point=_fig1_point,
    assemble=_fig1_assemble,
    summary=_fig1_summary,
))


# ---------------------------------------------------------------- Figures 4 and 5 -----

@dataclass(frozen=True, kw_only=True)
class SGDConfig(SimConfig):
    seeds: int
    steps: int
    batch: int
    lr: float
    eval_every: int
    order: int
    early_steps: int   # Fig. 5 start: the same runs' first steps, recorded densely
    early_every: int


def _sgd_init(key, d, init):
    k = jax.random.split(key, 4)
    if init == "gaussian":      # Fig. 4: every entry i.i.d. N(0, 1)
        return lda.LDAParams(jax.random.normal(k[0], (d, d)), jax.random.normal(k[1], (d,)),
                             jax.random.normal(k[2], (d,)), jax.random.normal(k[3], ()))
    if init == "fig5":          # Fig. 5: U11 = 0, u12 = 0, v22 = 0, v21 ~ N(0, I)
        return lda.LDAParams(jnp.zeros((d, d)), jnp.zeros(d), jax.random.normal(k[2], (d,)),
                             jnp.zeros(()))
    raise ValueError(f"init: unknown {init!r}; use 'gaussian' or 'fig5'.")


# train caches its compiled program on the identity of the loss, optimiser and metrics:
# build each once per setting so that the points of a simulation share one program.

class _SGDLoss(eqx.Module):
    """Logistic loss on ``batch`` fresh samples of the problem (the training data; float32
    normals, ``lda.sample(fast=True)``)."""

    batch: int = eqx.field(static=True)

    def __call__(self, th, data, key):
        prob, _ = data
        x, y = lda.sample(prob, key, self.batch, fast=True)
        return jnp.mean(jax.nn.softplus(-y * lda.predictor(prob, th, x)))


class _SGDMetrics(eqx.Module):
    order: int = eqx.field(static=True)

    def __call__(self, th, data):
        prob, basis = data
        return {"risk": lda.risk(prob, th, self.order),
                "PK_v21": jnp.linalg.norm(basis.T @ th.v21), "v21": jnp.linalg.norm(th.v21)}


def sgd_runs(prob: lda.LDAProblem, init: str, key, *, seeds: int, steps: int, batch: int,
             lr: float, eval_every: int, order: int, progress: bool | None = None):
    """SGD on the logistic loss of ``prob`` (fresh batches of ``batch`` samples per step,
    ``optax.sgd(lr)``) for ``seeds`` independent starts drawn by ``_sgd_init(init)``,
    batched in one :func:`gmtheory.training.train`.  Seed ``i`` uses
    ``fold_in(split(key, seeds)[i], 0)`` for its start and ``fold_in(..., 1)`` for its
    batches.  Returns the population risk (2-D GH, ``order``), ``|P_K v21|`` and
    ``|v21|`` every ``eval_every`` steps, shape ``(seeds, steps // eval_every)``, the
    starting risks ``risk0`` (seeds,) and the final parameters ``theta`` (batched)."""
    if steps % eval_every:
        raise ValueError(f"steps: {steps} is not a multiple of eval_every={eval_every}.")
    keys = jax.random.split(key, seeds)
    th0 = jax.vmap(lambda k: _sgd_init(jax.random.fold_in(k, 0), prob.d, init))(keys)
    basis = lda.krylov_basis(prob.cov, prob.m_pos)
    res = train(_SGDLoss(int(batch)), th0, hyper(optax.sgd, learning_rate=float(lr)),
                steps=steps,
                key=jax.vmap(lambda k: jax.random.fold_in(k, 1))(keys), data=(prob, basis),
                record_every=eval_every, metrics_fn=_SGDMetrics(int(order)), batched=True,
                progress=progress, desc=f"lda SGD ({init})")
    h = res.history                                  # (records, seeds) -> (seeds, records)
    return {"risk": h["risk"].T, "PK_v21": h["PK_v21"].T, "v21": h["v21"].T,
            "risk0": res.initial["risk"], "theta": res.params}


TAIL_FRACTION = 0.2
FLOOR_Z = 3.0


def tail_excess(risk, R_star, frac: float = TAIL_FRACTION):
    """Tail-averaged excess risk: the mean of ``risk - R_star`` over the last ``frac`` of
    the recorded evaluations (last axis; at least one).  One SGD sample of the
    population risk fluctuates with the SGD noise; the average over the tail estimates
    the level the run has reached."""
    risk = np.asarray(risk, float)
    if not 0 < frac <= 1:
        raise ValueError(f"frac: must lie in (0, 1], got {frac}.")
    n = max(1, int(math.ceil(frac * risk.shape[-1])))
    return np.mean(risk[..., -n:] - float(R_star), axis=-1)


def sgd_epsilon(floor, floor_sd, z: float = FLOOR_Z):
    """``eps = floor + z * sd``: a run whose tail-averaged excess is at most ``eps`` is
    *within eps of R** (at its SGD noise floor).  ``floor`` and ``floor_sd`` are the mean
    and standard deviation of the stationary excess of constant-step SGD at the run's
    final parameters (:func:`gmtheory.lda.sgd_noise_floor`); one stationary sample
    exceeds ``floor + 3 sd`` with probability well under 1 %, and the tail average of
    many samples fluctuates less than one sample."""
    return np.asarray(floor, float) + z * np.asarray(floor_sd, float)


def time_within(iters, risk, R_star, eps, frac: float = TAIL_FRACTION):
    """First recorded iteration ``t`` at which the run, stopped there, would be within
    ``eps``: ``tail_excess(risk[..., :k]) <= eps`` with ``iters[k - 1] = t``; ``inf`` if
    never.  ``risk`` (seeds, records), ``eps`` (seeds,)."""
    iters = np.asarray(iters, float)
    ex = np.asarray(risk, float) - float(R_star)
    eps = np.broadcast_to(np.asarray(eps, float), ex.shape[:-1])
    c = np.concatenate([np.zeros(ex.shape[:-1] + (1,)), np.cumsum(ex, -1)], -1)
    k = np.arange(1, ex.shape[-1] + 1)
    n = np.maximum(1, np.ceil(frac * k).astype(int))
    tails = (c[..., k] - c[..., k - n]) / n                  # tail average up to record k
    hit = tails <= eps[..., None]
    return np.where(hit.any(-1), iters[np.argmax(hit, -1)], np.inf)


FAST_WINDOWS = ((0, 20), (40, 80))


def fast_phase_rates(a, windows=FAST_WINDOWS):
    """Exponential fits (:func:`gmtheory.stats.fit_semilog`) of the seed-median excess of
    the Fig. 5 start over iteration windows of its fast phase, from the dense early
    records (iteration 0 = the start): one :class:`~gmtheory.stats.Fit` per window.  A
    single exponential would give the same rate in every window."""
    it = np.concatenate([[0.0], np.asarray(a["early_iters"], float)])
    ex = np.concatenate([np.asarray(a["fig5_risk0"])[:, None], a["fig5_early_risk"]], 1)
    med = np.median(ex - float(a["R_star"]), 0)
    out = []
    for lo, hi in windows:
        sel = (it >= lo) & (it <= hi)
        out.append(stats.fit_semilog(it[sel], med[sel]))
    return out


def _sgd_point(cfg, point, key):
    prob = lda.config("C2")
    out = sgd_runs(prob, point["init"], key, seeds=cfg.seeds, steps=cfg.steps,
                   batch=cfg.batch, lr=cfg.lr, eval_every=cfg.eval_every, order=cfg.order)
    floor, sd = lda.sgd_noise_floor(prob, out["theta"], cfg.lr, cfg.batch, cfg.order,
                                    batched=True)
    res = {**{k: out[k] for k in ("risk", "PK_v21", "v21", "risk0")},
           "floor": floor, "floor_sd": sd}
    if point["init"] == "fig5" and cfg.early_steps:
        # the fast phase: the same seeds (same key, so the same starts and batches) for
        # the first early_steps steps, with the risk recorded every early_every steps
        early = sgd_runs(prob, "fig5", key, seeds=cfg.seeds, steps=cfg.early_steps,
                         batch=cfg.batch, lr=cfg.lr, eval_every=cfg.early_every,
                         order=cfg.order, progress=False)
        res["early_risk"] = early["risk"]
    return res


def _sgd_assemble(cfg, points, res):
    out = {"iters": cfg.eval_every * np.arange(1, cfg.steps // cfg.eval_every + 1),
           "early_iters": cfg.early_every * np.arange(1, cfg.early_steps // cfg.early_every + 1),
           "R_star": np.asarray(lda.bayes_risk(lda.config("C2")))}
    for p, r in zip(points, res, strict=True):
        for k, v in r.items():
            out[f"{p['init']}_{k}"] = v
    return out


def _sgd_summary(cfg, a):
    lines = [f"C2 (d = 20), SGD step {cfg.lr:g}, batch {cfg.batch}, {cfg.steps:,} steps, "
             f"{cfg.seeds} seeds; population risk by 2-D GH (order {cfg.order}); "
             f"R* = {float(a['R_star']):.6f}; tail-averaged excess = mean over the last "
             f"{TAIL_FRACTION:.0%} of the evaluations; eps = SGD noise floor + {FLOOR_Z:g} sd "
             f"at each run's end (linearised SGD, lda.sgd_noise_floor)"]
    for init, label in (("gaussian", "Fig. 4 (all entries N(0,1))"),
                        ("fig5", "Fig. 5 (U11=u12=v22=0, v21~N(0,I))")):
        ex = tail_excess(a[f"{init}_risk"], a["R_star"])
        eps = sgd_epsilon(a[f"{init}_floor"], a[f"{init}_floor_sd"])
        t = time_within(a["iters"], a[f"{init}_risk"], a["R_star"], eps)
        lines.append(f"{label}: tail-averaged excess median {np.median(ex):.3g} "
                     f"[min {ex.min():.3g}, max {ex.max():.3g}]; noise floor median "
                     f"{np.median(a[f'{init}_floor']):.3g}; within eps: "
                     f"{int(np.sum(ex <= eps))} of {ex.size} seeds (median first time "
                     f"{np.median(t):.4g}); |P_K v21| final median "
                     f"{np.median(a[f'{init}_PK_v21'][:, -1]):.3g}")
    if "fig5_early_risk" in a:
        fits = fast_phase_rates(a)
        lines.append("Fig. 5 fast phase (median over seeds, records every "
                     f"{cfg.early_every} steps): exponential rate "
                     + "; ".join(f"{-f.slope:.3g}/iter over iterations {lo}-{hi} "
                                 f"(R^2 = {f.r2:.3f})"
                                 for (lo, hi), f in zip(FAST_WINDOWS, fits, strict=True)))
    return lines


register(Simulation(
    name="lda-sgd",
    description="SGD on C2 from the all-Gaussian (Fig. 4) and the Fig. 5 initialisations.",
    config_cls=SGDConfig,
    points=lambda cfg: [{"init": "gaussian"}, {"init": "fig5"}],
    run_point=_sgd_point,
    assemble=_sgd_assemble,
    summary=_sgd_summary,
))


# ---------------------------------------------------------------- finite prompts ------

@dataclass(frozen=True, kw_only=True)
class FinitePromptConfig(SimConfig):
    Ls: tuple[int, ...]
    seeds: int
    steps: int
    tokens_per_step: int   # prompts per step = max(min_batch, tokens_per_step // L)
    min_batch: int
    queries: int
    train_dtype: str  # training only; every evaluation runs in float64
    lr: float
    eval_prompts: int
    eval_queries: int
    init_scale: float
    order: int
    fit_max_L: int          # the softmax power-law fit uses L <= fit_max_L


def _prompts(prob, key, B, L, Q):
    kc, kq = jax.random.split(key)
    X, Y = lda.sample(prob, kc, B * L)
    x, y = lda.sample(prob, kq, B * Q)
    return X.reshape(B, L, -1), Y.reshape(B, L), x.reshape(B, Q, -1), y.reshape(B, Q)


class _PromptLoss(eqx.Module):
    """Logistic loss of a ``kind`` head on ``batch`` fresh prompts of ``L`` tokens and
    ``queries`` queries each (the problem is the training data)."""

    kind: str = eqx.field(static=True)
    L: int = eqx.field(static=True)
    batch: int = eqx.field(static=True)
    queries: int = eqx.field(static=True)

    def __call__(self, th, prob, key):
        X, Y, x, y = _prompts(prob, key, self.batch, self.L, self.queries)
        return jnp.mean(jax.nn.softplus(-y * lda.prompt_predictor(th, X, Y, x, self.kind)))


def _fp_point(cfg, point, key):
    prob = lda.config("C1")
    kind, L = point["kind"], point["L"]
    Rs = lda.bayes_risk(prob)
    dt = jnp.dtype(cfg.train_dtype)
    prob_t = jax.tree.map(lambda a: a.astype(dt), prob)
    batch = max(cfg.min_batch, cfg.tokens_per_step // L)
    ws, bs = lda.bayes_score(prob)
    # seed i: start from k0, batches from k1, evaluation prompts from k2
    k0, k1, k2 = (jnp.stack(ks) for ks in zip(*[jax.random.split(jax.random.fold_in(key, i), 3)
                                                for i in range(cfg.seeds)], strict=True))
    vec0, unr = lda.flatten(lda.LDAParams(jnp.zeros((2, 2)), jnp.zeros(2), jnp.zeros(2),
                                          jnp.zeros(())))
    th0 = jax.vmap(lambda k: unr(cfg.init_scale * jax.random.normal(k, vec0.shape,
                                                                    dtype=vec0.dtype)))(k0)
    res = train(_PromptLoss(kind, L, batch, cfg.queries),
                jax.tree.map(lambda a: a.astype(dt), th0), _adam_cosine(cfg.lr, cfg.steps),
                steps=cfg.steps, key=k1, data=prob_t, record_every=_record_every(cfg.steps),
                batched=True, desc=f"lda {kind} head, L={L}")
    th = jax.tree.map(lambda a: a.astype(vec0.dtype), res.params)

    @jax.jit
    def evaluate(th, k):
        if kind == "softmax":
            inf = lda.risk(prob, th, cfg.order) - Rs
        else:
            inf = lda.reduced_loss(prob, lda.linear_limit_weight(prob, th), cfg.order) - Rs
        # fresh prompts; paired with the Bayes score on the same queries (control variate:
        # E softplus(-y f*(x)) = R*), mean per prompt
        X, Y, x, y = _prompts(prob, k, cfg.eval_prompts, L, cfg.eval_queries)
        per = jnp.mean(jax.nn.softplus(-y * lda.prompt_predictor(th, X, Y, x, kind))
                       - jax.nn.softplus(-y * (x @ ws + bs)), axis=1)
        return inf, per

    inf, per = jax.vmap(evaluate)(th, k2)
    mean, se = stats.mean_se(np.asarray(per), axis=1)      # SE across prompts, per seed
    return {"excess_inf": inf, "excess_finite": mean, "excess_finite_se": se,
            "theta": jax.vmap(lambda t: lda.flatten(t)[0])(th), "train_loss": res.loss.T}


def _fp_points(cfg):
    return [{"kind": k, "L": int(L)} for k in ("softmax", "linear") for L in cfg.Ls]


def _fp_assemble(cfg, points, res):
    prob = lda.config("C1")
    _, lin_opt = lda.linear_attention_optimum(prob, cfg.order)
    out = {"Ls": np.array(cfg.Ls), "R_star": np.asarray(lda.bayes_risk(prob)),
           "linear_gap": np.asarray(lin_opt - lda.bayes_risk(prob)),
           "fit_max_L": np.asarray(cfg.fit_max_L)}
    for kind in ("softmax", "linear"):
        rows = [r for p, r in zip(points, res, strict=True) if p["kind"] == kind]
        for k in ("excess_inf", "excess_finite", "excess_finite_se"):
            out[f"{kind}_{k}"] = np.stack([r[k] for r in rows])     # (len(Ls), seeds)
        # the trained heads, flat (lda.flatten order): (len(Ls), seeds, 9)
        out[f"{kind}_theta"] = np.stack([np.asarray(r["theta"]) for r in rows])
    return out


def finite_prompt_slope(a, max_L=None):
    """Log-log fit (:func:`gmtheory.stats.fit_loglog`) of the softmax head's seed-median
    infinite-prompt excess against L over ``L <= max_L`` (default: the run's
    ``fit_max_L``; ``np.inf`` for every L); points with a non-positive median (a head at
    R* to quadrature accuracy) are left out."""
    Ls = np.asarray(a["Ls"], float)
    y = np.median(a["softmax_excess_inf"], 1)
    max_L = float(a["fit_max_L"]) if max_L is None else float(max_L)
    keep = (y > 0) & (Ls <= max_L)
    return stats.fit_loglog(Ls[keep], y[keep])


def _fp_summary(cfg, a):
    lines = [f"C1 (b* = log 1.5 != 0), Adam lr {cfg.lr:g} (cosine), {cfg.steps} steps of "
             f"max({cfg.min_batch}, {cfg.tokens_per_step}/L) prompts x {cfg.queries} queries "
             f"({cfg.train_dtype}), {cfg.seeds} seeds; "
             f"linear-attention gap (best w, no bias) = {float(a['linear_gap']):.4g}"]
    for kind in ("softmax", "linear"):
        for i, L in enumerate(a["Ls"]):
            inf, fin = a[f"{kind}_excess_inf"][i], a[f"{kind}_excess_finite"][i]
            lines.append(f"{kind:<8} L={int(L):>5}: excess (infinite-prompt operator) median "
                         f"{np.median(inf):.4g} [seeds {np.min(inf):.3g}..{np.max(inf):.3g}]; "
                         f"on fresh L-token prompts median {np.median(fin):.4g} "
                         f"[seeds {np.min(fin):.3g}..{np.max(fin):.3g}, SE per seed "
                         f"<= {np.max(a[f'{kind}_excess_finite_se'][i]):.2g}]")
    Ls = np.asarray(a["Ls"])
    fit = finite_prompt_slope(a)
    used = Ls[Ls <= cfg.fit_max_L]
    lines.append(f"softmax: fitted slope of the median infinite-prompt excess against L over "
                 f"L = {int(used.min())}..{int(used.max())}: {fit.slope:.2f} +- "
                 f"{fit.stderr:.2f} (R^2 = {fit.r2:.4f})")
    if used.size < Ls.size:
        full = finite_prompt_slope(a, np.inf)
        lines.append(f"softmax: over every L ({int(Ls.min())}..{int(Ls.max())}) the slope "
                     f"would be {full.slope:.2f} +- {full.stderr:.2f} (R^2 = {full.r2:.3f}): "
                     f"the curve flattens beyond L = {int(used.max())}")
    return lines


register(Simulation(
    name="lda-finite-prompt",
    description="Softmax vs linear heads trained on finite prompts of L tokens (C1).",
    config_cls=FinitePromptConfig,
    points=_fp_points,
    run_point=_fp_point,
    assemble=_fp_assemble,
    summary=_fp_summary,
))


# ---------------------------------------------------------------- sweep ---------------

def sweep_problem(d: int, pi_pos: float, separation: float) -> lda.LDAProblem:
    """``m_± = ±(separation/2) e_1 + e_2``, ``Gamma = I_d``: the means are not opposite
    (so Lemma 3.2 / Theorem 3.3 apply) and ``b* = log(pi / (1 - pi))``."""
    e = np.eye(d)
    return lda.LDAProblem(0.5 * separation * e[0] + e[1], -0.5 * separation * e[0] + e[1],
                          np.eye(d), pi_pos)


@dataclass(frozen=True, kw_only=True)
class SweepConfig(SimConfig):
    pi_pos: tuple[float, ...]
    separation: tuple[float, ...]
    d: tuple[int, ...]
    steps: int
    lr: float
    order: int       # training
    eval_order: int  # final risks (same rule for R* through the Bayes parameters)


def _adam_population(prob, th0, lr, steps, order):
    """Adam (cosine decay) on the population risk, analytic gradients; the problem goes in
    as ``data``, so every grid point of the same d runs the same compiled program."""
    res = train(None, th0, _adam_cosine(float(lr), int(steps)), steps=steps, data=prob,
                value_and_grad_fn=PopulationGradient(int(order)),
                record_every=_record_every(steps, 4), desc="lda population Adam")
    return res.params


def _sweep_point(cfg, point, key):
    d = point["d"]
    prob = sweep_problem(d, point["pi_pos"], point["separation"])
    Rs = lda.risk(prob, lda.bayes_parameters(prob), cfg.eval_order)
    th0 = _sgd_init(key, d, "fig5")
    th0 = th0._replace(v21=0.1 * th0.v21)
    th = _adam_population(prob, th0, cfg.lr, cfg.steps, cfg.order)
    _, lin = lda.linear_attention_optimum(prob, cfg.eval_order)
    return {"softmax_excess": lda.risk(prob, th, cfg.eval_order) - Rs, "linear_excess": lin - Rs,
            "b_star": lda.bayes_score(prob)[1]}


def _sweep_axes(cfg):
    return {"d": [int(d) for d in cfg.d], "separation": [float(s) for s in cfg.separation],
            "pi_pos": [float(p) for p in cfg.pi_pos]}


def _sweep_points(cfg):
    return grid(**_sweep_axes(cfg))


def _sweep_assemble(cfg, points, res):
    out = {"d": np.array(cfg.d), "pi_pos": np.array(cfg.pi_pos),
           "separation": np.array(cfg.separation)}
    out.update(assemble_grid(points, res, _sweep_axes(cfg),
                             ("softmax_excess", "linear_excess", "b_star")))
    return out


def _sweep_summary(cfg, a):
    lin, soft = a["linear_excess"], a["softmax_excess"]
    lines = [f"grid: d in {[int(x) for x in a['d']]}, pi_pos in {a['pi_pos'].tolist()}, "
             f"separation in {a['separation'].tolist()}; softmax: Adam on the population risk "
             f"({cfg.steps} steps); linear: its exact optimum (Newton, no bias path)"]
    half = np.isclose(a["pi_pos"], 0.5)
    for k, d in enumerate(a["d"]):
        i = np.unravel_index(soft[k].argmax(), soft[k].shape)
        j = np.unravel_index(lin[k].argmax(), lin[k].shape)
        lines.append(
            f"d = {int(d)}: softmax final excess median {np.median(soft[k]):.3g}, max "
            f"{soft[k].max():.3g} (pi_pos = {a['pi_pos'][i[1]]:g}, separation = "
            f"{a['separation'][i[0]]:g}); linear excess max {lin[k].max():.3g} (pi_pos = "
            f"{a['pi_pos'][j[1]]:g}, separation = {a['separation'][j[0]]:g}), at pi_pos = 0.5 "
            f"(b* = 0) max |excess| {np.max(np.abs(lin[k][:, half]), initial=0.0):.2g}")
    lines.append(f"softmax final excess over the whole grid: max {soft.max():.3g}")
    return lines


register(Simulation(
    name="lda-sweep",
    description="Final excess risk of trained softmax vs optimal linear attention over "
                "(pi_pos, separation, d).",
    config_cls=SweepConfig,
    points=_sweep_points,
    run_point=_sweep_point,
    assemble=_sweep_assemble,
    summary=_sweep_summary,
))
