"""``icl-softmax``: one softmax head against linear attention on in-context regression."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from .. import icl
from .. import icl_softmax as S
from ..simulations.icl_softmax import softmax_estimate
from ._base import Figure, register_figure


def draw_icl_softmax(a, meta):
    cfg = meta["config"]
    rho = cfg["rho"]
    soft, soft_se = softmax_estimate(a)
    ds = [int(d) for d in a["ds"]]
    fig, axes = plt.subplots(1, len(ds) + 1, figsize=(4.2 * (len(ds) + 1), 4.9))
    grid = np.geomspace(min(a["alphas"]) * 0.8, max(a["alphas"]) * 1.25, 80)
    for i, (ax, d) in enumerate(zip(axes, ds, strict=False)):
        x = a["alpha_eff"][i]
        ax.plot(grid, icl.optimum_error(grid * d, d, rho), color="C0",
                label="linear attention, best Γ at this ℓ, d (exact)")
        ax.plot(grid, [icl.limit_large(g, rho) for g in grid], "--", color="C0", lw=1,
                label="linear attention, d → ∞: Lu et al. (τ, κ → ∞)")
        ax.plot(x, a["iso_pred"][i], "-", color="C3",
                label="softmax head, best isotropic head at this ℓ, d (exact)")
        ax.plot(grid, [S.softmax_head_optimum(g, rho)["error"] for g in grid], "--",
                color="C3", lw=1, label="softmax head, d → ∞: Lu et al. at α/e")
        ax.plot(x, a["pair_theory"][i], "-", color="C2",
                label="two heads: best isotropic head + a mean head (exact, t → 0)")
        ax.errorbar(x, a["pair_mean"][i], yerr=2 * a["pair_mean_se"][i], fmt="^", color="C2",
                    ms=5, capsize=2, label=f"two softmax heads trained (± 2 SE of the "
                    f"evaluation, {cfg['seeds']} seeds)")
        ax.errorbar(x * 0.96, a["lin_mean"][i], yerr=2 * a["lin_mean_se"][i], fmt="s",
                    color="C0", ms=5, capsize=2,
                    label=f"linear attention trained (exact error, ± 2 SE over {cfg['seeds']} "
                    "seeds)")
        ax.errorbar(x * 1.04, soft[i], yerr=2 * soft_se[i], fmt="o",
                    color="C3", ms=5, capsize=2,
                    label=f"softmax head trained (± 2 SE of the evaluation, {cfg['seeds']} "
                    "seeds)")
        ax.axhline(rho, color="grey", ls=":", lw=1, label=f"noise floor ρ = {rho:g}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("prompt length per dimension α = ℓ/d")
        ax.set_ylabel("in-context test error")
        ax.set_title(f"d = {d}", fontsize=10)
        ax.set_ylim(0, None)
    # one legend for the two error panels, below them: no text over the data
    h, lab = axes[0].get_legend_handles_labels()
    ax = axes[-1]
    for i, d in enumerate(ds):
        x = a["alpha_eff"][i]
        ratio = (soft[i] - rho) / (a["lin_mean"][i] - rho)
        rse = np.abs(ratio) * np.hypot(soft_se[i] / (soft[i] - rho),
                                       a["lin_mean_se"][i] / (a["lin_mean"][i] - rho))
        ax.errorbar(x * (0.96 if i == 0 else 1.04), ratio, yerr=2 * rse, fmt="os"[i % 2],
                    color=f"C{i + 4}", ms=5, capsize=2, label=f"trained, d = {d} (± 2 SE)")
        # the two exact optima at this l and d: the best isotropic softmax head over the
        # best linear attention
        ax.plot(x, (a["iso_pred"][i] - rho) / (icl.optimum_error(a["ell"][i], d, rho) - rho),
                "-", color=f"C{i + 4}", lw=1.2, label=f"derived at d = {d} (exact optima)")
    th = [(S.softmax_head_optimum(g, rho)["error"] - rho) / (icl.limit_large(g, rho) - rho)
          for g in grid]
    ax.plot(grid, th, "k--", lw=1, label="derived, d → ∞")
    ax.axhline(np.e, color="grey", ls=":", lw=1, label="e = 2.718 (α → ∞)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("prompt length per dimension α = ℓ/d")
    ax.set_ylabel("excess error ratio (softmax − ρ) / (linear − ρ)")
    ax.set_title("softmax needs e times longer prompts", fontsize=10)
    ax.set_ylim(1, None)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    fig.legend(h, lab, loc="lower left", bbox_to_anchor=(0.04, 0.0), ncol=2, fontsize=7.5,
               frameon=False)
    return fig


register_figure(Figure(
    name="icl-softmax", simulation="icl-softmax",
    caption=("One softmax head on Lu et al.'s in-context regression task, beside linear "
             "attention trained on the same prompts. In the infinite-prompt limit the softmax "
             "head is a linear map and reaches the noise floor as linear attention does "
             "(check icl.09). Linear attention's best error at each ℓ and d (blue, solid) "
             "tends to Lu et al.'s limit as d → ∞ (blue, dashed). At finite prompts the "
             "softmax head's log-normal weights keep an effective sample size of about "
             "ℓ·exp(−t), and its best error (purple, solid: the best isotropic head, computed "
             "exactly at each ℓ and d, figure icl-softmax-exact) tends to linear attention's "
             "at the prompt length ℓ/e as d → ∞ (purple, dashed). Trained softmax heads, every "
             "parameter free (AdamW, with weight decay on the parts that vanish at the "
             "symmetric optimum), reach that curve and do not go below it; trained linear "
             "attention reaches its exact optimum. A second head that can output the "
             "prompt's mean label (green) cancels the mean part of the weights' variance; the "
             "pair's best error, reached as the tilt goes to 0, is linear attention's on "
             "centred tokens, a little above linear attention's. Trained pairs approach it "
             "slowly. Right: the excess error of one softmax head over linear attention, "
             "trained (markers) and derived from the two exact optima at each d (solid), "
             "grows with the prompt length towards the factor e of the d → ∞ curve "
             "(dashed)."),
    draw=draw_icl_softmax, checks=("icl.09-softmax-regression",)))


def draw_icl_softmax_exact(a, meta):
    rho = float(a["rho"])
    ells = np.asarray(a["ells"], float)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6))
    for j, al in enumerate(a["alphas"]):
        ok = np.isfinite(a["t"][:, j])
        dk = ok & a["has_delta"][:, j]
        c, x = f"C{j}", ells[ok]
        ax = axes[0]
        ax.plot(x, a["exact"][ok, j], "-", color=c, label=f"α = {al:g}: exact optimum")
        ax.errorbar(x, a["mc"][ok, j], yerr=2 * a["mc_se"][ok, j], fmt="o", color=c, ms=4,
                    capsize=2)
        ax.plot(ells[dk], a["delta_derived"][dk, j], "--", color=c, lw=1)
        ax = axes[1]
        rel = (a["delta_exact"][dk, j] - a["exact"][dk, j]) / a["exact"][dk, j]
        ax.plot(ells[dk], 100 * rel, "-", color=c, label=f"α = {al:g}")
        ax.errorbar(ells[dk], 100 * a["gap_mc"][dk, j] / a["exact"][dk, j],
                    yerr=200 * a["gap_se"][dk, j] / a["exact"][dk, j], fmt="o", color=c,
                    ms=4, capsize=2)
        ax = axes[2]
        ax.plot(x, a["t"][ok, j], "o-", color=c, ms=4, label=f"α = {al:g}: exact")
        ax.plot(ells[dk], a["delta_t"][dk, j], "--", color=c, lw=1)
    axes[0].axhline(rho, color="grey", ls=":", lw=1, label=f"noise floor ρ = {rho:g}")
    axes[0].set_ylabel("test error of the best isotropic head")
    axes[0].set_title("exact (lines) vs Monte Carlo (± 2 SE);\ndashed: delta method", fontsize=10)
    axes[0].set_ylim(0, None)
    axes[1].axhline(0, color="grey", lw=0.8)
    axes[1].set_ylabel("excess error of the delta method's head (%)")
    axes[1].set_title("what the delta method's tilt costs:\nexact (lines), paired Monte Carlo "
                      "(± 2 SE)", fontsize=10)
    axes[2].set_ylabel("best tilt t* (score variance)")
    axes[2].set_title("best tilt: exact (dots) vs delta method (dashed)", fontsize=10)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("prompt length ℓ")
    axes[0].legend(fontsize=7.5, loc="lower left")
    axes[2].legend(fontsize=7.5, loc="upper right")
    fig.tight_layout()
    return fig


register_figure(Figure(
    name="icl-softmax-exact", simulation="icl-softmax-exact",
    caption=("The isotropic softmax head A = √(td)·I, e = g√(d/t) on in-context regression "
             "(ρ = 0.1, d = ℓ/α) at every prompt length. Left: its best error computed "
             "exactly (the tokens enter only through their projections on the query; the "
             "softmax moments are one-dimensional integrals) against a Monte Carlo of the "
             "d-dimensional head (check icl.11), with the delta method's leading-order value "
             "dashed. Middle: how much worse the delta method's head is than the exact "
             "optimum, exactly and by the paired Monte Carlo difference (the delta method "
             "needs d ≥ 3). Right: the best tilt is far above the delta method's at short "
             "prompts and approaches it as ℓ grows (both tend to t = 1)."),
    draw=draw_icl_softmax_exact, checks=("icl.11-softmax-every-prompt-length",)))
