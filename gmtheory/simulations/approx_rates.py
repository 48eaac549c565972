"""Error against resources for every ReLU -> softmax construction (docs/topics/approx.md).

:func:`measure` evaluates one target over a list of resource values and returns the
measured sup error (dense grid in 1-D, random points in higher dimension) beside the
bound.  Used by the ``approx.*`` checks and by the ``approx-rates`` figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .. import approx as A
from .. import approx_compose as C
from ..problems import stream_key
from ._base import SimConfig, Simulation, register

__all__ = ["TARGETS", "measure", "measure_composed", "measure_interpolation_affine", "SHIFTED",
           "adversarial_max_error",
           "ApproxRatesConfig"]

# target -> (resource name, default resource values, x-axis scale)
TARGETS = {
    "relu": ("beta", (1, 4, 16, 64, 256, 1024, 4096), "log"),
    "interpolation": ("p", (5, 9, 17, 33, 65, 129), "log"),
    "max-one-head": ("beta", (1, 4, 16, 64, 256, 1024), "log"),
    "max-relu-tree": ("beta", (1, 4, 16, 64, 256, 1024), "log"),
    "square": ("m", (1, 2, 3, 4, 5, 6, 7, 8), "lin"),
    "multiply": ("m", (1, 2, 3, 4, 5, 6), "lin"),
    "reciprocal-pl": ("n", (16, 32, 64, 128, 256, 512), "log"),
    "reciprocal-newton": ("steps", (1, 2, 3, 4, 5), "lin"),
}

MAX_N = 8  # inputs of the max/min targets
RECIP_A = 0.25


def adversarial_max_error(n: int, beta: float, n_delta: int = 2000):
    """Worst case of ``max - softmax-average`` over ``x = (1, 1-delta, ..., 1-delta)``.

    Evaluated through :func:`gmtheory.approx.max_one_head`; returns the sup over a grid of
    ``delta`` in ``(0, 20 log(n)/beta]`` (the maximiser lies near ``log(n)/beta``).
    """
    deltas = jnp.linspace(1e-3, 20.0 * max(math.log(n), 1.0) / beta, n_delta)
    x = jnp.concatenate([jnp.ones((n_delta, 1)), 1.0 - jnp.tile(deltas[:, None], (1, n - 1))], 1)
    return float(jnp.max(1.0 - A.max_one_head(x, beta)))


def measure(target: str, values=None, *, key=None, n_random: int = 4096):
    """Measured sup error and bound for ``target`` at each resource value.

    Returns a dict of numpy arrays ``resource``, ``measured``, ``bound``, and the
    resource counts ``heads``, ``layers``, ``max_beta``.
    """
    if target not in TARGETS:
        raise ValueError(f"target: unknown {target!r}; choose from {sorted(TARGETS)}.")
    values = TARGETS[target][1] if values is None else tuple(values)
    key = stream_key(0, f"approx-{target}") if key is None else key
    rows = []
    for v in values:
        if target == "relu":
            beta = float(v)
            u_star = 1.2784645427610737  # grid point at the maximiser u*/beta as well
            t = jnp.concatenate([jnp.linspace(-4, 4, 40001), jnp.array([u_star / beta])])
            err = float(jnp.max(jnp.abs(A.relu(t, beta) - jax.nn.relu(t))))
            rows.append((err, A.relu_bound(beta), A.Resources(1, 1, beta)))
        elif target == "interpolation":
            p = int(v)
            h = 2.0 / (p - 1)
            beta = 20.0 / h**2
            y = jnp.linspace(-1.5, 1.5, 30001)
            err = float(jnp.max(jnp.abs(A.interpolation_head(y, -1.0, 1.0, p, beta)
                                        - jnp.clip(y, -1.0, 1.0))))
            rows.append((err, A.interpolation_bound(-1.0, 1.0, p, beta),
                         A.Resources(1, 1, beta, p)))
        elif target == "max-one-head":
            beta = float(v)
            x = jax.random.uniform(key, (n_random, MAX_N))
            err = max(float(jnp.max(x.max(1) - A.max_one_head(x, beta))),
                      adversarial_max_error(MAX_N, beta))
            rows.append((err, A.max_one_head_bound(MAX_N, beta), A.Resources(1, 1, beta)))
        elif target == "max-relu-tree":
            beta = float(v)
            # uniform inputs, plus inputs whose differences are O(1/beta): the only place
            # the tree's error is not exponentially small (each node's error is c(beta t) /
            # beta, t a difference), so the sup is sampled where it lives at every beta
            ku, kz = jax.random.split(key)
            z = jax.random.uniform(kz, (n_random, MAX_N), minval=-4.0, maxval=4.0)
            x = jnp.concatenate([jax.random.uniform(ku, (n_random, MAX_N)), 0.5 + z / beta])
            out, res = A.max_relu_tree(x, beta)
            err = float(jnp.max(jnp.abs(out - x.max(1))))
            rows.append((err, A.max_relu_tree_bound(MAX_N, beta), res))
        elif target == "square":
            x = jnp.linspace(0.0, 1.0, 2**12 + 1)  # includes the dyadic points of level <= 12
            out, res = A.square(x, int(v))
            rows.append((float(jnp.max(jnp.abs(out - x**2))), A.square_bound(int(v)), res))
        elif target == "multiply":
            xy = jax.random.uniform(key, (2, n_random))
            g = jnp.linspace(0, 1, 65)
            X, Y = jnp.meshgrid(g, g)
            x = jnp.concatenate([xy[0], X.ravel()])
            y = jnp.concatenate([xy[1], Y.ravel()])
            out, res = A.multiply(x, y, int(v))
            rows.append((float(jnp.max(jnp.abs(out - x * y))), A.multiply_bound(int(v)), res))
        elif target == "reciprocal-pl":
            n = int(v)
            beta = 1e9
            x = jnp.linspace(RECIP_A, 1.0, 20001)
            out, res = A.reciprocal_pl(x, RECIP_A, n, beta)
            rows.append((float(jnp.max(jnp.abs(out - 1.0 / x))),
                         A.reciprocal_pl_bound(RECIP_A, n, beta), res))
        elif target == "reciprocal-newton":
            x = jnp.linspace(RECIP_A, 1.0, 2001)
            out, res = A.reciprocal_newton(x, RECIP_A, int(v), 10)
            rows.append((float(jnp.max(jnp.abs(out - 1.0 / x))),
                         A.reciprocal_newton_bound(RECIP_A, int(v), 10), res))
    return {
        "resource": np.array(values, float),
        "measured": np.array([r[0] for r in rows]),
        "bound": np.array([r[1] for r in rows]),
        "heads": np.array([r[2].heads for r in rows]),
        "layers": np.array([r[2].layers for r in rows]),
        "max_beta": np.array([r[2].max_beta for r in rows]),
    }


# target -> the box of the composed route's second test (rescaled into the construction's
# domain by the composition rules; a sub-box off 0 for ReLU exercises the tail bound)
SHIFTED = {
    "relu": (0.5, 4.0),
    "interpolation": (-3.0, 3.0),
    "max-one-head": (-1.0, 2.0),
    "max-relu-tree": (-1.0, 2.0),
    "square": (-1.0, 3.0),
    "multiply": ((-2.0, 0.5), (1.0, 3.0)),
    "reciprocal-pl": (0.5, 2.0),
    "reciprocal-newton": (0.5, 2.0),
}


def _composed(target, v, vars_):
    """The target at resource ``v`` through :mod:`gmtheory.approx_compose`."""
    if target == "relu":
        return C.relu(vars_[0], float(v))
    if target == "interpolation":
        h = 2.0 / (int(v) - 1)
        return C.clip(vars_[0], -1.0, 1.0, int(v), 20.0 / h**2)
    if target in ("max-one-head", "max-relu-tree"):
        return C.maximum(*vars_, form="head" if target == "max-one-head" else "tree",
                         beta=float(v))
    if target == "square":
        return C.square(vars_[0], int(v))
    if target == "multiply":
        return C.multiply(vars_[0], vars_[1], int(v))
    if target == "reciprocal-pl":
        return C.reciprocal(vars_[0], n=int(v), beta=1e9)
    return C.reciprocal(vars_[0], form="newton", steps=int(v), m=10, beta=None)


def _hand(target, v, x):
    """The hand-built construction of :func:`measure` at resource ``v`` on ``x`` ``(n, d)``."""
    if target == "relu":
        return A.relu(x[:, 0], float(v))
    if target == "interpolation":
        h = 2.0 / (int(v) - 1)
        return A.interpolation_head(x[:, 0], -1.0, 1.0, int(v), 20.0 / h**2)
    if target == "max-one-head":
        return A.max_one_head(x, float(v))
    if target == "max-relu-tree":
        return A.max_relu_tree(x, float(v))[0]
    if target == "square":
        return A.square(x[:, 0], int(v))[0]
    if target == "multiply":
        return A.multiply(x[:, 0], x[:, 1], int(v))[0]
    if target == "reciprocal-pl":
        return A.reciprocal_pl(x[:, 0], RECIP_A, int(v), 1e9)[0]
    return A.reciprocal_newton(x[:, 0], RECIP_A, int(v), 10)[0]


def _points(key, lo, hi, n_random, grid):
    """Random points of the box plus its corners (a dense grid instead in 1-D)."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    if lo.size == 1:
        return jnp.linspace(lo[0], hi[0], grid)[:, None]
    corners = np.array(np.meshgrid(*zip(lo, hi, strict=True))).reshape(lo.size, -1).T
    x = jax.random.uniform(key, (n_random, lo.size), minval=lo, maxval=hi)
    return jnp.concatenate([x, jnp.asarray(corners)])


def measure_composed(target: str, values=None, *, key=None, n_random: int = 4096):
    """The ``target`` through the composition rules of :mod:`gmtheory.approx_compose`.

    At each resource value: ``same``, the largest ``|composed - hand-built|`` on the
    construction's own domain (where every rescaling is the identity); ``measured`` and
    ``bound``, the composed route's sup error and certified bound there; ``shifted_*`` the
    same on the box :data:`SHIFTED` (rescaled into the domain by the rules).  Random
    points plus corners in higher dimension, a dense grid in 1-D.
    """
    if target not in TARGETS:
        raise ValueError(f"target: unknown {target!r}; choose from {sorted(TARGETS)}.")
    values = TARGETS[target][1] if values is None else tuple(values)
    key = stream_key(0, f"approx-composed-{target}") if key is None else key
    own = {"relu": (-4.0, 4.0), "interpolation": (-1.5, 1.5), "square": (0.0, 1.0),
           "reciprocal-pl": (RECIP_A, 1.0), "reciprocal-newton": (RECIP_A, 1.0)}
    d = MAX_N if target.startswith("max") else 2 if target == "multiply" else 1
    boxes = {"own": own.get(target, (0.0, 1.0)), "shifted": SHIFTED[target]}
    rows = {k: [] for k in ("same", "measured", "bound", "shifted_measured", "shifted_bound",
                            "heads", "layers", "max_beta")}
    for name, (lo, hi) in boxes.items():
        lo = np.broadcast_to(np.asarray(lo, float), (d,))
        hi = np.broadcast_to(np.asarray(hi, float), (d,))
        vars_ = C.variables(lo, hi)
        x = _points(jax.random.fold_in(key, name == "shifted"), lo, hi, n_random,
                    1001 if target == "reciprocal-newton" else 4001)
        for v in values:
            f = _composed(target, v, vars_)
            out = f(x)
            err = float(jnp.max(jnp.abs(out - f.exact(x))))
            if name == "own":
                rows["same"].append(float(jnp.max(jnp.abs(out - _hand(target, v, x)))))
                rows["measured"].append(err)
                rows["bound"].append(f.bound)
                r = f.resources
                rows["heads"].append(r.heads)
                rows["layers"].append(r.layers)
                rows["max_beta"].append(r.max_beta)
            else:
                rows["shifted_measured"].append(err)
                rows["shifted_bound"].append(f.bound)
    return {"resource": np.array(values, float), **{k: np.array(v) for k, v in rows.items()}}


def measure_interpolation_affine(values=None, *, d: int = 3, t: float = 0.3, key=None,
                                 n_random: int = 20_000):
    """The ``d > 1`` interpolation head :func:`gmtheory.approx.interpolation_head_affine`
    for ``clip(w^T x + t, -1, 1)``, ``w ~ N(0, I_d)`` and ``x`` uniform on ``[-1, 1]^d`` plus
    the corners, at ``p`` anchors (``beta = 20/h^2`` as in :func:`measure`).

    Returns ``p``, ``measured``, ``bound`` and ``vs_scalar``: the largest difference from
    the scalar head at ``y = w^T x + t`` (the same scores, formed differently); ``w``,
    ``y_max`` (largest ``|y|``) and ``beta``.
    """
    values = TARGETS["interpolation"][1] if values is None else tuple(values)
    key = stream_key(0, "approx-interpolation-affine") if key is None else key
    kw, kx = jax.random.split(key)
    w = jax.random.normal(kw, (d,))
    x = _points(kx, -np.ones(d), np.ones(d), n_random, 0)
    y = x @ w + t
    rows = []
    for p in values:
        h = 2.0 / (int(p) - 1)
        beta = 20.0 / h**2
        out = A.interpolation_head_affine(x, w, t, -1.0, 1.0, p=int(p), beta=beta)
        rows.append((float(jnp.max(jnp.abs(out - jnp.clip(y, -1.0, 1.0)))),
                     A.interpolation_bound(-1.0, 1.0, int(p), beta),
                     float(jnp.max(jnp.abs(out - A.interpolation_head(y, -1.0, 1.0, int(p),
                                                                       beta)))), beta))
    return {"p": np.array(values, float), "measured": np.array([r[0] for r in rows]),
            "bound": np.array([r[1] for r in rows]), "vs_scalar": np.array([r[2] for r in rows]),
            "beta": np.array([r[3] for r in rows]), "w": np.asarray(w),
            "y_max": float(jnp.max(jnp.abs(y)))}


@dataclass(frozen=True, kw_only=True)
class ApproxRatesConfig(SimConfig):
    n_random: int


def _run_point(cfg, point, key):
    return measure(point["target"], key=key, n_random=cfg.n_random)


def _assemble(cfg, points, results):
    out = {}
    for p, r in zip(points, results, strict=True):
        for k, v in r.items():
            out[f"{p['target']}/{k}"] = v
    return out


def _summary(cfg, a):
    lines = [f"{'target':<18} {'resource':>9} {'measured':>10} {'bound':>10} {'heads':>6} "
             f"{'layers':>6} {'max beta':>9}"]
    for t, (rname, _, _) in TARGETS.items():
        for i in range(len(a[f"{t}/resource"])):
            lines.append(f"{t:<18} {rname}={a[f'{t}/resource'][i]:<7g} "
                         f"{a[f'{t}/measured'][i]:10.3g} {a[f'{t}/bound'][i]:10.3g} "
                         f"{a[f'{t}/heads'][i]:6d} {a[f'{t}/layers'][i]:6d} "
                         f"{a[f'{t}/max_beta'][i]:9.3g}")
    return lines


register(Simulation(
    name="approx-rates",
    description="Measured sup error and bound against resources for each construction.",
    config_cls=ApproxRatesConfig,
    points=lambda cfg: [{"target": t} for t in TARGETS],
    run_point=_run_point,
    assemble=_assemble,
    summary=_summary,
))
