"""Training dynamics on the population risk: gradient descent through the training engine,
and the noise floor of constant-step SGD near the Bayes manifold."""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from ..training import hyper, train
from .effective import phi
from .landscape import dist_E1, dist_E2, grad_and_sq_norm, hessian, risk_eff
from .problem import DEFAULT_ORDER, GATE_NODES, LDAParams, LDAProblem

__all__ = ["gradient_descent", "sgd_noise_floor"]

# ---------------------------------------------------------------- gradient descent ----

# The training engine caches its compiled program on what it depends on: the learning rate
# travels as data (training.hyper), the quadrature order is a static field of the loss
# module, so repeated runs (several starts, several step sizes, a sweep of problems passed as
# data) reuse one program.

class PopulationGradient(eqx.Module):
    """``(theta, prob, key) -> (R, grad R)`` of the population risk (Lemma B.10's analytic
    gradient at Gauss–Hermite order ``order``), for :func:`gmtheory.training.train`'s
    ``value_and_grad_fn``; the problem is the training data."""

    order: int = eqx.field(static=True)

    def __call__(self, theta, prob, _key):
        return grad_and_sq_norm(prob, theta, self.order)


class _GDMetrics(eqx.Module):
    order: int = eqx.field(static=True)

    def __call__(self, theta, prob):
        zeta = phi(prob, theta)
        return {"dist_E1": dist_E1(prob, zeta), "dist_E2": dist_E2(prob, zeta),
                "risk": risk_eff(prob, zeta, self.order), "theta": ravel_pytree(theta)[0]}


def gradient_descent(prob: LDAProblem, theta0: LDAParams, lr: float, steps: int, *,
                     record_every: int = 1, order: int = DEFAULT_ORDER,
                     metrics_fn=None, batched: bool = False, progress: bool | None = None,
                     desc: str = "lda population GD"):
    """Population gradient descent ``theta <- theta - lr grad R(theta)`` with Lemma B.10's
    analytic gradient: :func:`gmtheory.training.train` with ``optax.sgd(lr)`` (no
    sampling; the problem is passed as ``data``, so one compiled program serves every
    problem of the same dimension).  Returns ``(theta_final, trace)`` where ``trace`` has
    ``dist_E1``, ``dist_E2``, ``risk`` (gate-resolved, :func:`risk_eff`) and the flat
    ``theta`` every ``record_every`` steps (``steps // record_every`` rows), and
    ``grad_sq``, the mean of ``|grad R|^2`` over each record (:func:`grad_and_sq_norm`).

    ``metrics_fn(theta, prob) -> dict`` records other quantities instead of the default
    ones; ``batched=True`` runs a leading axis of starts in one program (``theta0``'s
    leaves stacked)."""
    if steps % record_every:
        raise ValueError(f"steps: {steps} is not a multiple of record_every={record_every}.")
    res = train(None, theta0, hyper(optax.sgd, learning_rate=float(lr)), steps=steps,
                data=prob, value_and_grad_fn=PopulationGradient(int(order)),
                record_every=record_every,
                metrics_fn=_GDMetrics(int(order)) if metrics_fn is None else metrics_fn,
                batched=batched, progress=progress, desc=desc)
    return res.params, {**res.history, "grad_sq": res.loss}


@partial(jax.jit, static_argnames=("order", "form", "gate_nodes"))
def _hessians(prob, theta, order, form, gate_nodes):
    return jax.vmap(lambda th: hessian(prob, th, order, form, gate_nodes))(theta)


def sgd_noise_floor(prob: LDAProblem, theta: LDAParams, lr: float, batch: int,
                    order: int = DEFAULT_ORDER, *, batched: bool = False,
                    gate_nodes: int | None = GATE_NODES, rtol: float = 1e-9):
    """Stationary excess risk of constant-step SGD (step ``lr``, ``batch`` fresh samples
    per step) near the Bayes manifold, from the linearised (Ornstein–Uhlenbeck) dynamics
    at ``theta``: returns ``(mean, sd)`` of the excess ``R(theta_t) - R*`` of a run that
    has reached its noise floor (arrays over the leading axis when ``batched``).

    Near a point of Theta* the loss is quadratic with Hessian ``H = grad^2 R(theta)``
    and, the logistic model being well specified there (``f_theta = f*``), the
    per-sample gradient covariance is the Fisher matrix ``E[eta(1-eta) grad f grad f^T]
    = H`` (Prop. B.12).  SGD ``theta <- theta - lr (H theta + xi)`` with
    ``Cov(xi) = H / batch`` then has, in each eigendirection ``lambda_i > 0`` of ``H``,
    the stationary variance ``p_i = lr / (batch (2 - lr lambda_i))``; the excess
    ``sum_i lambda_i x_i^2 / 2`` has mean ``sum_i lambda_i p_i / 2`` and variance
    ``sum_i (lambda_i p_i)^2 / 2`` (independent Gaussian modes).  Flat directions
    (eigenvalues below ``rtol`` times the largest) carry no noise and no excess.  The
    Hessian integrates the gate axis with ``gate_nodes`` nodes (:func:`risk_eff`), as
    SGD runs may end with sharp gates."""
    th = theta if batched else jax.tree.map(lambda a: jnp.asarray(a)[None], theta)
    Hs = np.asarray(_hessians(prob, th, order, None, gate_nodes))
    means, sds = [], []
    for H in Hs:
        ev = np.linalg.eigvalsh(H)
        lam = ev[ev > rtol * ev.max()]
        if np.any(lr * lam >= 2):
            raise ValueError(f"lr: {lr} is unstable for this Hessian (lr * lambda_max = "
                             f"{lr * lam.max():.3g} >= 2); constant-step SGD has no noise "
                             f"floor.")
        lp = lam * lr / (batch * (2 - lr * lam))
        means.append(0.5 * lp.sum())
        sds.append(np.sqrt(0.5 * np.sum(lp**2)))
    if batched:
        return np.array(means), np.array(sds)
    return float(means[0]), float(sds[0])

