"""Where an expectation is taken: a Gauss–Hermite grid in low dimension, samples above.

:func:`nodes` returns weighted points of a mixture, tagged with their component, so
one integrand serves both rules: ``E f = sum_i w_i f(x_i)``.  On the grid the standard
error is 0 (the error is the quadrature's, set by the order); on samples it is the
Monte Carlo standard error of the weighted mean (:func:`weighted_mean_se`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..mixture import GaussianMixture, psd_factor
from ..quadrature import gauss_hermite_rule
from ..training import train


class Nodes(NamedTuple):
    x: jnp.ndarray         #: points (n, d)
    w: jnp.ndarray         #: weights (n,), summing to 1
    comp: jnp.ndarray      #: component of each point (n,)
    method: str            #: "gauss-hermite order p" or "monte carlo, n samples"
    mc: bool               #: True for samples (then an SE is reported)


def nodes(mixture: GaussianMixture, key, *, n_samples: int, order: int, gh_max_dim: int):
    """Weighted points for ``E_{x ~ mixture}``: a tensor GH grid per component when
    ``d <= gh_max_dim``, else ``n_samples`` i.i.d. samples from ``key``."""
    d, K = mixture.dim, mixture.n_components
    if d <= gh_max_dim:
        t, om = gauss_hermite_rule(order, d)
        F = psd_factor(mixture.covs)
        x = (mixture.means[:, None, :] + jnp.einsum("kij,nj->kni", F, t)).reshape(-1, d)
        w = (mixture.weights[:, None] * om[None]).reshape(-1)
        comp = jnp.repeat(jnp.arange(K), t.shape[0])
        return Nodes(x, w, comp, f"Gauss-Hermite, order {order} per dimension", False)
    x, comp = mixture.sample(key, int(n_samples))
    w = jnp.full((x.shape[0],), 1.0 / x.shape[0], dtype=x.dtype)
    return Nodes(x, w, comp, f"Monte Carlo, {int(n_samples):,} samples", True)


NODE_CAP = 1 << 20     # largest tensor grid (K order^d nodes) the adaptive rule evaluates


class Estimate(NamedTuple):
    """Expectations of several integrands with their errors (:func:`adaptive_means`)."""

    values: tuple          #: one value per integrand
    errors: tuple          #: its error: the quadrature error estimate or the MC SE
    kinds: tuple           #: per integrand, "quadrature" or "monte carlo" (its error's kind)
    method: str            #: how it was computed, in words
    order: int | None      #: the highest Gauss-Hermite order used (None: Monte Carlo only)
    capped: bool           #: True when GH did not converge within its budget for some
    history: tuple         #: (order, values) of every GH order tried


def adaptive_means(fn, mixture: GaussianMixture, key, *, order: int, max_order: int,
                   tols, gh_max_dim: int, n_samples: int, names=None) -> Estimate:
    """``E fn(x)_i`` for ``x`` from ``mixture`` (``fn`` returns a tuple of per-point
    arrays), each with its error.

    Where ``d <= gh_max_dim`` the tensor Gauss-Hermite order doubles from ``order`` until two
    successive orders agree within ``tols[i]``; the value is the higher order's and its
    error the last change (an integrand with a kink, e.g. a Bayes error, converges slowly,
    so the error is measured, not assumed).  An integrand that has not converged when the
    order would pass ``max_order`` or the grid :data:`NODE_CAP` nodes is *capped*: its value
    is a Monte Carlo mean over ``n_samples`` samples (from ``key``) with its SE, and the
    method says which option lifts the cap (``names`` name the integrands there).  Above
    ``gh_max_dim``: Monte Carlo."""
    d, K = mixture.dim, mixture.n_components
    history = []
    mc_vals = None
    # one compiled program per grid size: run op by op, every primitive of the integrand
    # is lowered (and its IR context built) anew for each order's shape
    fn = jax.jit(fn)

    def mc():
        nonlocal mc_vals
        if mc_vals is None:
            x, _ = mixture.sample(key, int(n_samples))
            mc_vals = [mc_mean_se(v) for v in fn(x)]
        return mc_vals

    if d > gh_max_dim:
        m = mc()
        return Estimate(tuple(v for v, _ in m), tuple(s for _, s in m),
                        ("monte carlo",) * len(m), f"Monte Carlo, {int(n_samples):,} samples",
                        None, False, ())
    top = min(int(max_order), int((NODE_CAP / K) ** (1.0 / d)))
    o, prev = min(int(order), top), None
    while True:
        nd = nodes(mixture, key, n_samples=0, order=o, gh_max_dim=d)
        vals = tuple(float(jnp.sum(nd.w * jnp.asarray(v))) for v in fn(nd.x))
        history.append((o, vals))
        errs = tuple(math.inf for _ in vals) if prev is None else tuple(
            abs(a - b) for a, b in zip(vals, prev[1], strict=True))
        done = [e <= t for e, t in zip(errs, tols, strict=True)]
        if all(done) or o >= top:
            break
        prev = (o, vals)
        o = min(2 * o, top)
    gh = (f"Gauss-Hermite, order {o} per dimension (its change from order "
          f"{prev[0] if prev else o} is the error)")
    if all(done):
        return Estimate(vals, errs, ("quadrature",) * len(vals), gh, o, False, tuple(history))
    m = mc()
    capped = [i for i, ok in enumerate(done) if not ok]
    names = names or [f"integrand {i}" for i in range(len(vals))]
    why = (f"Monte Carlo, {int(n_samples):,} samples, for {', '.join(names[i] for i in capped)}"
           f": Gauss-Hermite "
           f"had not converged at order {o} (change "
           f"{', '.join(f'{errs[i]:.2g}' for i in capped)} against a tolerance of "
           f"{', '.join(f'{tols[i]:.2g}' for i in capped)}); raise options.max_order, or lower "
           "options.gh_max_dim to go straight to Monte Carlo")
    return Estimate(tuple(m[i][0] if i in capped else vals[i] for i in range(len(vals))),
                    tuple(m[i][1] if i in capped else errs[i] for i in range(len(vals))),
                    tuple("monte carlo" if i in capped else "quadrature"
                          for i in range(len(vals))),
                    (gh + "; " if len(capped) < len(vals) else "") + why, o, True,
                    tuple(history))


def weighted_mean_se(values, nd: Nodes):
    """``(sum_i w_i v_i, se)``: se = 0 on a GH grid, the MC standard error on samples."""
    v = jnp.asarray(values)
    mean = float(jnp.sum(nd.w * v))
    if not nd.mc:
        return mean, 0.0
    n = v.shape[0]
    return mean, float(jnp.std(v, ddof=1) / np.sqrt(n))


def mc_mean_se(values):
    """Plain Monte Carlo mean and standard error of i.i.d. values."""
    v = np.asarray(values, dtype=float)
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(v.size))


_PROMPT_OPT = optax.adam(3e-3)   # one object: the training engine caches its program on it


def train_on_prompts(loss, theta0, data, key, opts, *, L, tag):
    """Heads trained on fresh prompts of ``L`` tokens by the training engine (Adam,
    ``opts.train_steps`` steps), ``opts.train_seeds`` seeds from ``theta0`` at once
    (batched): the parameters with a leading seed axis.  ``loss(theta, data, key)`` draws
    its prompts from ``key``; ``data`` ends with an array whose static shape is
    ``(opts.train_prompts, L, opts.train_queries)``, so that one compiled program serves
    every point of an L."""
    S = opts.train_seeds
    params = jax.tree.map(lambda a: jnp.broadcast_to(a, (S,) + a.shape), theta0)
    shape = jnp.zeros((opts.train_prompts, L, opts.train_queries))
    res = train(loss, params, _PROMPT_OPT, steps=opts.train_steps,
                key=jax.random.split(key, S), data=(*data, shape), batched=True,
                progress=False, desc=f"head on L = {L} prompts", tag=tag)
    return res.params


def seeds_mean_se(values, ses):
    """Mean over independently trained seeds, each evaluated on the same prompts with its
    own SE over prompts: the SE counts both the prompts (the seeds' mean squared SE over
    the number of seeds) and the spread over seeds (their variance over the number)."""
    v, s = np.asarray(values, dtype=float), np.asarray(ses, dtype=float)
    spread = v.var(ddof=1) / v.size if v.size > 1 else 0.0
    return float(v.mean()), float(np.sqrt(np.mean(s**2) / v.size + spread))


def binomial_mean_se(hits):
    """Mean of 0/1 outcomes with the Agresti–Coull standard error
    ``sqrt(p~ (1 - p~) / (n + 4))``, ``p~ = (k + 2) / (n + 4)``: unlike ``sqrt(p (1 - p) / n)``
    it is not 0 when no (or every) outcome is a hit, so rare errors keep an honest SE."""
    v = np.asarray(hits, dtype=float)
    n, k = v.size, float(v.sum())
    pt = (k + 2.0) / (n + 4.0)
    return k / n, float(np.sqrt(pt * (1.0 - pt) / (n + 4.0)))


def combined_z(a, se_a, b, se_b):
    """``|a - b| / sqrt(se_a^2 + se_b^2)`` (inf when both SEs are 0 and a != b)."""
    se = float(np.hypot(se_a, se_b))
    diff = abs(float(a) - float(b))
    if se == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / se


def resolved_agreement(a, err_a, b, err_b, z_max, *, why, name):
    """``|a - b| / sqrt(err_a^2 + err_b^2) <= z_max`` as an agreement that states its
    resolution: the smallest relative error in ``a`` it is sure to detect,
    ``(z_max sqrt(err_a^2 + err_b^2) + |a - b|) / |a|``."""
    from ..comparisons import Comparison

    se = float(np.hypot(err_a, err_b))
    res = (z_max * se + abs(float(a) - float(b))) / abs(float(a)) if float(a) != 0 else None
    return Comparison("agreement", combined_z(a, err_a, b, err_b), z_max, why, name,
                      resolution=res)


def split(key, n):
    return list(jax.random.split(key, n))
