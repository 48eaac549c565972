"""Compiled random ReLU networks: measured error against the certified bound, and resources.

For each network of :data:`COMPILED_NETS` (depths 2-4, widths <= 16, ``d <= 4``, numpy seed
recorded), :func:`gmtheory.approx.compile_relu_network` at every ``beta`` of the config:
the measured sup error on random points of the box plus its corners beside ``.bound``;
and at every ``eps``: the chosen scale and the heads.  Drawn by the ``approx-compiled``
figure; the check ``approx.compiled-relu-network`` uses the same networks.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from .. import approx as A
from ._base import SimConfig, Simulation, register

__all__ = ["COMPILED_NETS", "random_relu_network", "box_points", "ApproxCompiledConfig"]

# (numpy seed, input dimension d, widths of the affine layers): depths 2-4, widths <= 16
COMPILED_NETS = ((0, 1, (8, 1)), (1, 2, (16, 1)), (2, 2, (16, 16, 1)), (3, 3, (12, 8, 2)),
                 (4, 4, (16, 16, 16, 1)), (5, 4, (8, 16, 8, 3)), (6, 3, (16, 4, 16, 1)))


def random_relu_network(seed: int, d: int, widths):
    """Random ReLU network ``[(W, b)]`` (``W ~ N(0, 1/fan_in)``, ``b ~ N(0, 1/4)``) and a
    random box ``lo in [-2, 0]^d``, ``hi = lo + [0.5, 2]^d``, from ``numpy`` seed ``seed``;
    returns ``(layers, lo, hi, rng)`` with the generator for drawing points."""
    rng = np.random.default_rng(seed)
    layers, prev = [], d
    for w in widths:
        layers.append((rng.normal(size=(w, prev)) / math.sqrt(prev), 0.5 * rng.normal(size=w)))
        prev = w
    lo = rng.uniform(-2.0, 0.0, d)
    return layers, lo, lo + rng.uniform(0.5, 2.0, d), rng


def box_points(rng, lo, hi, n: int):
    """``n`` uniform points of the box ``[lo, hi]`` followed by its ``2^d`` corners."""
    corners = np.array(list(itertools.product(*zip(lo, hi, strict=True))))
    return jnp.asarray(np.concatenate([rng.uniform(lo, hi, (n, len(lo))), corners]))


@dataclass(frozen=True, kw_only=True)
class ApproxCompiledConfig(SimConfig):
    points: int
    betas: tuple[float, ...]
    eps: tuple[float, ...]


def _run_point(cfg, point, key):
    del key  # the network and its points come from the recorded numpy seed
    seed, d, widths = COMPILED_NETS[point["net"]]
    layers, lo, hi, rng = random_relu_network(seed, d, widths)
    x = box_points(rng, lo, hi, cfg.points)
    meas, bound = [], []
    for b in cfg.betas:
        net = A.compile_relu_network(layers, lo, hi, beta=b)
        meas.append(float(jnp.max(jnp.abs(net(x) - net.reference(x)))))
        bound.append(net.bound)
    nets = [A.compile_relu_network(layers, lo, hi, eps=e) for e in cfg.eps]
    return {"measured": np.array(meas), "bound": np.array(bound),
            "eps_bound": np.array([n.bound for n in nets]),
            "eps_beta": np.array([n.resources.max_beta for n in nets]),
            "eps_heads": np.array([n.resources.heads for n in nets]),
            "eps_layers": np.array([n.resources.layers for n in nets])}


def _assemble(cfg, points, results):
    out = {"betas": np.array(cfg.betas, float), "eps": np.array(cfg.eps, float),
           "nets": np.array([p["net"] for p in points])}
    for k in results[0]:
        out[k] = np.stack([r[k] for r in results])
    return out


def _summary(cfg, a):
    lines = [f"{'net':<24} {'heads':>5} {'worst meas/bound':>17} {'beta at eps':>32}"]
    for i, n in enumerate(a["nets"]):
        seed, d, widths = COMPILED_NETS[int(n)]
        betas = " ".join(f"{b:.3g}" for b in a["eps_beta"][i])
        lines.append(f"{f'seed {seed}, d={d}, {widths}':<24} {int(a['eps_heads'][i][0]):5d} "
                     f"{np.max(a['measured'][i] / a['bound'][i]):17.3g} {betas:>32}")
    return lines


register(Simulation(
    name="approx-compiled",
    description="Compiled random ReLU networks: measured error vs certified bound, resources.",
    config_cls=ApproxCompiledConfig,
    points=lambda cfg: [{"net": i} for i in range(len(COMPILED_NETS))],
    run_point=_run_point,
    assemble=_assemble,
    summary=_summary,
))
