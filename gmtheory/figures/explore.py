"""The regime figure of ``gmtheory explore``: curves over one axis, a phase diagram over two.

``draw_regimes(result, path)`` draws an :class:`gmtheory.regimes.ExploreResult`; the
command draws it before :meth:`~gmtheory.regimes.ExploreResult.write` writes the report
that shows it::

    from gmtheory.figures.explore import draw_regimes
    draw_regimes(res, "my-run/regimes.png"); res.write("my-run")
"""

from __future__ import annotations

import numpy as np

from ..regimes.report import columns, fmt
from ._base import style_path

# (key, label, colour, marker)
SERIES = {
    "denoising": [("bayes_risk", "Bayes (MMSE)", "k", "o"),
                  ("linear_risk", "linear attention (best A z)", "C0", "s"),
                  ("head1_risk", "1 softmax head", "C1", "^"),
                  ("head2_risk", "2 softmax heads", "C2", "v"),
                  ("head3_risk", "3 softmax heads", "C3", "D"),
                  ("prompt_risk", "1 head on an L-token prompt", "C6", "x"),
                  ("trained_risk", "1 head trained on L-token prompts", "C5", "P")],
    "classification": [("bayes_error", "Bayes", "k", "o"),
                       ("linear_error", "linear attention", "C0", "s"),
                       ("softmax_error", "softmax head", "C1", "^"),
                       ("prompt_error", "head on an L-token prompt", "C6", "x"),
                       ("trained_error", "head trained on L-token prompts", "C5", "P")],
}


LINEAR_ENOUGH = 0.01  # relative risk excess (denoising) or 0-1 error excess (classification)


def _linear_gap(p, task):
    """Linear attention's excess over Bayes: relative risk (denoising), 0-1 error (classes)."""
    if task == "denoising":
        return p["linear_gap"] / p["bayes_risk"]
    return p["linear_error"] - p["bayes_error"]


def _phase_value(p, task):
    """Share of the linear-to-Bayes gap that one softmax head closes."""
    if task == "denoising":
        return p.get("head1_gap_recovered", np.nan)
    gap = p["linear_error"] - p["bayes_error"]
    return 1.0 - (p["softmax_error"] - p["bayes_error"]) / gap if gap > 0 else np.nan


def draw_regimes(res, path):
    """Draw ``res`` (an :class:`gmtheory.regimes.ExploreResult`) into ``path`` (PNG)."""
    from pathlib import Path

    import matplotlib.style
    from matplotlib.figure import Figure

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    prob = res.problem
    axes = list(prob.vary)
    task = prob.task
    ylabel = "risk E|f(Z) - X|²" if task == "denoising" else "0–1 error"
    with matplotlib.style.context(style_path()):  # no pyplot: the caller's backend stays
        if len(axes) == 2:
            a0, a1 = axes
            v0, v1 = prob.vary[a0], prob.vary[a1]
            share = np.full((len(v0), len(v1)), np.nan)
            rel = np.full_like(share, np.nan)
            for p in res.points:
                i, j = v0.index(p["params"][a0]), v1.index(p["params"][a1])
                share[i, j] = _phase_value(p, task)
                rel[i, j] = _linear_gap(p, task)
            fig = Figure(figsize=(12, 4.6))
            ax, bx = fig.subplots(1, 2)
            im = ax.imshow(np.log10(np.maximum(rel, 1e-6)).T, origin="lower", cmap="magma_r",
                           aspect="auto")
            fig.colorbar(im, ax=ax, label="log10 of linear attention's excess over Bayes"
                         + (" (relative)" if task == "denoising" else " (0–1 error)"))
            ax.set_title("(a) where linear attention is not enough")
            masked = np.where(rel < LINEAR_ENOUGH, np.nan, share)
            im2 = bx.imshow(masked.T, origin="lower", cmap="viridis", vmin=0, vmax=1,
                            aspect="auto")
            fig.colorbar(im2, ax=bx, label="share of that gap closed by one softmax head")
            bx.set_title("(b) what one softmax head recovers")
            for i in range(len(v0)):
                for j in range(len(v1)):
                    ax.text(i, j, fmt(rel[i, j]), ha="center", va="center", fontsize=7,
                            color="k" if rel[i, j] < 10 ** np.nanmean(np.log10(
                                np.maximum(rel, 1e-6))) else "w")
                    lin = rel[i, j] < LINEAR_ENOUGH
                    bx.text(i, j, "linear\nenough" if lin else fmt(share[i, j]), ha="center",
                            va="center", fontsize=7,
                            color="k" if lin or share[i, j] > 0.6 else "w")
            for axx in (ax, bx):
                axx.set_xticks(range(len(v0)), [fmt(v) for v in v0])
                axx.set_yticks(range(len(v1)), [fmt(v) for v in v1])
                axx.set_xlabel(a0)
                axx.set_ylabel(a1)
                axx.grid(False)
            fig.suptitle(f"{prob.name}: {task}, d = {prob.dim}, K = {prob.n_components} "
                         f"(blank in (b): linear attention within {LINEAR_ENOUGH:g} of Bayes)",
                         fontsize=10)
        else:
            fig = Figure(figsize=(11, 4.2))
            ax, bx = fig.subplots(1, 2)
            keys = {k for k, _ in columns(res)}
            if axes:
                a = axes[0]
                x = np.array([p["params"][a] for p in res.points], float)
            else:
                a, x = None, np.zeros(1)
            base = "bayes_risk" if task == "denoising" else "bayes_error"
            b = np.array([p[base] for p in res.points], float)
            b_se = np.array([p.get(f"{base}_se", 0.0) or 0.0 for p in res.points], float)
            for k, label, col, mk in SERIES[task]:
                if k not in keys:
                    continue
                y = np.array([p.get(k, np.nan) for p in res.points], float)
                se = np.array([p.get(f"{k}_se", 0.0) or 0.0 for p in res.points], float)
                ax.errorbar(x, y, yerr=2 * se, color=col, marker=mk, ms=5, capsize=3,
                            lw=1.5, label=label)
                if k != base:
                    gap = y - b
                    gse = np.hypot(se, b_se) if k.startswith(("prompt", "trained")) else se
                    bx.errorbar(x, gap, yerr=2 * gse, color=col, marker=mk, ms=5, capsize=3,
                                lw=1.5, label=label)
            gaps = np.concatenate([ln.get_ydata() for ln in bx.get_lines()] or [np.zeros(1)])
            gaps = gaps[np.isfinite(gaps)]
            if gaps.size and gaps.max() > 0 and gaps.max() > 100 * max(gaps.min(), 0) :
                # excesses spanning decades (finite prompts against the limit): log scale,
                # linear below 1e-3 of the largest so that zero excesses stay on the plot
                bx.set_yscale("symlog", linthresh=1e-3 * gaps.max())
            bx.axhline(0.0, color="k", lw=0.8)
            for axx in (ax, bx):
                if a is None:
                    axx.set_xticks([])
                else:
                    axx.set_xlabel(a)
                    if a == "L":
                        axx.set_xscale("log")
            ax.set_ylabel(ylabel)
            bx.set_ylabel("excess over Bayes (" + ("risk" if task == "denoising" else "error")
                          + " − Bayes)")
            ax.set_title(f"(a) {prob.name}: {task}, d = {prob.dim}, K = {prob.n_components}")
            bx.set_title("(b) what each predictor leaves on the table")
            ax.legend(fontsize=8, loc="best")
            bx.text(0.99, 0.99, "bars: ±2 SE (Monte Carlo; quadrature has none)",
                    transform=bx.transAxes, ha="right", va="top", fontsize=7, color="0.4")
        fig.savefig(path, dpi=130, bbox_inches="tight")
    return path
