"""Denoising figures: Figure 2 (two-head SGD), Figure 3 (iterates), the transition."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

from ..denoising import FIG2, u_lambda
from ..simulations.denoising_sims import PHASE_FLOOR
from ..stats import fit_loglog
from ._base import Figure, register_figure


def draw_fig2(a, meta):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.4))
    ax1.plot(*a["z"].T, ".", ms=3, alpha=0.5, color="C1", label="noisy Z = X + ε")
    ax1.plot(*a["x"].T, ".", ms=3, alpha=0.6, color="C0", label="clean X")
    (a1, b1), (a2, b2) = FIG2.m1, FIG2.m2
    ax1.plot([a1, a2], [b1, b2], "k*", ms=12,
             label=f"means m₁ = ({a1:g},{b1:g}), m₂ = ({a2:g},{b2:g})")
    ax1.set_aspect("equal")
    ax1.set_title(f"γ = {FIG2.gamma:g}, ξ = {FIG2.xi:g} (γ² ≠ ξ²: one head cannot be exact)")
    ax1.set_xlabel("coordinate 1")
    ax1.set_ylabel("coordinate 2")
    ax1.legend(loc="lower left", fontsize=7.5)
    steps = a["steps"]
    for j, h in enumerate(a["excess"]):
        ax2.semilogy(steps, h, lw=1.2, alpha=0.8, label="two heads, SGD" if j == 0 else None,
                     color="C0")
    ax2.axhline(float(a["linear_gap"]), color="C3", ls="--",
                label=f"best linear attention (gap {float(a['linear_gap']):.3f})")
    ax2.axhline(float(a["best_single_head"]), color="C2", ls=":",
                label=f"best single head ({float(a['best_single_head']):.3g})")
    cfg = meta["config"]
    ax2.set_xlabel(f"online SGD step (lr {cfg['lr']}, clip {cfg['clip']}, batch {cfg['batch']})")
    ax2.set_ylabel("excess risk E|f(Z) − f*(Z)|²  (Gauss–Hermite)")
    ax2.set_title(f"Two heads learn the Bayes denoiser ({cfg['seeds']} seeds)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


def draw_fig3(a, meta):
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    g = a["grid"]
    ext = (g[0], g[-1], g[0], g[-1])
    for ax, name in zip(axes, ("strong", "weak"), strict=True):
        lam = float(a[f"{name}/lambda"])
        im = ax.imshow(a[f"{name}/posterior"], origin="lower", extent=ext, cmap="RdBu_r",
                       vmin=0, vmax=1, alpha=0.75)
        tr = a[f"{name}/traj"]
        for i in range(tr.shape[1]):
            ax.plot(tr[:, i, 0], tr[:, i, 1], "-", color="k", lw=0.4, alpha=0.4)
            ax.plot(tr[:, i, 0], tr[:, i, 1], ".", color="C0", ms=3)
        lim = tr[-1]
        ax.plot(lim[:, 0], lim[:, 1], "rx", ms=10, mew=2, label="limit z_∞")
        ax.plot([0, 0], [3, -3], "k*", ms=10, label="means ±(0,3)")
        u = u_lambda(lam)
        ax.set_title(f"{name} separation: λ = {lam:.2f} " +
                     (f"(limits ±{u:.3f}·(0,3))" if lam > 1 else "(collapse to 0)"))
        ax.set_xlabel("z₁")
        ax.set_ylabel("z₂")
        ax.grid(False)
        ax.legend(loc="lower left", fontsize=8)
    fig.colorbar(im, ax=axes, shrink=0.8, label="posterior P(C = 1 | z)")
    return fig


def draw_transition(a, meta):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot(a["lambdas"], a["u_lambda"], label="u_λ: root of u = tanh(λ² u)")
    ax1.axvline(1.0, color="k", ls="--", lw=1, label="threshold λ = 1")
    ax1.set_xlabel("λ = |m₁ − m₂| / (2ξ)")
    ax1.set_ylabel("limit u_λ  (z_∞ = c ± u_λ δ)")
    ax1.set_title("Denoising-to-clustering transition")
    ax1.legend()
    n = a["critical_n"]
    ax2.loglog(n, a["critical_u"], "o", ms=3, label="λ = 1: |u_n| (iterated f*)")
    ax2.loglog(n, np.sqrt(1.5 / n), "k--", lw=1, label="√(3/(2n))")
    sub = a["sub_u"]
    ns = np.arange(1, sub.size)
    ax2.loglog(ns, sub[1:], "s", ms=3, label="λ = 0.8: geometric, ratio ≈ λ²")
    ax2.set_xlabel("iteration n")
    ax2.set_ylabel("|u_n|")
    ax2.set_ylim(1e-12, 2)
    ax2.set_title("Sublinear collapse at the threshold")
    ax2.legend()
    fig.tight_layout()
    return fig


register_figure(Figure(
    name="denoise-fig2", simulation="denoise-fig2",
    caption=("Figure 2: two population softmax heads trained by online SGD on the Figure 2 "
             "mixture approach the Bayes denoiser, far below the best linear attention (dashed) "
             "and the best single head (dotted), which cannot be exact since γ² ≠ ξ²."),
    draw=draw_fig2,
    checks=("denoising.33-figure2-two-heads",),
    theory_checks=("denoising.28-single-head", "denoising.29-linear-gap")))

register_figure(Figure(
    name="denoise-fig3", simulation="denoise-iterates",
    caption=("Figure 3: iterating the Bayes denoiser of a two-point mixture (γ = 0). Strong "
             "separation: trajectories split by the sign of z₂ to ±u_λ(0,3); weak separation: "
             "all collapse to the midpoint. Background: posterior of component 1."),
    draw=draw_fig3, checks=("denoising.31-clustering-transition",)))

register_figure(Figure(
    name="denoise-transition", simulation="denoise-iterates",
    caption=("The limit u_λ is 0 up to λ = 1 and grows to 1 beyond (left); at λ = 1 the "
             "collapse is sublinear, |u_n| ≈ √(3/(2n)), while below it is geometric (right)."),
    draw=draw_transition, checks=("denoising.31-clustering-transition",)))


def _seeds_and_median(ax, x, v, light, marker, label):
    """Draws every seed of ``v`` (x, seeds) as small light markers (never in the median's
    colour) and returns the median over seeds."""
    for j in range(v.shape[1]):
        ax.plot(x, v[:, j], marker, color=light, ms=3.5, alpha=0.8, ls="none",
                label=f"{label}, each of {v.shape[1]} seeds" if j == 0 else None)
    return np.median(v, 1)


def _l_axis(ax, Ls):
    """A log axis ticked at the simulated prompt lengths only (no minor labels)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator([float(v) for v in Ls]))
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def draw_icl(a, meta):
    from ..simulations.icl_denoising import inverse_temperature_trend

    Ls = a["Ls"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5.4))
    for kind, mk, col, light in (("softmax", "o", "C0", "#8fc1e3"),
                                 ("linear", "s", "C1", "#f2b38a")):
        ex = a[f"{kind}/excess"]
        med = _seeds_and_median(ax1, Ls, ex, light, mk, f"trained {kind}")
        lab = f"trained {kind}, median"
        if kind == "softmax":
            lab += f" (fitted slope {fit_loglog(Ls, med).slope:+.2f})"
        ax1.plot(Ls, med, "-", color=col, lw=1.6, label=lab)
    ax1.plot(Ls, a["prop44_excess"], "k--",
             label=f"Prop. 4.4 parameters (fitted slope "
                   f"{fit_loglog(Ls, a['prop44_excess']).slope:+.2f})")
    ax1.plot(Ls, a["mean_linear_gap"], ":", color="C3",
             label="mean per-task linear gap (floor of linear attention)")
    ax1.set_yscale("log")
    _l_axis(ax1, Ls)
    ax1.set_xlabel("prompt length L")
    ax1.set_ylabel("in-context excess E|f(z) − f*_task(z)|²")
    ax1.set_title("Trained in-context denoisers on finite prompts", fontsize=10.5)
    ax1.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    it = a["softmax/inv_temp"]
    med = _seeds_and_median(ax2, Ls, it, "#8fc1e3", "o", "trained softmax")
    tr = inverse_temperature_trend(a)
    ax2.plot(Ls, med, "-o", color="C0", ms=4,
             label=f"median over seeds (slope against ln L: {tr.slope:+.3f} ± {tr.stderr:.3f})")
    ax2.axhline(float(a["inv_temp_prop44"]), color="k", ls="--",
                label="Prop. 4.4 (infinite prompts): 1/(γ² + ξ²)")
    _l_axis(ax2, Ls)
    ax2.set_ylim(0, 1.0)
    ax2.set_xlabel("prompt length L")
    ax2.set_ylabel("inverse temperature tr(U)/d of the active head")
    ax2.set_title("Learned inverse temperature of the softmax gate", fontsize=10.5)
    ax2.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)
    fig.tight_layout()
    return fig


register_figure(Figure(
    name="icl-denoising", simulation="icl-denoising",
    caption=("Residual two-head attention trained on fresh prompts of L noisy tokens (tasks drawn "
             "per prompt as in Prop. 4.4); light markers: every seed, lines: the median over "
             "seeds (quick profile: L = 32, 128, 512, 4 seeds, 400 Adam steps; the paper "
             "profile adds L = 2048). Left: the seeds' excesses differ by "
             "under 2 %, so their markers overlap the medians; at every L the trained "
             "softmax model has a lower excess than the infinite-prompt optimal parameters of "
             "Prop. 4.4, both decaying like L^-0.4; linear attention stays above the per-task "
             "linear gap. Right: the learned inverse temperature is about half the Prop. 4.4 "
             "value at every L and does not rise measurably with L (the slope against ln L in "
             "the legend is within its SE of 0); over this range it does not approach 0.8. "
             "Check denoising.36 reads this run: on the "
             "same evaluation prompts every softmax seed lies below the Prop. 4.4 "
             "parameters, and no linear seed below the best linear denoiser of each "
             "prompt's task (paired, + t SE)."),
    draw=draw_icl, checks=("denoising.36-trained-icl-bounds",),
    theory_checks=("denoising.32-residual-icl",)))


def _cell_text(v, floor):
    if v < floor:
        return f"<{floor:.0e}"
    return f"{v:.2f}" if v >= 0.095 else f"{v:.1e}"


def _index_position(v, grid):
    """Position of the value ``v`` on an axis whose cells (index 0, 1, ...) hold ``grid``
    (interpolated between cell centres on a log scale)."""
    return float(np.interp(np.log(v), np.log(np.asarray(grid, float)), np.arange(len(grid))))


def draw_sweep(a, meta):
    from matplotlib import patheffects
    from matplotlib.colors import LogNorm
    from matplotlib.patches import Rectangle

    cfg = meta["config"]
    r, s = a["ratios"], a["seps"]
    floor = PHASE_FLOOR
    vmax = max(a["linear"].max(), a["single"].max(), a["two"].max())
    norm = LogNorm(vmin=floor, vmax=vmax)
    cmap = plt.get_cmap("magma").with_extremes(under="0.88")   # below the floor: light grey
    n_cells = len(r) * len(s)
    annotate = n_cells <= 49           # a larger grid: the colours carry the values
    step = -(-len(r) // 8)             # at most 8 x tick labels, so that they do not overlap
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6), sharey=True)
    starts = f"{cfg['starts']} random start" + ("s" if cfg["starts"] > 1 else "")
    panels = ((axes[0], "single", f"best single head (L-BFGS, {starts} + γ = ξ)"),
              (axes[1], "two", "two-head construction (App. C.6)"),
              (axes[2], "linear", "linear attention: gap R(A*) − R(f*)"))
    xr = _index_position(1.0, r)
    ys = _index_position(2.0, s)
    for ax, key, title in panels:
        v = a[key]                       # (ratios, seps)
        im = ax.imshow(np.where(v < floor, floor / 10, v).T, origin="lower", cmap=cmap,
                       norm=norm, aspect="auto", interpolation="nearest")
        for i in range(len(r) if annotate else 0):
            for j in range(len(s)):
                val = float(v[i, j])
                dark = floor <= val and norm(val) < 0.55
                ax.text(i, j, _cell_text(val, floor), ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
        first = int(np.argmin(np.abs(np.log(r)))) % step       # gamma = xi gets a label
        ax.set_xticks(range(first, len(r), step), [f"{x:.2g}" for x in r[first::step]])
        ax.set_yticks(range(len(s)), [f"{x:g}" for x in s])
        ax.set_xlabel("ξ / γ  (γ = 1)")
        ax.set_title(title, fontsize=10)
        ax.grid(False)
        halo = [patheffects.withStroke(linewidth=3.5, foreground="k")]
        if np.isclose(r, 1.0).any():     # gamma = xi is a column of cells: outline it
            ax.add_patch(Rectangle((xr - 0.5, -0.5), 1, len(s), fill=False, ec="c", lw=2,
                                   ls="--", label="γ² = ξ² (outlined column)"))
        elif min(r) < 1.0 < max(r):      # between columns: a line on the cell edge
            ax.axvline(xr, color="c", ls="--", lw=1.5, label="γ² = ξ²")
        if np.isclose(s, 2.0).any():     # separation 2 is a row of cells: outline it
            ax.add_patch(Rectangle((-0.5, ys - 0.5), len(r), 1, fill=False, ec="w", lw=2,
                                   ls=":", path_effects=halo,
                                   label="λ = |m₁ − m₂| / (2ξ) = 1 (separation 2, outlined row)"))
        elif min(s) < 2.0 < max(s):
            ax.axhline(ys, color="w", ls=":", lw=2, path_effects=halo,
                       label="λ = |m₁ − m₂| / (2ξ) = 1 (separation 2)")
        ax.set_xlim(-0.5, len(r) - 0.5)
        ax.set_ylim(-0.5, len(s) - 0.5)
    axes[0].set_ylabel("separation |m₁ − m₂| / ξ")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.08, 0.9, 1))
    cax = fig.add_axes((0.915, 0.2, 0.012, 0.7))
    fig.colorbar(im, cax=cax, extend="min",
                 label=f"excess risk over the Bayes denoiser\n(scale clipped at {floor:.0e}; "
                       f"grey cells: below, <{floor:.0e})")
    fig.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.45, 0.0), ncol=2,
               fontsize=8.5, frameon=False)
    return fig


register_figure(Figure(
    name="denoise-phase", simulation="denoise-sweep",
    caption=("Excess risk over (ξ/γ, separation), d = 2, π = ½, each cell annotated with its "
             "value. One head reaches the Bayes denoiser only in the column γ² = ξ² (left: the "
             "best of the run's random L-BFGS starts, 4 in the quick profile and 8 in the "
             "paper's, and the γ = ξ head as a start; float64 round-off in that column); two "
             "heads are exact everywhere (middle, round-off); linear attention keeps a "
             "positive gap everywhere, growing with ξ/γ and the separation (right). The "
             "colour scale is clipped at 1e-12; grey cells lie below it (round-off, "
             "1e-32–1e-27); the smallest excess above round-off in the quick profile is "
             "6e-10 (summary)."),
    draw=draw_sweep,
    checks=("denoising.35-phase-diagram",),
    theory_checks=("denoising.27-two-heads-exact", "denoising.28-single-head",
                   "denoising.29-linear-gap")))
