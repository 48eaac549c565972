"""The "gated experts" picture of Prop. 2.1 / eq. (3) on a 3-component mixture in d = 2.

Evaluates the gates ``alpha_k(z)`` and the output fields of softmax and linear
attention on a grid of queries.  Deterministic (no randomness); ``seed`` is kept
for the common interface.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from ..mixture import GaussianMixture
from ..operators import attention_gates, linear_attention_limit, softmax_attention_limit
from ._base import SimConfig, Simulation, register

__all__ = ["GatedExpertsConfig", "gated_experts_problem"]


@dataclass(frozen=True, kw_only=True)
class GatedExpertsConfig(SimConfig):
    grid: int
    extent: float
    u_scale: float
    cov_scale: float


def gated_experts_problem(cfg):
    """Mixture with means on a triangle, shared covariance, ``U = u_scale I``, ``V = I``."""
    ang = jnp.deg2rad(jnp.array([90.0, 210.0, 330.0]))
    means = 2.5 * jnp.stack([jnp.cos(ang), jnp.sin(ang)], axis=1)
    mix = GaussianMixture.shared(jnp.array([0.5, 0.3, 0.2]), means, cfg.cov_scale * jnp.eye(2))
    return mix, cfg.u_scale * jnp.eye(2), jnp.eye(2)


def _run_point(cfg, point, key):
    mix, U, V = gated_experts_problem(cfg)
    g = jnp.linspace(-cfg.extent, cfg.extent, cfg.grid)
    X, Y = jnp.meshgrid(g, g, indexing="xy")
    z = jnp.stack([X.ravel(), Y.ravel()], axis=1)
    G = cfg.grid
    return {
        "grid": g,
        "gates": attention_gates(mix, U, z).reshape(G, G, 3),
        "soft": softmax_attention_limit(mix, U, V, z).reshape(G, G, 2),
        "lin": linear_attention_limit(mix, U, V, z).reshape(G, G, 2),
        # T_lin(z) = M z: the rows of linear_attention_limit at e_1, e_2 are M's columns
        "lin_map": linear_attention_limit(mix, U, V, jnp.eye(2)).T,
        "means": mix.means,
        "weights": mix.weights,
    }


def _summary(cfg, a):
    gates = a["gates"].reshape(-1, 3)
    M = np.asarray(a["lin_map"])
    ev = np.linalg.eigvals(M)
    return [
        f"grid {cfg.grid}x{cfg.grid}; fraction of queries with a dominant gate (>0.9): "
        f"{np.mean(gates.max(1) > 0.9):.3f}",
        f"linear attention: T_lin(z) = M z with M = V E[zz^T] U = {np.round(M, 4).tolist()} "
        f"(eigenvalues {np.round(np.sort(ev.real), 4).tolist()}), the same map at every query",
    ]


register(
    Simulation(
        name="gated-experts",
        description="Gates and output fields of softmax vs linear attention on a 2-D mixture.",
        config_cls=GatedExpertsConfig,
        points=lambda cfg: [{"grid": cfg.grid}],
        run_point=_run_point,
        assemble=lambda cfg, pts, res: res[0],
        summary=_summary,
    )
)
