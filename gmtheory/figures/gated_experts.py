"""Gated experts (Prop. 2.1 / eq. (3)): gates over the plane, softmax vs linear output."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ._base import Figure, register_figure

COLORS = np.array([[0.0, 0.45, 0.70], [0.84, 0.37, 0.0], [0.0, 0.62, 0.45]])


def draw(a, meta):
    g, gates, means = a["grid"], a["gates"], a["means"]
    ext = (g[0], g[-1], g[0], g[-1])
    rgb = np.clip(gates @ COLORS + (1 - gates.sum(-1, keepdims=True)), 0, 1)
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.4))
    step = max(1, len(g) // 15)
    sl = (slice(None, None, step), slice(None, None, step))
    X, Y = np.meshgrid(g, g, indexing="xy")
    for ax, title, field in (
        (axes[0], "gates α_k(z): colour = mixture of the 3 gates", None),
        (axes[1], "softmax attention: output T(z) at query z", a["soft"]),
        (axes[2], "linear attention: output at query z", a["lin"]),
    ):
        ax.imshow(rgb, origin="lower", extent=ext, alpha=1.0 if field is None else 0.35)
        if field is not None:
            ax.quiver(X[sl], Y[sl], field[..., 0][sl], field[..., 1][sl], color="k",
                      angles="xy", width=0.004)
        for k, m in enumerate(means):
            ax.plot(*m, "o", ms=9, mec="white", color=COLORS[k],
                    label=f"mean m_{k + 1} (π={a['weights'][k]:.1f})")
        ax.set_title(title)
        ax.set_xlabel("z₁")
        ax.set_ylabel("z₂")
        ax.grid(False)
    dom = gates.max(-1)
    cs = axes[0].contour(X, Y, dom, levels=[0.5, 0.9], colors="k", linewidths=0.8)
    axes[0].clabel(cs, fmt={0.5: "max α = 0.5", 0.9: "0.9"}, fontsize=7)
    axes[0].legend(loc="lower left", fontsize=7, frameon=True)
    fig.tight_layout()
    return fig


register_figure(Figure(
    name="gated-experts",
    simulation="gated-experts",
    caption=("Three-component mixture, shared covariance 0.25·I, U = 1.5·I, V = I. Softmax "
             "attention selects a component per query (left: gates; middle: outputs point to "
             "the selected mean plus a small linear term), while linear attention applies one "
             "fixed linear map V·E[zzᵀ]·U (right). Arrow lengths are scaled per panel."),
    draw=draw,
))
