"""``gmtheory bench denoise``: time to a test MSE on fresh prompts of the clean-context task
(Smart, Bietti & Sengupta), the authors' protocol against the best protocol found here.

It trains the clean-context simulation's model (:mod:`gmtheory.simulations.clean_context`),
so, like the CLI, it sits above the simulations; the library does not import it.
"""

from __future__ import annotations

import time
from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from .. import denoising as D
from .._xla import jit_long
from ..mixture import GaussianMixture
from ..operators import softmax_attention
from ..problems import stream_key
from ..simulations import get_simulation, make_config
from ..stats import mean_se
from ..training import hyper, minimize_lbfgs, train

__all__ = ["bench_denoise", "format_denoise", "sample_clean", "authors_init",
           "fit_isotropic_head", "AUTHORS_TEST_MSE"]


AUTHORS_TEST_MSE = 0.0285   # their trainer's final test MSE (issue #16; 800-prompt pool)


def sample_clean(key, n: int, cfg, dtype=jnp.float32):
    """``n`` fresh prompts of the clean-context task, drawn on the device in ``dtype``:
    tokens ``(n, L, d)``, noisy query ``(n, 1, d)``, clean query ``(n, 1, d)`` and the
    centres ``(n, C, d)``.  The distribution of :func:`clean_prompts` (equal weights,
    covariance ``s0^2 I``), drawn lean: one normal draw for the centres, one for every
    point's noise and one integer draw for the components, and no oracle."""
    C, L, d = cfg.centres, cfg.L, cfg.d
    kc, ki, kn = jax.random.split(key, 3)
    cen = jax.random.normal(kc, (n, C, d), dtype)
    cen = cen / jnp.linalg.norm(cen, axis=-1, keepdims=True)
    comp = jax.random.randint(ki, (n, L + 1), 0, C)
    noise = jax.random.normal(kn, (n, L + 2, d), dtype)
    pts = (jnp.take_along_axis(cen, comp[..., None], axis=1)
           + np.sqrt(cfg.s0_sq).astype(dtype) * noise[:, :L + 1])
    xq = pts[:, L:]
    return pts[:, :L], xq + np.sqrt(cfg.sz_sq).astype(dtype) * noise[:, L + 1:], xq, cen


def _bayes_batch(cen, zq, cfg):
    """The oracle (eq. (10), centres known) for each prompt: ``(n, 1, d)``."""
    w = jnp.full((cfg.centres,), 1.0 / cfg.centres, cen.dtype)
    covs = jnp.broadcast_to(cfg.s0_sq * jnp.eye(cfg.d, dtype=cen.dtype),
                            (cfg.centres, cfg.d, cfg.d))

    def one(c, z):
        mix = GaussianMixture.tree_unflatten(None, (w, c, covs))
        return D.bayes_denoiser(mix, np.sqrt(cfg.sz_sq), z)

    return jax.vmap(one)(cen, zq)


def _head_sq_err(p, toks, zq, xq):
    """Per-prompt MSE (per coordinate) of the authors' head ``p`` (U = W_KQ, V = W_PV)."""
    dt = p["U"].dtype
    pred = softmax_attention(toks.astype(dt), p["U"], p["V"], zq.astype(dt))
    return jnp.mean((pred - xq.astype(dt)) ** 2, axis=(1, 2))


_test_mse = jit_long(lambda p, toks, zq, xq: jnp.mean(_head_sq_err(p, toks, zq, xq)))


@partial(jit_long, static_argnames=("cfg", "n"))
def _test_set(key, cfg, n):
    toks, zq, xq, cen = sample_clean(key, n, cfg, jnp.result_type(float))
    return toks, zq, xq, _bayes_batch(cen, zq, cfg)


class _FreshLoss(eqx.Module):
    """The training loss on ``batch`` fresh prompts per step (a module whose fields are
    static: equal settings share one compiled program of :func:`gmtheory.training.train`)."""

    cfg: object = eqx.field(static=True)
    batch: int = eqx.field(static=True)
    dtype_name: str = eqx.field(static=True)

    def __call__(self, p, data, k):
        toks, zq, xq, _ = sample_clean(k, self.batch, self.cfg, jnp.dtype(self.dtype_name))
        return jnp.mean(_head_sq_err(p, toks, zq, xq))


def authors_init(key, cfg, dtype=jnp.float32):
    """Their initialisation: every entry of ``W_KQ``, ``W_PV`` uniform on ``[-1/sqrt(d),
    1/sqrt(d)]``."""
    lim = 1.0 / np.sqrt(cfg.d)
    ku, kv = jax.random.split(key)
    return {"U": jax.random.uniform(ku, (cfg.d, cfg.d), dtype, -lim, lim),
            "V": jax.random.uniform(kv, (cfg.d, cfg.d), dtype, -lim, lim)}


def _iso_objective(t, data):
    toks, zq, xq = data
    eye = jnp.eye(toks.shape[-1], dtype=toks.dtype)
    return jnp.mean(_head_sq_err({"U": t[0] * eye, "V": t[1] * eye}, toks, zq, xq))


def fit_isotropic_head(key, cfg, n_prompts: int = 400, dtype=jnp.float32, start=None):
    """The best isotropic head ``W_KQ = b I``, ``W_PV = v I`` at the finite ``L`` of
    ``cfg``: L-BFGS on the two scalars over ``n_prompts`` fresh prompts.  By the
    rotation invariance of the task (centres uniform on the sphere) the head's risk
    depends on ``(W_KQ, W_PV)`` only up to a common rotation, and the isotropic pair is
    its natural candidate optimum; :func:`best_isotropic_head` is the same fit in the
    infinite-prompt limit.  Returns ``(params, b, v)``."""
    toks, zq, xq, _ = sample_clean(key, n_prompts, cfg, dtype)
    x0 = jnp.asarray(start if start is not None else (0.5 / cfg.sz_sq, 1.0), dtype)
    res = minimize_lbfgs(_iso_objective, x0, (toks, zq, xq), maxiter=100, gtol=1e-6)
    b, v = (float(x) for x in res.x)
    eye = jnp.eye(cfg.d, dtype=dtype)
    return {"U": b * eye, "V": v * eye}, b, v


class _Stop(Exception):
    """Raised by the benchmark's callback to end a timed training run."""


def _timed_adam(p0, cfg, *, lr, batch, dtype, key, evaluate, t0_s, stop, record_every,
                max_steps, desc):
    """Adam on fresh prompts through :func:`gmtheory.training.train`, timed.

    A warm-up call of one block compiles the training program first (its wall time is
    returned as ``compile_s``); the timed call then runs from ``p0`` with the compiled
    program.  After every block of ``record_every`` steps the callback evaluates the
    test MSE (``evaluate``); that time is not counted as training time.  ``t0_s`` offsets
    the clock (time spent by an earlier phase).  ``stop(trace)`` ends the run, as does
    ``max_steps``.  Returns ``(trace, compile_s, eval_s)``, ``trace`` a list of
    ``(seconds, step, test MSE)``."""
    loss = _FreshLoss(cfg, int(batch), jnp.dtype(dtype).name)
    opt = hyper(optax.adam, learning_rate=float(lr))
    kw = dict(record_every=record_every, block_records=1, checkpoint=False, progress=False)
    t = time.perf_counter()
    jax.block_until_ready(train(loss, p0, opt, steps=record_every, key=key, **kw).params)
    compile_s = time.perf_counter() - t
    trace, clock = [], {"eval": 0.0, "start": 0.0}

    def callback(info):
        now = time.perf_counter()
        seconds = t0_s + now - clock["start"] - clock["eval"]
        trace.append((seconds, int(info["step"]), evaluate(info["params"])))
        clock["eval"] += time.perf_counter() - now
        if stop(trace) or info["step"] >= max_steps:
            raise _Stop

    clock["start"] = time.perf_counter()
    try:
        train(loss, p0, opt, steps=record_every * 10**6, key=key, callback=callback,
              desc=desc, **kw)
    except _Stop:
        pass
    return trace, compile_s, clock["eval"]


def _summarise_trace(trace, targets, budget_s):
    """Time to each target (first record at or below it; None if never) and the test MSE
    of the last record within ``budget_s``."""
    time_to = {name: next((t for t, _, m in trace if m <= v), None)
               for name, v in targets.items()}
    within = [r for r in trace if r[0] <= budget_s] or trace[:1]
    return {"trace": [list(r) for r in trace], "time_to": time_to,
            "mse_at_budget": within[-1][2], "step_at_budget": within[-1][1],
            "seconds_at_budget": within[-1][0], "final_mse": trace[-1][2],
            "final_seconds": trace[-1][0], "final_step": trace[-1][1]}


def bench_denoise(*, quick: bool = False, budget_s: float = 12.0, max_s: float = 60.0,
                  n_test: int = 2000, n_fit: int = 200, n_floor: int = 2000,
                  record_every: int = 25, max_steps: int = 10**6, seed: int = 0,
                  progress: bool = False, cfg=None, **_) -> dict:
    """``gmtheory bench denoise``: the clean-context denoiser (Smart, Bietti & Sengupta's
    setup, the task of ``simulations/clean-context.toml``'s quick profile: d = 16, 8 centres
    on the unit sphere, L = 500, s0^2 = 0.02, sZ^2 = 0.1, one softmax head without
    residual) trained on fresh prompts
    drawn on the device, float32, through :func:`gmtheory.training.train`.

    * ``n_test`` test prompts (float64) and the oracle Bayes MSE on them;
    * the **floor** of the model at this L: the isotropic head fitted by
      :func:`fit_isotropic_head` on ``n_floor`` independent prompts (Adam on all 512
      parameters started there does not go below it);
    * protocol **authors**: their initialisation, Adam 1e-2, batch 80;
    * protocol **best**: :func:`fit_isotropic_head` on ``n_fit`` prompts (two scalars by
      L-BFGS, the theory's symmetry), then Adam 1e-4, batch 80, on all parameters.

    Each protocol runs until ``budget_s`` seconds of training (test evaluations not counted)
    once its targets above the floor are reached, or ``max_s`` (or ``max_steps``); the test
    MSE is checked every ``record_every`` steps. Targets: the authors' final test MSE
    0.0285, 1.025 x Bayes, and floor + 0.025 x Bayes. Times exclude compilation, which is
    measured separately (a warm-up call of one block; the fit is run twice and its first,
    cold, time is reported too). ``quick``: budget 4 s, 500 test prompts. ``cfg`` overrides
    the task (tests use a tiny one). Random draws use the non-partitionable threefry (three
    times faster than the partitionable one on this CPU)."""
    if cfg is None:   # the task of the clean-context quick profile (its TOML file)
        cfg = make_config(get_simulation("clean-context"))
    if quick:
        budget_s, max_s, n_test = min(budget_s, 4.0), min(max_s, 20.0), min(n_test, 500)
    bar = tqdm(total=5, desc="bench denoise", disable=not progress, leave=False)
    with jax.threefry_partitionable(False):
        toks, zq, xq, fstar = _test_set(stream_key(seed, "bench-test"), cfg, n_test)
        bayes_pp = jnp.mean((fstar - xq) ** 2, axis=(1, 2))
        bayes = float(jnp.mean(bayes_pp))
        test32 = tuple(a.astype(jnp.float32) for a in (toks, zq, xq))

        def evaluate(p):
            return float(_test_mse(p, *test32))

        def stats(p):
            err = np.asarray(_head_sq_err(p, toks, zq, xq), float)
            return {"mse": float(err.mean()), "excess_over_bayes": mean_se(err - bayes_pp)}

        bar.update()
        p_floor, b_f, v_f = fit_isotropic_head(stream_key(seed, "bench-floor"), cfg, n_floor)
        floor = {"b": b_f, "v": v_f, "n_prompts": n_floor, **stats(p_floor)}
        bar.update()
        targets = {"authors_0.0285": AUTHORS_TEST_MSE, "1.025_bayes": 1.025 * bayes,
                   "floor_plus_0.025_bayes": floor["mse"] + 0.025 * bayes}

        reachable = [v for v in targets.values() if v > floor["mse"]]

        def stop(trace):            # budget spent and every target above the floor reached
            t, _, _ = trace[-1]
            reached = all(any(m <= v for _, _, m in trace) for v in reachable)
            return t >= max_s or (t >= budget_s and reached)

        runs = {}
        p0 = authors_init(stream_key(seed, "bench-init"), cfg)
        trace, comp, ev = _timed_adam(
            p0, cfg, lr=1e-2, batch=80, dtype=jnp.float32, key=stream_key(seed, "bench-a"),
            evaluate=evaluate, t0_s=0.0, stop=stop, record_every=record_every,
            max_steps=max_steps, desc="denoise: authors")
        runs["authors"] = {"protocol": "their init U[+-1/sqrt(d)], Adam 1e-2, batch 80, "
                           "fresh prompts, float32", "compile_s": comp, "eval_s": ev,
                           **_summarise_trace([(0.0, 0, evaluate(p0))] + trace, targets,
                                              budget_s)}
        bar.update()
        k_fit = stream_key(seed, "bench-fit")
        t = time.perf_counter()
        fit_isotropic_head(k_fit, cfg, n_fit)            # cold: compiles the objective
        fit_cold = time.perf_counter() - t
        t = time.perf_counter()
        p_fit, b, v = fit_isotropic_head(k_fit, cfg, n_fit)
        fit_s = time.perf_counter() - t
        bar.update()
        trace, comp, ev = _timed_adam(
            p_fit, cfg, lr=1e-4, batch=80, dtype=jnp.float32, key=stream_key(seed, "bench-b"),
            evaluate=evaluate, t0_s=fit_s, stop=stop, record_every=record_every,
            max_steps=max_steps, desc="denoise: best")
        runs["best"] = {"protocol": f"isotropic head fitted at L = {cfg.L} on {n_fit} fresh "
                        "prompts (L-BFGS on b, v), then Adam 1e-4, batch 80, all parameters, "
                        "fresh prompts, float32", "compile_s": comp, "eval_s": ev,
                        "fit_s": fit_s, "fit_cold_s": fit_cold, "fit_b": b, "fit_v": v,
                        **_summarise_trace([(fit_s, 0, evaluate(p_fit))] + trace, targets,
                                           budget_s)}
        bar.close()
    return {"cfg": {k: getattr(cfg, k) for k in ("d", "centres", "L", "s0_sq", "sz_sq")},
            "test_prompts": n_test, "bayes_mse": bayes, "floor": floor, "targets": targets,
            "budget_s": budget_s, "max_s": max_s, "record_every": record_every,
            "runs": runs, "backend": jax.default_backend()}


def _with_compilation(run: dict, seconds: float) -> float:
    """``seconds`` of a protocol's clock plus the compilation that preceded it: the fit's
    (its cold call minus its warm one) and, once Adam has started, the training
    program's."""
    fit = run.get("fit_cold_s", 0.0) - run.get("fit_s", 0.0)
    adam = run["compile_s"] if seconds > run.get("fit_s", 0.0) or "fit_s" not in run else 0.0
    return seconds + fit + adam


def format_denoise(res: dict) -> str:
    c, f, tg = res["cfg"], res["floor"], res["targets"]
    B = res["bayes_mse"]
    lines = [
        f"clean-context denoiser (Smart, Bietti & Sengupta): d={c['d']}, {c['centres']} "
        f"centres on the unit sphere, L={c['L']}, s0^2={c['s0_sq']}, sZ^2={c['sz_sq']}; one "
        f"softmax head, no residual; fresh prompts drawn on the device; backend "
        f"{res['backend']}",
        f"test: {res['test_prompts']} fresh prompts; oracle Bayes MSE {B:.5f}",
        f"floor of one head at L={c['L']}: isotropic head W_KQ = {f['b']:.3g} I, W_PV = "
        f"{f['v']:.3g} I (fitted on {f['n_prompts']} other prompts): test MSE {f['mse']:.5f}"
        f" = {f['mse'] / B:.4f} x Bayes (excess {f['excess_over_bayes'][0]:.2e} +- "
        f"{f['excess_over_bayes'][1]:.1e})",
        "targets: " + ", ".join(f"{k} = {v:.5f}" for k, v in tg.items()),
        "times: training seconds from the start of the protocol, compilation excluded "
        f"(given separately), test evaluations (every {res['record_every']} steps) "
        "excluded",
    ]
    for name, r in res["runs"].items():
        lines.append(f"[{name}] {r['protocol']}")
        if "fit_s" in r:
            lines.append(f"  fit: b = {r['fit_b']:.3g}, v = {r['fit_v']:.3g} in {r['fit_s']:.2f} s "
                         f"({r['fit_cold_s']:.2f} s on its first, compiling, call)")
        for k, v in r["time_to"].items():
            lines.append(f"  time to test MSE <= {k} ({tg[k]:.5f}): " + (
                f"not reached in {r['final_seconds']:.1f} s ({r['final_step']} steps)"
                if v is None else f"{v:.2f} s; {_with_compilation(r, v):.2f} s with "
                "compilation"))
        lines.append(f"  test MSE after {res['budget_s']:g} s: {r['mse_at_budget']:.5f} = "
                     f"{r['mse_at_budget'] / B:.4f} x Bayes ({r['step_at_budget']} steps); "
                     f"stopped at {r['final_seconds']:.1f} s ({r['final_step']} steps): "
                     f"{r['final_mse']:.5f} = {r['final_mse'] / B:.4f} x Bayes; training "
                     f"program compiled in {r['compile_s']:.1f} s")
    met = [r["time_to"]["1.025_bayes"] for r in res["runs"].values()]
    met = [t for t in met if t is not None and t <= res["budget_s"]]
    goal = f"goal: test MSE <= 1.025 x Bayes within {res['budget_s']:g} s: "
    if met:
        lines.append(goal + f"met ({min(met):.2f} s)")
    elif f["mse"] > tg["1.025_bayes"]:
        lines.append(goal + f"NOT met: the best head found at L={c['L']}, the isotropic "
                     f"one above, sits at {f['mse'] / B:.4f} x Bayes, and Adam on all "
                     "parameters started there does not lower it (protocol best); the "
                     "infinite-prompt optimum's small excess is out of reach at finite L, "
                     "where the softmax average over the context adds its variance")
    else:
        lines.append(goal + "NOT met in the time given")
    return "\n".join(lines)
