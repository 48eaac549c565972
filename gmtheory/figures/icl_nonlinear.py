"""The memorisation -> in-context-learning transition in kappa for nonlinear single-index
targets (simulation ``icl-nonlinear-kappa``): simulations on f(x^T w) + eps and on the
equivalent linear target against the d -> infinity theory of the equivalent linear model."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from ._base import Figure, register_figure

_NAMES = {"relu": "ReLU", "sign": "sign", "tanh": "tanh", "erf": "erf", "abs": "|z|",
          "z2": "z²"}
_ALPHA_COLOURS = ("#332288", "C4")       # the two (alpha, tau) in panels (c)-(e)


def _err(ax, x, m, se, ok=None, **kw):
    """Points with +-2 SE bars; non-positive means (possible at large kappa, where g_task is
    ~1e-3 and noisy) cannot be drawn on a log axis and are left out."""
    ok = np.isfinite(m) if ok is None else ok & np.isfinite(m)
    ax.errorbar(x[ok], m[ok], yerr=2 * se[ok], **{"fmt": "o", "ms": 4, "capsize": 2,
                                                 "lw": 1, **kw})


def _draw_ratios_and_dmmse(axs, a, fs, ds, lin, colour, big, nd):
    """(g) the paired ratio of e_ICL, nonlinear over equivalent-linear, at both d; (h) the
    nonlinear e_IDG against the equivalent model's theory; (i) the dMMSE of the nonlinear
    targets beside ridge-pretrained linear attention (all at the first alpha)."""
    kap, al, tau = a["kappas"], float(a["alphas"][0]), float(a["taus"][0])
    ax = axs[0]
    for n, q in enumerate(lin):
        c = colour[fs[q]]
        shift = 1.0 + 0.025 * (n - (len(lin) - 1) / 2)
        for i in range(nd):
            _err(ax, kap * shift * (1.0 if i == big else 0.985),
                 a["ratio_icl_mean"][i, 0, q], a["ratio_icl_se"][i, 0, q], color=c,
                 ms=4.5 if i == big else 3, alpha=1.0 if i == big else 0.4,
                 fmt="o" if i == big else "^")
    ax.axhline(1.0, color="k", lw=1.2)
    ax.set_xscale("log")
    h = [Line2D([], [], color=colour[fs[q]], marker="o", ls="none", label=_NAMES[fs[q]])
         for q in lin]
    h.append(Line2D([], [], color="k", lw=1.2, label="equivalence: ratio 1"))
    if nd > 1:
        h.append(Line2D([], [], color="k", marker="^", ms=3, alpha=0.4, ls="none",
                        label=f"faint: d = {ds[0]}, solid: d = {ds[big]}"))
    ax.legend(handles=h, fontsize=7.5, loc="upper right", ncol=2)
    ax.set_xlabel("κ = k / d")
    ax.set_ylabel("e_ICL(f) / e_ICL(equivalent linear), paired by trial")
    ax.set_title(f"(g) the equivalence, trial by trial: α = {al:g}, τ = {tau:g}", fontsize=10)

    ax = axs[1]
    for q in lin:
        c = colour[fs[q]]
        ax.loglog(a["kappa_grid"], a["theory_idg"][0, q], color=c, lw=1.6)
        _err(ax, kap, a["nonlinear_idg_mean"][big, 0, q], a["nonlinear_idg_se"][big, 0, q],
             color=c)
        _err(ax, kap * 1.07, a["equivalent_idg_mean"][big, 0, q],
             a["equivalent_idg_se"][big, 0, q], color=c, fmt="s", mfc="white", ms=5)
    h = [Line2D([], [], color=colour[fs[q]], lw=1.6, label=_NAMES[fs[q]]) for q in lin]
    h += [Line2D([], [], color="k", lw=1.6, label="theory d → ∞: c₁² e_IDG,Lu(ρ_eff/c₁²)"),
          Line2D([], [], color="k", marker="o", ls="none", label=f"f(xᵀw) + ε, d = {ds[big]}"),
          Line2D([], [], color="k", marker="s", mfc="white", ls="none",
                 label=f"equivalent linear, d = {ds[big]}")]
    ax.legend(handles=h, fontsize=7.5, loc="lower right", ncol=2)
    ax.set_xlabel("κ = k / d")
    ax.set_ylabel("e_IDG (test tasks from the pretraining pool)")
    ax.set_title(f"(h) in-distribution error of the nonlinear targets, α = {al:g}",
                 fontsize=10)

    ax = axs[2]
    dfs = [str(f) for f in a["dmmse_fs"]]
    for f in dfs:
        q, c = fs.index(f), colour[f]
        m2 = a["hermite"][q][2]
        dm = a["dmmse"][dfs.index(f)] / m2                       # (kappa, test, (m, se))
        _err(ax, kap / 1.05, dm[:, 0, 0], dm[:, 0, 1], color=c, fmt="s", ms=5)
        _err(ax, kap / 1.05, dm[:, 1, 0], dm[:, 1, 1], color=c, fmt="s", mfc="white", ms=5)
        _err(ax, kap * 1.05, a["nonlinear_icl_mean"][big, 0, q] / m2,
             a["nonlinear_icl_se"][big, 0, q] / m2, color=c, fmt="o", ms=4.5)
        _err(ax, kap * 1.05, a["nonlinear_idg_mean"][big, 0, q] / m2,
             a["nonlinear_idg_se"][big, 0, q] / m2, color=c, fmt="D", mfc="white", ms=4)
    ax.axhline(1.0, color="k", ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    h = [Line2D([], [], color=colour[f], marker="s", ls="none", label=_NAMES[f]) for f in dfs]
    h += [Line2D([], [], color="k", marker="s", ls="none", label="dMMSE, e_ICL (fresh tasks)"),
          Line2D([], [], color="k", marker="s", mfc="white", ls="none",
                 label="dMMSE, e_IDG (pool tasks)"),
          Line2D([], [], color="k", marker="o", ls="none", label="linear attention, e_ICL"),
          Line2D([], [], color="k", marker="D", mfc="white", ls="none",
                 label="linear attention, e_IDG"),
          Line2D([], [], color="k", ls="--", lw=1, label="m₂: the predictor ŷ = 0")]
    # the errors lie near the noise (e_IDG of dMMSE) and above ~0.5 m2: the legend goes in
    # the empty decade between them
    lo = np.nanmin(a["dmmse"][:, :, 1, 0] / a["hermite"][[fs.index(f) for f in dfs], 2:3])
    ax.set_ylim(lo / 3, None)
    ax.legend(handles=h, fontsize=7.5, loc="center", ncol=2, bbox_to_anchor=(0.5, 0.36))
    ax.set_xlabel("κ = k / d")
    ax.set_ylabel("test error / m₂")
    ax.set_title(f"(i) Bayes with the pool as prior (dMMSE) vs linear attention, d = "
                 f"{ds[big]}, α = {al:g}", fontsize=10)


def draw(a, meta):
    cfg = meta["config"]
    fs, ds, kap = list(cfg["fs"]), list(a["ds"]), a["kappas"]
    lin = [q for q, f in enumerate(fs) if a["hermite"][q][1] != 0]
    nd, big, small = len(ds), len(ds) - 1, 0
    trials = int(a["trials"])
    fig, axs = plt.subplots(3, 3, figsize=(17, 15))
    colour = {f: f"C{q}" for q, f in enumerate(fs)}

    # (a), (b): g_task against kappa, one panel per (alpha, tau)
    for j, (al, tau) in enumerate(zip(a["alphas"], a["taus"], strict=True)):
        ax = axs[0, j]
        for q in lin:
            c = colour[fs[q]]
            ax.loglog(a["kappa_grid"], a["theory_g"][j, q], color=c, lw=1.8)
            _err(ax, kap, a["nonlinear_g_mean"][big, j, q], a["nonlinear_g_se"][big, j, q],
                 ok=a["nonlinear_g_mean"][big, j, q] > 0, color=c)
            _err(ax, kap * 1.07, a["equivalent_g_mean"][big, j, q],
                 a["equivalent_g_se"][big, j, q], ok=a["equivalent_g_mean"][big, j, q] > 0,
                 color=c, fmt="s", mfc="white", ms=5)
            tick = a["theory_at_sizes_g"][big, j, q]
            ax.plot(kap * 1.035, np.where(tick > 0, tick, np.nan), "_", color=c, ms=16, mew=1.6)
            if nd > 1:
                _err(ax, kap / 1.07, a["nonlinear_g_mean"][small, j, q],
                     a["nonlinear_g_se"][small, j, q],
                     ok=a["nonlinear_g_mean"][small, j, q] > 0, color=c, fmt="^", ms=3.5,
                     alpha=0.45)
        ax.axvline(float(a["kappa_ref"]), ymin=0.6, color="grey", ls=":", lw=1)
        ax.set_xlabel("κ = k / d  (task diversity)")
        ax.set_ylabel("g_task = e_ICL − e_IDG")
        ax.set_title(f"({'ab'[j]}) α = {al:g}, τ = {tau:g}: task-generalisation gap",
                     fontsize=10)
        ax.set_ylim(1e-4, None)
    handles = [Line2D([], [], color=colour[fs[q]], lw=1.8,
                      label=f"{_NAMES[fs[q]]}: c₁ = {a['hermite'][q][1]:.3f}, ρ_eff/c₁² = "
                            f"{a['hermite'][q][3] / a['hermite'][q][1] ** 2:.2f}")
               for q in lin]
    handles += [Line2D([], [], color="k", lw=1.8, label="theory d → ∞: c₁² g_Lu(ρ_eff/c₁²)"),
                Line2D([], [], color="k", marker="_", ms=16, mew=1.6, ls="none",
                       label=f"short bars: theory at the d = {ds[big]} rounded k, n"),
                Line2D([], [], color="k", marker="o", ls="none",
                       label=f"f(xᵀw) + ε, d = {ds[big]}"),
                Line2D([], [], color="k", marker="s", mfc="white", ls="none",
                       label=f"c₁xᵀw + N(0, ρ_eff), d = {ds[big]}")]
    if nd > 1:
        handles.append(Line2D([], [], color="k", marker="^", ms=3.5, alpha=0.45, ls="none",
                              label=f"f(xᵀw) + ε, d = {ds[small]}"))
    handles.append(Line2D([], [], color="grey", ls=":", label=f"κ_ref = {float(a['kappa_ref']):g}"))
    axs[0, 0].legend(handles=handles, fontsize=7.5, loc="lower left")
    for j in range(len(a["alphas"]), 2):          # a sweep with a single (alpha, tau)
        axs[0, j].set_visible(False)

    # (c): the transition point per target, split by (alpha, tau) so that no two series
    # overlap: four slots per target (alpha x nonlinear / equivalent), the smaller d faint
    # just left of the larger; theory (a function of rho' only) as a bar over its alpha's
    # two slots
    ax = axs[0, 2]
    order = sorted(lin, key=lambda q: a["hermite"][q][3] / a["hermite"][q][1] ** 2)
    for pos, q in enumerate(order):
        for j in range(len(a["alphas"])):
            c = _ALPHA_COLOURS[j]
            base = pos + 0.42 * (j - 0.5)
            ax.hlines(a["half_theory"][j][q], base - 0.17, base + 0.17, color=c, lw=2.2)
            for w in (0, 1):
                for i in range(nd):
                    k, se = a["half_sim"][i, j, q, w]
                    x = base + 0.1 * (2 * w - 1) - (0.035 if i != big else 0.0)
                    ax.errorbar([x], [k], yerr=[2 * se], fmt="os"[w], color=c,
                                ms=5 if i == big else 3.5, mfc=c if w == 0 else "white",
                                capsize=2, lw=1, alpha=1.0 if i == big else 0.45)
    ax.set_xticks(range(len(order)))
    ax.set_xticklabels([f"{_NAMES[fs[q]]}\nρ' = {a['hermite'][q][3] / a['hermite'][q][1] ** 2:.2f}"
                        for q in order], fontsize=8)
    ax.set_xlim(-0.6, len(order) - 0.4)
    extra = [Line2D([], [], color=_ALPHA_COLOURS[j], lw=2.2,
                    label=f"theory (f only via ρ'), α = {al:g}, τ = {tau:g}")
             for j, (al, tau) in enumerate(zip(a["alphas"], a["taus"], strict=True))]
    extra += [Line2D([], [], color="k", marker="o", ls="none", label=f"f(xᵀw) + ε, d = {ds[big]}"),
              Line2D([], [], color="k", marker="s", mfc="white", ls="none",
                     label=f"equivalent linear, d = {ds[big]}")]
    if nd > 1:
        extra.append(Line2D([], [], color="k", marker="o", ms=3.5, alpha=0.45, ls="none",
                            label=f"d = {ds[small]} (faint, just left)"))
    hs = np.asarray(a["half_sim"])[:, :, lin]                   # the targets drawn here
    lo = np.nanmin(hs[..., 0] - 2 * hs[..., 1])
    hi = max(np.nanmax(hs[..., 0] + 2 * hs[..., 1]),
             float(np.nanmax(np.asarray(a["half_theory"])[:, lin])))
    ax.set_ylim(lo - 0.45 * (hi - lo), hi + 0.05 * (hi - lo))     # room for the legend below
    ax.legend(handles=extra, fontsize=7.5, loc="lower center", ncol=2)
    ax.set_xlabel("target f (ordered by ρ' = ρ_eff / c₁², the rescaled model's noise)")
    ax.set_ylabel(f"κ½: g_task = ½ g_task(κ_ref = {float(a['kappa_ref']):g})")
    ax.set_title("(c) transition point κ½ per target, split by α", fontsize=10)

    # (d), (e): c1 = 0 (|z|) across kappa
    if "abs" in fs:
        q = fs.index("abs")
        m2 = a["hermite"][q][2]
        ax = axs[1, 0]
        for j, (al, tau) in enumerate(zip(a["alphas"], a["taus"], strict=True)):
            c = _ALPHA_COLOURS[j]
            ax.axhline(tau / (tau - 1), color=c, lw=1.8,
                       label=f"equivalence: m₂τ/(τ−1), α = {al:g}, τ = {tau:g}")
            ax.plot(kap, a["theory_at_sizes_icl"][big, j, q] / m2, "_", color=c, ms=16,
                    mew=1.6)
            for i in range(nd):
                sty = dict(ms=5 if i == big else 3.5, alpha=1.0 if i == big else 0.45)
                _err(ax, kap / 1.05, a["nonlinear_icl_mean"][i, j, q] / m2,
                     a["nonlinear_icl_se"][i, j, q] / m2, color=c, fmt="o", **sty)
                _err(ax, kap * 1.05, a["nonlinear_idg_mean"][i, j, q] / m2,
                     a["nonlinear_idg_se"][i, j, q] / m2, color=c, fmt="D", mfc="white", **sty)
        ax.axhline(1.0, color="k", ls="--", lw=1, label="m₂: the predictor ŷ = 0 (exact floor)")
        h, _ = ax.get_legend_handles_labels()
        h += [Line2D([], [], color="k", marker="_", ms=16, mew=1.6, ls="none",
                     label=f"short bars: m₂τ'/(τ'−1), d = {ds[big]} rounded n = τ'd²"),
              Line2D([], [], color="k", marker="o", ls="none", label="e_ICL (fresh tasks)"),
              Line2D([], [], color="k", marker="D", mfc="white", ls="none",
                     label="e_IDG (pool tasks)")]
        if nd > 1:
            h.append(Line2D([], [], color="k", marker="o", ms=3.5, alpha=0.45, ls="none",
                            label=f"faint: d = {ds[small]}, solid: d = {ds[big]}"))
        ax.legend(handles=h, fontsize=7, loc="center", ncol=2, bbox_to_anchor=(0.5, 0.43))
        ax.set_xscale("log")
        ax.set_ylim(0.9, 2.8)
        ax.set_xlabel("κ = k / d")
        ax.set_ylabel("test error / m₂  (f = |z|, c₁ = 0)")
        ax.set_title("(d) c₁ = 0: errors at every κ stay above m₂", fontsize=10)

        ax = axs[1, 1]
        for j, al in enumerate(a["alphas"]):
            c = _ALPHA_COLOURS[j]
            for i in range(nd):
                _err(ax, kap * (1 + 0.06 * (i - big)), a["nonlinear_g_mean"][i, j, q] / m2,
                     a["nonlinear_g_se"][i, j, q] / m2, color=c, fmt="o",
                     ms=5 if i == big else 3.5, alpha=1.0 if i == big else 0.45,
                     label=f"f(xᵀw) + ε, α = {al:g}, d = {ds[i]}")
            ax.plot(kap, a["equivalent_g_mean"][big, j, q] / m2, "s", color=c, mfc="white",
                    ms=5, label=f"equivalent linear (pure noise), α = {al:g}, d = {ds[big]}")
        ax.axhline(0.0, color="k", lw=1.2, label="equivalence: g_task = 0")
        ax.set_xscale("log")
        ax.set_xlabel("κ = k / d")
        ax.set_ylabel("g_task / m₂  (f = |z|)")
        ax.set_title("(e) c₁ = 0: a small gap at finite d, none in the equivalent model",
                     fontsize=10)
        ax.legend(fontsize=7.5, loc="upper right")

    # (f): the transition, normalised by g_task(kappa_ref)
    ax = axs[1, 2]
    r = int(np.argmin(np.abs(kap - float(a["kappa_ref"]))))
    gr = int(np.argmin(np.abs(a["kappa_grid"] - float(a["kappa_ref"]))))
    for j in range(len(a["alphas"])):
        for q in lin:
            c = colour[fs[q]]
            th = a["theory_g"][j, q]
            ref = np.interp(np.log(float(a["kappa_ref"])), np.log(a["kappa_grid"]), th)
            ax.semilogx(a["kappa_grid"][gr:], th[gr:] / ref, color=c, lw=1.4,
                        ls="-" if j == 0 else "--")
            g, se = a["nonlinear_g_mean"][big, j, q], a["nonlinear_g_se"][big, j, q]
            ax.errorbar(kap[r:] * (1.04 if j else 1 / 1.04), g[r:] / g[r], yerr=2 * se[r:] / g[r],
                        fmt="o" if j == 0 else "v", color=c, ms=4, capsize=2, lw=1,
                        mfc=c if j == 0 else "white")
    ax.axhline(0.5, color="grey", ls=":", lw=1)
    h = [Line2D([], [], color=colour[fs[q]], lw=1.4, label=_NAMES[fs[q]]) for q in lin]
    for j, (al, tau) in enumerate(zip(a["alphas"], a["taus"], strict=True)):
        h.append(Line2D([], [], color="k", ls="-" if j == 0 else "--", marker="o" if j == 0
                        else "v", mfc="k" if j == 0 else "white",
                        label=f"α = {al:g}, τ = {tau:g}: theory (line), f(xᵀw) + ε, d = {ds[big]}"))
    ax.legend(handles=h, fontsize=7.5, loc="upper right")
    ax.set_ylim(-0.05, 1.25)
    ax.set_xlabel("κ = k / d")
    ax.set_ylabel(f"g_task(κ) / g_task(κ_ref = {float(a['kappa_ref']):g})")
    ax.set_title("(f) the transition, normalised (error bars ignore the SE of the "
                 "reference)", fontsize=10)
    _draw_ratios_and_dmmse(axs[2], a, fs, ds, lin, colour, big, nd)
    fig.suptitle(f"Nonlinear single-index targets across task diversity (ρ = {cfg['rho']}, "
                 f"λ = {cfg['lam']:g}; every point: mean of {trials} pretraining runs, "
                 "bars ±2 SE)", fontsize=11)
    fig.tight_layout()
    return fig


register_figure(Figure(
    name="icl-nonlinear-kappa", simulation="icl-nonlinear-kappa",
    caption=("g_task = e_ICL − e_IDG of ridge-pretrained linear attention for y = f(xᵀw) + ε "
             "against the number of pretraining tasks per dimension κ. (a, b) One panel per (α, τ) "
             "pair ((b) absent when the run has one, as the quick profile). Simulations on "
             "the nonlinear target (filled) and on its equivalent linear target c₁xᵀw + "
             "N(0, ρ_eff) with the same pools, token projections and queries (open squares), "
             "against the d → ∞ theory of the equivalent model (lines; short bars: the same "
             "theory at each simulated point's rounded k and n). Both kinds of point sit "
             "above the theory, most at small κ, where the pool has only κd tasks; there "
             "they come down from the smaller d (faint triangles) to the larger. (c) The κ "
             "at which g_task falls to half its value at κ_ref, per target (ordered by ρ' = "
             "ρ_eff/c₁²) and per α, side by side: the theory (bars) is nearly the same for "
             "every target; the simulated points, nonlinear and equivalent-linear alike, lie at "
             "or below it, since the finite-d excess is largest at κ_ref. (d, e) With c₁ = 0 "
             "(|z|) both errors stay above m₂ at every κ, near m₂τ/(τ−1): nothing is learnt; "
             "a small positive g_task at small κ, shrinking with d, has no counterpart in "
             "the equivalent model (exactly 0). (f) The transition normalised by its value "
             "at κ_ref. Points with a non-positive mean are not drawn on log axes; κ where "
             "the pool would have fewer than 2 tasks or 2 prompts per task are not "
             "simulated. (g) The ratio of the nonlinear target's e_ICL to its equivalent-linear "
             "e_ICL, trial by trial on the same pools, token projections and queries, at both "
             "d: it scatters about 1 with no trend in κ, though more widely than its ±2 SE bars "
             "at small κ, where several points lie beyond them (the run's summary gives "
             "the largest |z|); the "
             "O(1/ℓ) corrections of the equivalence are below this resolution. (h) The "
             "in-distribution error e_IDG (test tasks drawn from the pool) of the nonlinear "
             "target, and of its equivalent linear target, against the equivalent model's "
             "theory c₁² e_IDG,Lu(ρ_eff/c₁²): both sit on or just above it. (i) The dMMSE "
             "predictor (the Bayes posterior mean with the pretraining pool as prior and the "
             "nonlinear likelihood, the SE over test prompts of one pool) beside linear "
             "attention: dMMSE identifies a pool task (e_IDG at the noise level ρ at every κ) "
             "but a fresh task is not in its prior (e_ICL near or above m₂); at this τ = 2, "
             "close to the ridgeless interpolation peak, linear attention's e_ICL is far above "
             "m₂ at small κ and falls with κ. Numbers: the run's summary."),
    draw=draw, checks=("icl.08-nonlinear-kappa-equivalence",)))


# ------------------------------------------------------------- nothing learnable -------

def draw_c1_zero(a, meta):
    """One panel per (f, tau): the simulated error over the formula against 1/d, the line
    a + b/d through the points and its limit at 1/d = 0 (bars +-2 SE)."""
    cfg = meta["config"]
    fs, taus, ds = list(a["fs"]), np.asarray(a["taus"], float), np.asarray(a["ds"], float)
    nf, nt = len(fs), len(taus)
    fig, axs = plt.subplots(nf, nt, figsize=(4.6 * nt + 0.4, 3.6 * nf + 0.5), squeeze=False)
    x = 1.0 / ds
    xs = np.linspace(0.0, x.max() * 1.08, 50)
    for i, f in enumerate(fs):
        for j, tau in enumerate(taus):
            ax, pred = axs[i, j], float(a["predicted"][i, j])
            r, rse = a["mean"][:, i, j] / pred, a["se"][:, i, j] / pred
            lim, lse = float(a["rel_gap_limit"][i, j]), float(a["rel_gap_limit_se"][i, j])
            # the run's line a + b/d (stats.extrapolate_inverse_each, weighted by the SEs):
            # its limit a is stored; a weighted least-squares line passes through the
            # weighted centroid of the points, which gives b
            w = 1.0 / rse**2
            a0 = 1 + lim
            b = (np.sum(w * r) / np.sum(w) - a0) / (np.sum(w * x) / np.sum(w))
            ax.plot(xs, a0 + b * xs, "--", color="C0", lw=1,
                    label="a + b/d through the points")
            ax.errorbar(x, r, yerr=2 * rse, fmt="o", color="C0", capsize=3,
                        label=f"simulated ({int(a['trials'])} trials per d)")
            ax.errorbar([0.0], [1 + lim], yerr=[2 * lse], fmt="s", color="C3", capsize=3,
                        label=f"d → ∞: {1 + lim:.3f} (SE {lse:.3f})")
            ax.axhline(1.0, color="k", lw=1.2,
                       label="m₂τ/(τ−1)" if tau > 1 else "m₂/(1−τ)")
            ax.set_xticks([0.0, *x])
            ax.set_xticklabels(["∞"] + [f"1/{int(d)}" for d in ds])
            ax.set_xlim(-0.06 * x.max(), x.max() * 1.1)
            ax.set_xlabel("1/d")
            ax.set_ylabel("pretrained e_ICL / formula")
            ax.set_title(f"f = {_NAMES[f]}, τ = {tau:g}: formula {pred:.3f} "
                         f"(m₂ = {float(a['m2'][i]):.3f})", fontsize=10)
            ax.legend(fontsize=7.5, loc="upper left")
    fig.suptitle(f"Nothing learnable when c₁ = 0 (α = {cfg['alpha']:g}, κ = ∞, ρ = "
                 f"{cfg['rho']:g}, λ = {cfg['lam']:g}; bars ±2 SE)", fontsize=11)
    fig.tight_layout()
    return fig


register_figure(Figure(
    name="icl-c1-zero", simulation="icl-c1-zero",
    caption=("Linear attention learns nothing from a target with no linear part. For an even "
             "f (|z|, z²) the first Hermite coefficient c₁ is zero, and the near-ridgeless "
             "pretrained model only fits noise of variance m₂: its error is m₂τ/(τ−1) for "
             "τ > 1 and m₂/(1−τ) for τ < 1 as d → ∞ (κ = ∞, a fresh task per prompt), "
             "above m₂, the error of predicting 0. Per panel (one per f and τ), the mean "
             "exact test error of the pretrained Γ over the formula against 1/d (bars ±2 "
             "Monte Carlo SE over trials), the line a + b/d through the points, and its "
             "value at 1/d = 0 with its SE. The finite-d error lies above the formula and "
             "comes down to it as d grows. Check icl.06 reads this run (its extrapolated "
             "error equals the formula within 10 % on the quick run, |z| at τ = 3, and "
             "within 5 % in every panel on the paper run, icl.06-paper). Numbers: the run's "
             "summary."),
    draw=draw_c1_zero, checks=("icl.06-nothing-learnable",)))
