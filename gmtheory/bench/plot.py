"""The benchmark figure: ``gmtheory bench gma --figure PATH``."""

from __future__ import annotations

import numpy as np

from .gma import SLOPE_MIN_N

__all__ = ["plot_gma"]


def plot_gma(res: dict, path) -> None:
    """Time (forward+backward) and compiled temporary memory against N, log–log, with
    N^1 and N^2 guides; each legend entry carries its log-log slope from ``res['slopes']``
    (fitted over ``res['slope_Ns']``), and the titles count the GMA forms that meet the
    slope goal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..figures import style_path

    goal = 1.15                                     # time/memory slope goal (docs/topics/gma.md)
    sn = res.get("slope_Ns") or [SLOPE_MIN_N]
    slopes = res["slopes"]
    with plt.style.context(str(style_path())):
        fig, axes = plt.subplots(1, 2, figsize=(13, 6.4))
        keys = sorted({(r["method"], r["K"] or 0) for r in res["rows"]})
        for metric, ax, scale in (("fwdbwd_s", axes[0], 1.0),
                                  ("fwdbwd_temp_bytes", axes[1], 2.0**-20)):
            for i, (method, K) in enumerate(keys):
                pts = sorted((r["N"], r[metric]) for r in res["rows"]
                             if r["method"] == method and (r["K"] or 0) == K)
                n, y = (np.array(v, float) for v in zip(*pts, strict=True))
                s = slopes.get(f"{method}[K={K or None}] {metric}")
                lab = method + (f" (K={K})" if K else "") + ("" if s is None else
                                                             f": slope {s:.2f}")
                ax.loglog(n, y * scale, "o" + ("--" if K == 64 else "-"), ms=3, label=lab,
                          color=f"C{i % 8}")
            # guides: N below every curve; N^2 above the steepest (softmax) curve's start
            n0 = min(r["N"] for r in res["rows"])
            nn = np.geomspace(n0, max(r["N"] for r in res["rows"]), 20)
            y_lo = 0.4 * min(r[metric] for r in res["rows"] if r["N"] == n0) * scale
            ax.loglog(nn, y_lo * nn / n0, color="0.45", lw=1.2, ls=(0, (1, 1.5)),
                      label="∝ N guide")
            y_hi = 1.5 * max(r[metric] for r in res["rows"] if r["N"] == n0) * scale
            top = nn <= n0 * 2**5.5
            ax.loglog(nn[top], y_hi * (nn[top] / n0) ** 2, color="0.45", lw=1.2, ls="-.",
                      label="∝ N² guide")
            ax.axvspan(min(sn), max(sn), color="0.96", zorder=0,
                       label=f"slope fit range N = {min(sn)}–{max(sn)}")
            ax.set_xlabel("sequence length N")
            gma = {k: v for k, v in slopes.items() if k.startswith("gma") and
                   k.endswith(" " + metric)}
            soft = [v for k, v in slopes.items() if k.startswith("softmax")
                    and k.endswith(" " + metric)]
            what = ("forward + backward time" if metric == "fwdbwd_s"
                    else "compiled temporary memory")
            ax.set_title(f"{what}: log-log slope of the {len(gma)} GMA forms "
                         f"{min(gma.values()):.2f}–{max(gma.values()):.2f}"
                         + (f", softmax {soft[0]:.2f}" if soft else "")
                         + f"\nslope goal ≤ {goal:g} for GMA: met by "
                         f"{sum(v <= goal for v in gma.values())} of {len(gma)}", fontsize=10)
        axes[0].set_ylabel(f"forward + backward time (s, median of {res['repeats']} runs)")
        axes[1].set_ylabel("compiled temporary memory (MiB)")
        for ax in axes:
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
        note = (f"d_model 64, 4 heads, {res['dtype']}, backend {res['backend']}, "
                f"median of {res['repeats']} runs after warm-up; slopes fitted over "
                f"N = {min(sn)}–{max(sn)} ({len(sn)} sizes).")
        skipped = [f"{r['method']} at N = {r['N']} (needs ~{r['needed_bytes'] / 2**30:.0f} GiB, "
                   f"{r['available_bytes'] / 2**30:.0f} GiB available)"
                   for r in res.get("skipped", ())]
        if skipped:
            note += " Not run, too large for memory: " + "; ".join(skipped) + "."
        fig.tight_layout()
        fig.text(0.01, -0.01, note, fontsize=9, style="italic", va="top")
        fig.savefig(path)
        plt.close(fig)
