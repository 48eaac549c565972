"""``gmtheory bench lda``: population gradient descent on C1 through the training engine,
against a Python-loop and an autodiff baseline."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

from .. import lda
from .._xla import jit_long
from ..mixture import GaussianMixture
from ..quadrature import expect_mixture
from ._runner import progress_bar, time_fn

__all__ = ["bench_lda", "format_lda"]


def bench_lda(*, quick: bool = False, repeats: int = 3, order: int | None = None,
              progress: bool = False) -> dict:
    """Population gradient descent on C1 (Fig. 1 protocol): wall time of ``10^5`` steps
    (``quick``: ``2*10^4``) through the training engine (:func:`gmtheory.lda.gradient_descent`,
    i.e. :func:`gmtheory.training.train`: ``lax.scan`` in blocks; the time of a whole call,
    so whatever the engine traces or compiles per call is included), against baselines in
    the same process: the same jitted step called from a Python loop (one dispatch per
    step; 2000 steps, scaled to the same count), and autodiff of an
    x-space tensor Gauss–Hermite risk in a scan (what a direct implementation would
    do; fixed nodes, so no sharp-gate alignment either).  float64, analytic
    Lemma B.10 gradients, Gauss–Hermite order 64 (d = 2: 4096 nodes per class)."""
    prob = lda.config("C1")
    steps = 20_000 if quick else 100_000
    order = order or lda.DEFAULT_ORDER
    th0 = lda.table3_start("theta2", prob)
    lr = 1e-4
    bar = progress_bar("lda", progress, total=3)  # scan, Python loop, autodiff baseline
    t0 = time.perf_counter()
    jax.block_until_ready(lda.gradient_descent(prob, th0, lr, steps, record_every=steps,
                                               order=order, progress=False))
    first = time.perf_counter() - t0
    scan_s = time_fn(lambda: lda.gradient_descent(prob, th0, lr, steps, record_every=steps,
                                                  order=order, progress=False),
                     repeats=repeats)
    bar.update()

    # Baseline 1, kept as a hand-written update on purpose (issue #12 keeps the benchmark's
    # own baselines): its point is one Python-level dispatch per step, which is what the
    # engine's lax.scan removes; routing it through gmtheory.training.train would remove
    # exactly the cost it measures.
    @jit_long
    def step(th):
        g = lda.grad(prob, th, order)
        return jax.tree.map(lambda a, b: a - lr * b, th, g)

    n_loop = 2000

    def loop():
        th = th0
        for _ in range(n_loop):
            th = step(th)
        return th

    loop_s = time_fn(loop, repeats=1) * steps / n_loop
    bar.update()

    # Baseline 2, kept as a plain autodiff loop on purpose (issue #12 keeps the benchmark's
    # own baselines): what a direct implementation would write, jax.grad of an x-space
    # tensor-GH risk (fixed nodes, same order, through quadrature.expect_mixture over the
    # two classes) in a bare lax.scan, without the engine's NaN guard or checkpoints; its
    # point is the cost of the gradient, not of the engine.
    classes = GaussianMixture(jnp.stack([prob.pi_pos, 1 - prob.pi_pos]),
                              jnp.stack([prob.m_pos, prob.m_neg]), jnp.stack([prob.cov] * 2))
    label = (1.0, -1.0)

    def risk_x(th):
        return expect_mixture(lambda x, k: jax.nn.softplus(-label[k] * lda.predictor(prob, th, x)),
                              classes, order, component=True)

    @jit_long
    def ad_run(th):
        def body(th, _):
            return jax.tree.map(lambda a, b: a - lr * b, th, jax.grad(risk_x)(th)), None
        return jax.lax.scan(body, th, None, length=steps)[0]

    ad_s = time_fn(ad_run, th0, repeats=1)
    bar.close()
    return {"steps": steps, "order": order, "scan_s": scan_s, "first_call_s": first,
            "python_loop_s_scaled": loop_s, "speedup_vs_loop": loop_s / scan_s,
            "autodiff_tensor_s": ad_s, "speedup_vs_autodiff": ad_s / scan_s,
            "us_per_step": 1e6 * scan_s / steps, "backend": jax.default_backend(),
            "devices": jax.device_count(), "target_s_for_1e5": 60.0}


def format_lda(res: dict) -> str:
    per_1e5 = res["scan_s"] * 1e5 / res["steps"]
    return "\n".join([
        f"LDA population GD on C1 (float64, GH order {res['order']}, analytic gradients), "
        f"backend {res['backend']}",
        f"{res['steps']:,} steps through the training engine (lax.scan blocks): "
        f"{res['scan_s']:.2f} s "
        f"({res['us_per_step']:.0f} us/step; first call incl. compilation "
        f"{res['first_call_s']:.2f} s)",
        f"baseline, jitted step from a Python loop: {res['python_loop_s_scaled']:.2f} s for the "
        f"same count -> scan is {res['speedup_vs_loop']:.2f}x faster (the step dominates)",
        f"baseline, autodiff of an x-space tensor-GH risk in a scan: "
        f"{res['autodiff_tensor_s']:.2f} s -> {res['speedup_vs_autodiff']:.2f}x",
        f"10^5 steps: {per_1e5:.1f} s (target < {res['target_s_for_1e5']:.0f} s): "
        + ("met" if per_1e5 < res["target_s_for_1e5"] else "MISSED"),
    ])

