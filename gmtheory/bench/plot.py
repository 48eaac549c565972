"""The benchmark figure, ``gmtheory bench gma --figure PATH``, and the benchmark figures'
entries in the figure index (``figures/README.md``, :func:`gmtheory.tables.figures_index`)."""

from __future__ import annotations

import textwrap
from typing import NamedTuple

import numpy as np

from .. import gma as _gma
from .gma import GMA_FORMS, SLOPE_MIN_N, SPREAD, fit_ranges, run_spread, slope_key

__all__ = ["plot_gma", "BENCH_FIGURES", "BenchFigure", "bench_figures_index"]

GOAL = 1.15  # time/memory slope goal for GMA (docs/topics/gma.md#benchmark)


def _label(method, K, slopes, metric) -> str:
    """Legend entry: the method and its slopes ± SE, one per form fitted."""
    parts = []
    for form in ("unfused", "fused", ""):
        v = slopes.get(slope_key(method, K or None, form, metric))
        if v:
            se = (" (2 sizes, no SE)" if v["se"] is None else
                  " ± <0.01" if v["se"] < 0.005 else f" ± {v['se']:.2f}")
            parts.append(f"{form + ' ' if form else ''}{v['slope']:.2f}{se}")
    return (method + (f" (K={K})" if K else "")
            + (": slope " + ", ".join(parts) if parts else ""))


def _draw_series(ax, rows, metric, scale, style, fmin):
    """One method's medians: a line per form (open markers: GMA's unfused form, filled: its
    fused form or a method with one form), a thin dotted link across the switch, and, for
    times, the spread of the repeats as error bars."""
    method, color, ls = style
    pts = sorted((r["N"], r[metric] * scale, r) for r in rows)
    ns = [p[0] for p in pts]
    segs = fit_ranges(method, ns, fmin) if method in GMA_FORMS else [("", ns)]
    last = None
    for form, span in segs:
        seg = [p for p in pts if p[0] in span]
        x, y = [p[0] for p in seg], [p[1] for p in seg]
        if last is not None:
            ax.loglog([last[0], x[0]], [last[1], y[0]], color=color, lw=0.8, ls=":")
        ax.loglog(x, y, "o", ls=ls, ms=3.5, color=color,
                  mfc="white" if form == "unfused" else color)
        last = (x[-1], y[-1])
        if metric != "fwdbwd_s":
            continue
        q = [(p[0], p[1], run_spread(p[2])) for p in seg]
        q = [(n, y, lo * scale, hi * scale) for n, y, s in q if s for lo, hi in [s]]
        if q:
            n, y, lo, hi = (np.array(v) for v in zip(*q, strict=True))
            ax.errorbar(n, y, yerr=[np.maximum(y - lo, 0), np.maximum(hi - y, 0)], fmt="none",
                        ecolor=color, elinewidth=0.9, capsize=2.5)


def _mark_switch(ax, fmin, methods, Ns):
    """``FUSED_MIN_N`` of each GMA direction drawn, within the sizes ``Ns`` measured: a
    vertical line and a tick label on the top axis (outside the data)."""
    from matplotlib.ticker import NullLocator

    marks = {int(fmin[d]): d for m, d in GMA_FORMS.items()
             if m in methods and min(Ns) < int(fmin[d]) <= max(Ns)}
    for x in marks:
        ax.axvline(x, color="0.35", lw=0.9, ls=(0, (2, 2)), zorder=0)
    top = ax.secondary_xaxis("top")
    short = {"causal": "causal", "bidirectional": "bidir."}
    top.set_xticks(sorted(marks), labels=[f"{short[marks[x]]}\n{x}" for x in sorted(marks)],
                   fontsize=7.5)
    top.set_xlabel("gma.FUSED_MIN_N: GMA's fused form from", fontsize=8, labelpad=2)
    top.xaxis.set_minor_locator(NullLocator())
    top.tick_params(length=4, pad=1)


def _title(what, slopes, metric) -> str:
    """A panel's title: the ranges of the slopes by kind of fit, and the goal met."""
    def fits(prefix, form=None):
        return [v["slope"] for k, v in slopes.items() if k.startswith(prefix)
                and k.endswith(" " + metric) and (form is None or f", {form}]" in k)]

    def span(vals, goal=True):
        if not vals:
            return "none"
        met = f" ({sum(v <= GOAL for v in vals)} of {len(vals)} ≤ {GOAL:g})" if goal else ""
        return (f"{min(vals):.2f}–{max(vals):.2f}" if len(vals) > 1 else f"{vals[0]:.2f}") + met

    soft = fits("softmax")
    return (f"{what}: log-log slopes (goal ≤ {GOAL:g} for GMA)\nGMA fused "
            f"{span(fits('gma-', 'fused'))}, unfused {span(fits('gma-', 'unfused'))}\n"
            f"naive cumsum GMA {span(fits('gma-causal-cumsum'))}"
            + (f", xla softmax {span(soft, goal=False)}" if soft else ""))


def _draw_spread(ax, all_rows, keys, repeats):
    """The spread of the repeated fwd+bwd times: interquartile range / median, in %."""
    worst = (0.0, None)
    for i, (method, K) in enumerate(keys):
        pts = [(r["N"], run_spread(r), r["fwdbwd_s"]) for r in all_rows
               if r["method"] == method and (r["K"] or 0) == K]
        pts = sorted((n, 100 * (q[1] - q[0]) / t) for n, q, t in pts if q)
        if pts:
            n, y = zip(*pts, strict=True)
            ax.semilogx(n, y, "o", ls="--" if K == 64 else "-", ms=3.5, lw=1, color=f"C{i % 8}")
            j = int(np.argmax(y))
            if y[j] > worst[0]:
                worst = (y[j], f"{method}{f' K={K}' if K else ''}, N = {n[j]}")
    if worst[1] is None:
        ax.text(0.5, 0.5, "no repeats recorded\n(this run kept only the medians)",
                transform=ax.transAxes, ha="center", va="center")
        return
    allq = [100 * (q[1] - q[0]) / r["fwdbwd_s"] for r in all_rows for q in [run_spread(r)] if q]
    ax.set_ylim(0, None)
    ax.set_xlabel("sequence length N")
    lo, hi = SPREAD
    ax.set_ylabel(f"{lo}th–{hi}th percentile range of the {repeats} runs (% of median)")
    ax.set_title(f"spread over the {repeats} repeats, fwd+bwd time\nmedian {np.median(allq):.0f} %"
                 f" of the median; largest {worst[0]:.0f} %\n({worst[1]})", fontsize=10)


def plot_gma(res: dict, path) -> None:
    """Time (forward+backward; median, error bars: the interquartile range of the repeats),
    compiled temporary memory and the repeats' relative spread against N, log–log, with N^1
    and N^2 guides.  Each legend entry carries its log-log slopes ± SE from
    ``res['slopes']``, GMA's unfused (open markers) and fused (filled) forms fitted apart;
    ``gma.FUSED_MIN_N`` (the run's ``res['fused_min_n']``) is marked on the top axis and by
    vertical lines; the titles count the fits that meet the slope goal."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..figures import style_path

    fmin = res.get("fused_min_n") or dict(_gma.FUSED_MIN_N)
    slopes, all_rows = res["slopes"], res["rows"]
    spread = any(r.get("fwdbwd_s_runs") for r in all_rows)
    keys = sorted({(r["method"], r["K"] or 0) for r in all_rows})
    with plt.style.context(str(style_path())):
        fig, axes = plt.subplots(1, 3, figsize=(18, 6.8), width_ratios=[1, 1, 0.7])
        for metric, ax, scale in (("fwdbwd_s", axes[0], 1.0),
                                  ("fwdbwd_temp_bytes", axes[1], 2.0**-20)):
            for i, (method, K) in enumerate(keys):
                rows = [r for r in all_rows if r["method"] == method and (r["K"] or 0) == K]
                style = (method, f"C{i % 8}", "--" if K == 64 else "-")
                _draw_series(ax, rows, metric, scale, style, fmin)
                ax.plot([], [], "o", ls=style[2], ms=3.5, color=style[1],
                        label=_label(method, K, slopes, metric))
            # guides: N below every curve; N^2 above the steepest (softmax) curve's start
            n0 = min(r["N"] for r in all_rows)
            nn = np.geomspace(n0, max(r["N"] for r in all_rows), 20)
            y_lo = 0.4 * min(r[metric] for r in all_rows if r["N"] == n0) * scale
            ax.loglog(nn, y_lo * nn / n0, color="0.45", lw=1.2, ls=(0, (1, 1.5)),
                      label="∝ N guide")
            y_hi = 1.5 * max(r[metric] for r in all_rows if r["N"] == n0) * scale
            top = nn <= n0 * 2**5.5
            ax.loglog(nn[top], y_hi * (nn[top] / n0) ** 2, color="0.45", lw=1.2, ls="-.",
                      label="∝ N² guide")
            ax.set_xlabel("sequence length N")
            ax.set_title(_title("forward + backward time" if metric == "fwdbwd_s"
                                else "compiled temporary memory", slopes, metric), fontsize=10)
        _draw_spread(axes[2], all_rows, keys, res["repeats"])
        for ax in axes:
            _mark_switch(ax, fmin, {m for m, _ in keys}, [r["N"] for r in all_rows])
        axes[0].set_ylabel(f"forward + backward time (s; median of {res['repeats']} runs"
                           + (", bars: interquartile range)" if spread else ")"))
        axes[1].set_ylabel("compiled temporary memory (MiB; XLA's estimate, no spread)")
        for ax in axes[:2]:
            ax.plot([], [], "o", ms=3.5, mfc="white", color="0.3", ls="none",
                    label="open marker: GMA's unfused form (N < FUSED_MIN_N)")
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1)
        lo, hi = SPREAD
        note = (f"d_model 64, 4 heads, {res['dtype']}, backend {res['backend']}, median of "
                f"{res['repeats']} runs after warm-up; "
                + (f"error bars (left) and right panel: the {lo}th–{hi}th percentiles of the "
                   f"{res['repeats']} runs. "
                   if spread else "no spread recorded (this run kept only the medians). ")
                + "Slopes ± SE: least-squares log-log fits of the medians (gmtheory.stats."
                f"fit_loglog); GMA's unfused and fused forms fitted apart, never across "
                f"gma.FUSED_MIN_N (vertical lines: causal {fmin['causal']}, bidirectional "
                f"{fmin['bidirectional']}); other methods over N ≥ {SLOPE_MIN_N}. Colours "
                "and line styles of the right panel as in the legends.")
        skipped = [f"{r['method']} at N = {r['N']} (needs ~{r['needed_bytes'] / 2**30:.0f} GiB, "
                   f"{r['available_bytes'] / 2**30:.0f} GiB available)"
                   for r in res.get("skipped", ())]
        if skipped:
            note += " Not run, too large for memory: " + "; ".join(skipped) + "."
        fig.tight_layout()
        fig.text(0.01, -0.01, "\n".join(textwrap.wrap(note, 230)), fontsize=9,
                 style="italic", va="top")
        fig.savefig(path)
        plt.close(fig)


class BenchFigure(NamedTuple):
    """A figure drawn by a benchmark (not by ``gmtheory figures``): its caption, the command
    that measures and draws it, the measurements it is drawn from and where it is
    described (a docs page, relative to ``docs/``)."""

    caption: str
    command: str
    data: str
    page: str


BENCH_FIGURES: dict[str, BenchFigure] = {
    "bench-gma": BenchFigure(
        "GMA benchmark on the CPU: forward+backward time (median of 10 runs, error bars the "
        "interquartile range) and compiled temporary memory against N for causal and "
        "bidirectional GMA (K = 16, 64), the naive cumsum form, elu+1 linear attention and "
        "XLA softmax; log-log slopes ± SE fitted apart for GMA's unfused and fused forms, "
        "never across gma.FUSED_MIN_N (marked on the top axis).",
        "gmtheory bench gma --json docs/bench-gma.json --figure figures/bench-gma.png",
        "docs/bench-gma.json", "topics/gma.md#benchmark"),
}


def bench_figures_index(png_prefix: str = "", report_link: str = "../docs/report.md") -> list[str]:
    """The Markdown lines of :data:`BENCH_FIGURES` for the figure index: heading, image,
    caption, command, data and docs page (linked from the folder of ``report_link``, the
    report in ``docs/``, as :func:`gmtheory.tables.figures_index` links it)."""
    docs = report_link[:report_link.rfind("/") + 1]
    out = ["Benchmark figures (`gmtheory bench`): measured on the machine that ran the command, "
           "not drawn from a simulation; the command reruns the benchmark and redraws the "
           "figure.", ""]
    for name, f in BENCH_FIGURES.items():
        out += [f"## {name}", "", f"![{name}]({png_prefix}{name}.png)", "", f"*{f.caption}*", "",
                f"* command: `{f.command}`", f"* data: `{f.data}`",
                f"* described in: [docs/{f.page.split('#')[0]}]({docs}{f.page})", ""]
    return out
