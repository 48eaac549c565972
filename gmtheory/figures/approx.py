"""ReLU -> softmax constructions: error against resources, and trained vs constructive."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

from ..simulations.approx_compiled import COMPILED_NETS
from ..simulations.approx_rates import TARGETS
from ..stats import fit_loglog, fit_semilog
from ._base import Figure, register_figure

TITLES = {
    "relu": "ReLU: two-key head",
    "interpolation": "clip(y,-1,1): p-anchor head",
    "max-one-head": "max of 8: one head",
    "max-relu-tree": "max of 8: ReLU tree (3 layers)",
    "square": "x²: Yarotsky, m levels",
    "multiply": "xy: 3 squarings",
    "reciprocal-pl": "1/x on [¼,1]: n ReLUs",
    "reciprocal-newton": "1/x: Newton (m = 10)",
}


def draw_rates(a, meta):
    fig, axes = plt.subplots(2, 4, figsize=(15, 7))
    for ax, (t, (rname, _, scale)) in zip(axes.ravel(), TARGETS.items(), strict=True):
        r, m, b = a[f"{t}/resource"], a[f"{t}/measured"], a[f"{t}/bound"]
        ax.plot(r, m, "o", label="measured sup error")
        ax.plot(r, b, "k--", lw=1, label="bound")
        if scale == "log":
            x = r - 1 if t == "interpolation" else r
            slope, icpt = fit_loglog(x, m)[:2]
            ax.plot(r, np.exp(icpt) * x**slope, "-", alpha=0.5,
                    label=f"fit: slope {slope:+.2f}" + (" in p-1" if t == "interpolation" else ""))
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        elif t != "reciprocal-newton":
            slope, icpt = fit_semilog(r, m)[:2]
            ax.plot(r, np.exp(icpt + slope * r), "-", alpha=0.5,
                    label=f"fit: {slope:+.3f} per level (−log 4 = −1.386)")
        ax.set_yscale("log")
        ax.set_xlabel(rname + ("" if t != "square" else "  (heads = 3m)"))
        ax.set_ylabel("sup error")
        heads, beta = a[f"{t}/heads"][-1], a[f"{t}/max_beta"][-1]
        ax.set_title(f"{TITLES[t]}\nlast point: {heads} heads, β ≤ {beta:.2g}", fontsize=9.5)
        ax.legend(fontsize=7.5)
    fig.tight_layout()
    return fig


TRAINED_PANELS = (
    ("relu", "ReLU on [-1,1]", "β (1 head)"),
    ("interpolation", "clip(y,-1,1), y in [-1.5,1.5]", "anchors p (1 head)"),
    ("max-one-head", "max of 8: one head", "β (1 head, score scale ≤ β)"),
    ("max-relu-tree", "max of 8: 3 layers (4, 2, 1 heads)", "β (7 heads)"),
    ("square", "x² on [0,1]", "levels m (3m heads, m layers)"),
    ("multiply", "xy on [0,1]²", "levels m (9m heads, m layers)"),
    ("reciprocal", "1/x on [¼,1]: one layer", "heads n"),
    ("reciprocal-newton", "1/x on [¼,1]: Newton", "steps (18m heads, 2m layers each)"),
)


def draw_trained(a, meta):
    fig, axes = plt.subplots(2, 4, figsize=(15, 7))
    for ax, (fam, title, xl) in zip(axes.ravel(), TRAINED_PANELS, strict=True):
        if f"{fam}/size" not in a:
            ax.set_visible(False)
            continue
        s, sup = a[f"{fam}/size"], a[f"{fam}/sup"]
        ax.semilogy(s, a[f"{fam}/constructive"], "ks-", label="explicit construction")
        for j in range(sup.shape[1]):
            ax.semilogy(s, sup[:, j], "o", color="C1", alpha=0.6,
                        label="trained (Adam), one dot per seed" if j == 0 else None)
        ax.semilogy(s, sup.min(1), "-", color="C1", alpha=0.6, label="best trained seed")
        if fam in ("relu", "max-one-head", "max-relu-tree"):
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        if fam == "reciprocal-newton":
            xl += f", m = {meta.get('config', {}).get('newton_levels', '?')}"
        ax.set_xlabel(xl)
        ax.set_ylabel("sup error")
        ax.set_xticks(s)
        ax.set_xticklabels([f"{v:g}" for v in s])
        ax.set_title(title, fontsize=10)
    handles, labels = axes[1, 0].get_legend_handles_labels()  # one legend, no text over data
    fig.legend(handles, labels, loc="upper center", ncol=3, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


register_figure(Figure(
    name="approx-rates",
    simulation="approx-rates",
    caption=("Explicit softmax-attention constructions evaluated through the finite-prompt "
             "operator: the measured sup error (dots) stays below each bound (dashed) and its "
             "fitted slope matches the bound's exponent: −1 in β, −1 in p, −log 4 per level, "
             "−2 in n. Newton: bound from the perturbed recursion R_{k+1} = R_k² + δ."),
    draw=draw_rates,
    checks=("approx.relu-two-key-head", "approx.interpolation-head", "approx.max-one-head",
            "approx.max-relu-tree", "approx.square-yarotsky", "approx.multiply",
            "approx.reciprocal-pl", "approx.reciprocal-newton"),
))

register_figure(Figure(
    name="approx-trained",
    simulation="approx-trained",
    caption=("All eight targets: attention networks of the same size as the construction "
             "(same heads, layers, β and anchors, a family that contains the construction; "
             "Adam from random weights, several seeds) against the explicit construction, "
             "sup error on a dense grid (random points plus corners in d > 1). Quick run "
             "(1500 Adam steps for x² and 1/x in one layer, 500 for the others; 3 seeds): the "
             "best seed beats the construction for ReLU (by growing its weights, which raises "
             "the effective scale), the interpolation head, x² at m = 1, 2, xy at m = 1 and "
             "one Newton step (which from y₀ = 1 errs by 2.19); it stays above it for max "
             "(one head, and the tree by 80×), x² at m = 3 and 1/x in one layer."),
    draw=draw_trained,
    run_unchecked=("trained networks beside the explicit construction: an empirical "
                   "comparison with no theory value to decide (the construction's error is "
                   "checked on the approx-rates run; tests/test_approx.py tests the "
                   "training)"),
))


def draw_compiled(a, meta):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    betas, eps = a["betas"], a["eps"]
    for i, n in enumerate(a["nets"]):
        seed, d, widths = COMPILED_NETS[int(n)]
        lab = f"d={d}, widths {'-'.join(str(w) for w in widths)}"
        mk = "osD^vPX"[i % 7]
        axes[0].loglog(betas, a["bound"][i], "-", color=f"C{i}", lw=1, marker=mk, ms=3,
                       mfc="none", label=lab)
        axes[0].loglog(betas, a["measured"][i], mk, color=f"C{i}", ms=4)
        axes[1].loglog(eps, a["eps_beta"][i], "-", marker=mk, color=f"C{i}", ms=4, lw=1)
        # two networks may have equal heads: open markers of growing size keep both visible
        axes[2].semilogx(eps, a["eps_heads"][i], "-", marker=mk, color=f"C{i}", ms=3 + i,
                         mfc="none", lw=1)
    axes[0].plot([], [], "k-", lw=1, label="certified bound (line)")
    axes[0].plot([], [], "ko", ms=4, label="measured sup error (filled markers)")
    axes[0].set_xlabel("β (every hidden layer)")
    axes[0].set_ylabel("sup error on the box")
    axes[0].set_title("measured error ≤ certified bound ∝ 1/β", fontsize=10)
    axes[0].legend(fontsize=7, loc="lower left")
    low = a["eps_beta"].min(0)  # a 1/eps line a factor 3 below the lowest network
    axes[1].loglog(eps, low[-1] / 3.0 * eps[-1] / eps, "k--", lw=1, label="β ∝ 1/eps")
    axes[1].set_xlabel("target eps")
    axes[1].set_ylabel("β chosen (largest over the layers)")
    axes[1].set_title("the β the compiler chooses to meet eps (colours: left panel)",
                      fontsize=10)
    axes[1].legend(fontsize=8)
    axes[2].set_xlabel("target eps")
    axes[2].set_ylabel("heads (one per hidden unit)")
    axes[2].set_title("heads do not depend on eps (colours: left panel)", fontsize=10)
    axes[2].set_ylim(0, 1.15 * a["eps_heads"].max())
    for ax in axes[1:]:
        ax.invert_xaxis()
    fig.tight_layout()
    return fig


register_figure(Figure(
    name="approx-compiled",
    simulation="approx-compiled",
    caption=("compile_relu_network on seven random ReLU networks (depths 2-4, widths ≤ 16, "
             "d ≤ 4): the measured sup error on random points plus the box's corners (filled) "
             "stays below the certified bound (lines with open markers) at every β; the "
             "bound falls like 1/β, "
             "the measured error faster at large β (few random points fall within ~1/β of a "
             "unit's kink, where the worst case sits). Given a target eps, the compiler chooses "
             "each layer's β so that the certified bound meets it; the largest of them (middle) "
             "grows like 1/eps while the heads (one per hidden unit) stay fixed."),
    draw=draw_compiled,
    checks=("approx.compiled-relu-network",),
))
