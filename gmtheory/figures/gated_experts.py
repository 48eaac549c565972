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
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.9))
    step = max(1, len(g) // 15)
    sl = (slice(None, None, step), slice(None, None, step))
    X, Y = np.meshgrid(g, g, indexing="xy")
    for ax, title, field in (
        (axes[0], "softmax gates α_k(z): colour = mixture of the 3 gates", None),
        (axes[1], "softmax attention: output T(z) at query z\n(background: its gates, as left)",
         a["soft"]),
        (axes[2], "linear attention: output M z at query z\n(no gates: one map M for every "
                  "query)", a["lin"]),
    ):
        if ax is not axes[2]:          # linear attention has no gates to colour by
            ax.imshow(rgb, origin="lower", extent=ext, alpha=1.0 if field is None else 0.35)
        else:
            ax.set_xlim(g[0], g[-1])
            ax.set_ylim(g[0], g[-1])
            ax.set_aspect("equal")
        if field is not None:
            ax.quiver(X[sl], Y[sl], field[..., 0][sl], field[..., 1][sl], color="k",
                      angles="xy", width=0.004)
        for k, m in enumerate(means):
            ax.plot(*m, "o", ms=9, mec="white", color=COLORS[k],
                    label=f"mean m_{k + 1} (π = {a['weights'][k]:.1f})")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("z₁")
        ax.set_ylabel("z₂")
        ax.grid(False)
    # what linear attention does have: the eigen-axes of its one map M = V E[zz^T] U
    ev, vec = np.linalg.eig(np.asarray(a["lin_map"]))
    for i in np.argsort(-ev.real):
        v = vec[:, i].real * g[-1] * 1.5
        axes[2].plot([-v[0], v[0]], [-v[1], v[1]], ls="--" if i == np.argmax(ev.real) else ":",
                     color="0.4", lw=1.3,
                     label=f"right: eigen-axis of M, eigenvalue {ev[i].real:.2f}")
    dom = gates.max(-1)
    cs = axes[0].contour(X, Y, dom, levels=[0.5, 0.9], colors="k", linewidths=0.8)
    axes[0].clabel(cs, fmt={0.5: "max α = 0.5", 0.9: "0.9"}, fontsize=7)
    # one legend below the panels (means, as in every panel, and M's axes), off the data
    handles, labels = axes[2].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


register_figure(Figure(
    name="gated-experts",
    simulation="gated-experts",
    caption=("Three-component mixture, shared covariance 0.25·I, U = 1.5·I, V = I. Softmax "
             "attention selects a component per query (left: gates, with contours of the "
             "largest gate; middle: outputs point to the selected mean plus a small linear "
             "term, over the same gate colours). Linear attention has no gates: it applies one "
             "fixed linear map M = V·E[zzᵀ]·U to every query (right, uncoloured; dashed and "
             "dotted: M's eigen-axes, the directions it only stretches). Deterministic: no "
             "randomness. Arrow lengths are scaled per panel."),
    draw=draw,
    theory_checks=("operator.01b-prop2.1-gauss-hermite", "operator.02-eq3-shared-covariance",
                   "operator.05a-linear-attention"),
    run_unchecked=("deterministic: the run evaluates the operator's gates and outputs on a "
                   "grid (theory functions, no sampling), which the theory checks test on "
                   "their own points"),
))
