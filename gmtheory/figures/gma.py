"""GMA in use (issue 14): recall accuracy, byte-LM curves, in-context GMM classification
against the infinite-prompt limits, and the responsibility analysis.

Documentation: ``docs/topics/gma.md#gma-in-use-experiments``.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..stats import mean_se
from ._base import Figure, register_figure

MIXER_STYLE = {
    "softmax": ("#0072B2", "o", "softmax"),
    "linear": ("#D55E00", "s", "elu+1 linear"),
    "performer": ("#009E73", "^", "FAVOR+ (random features)"),
    "gma": ("#CC79A7", "D", "GMA"),
    "ssm": ("#E69F00", "v", "selective SSM (Mamba-style)"),
}


def mixer_style(m):
    return MIXER_STYLE.get(str(m), ("0.3", "o", str(m)))


def _profile(meta):
    return meta.get("profile", "quick") if isinstance(meta, dict) else "quick"


def _recall_curves(ax, a, t, mixers):
    """One sequence length: test accuracy against training steps, mean ± SE band over
    seeds, each seed a thin line; returns the largest value drawn."""
    top = float(np.max(a[f"{t}/{mixers[0]}/chance"]))
    for m in mixers:
        c, mk, lab = mixer_style(m)
        curve = np.asarray(a[f"{t}/{m}/acc_curve"])[0]          # (seeds, records)
        steps = np.asarray(a[f"{t}/{m}/steps"])[0]
        mu, se = mean_se(curve, axis=0)
        for row in curve:
            ax.plot(steps, row, color=c, lw=0.6, alpha=0.35)
        ax.plot(steps, mu, color=c, marker=mk, ms=4, lw=1.6, label=lab)
        ax.fill_between(steps, mu - se, mu + se, color=c, alpha=0.2, lw=0)
        top = max(top, float(np.max(curve)), float(np.max(mu + se)))
    ax.axhline(float(a[f"{t}/{mixers[0]}/chance"][0]), color="k", ls="--", lw=1,
               label="dashed: majority-class rate (ListOps), chance 1 / keys (MQAR)")
    if f"{t}/rule" in a:
        r = float(a[f"{t}/rule"][0])
        ax.axhline(r, color="0.35", ls=":", lw=1.4, label=RULE_LABEL)
        top = max(top, r)
    ax.set_xlabel("training step")
    return top


RULE_LABEL = "dotted: a rule without recall or mixing (caption)"


def _baselines(name, a, meta):
    """The trivial rules of the claim table, for a committed run recorded before them."""
    if isinstance(meta, dict) and meta.get("config") and meta.get("profile") != "quick":
        from .gma_claims import with_baselines
        return with_baselines(name, a, meta)
    return a


def draw_recall(a, meta):
    a = _baselines("gma-recall", a, meta)
    tasks = [str(t) for t in a["tasks"]]
    mixers = [str(m) for m in a["mixers"]]
    fig, axes = plt.subplots(1, len(tasks), figsize=(6 * len(tasks), 4.6), squeeze=False)
    if all(len(a[f"{t}/N"]) == 1 for t in tasks):        # one length each: learning curves
        for ax, t in zip(axes[0], tasks, strict=True):
            top = _recall_curves(ax, a, t, mixers)
            ax.set_ylabel("test accuracy")
            ax.set_ylim(0, min(1.0, 1.15 * top))
            name = {"listops": "ListOps", "mqar": "MQAR"}.get(t, t)
            n_par = int(a[f"{t}/{mixers[0]}/params"][0])
            ax.set_title(f"{name}, N = {int(a[f'{t}/N'][0])} ({_profile(meta)} profile; "
                         f"{n_par / 1e3:.0f} k parameters per model)", fontsize=10)
        handles, labels = axes[0][-1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=min(3, len(labels)), fontsize=8,
                   bbox_to_anchor=(0.5, 0.0))
        fig.tight_layout(rect=(0, 0.16, 1, 1))
        return fig
    titles = {"listops": "ListOps (10 classes)",
              "mqar": "MQAR (accuracy at the query positions)"}
    for ax, t in zip(axes[0], tasks, strict=True):
        N = a[f"{t}/N"]
        off = np.linspace(-0.04, 0.04, len(mixers))
        top = float(np.max(a[f"{t}/{mixers[0]}/chance"]))     # the y-range the data need
        for j, m in enumerate(mixers):
            c, mk, lab = mixer_style(m)
            acc = a[f"{t}/{m}/acc"]                        # (lengths, seeds)
            mu, se = mean_se(acc, axis=1)
            x = N * np.exp(off[j])
            for s in range(acc.shape[1]):
                ax.plot(x, acc[:, s], mk, color=c, alpha=0.3, ms=4, mew=0)
            ax.errorbar(x, mu, yerr=se, color=c, marker=mk, capsize=3, lw=1.5,
                        label=f"{lab} ({int(a[f'{t}/{m}/params'][0])} params)")
            top = max(top, float(np.max(acc)), float(np.max(mu + se)))
        ch = a[f"{t}/{mixers[0]}/chance"]
        ax.plot(N, ch, "k--", lw=1,
                label="dashed: majority-class rate (ListOps), chance 1 / keys (MQAR)")
        if f"{t}/rule" in a:
            ax.plot(N, a[f"{t}/rule"], ":", color="0.35", lw=1.4, label=RULE_LABEL)
            top = max(top, float(np.max(a[f"{t}/rule"])))
        ax.set_xscale("log")
        ax.set_xticks(N)
        ax.set_xticklabels([str(int(n)) for n in N])
        ax.minorticks_off()
        ax.set_xlabel("sequence length N (tokens)")
        ax.set_ylabel("test accuracy")
        ax.set_ylim(0, min(1.0, 1.15 * top))       # fitted to the data, chance included
        ax.set_title(titles.get(t, t), fontsize=10)
    handles, labels = axes[0][-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    return fig


def draw_lm(a, meta):
    a = _baselines("gma-lm", a, meta)
    mixers = [str(m) for m in a["mixers"]]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    if "ngram/bpb" in a:             # the n-gram ladder: what byte counts alone reach
        orders, grams = a["ngram/orders"], np.asarray(a["ngram/bpb"], float)
        for ax in axes:
            for g in grams:
                ax.axhline(g, color="0.55", ls=":", lw=1)
        axes[0].plot([], [], ":", color="0.55", label="dotted: byte n-gram models, "
                     + ", ".join(f"{int(k)} B {g:.2f}" for k, g in zip(orders, grams,
                                                                     strict=True)))
    init = []
    for m in mixers:
        c, mk, lab = mixer_style(m)
        bpb = a[f"{m}/val_bpb"]                            # (seeds, records)
        steps = a[f"{m}/steps"]
        mu, se = mean_se(bpb, axis=0)
        init.append(float(np.mean(a[f"{m}/val_bpb0"])))
        # wall-clock without compilation: the first block (which compiles, unless the
        # program was already compiled) is counted at the steady time per step
        wall = np.asarray(a[f"{m}/wall"], float)
        sps = float(a[f"{m}/sec_per_step"])
        wall = wall - wall[0] + steps[0] * sps
        for ax, x in ((axes[0], steps), (axes[1], wall)):
            ax.fill_between(x, mu - se, mu + se, color=c, alpha=0.2, lw=0)
            ax.plot(x, mu, color=c, marker=mk, ms=4,
                    label=f"{lab} ({int(a[f'{m}/params'])} params, {1e3 * sps:.0f} ms/step)")
    axes[0].set_xlabel("training step")
    axes[1].set_xlabel("wall-clock seconds of training (all seeds together; compilation "
                       "excluded)")
    for ax in axes:
        ax.set_ylabel("validation bits per byte")
    axes[0].set_title(f"vs steps (mean ± SE over seeds; at initialisation "
                      f"{min(init):.1f}–{max(init):.1f} bits/byte)", fontsize=10)
    axes[1].set_title("vs wall-clock", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return fig


def _gmm_bar(ax, x, v, w, col, lab):
    """One bar: mean ± SE over seeds with each seed as a dot, or a single reference."""
    v = np.atleast_1d(np.asarray(v, float))
    many = v.size > 1
    mu, se = mean_se(v) if many else (float(v[0]), 0.0)
    ax.bar(x, mu, w * 0.9, color=col, label=lab, yerr=se if many else None, capsize=3)
    if many:
        ax.plot(np.full(v.size, x), v, "k.", ms=3)


def _gmm_classify(ax, a, d, cases, order, label):
    bars = [("trained softmax (L = {L})", "softmax/acc", mixer_style("softmax")[0]),
            ("trained GMA (L = {L})", "gma/acc", mixer_style("gma")[0]),
            ("trained GMA at L = ∞ (its infinite-prompt limit,\nGauss–Hermite "
             "quadrature)", "gma/acc_limit", "#E6A0C4"),
            ("softmax-attention limit (Prop. 2.1, L = ∞)", "acc_softmax_limit", "#56B4E9"),
            ("Bayes classifier (means known)", "acc_bayes", "0.6")]
    L, w = int(a["L"]), 0.16
    for j, (lab, key, col) in enumerate(bars):
        for i, c in enumerate(cases):
            if f"{c}/d{d}/{key}" in a:
                _gmm_bar(ax, i + (j - (len(bars) - 1) / 2) * w, a[f"{c}/d{d}/{key}"], w, col,
                         lab.format(L=L) if (label and i == 0) else None)
    ax.axhline(float(a["chance"]), color="k", ls="--", lw=1,
               label="chance (1 / classes)" if label else None)
    names = {"A": "A: means fixed,\nlabels permuted", "B": "B: means redrawn\nper prompt"}
    ax.set_xticks(range(len(cases)))
    ax.set_xticklabels([names.get(c, c) for c in cases])
    ax.set_ylabel("test accuracy on the query's label")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"classification, d = {d}\n(L = ∞ limit: ${order}^{{{d}}}$ = {order ** d} "
                 "Gauss–Hermite nodes per component)", fontsize=10)


def _gmm_denoise(ax, a, ds, mixers):
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    w = 0.8 / (len(mixers) + 1)
    refs = [("mse_bayes", "Bayes posterior mean (mixture known)", "0.35", "-"),
            ("mse_no_context", "posterior mean of the query alone (ignores the prompt)",
             "#E69F00", "-."),
            ("mse_identity", "noisy query itself (noise² = {n:g})", "k", "--"),
            ("mse_zero", "prior mean 0 (sep² + var)", "0.5", ":")]
    for i, d in enumerate(ds):
        for j, m in enumerate(mixers):
            c, mk, lab = mixer_style(m)
            v = np.asarray(a[f"D/d{d}/{m}/mse"], float)
            mu, se = mean_se(v)
            x = i + (j - (len(mixers) - 1) / 2) * w
            ax.errorbar(x, mu, yerr=se, color=c, marker=mk, ms=7, capsize=4, lw=1.5,
                        label=f"trained {lab} (mean ± SE)" if i == 0 else None)
            ax.plot(np.full(v.size, x), v, ".", color=c, alpha=0.5, ms=4)
        for key, lab, col, ls in refs:
            ax.hlines(float(a[f"D/d{d}/{key}"]), i - 0.42, i + 0.42, colors=col, linestyles=ls,
                      lw=1.5, label=lab.format(n=float(a["noise"])) if i == 0 else None)
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ax.set_yticks([t for t in (0.05, 0.1, 0.2, 0.3, 0.5, 1, 2, 3, 5, 10) if lo <= t <= hi])
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(lo, hi)
    ax.set_xticks(range(len(ds)))
    ax.set_xticklabels([f"d = {d}" for d in ds])
    ax.set_xlim(-0.55, len(ds) - 0.45)
    ax.set_ylabel("test MSE per coordinate (log scale)")
    ax.set_title(f"denoising (case D: means redrawn, noise {float(a['noise']):g})",
                 fontsize=10)


def draw_gmm(a, meta):
    cases = [str(c) for c in a["cases"]]
    ds = [int(d) for d in a["ds"]]
    orders = [int(o) for o in a["orders"]]
    cls = [c for c in cases if c != "D"]
    n = (len(ds) if cls else 0) + ("D" in cases)
    fig, axes = plt.subplots(1, n, figsize=(5.2 * n, 5.0), squeeze=False)
    axes = list(axes[0])
    if cls:
        for k, (d, o) in enumerate(zip(ds, orders, strict=True)):
            _gmm_classify(axes[k], a, d, cls, o, label=k == 0)
    if "D" in cases:
        _gmm_denoise(axes[-1], a, ds, [str(m) for m in a["mixers"]])
    handles, labels = [], []
    for ax in (axes[0], axes[-1]) if cls and "D" in cases else axes[:1]:
        h, lab = ax.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    return fig


def draw_responsibilities(a, meta):
    cats = [str(c) for c in a["categories"]]
    usage = a["gma/resp_usage"]                  # (seeds, heads, K)
    table = a["gma/resp_table"]                  # (seeds, heads, K, C)
    nmi = a["gma/resp_nmi"]                      # (seeds, heads)
    S, H, K = usage.shape
    fig, axes = plt.subplots(1, 3, figsize=(18, 5.0),
                             gridspec_kw={"width_ratios": [1, 1.15, 1.15]})
    ax = axes[0]
    share = np.sort(usage * K, axis=-1)[..., ::-1]       # usage / uniform share, sorted
    mu, se = mean_se(share.reshape(S * H, K), axis=0)
    ax.bar(np.arange(1, K + 1), mu, yerr=se, color=mixer_style("gma")[0], capsize=2,
           label=f"mean ± SE over {S} seeds × {H} heads")
    ax.axhline(1.0, color="k", ls="--", lw=1, label="uniform use (1 / K each)")
    ax.axhline(0.01, color="0.4", ls=":", lw=1, label="dead threshold (1 % of uniform)")
    ax.set_yscale("log")
    ax.set_xlabel(f"component, ranked by mean responsibility (K = {K})")
    ax.set_ylabel("mean responsibility × K")
    ue, de = float(np.mean(a["gma/resp_usage_entropy"])), float(np.mean(
        a["gma/resp_dead_fraction"]))
    te = float(np.mean(a["gma/resp_token_entropy"]))
    ax.set_title(f"component usage: usage entropy {ue:.2f}, per-token entropy {te:.2f}, "
                 f"dead {de:.0%}", fontsize=9)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    # heat maps: P(category | argmax component) for the head with the largest NMI and for
    # a typical one (the median NMI), with the untrained layer's NMI as the null and the
    # NMI of shuffled categories as chance
    chance = (float(np.mean(a["gma/resp_nmi_shuffled"])) if "gma/resp_nmi_shuffled" in a
              else float("nan"))
    null = (f"untrained layer {float(np.mean(a['gma/resp_nmi_untrained'])):.2f}, "
            if "gma/resp_nmi_untrained" in a else "")
    flat = np.argsort(nmi.ravel())
    best = np.unravel_index(flat[-1], nmi.shape)
    typical = np.unravel_index(flat[(flat.size - 1) // 2], nmi.shape)
    counts = np.asarray(a["gma/resp_category_counts"], float)
    short = {"lowercase": "lower", "uppercase": "upper", "whitespace": "space",
             "punctuation": "punct."}
    for ax, (s, h), which in ((axes[1], best, "best head"), (axes[2], typical,
                                                              "typical head (median NMI)")):
        t = table[s, h]
        rows = t.sum(1)
        order = np.argsort(-rows)
        keep = order[rows[order] > 0]
        im = ax.imshow(t[keep] / rows[keep, None], aspect="auto", cmap="viridis", vmin=0,
                       vmax=1)
        ax.set_xticks(range(len(cats)))
        ax.set_xticklabels([f"{short.get(c, c)}\n{100 * n / counts.sum():.0f} %"
                            for c, n in zip(cats, counts, strict=True)], fontsize=8)
        ax.grid(False)
        ax.set_yticks(range(len(keep)))
        ax.set_yticklabels([f"c{k} ({int(rows[k])} tok)" for k in keep], fontsize=7)
        ax.set_xlabel("byte category of the token (share of validation bytes)")
        ax.set_ylabel("argmax component (tokens it wins)")
        ax.set_title(f"{which}: seed {s}, head {h}, NMI {nmi[s, h]:.2f}\n(mean over seeds "
                     f"and heads {float(np.mean(nmi)):.2f}; {null}shuffled categories "
                     f"{chance:.3f})",
                     fontsize=9)
    fig.colorbar(im, ax=ax, label="fraction of the component's tokens")
    fig.tight_layout()
    return fig


#: why no check reads the gma-recall and gma-lm runs (Figure.run_unchecked)
_TRAINED = ("trained mixers beside the trivial rules of the same task (issue 44): no theory "
            "value for a check to decide; the claim table gates each row on those rules "
            "(gmtheory.figures.gma_claims, tested on made-up results)")


register_figure(Figure(
    name="gma-recall",
    simulation="gma-recall",
    caption=("Test accuracy of the token mixers at equal parameter count against sequence "
             "length (light points: each seed; bars: mean ± SE over seeds) or, where a run "
             "has one length per task (the quick profile), against training steps (band: "
             "mean ± SE; thin lines: seeds). Dashed: majority-class rate (ListOps) or "
             "chance (MQAR); dotted: "
             "what a rule without recall or mixing scores on the same test data (ListOps: "
             "the root operator's majority label; MQAR: the sequence's most frequent "
             "value), which a mixer must beat before it has learnt the task; the y-axis "
             "is fitted to the data. Quick profile: "
             "150 steps, causal models, N = 32 — far too short to rank the mixers on "
             "ListOps; see docs/topics/gma.md."),
    draw=draw_recall,
    run_unchecked=_TRAINED,
))

register_figure(Figure(
    name="gma-lm",
    simulation="gma-lm",
    caption=("Byte-level causal language model on the Python standard library (held-out "
             "files): validation bits per byte (8 would be a uniform guess) against training "
             "steps and wall-clock, mean ± SE over seeds (band), the mixers at equal "
             "parameter count; dotted: byte n-gram count models with 1-5 bytes of "
             "context on the same split, the level that local statistics alone reach. "
             "Quick profile: 150 steps of 16 windows of 32 bytes, so the "
             "curves are still falling and the mixers barely separate; cpu profile "
             "(figures/cpu/): 3500 steps of 8 windows of 256 bytes, five mixers."),
    draw=draw_lm,
    run_unchecked=_TRAINED,
))

register_figure(Figure(
    name="gma-gmm",
    simulation="gma-gmm",
    caption=("In-context Gaussian-mixture tasks at d = 2 and d = 8 (3 components, prompts of "
             "L points). Classification panels, one per d: bars are the mean ± SE over "
             "seeds (dots: each seed) of trained softmax and GMA at the training prompt "
             "length, the trained GMA model evaluated at an infinite prompt (moments by "
             "Gauss-Hermite quadrature), the Prop. 2.1 softmax-attention limit (scores "
             "x·q / σ², values the label) and the Bayes classifier with known means; dashed: "
             "chance. Denoising panel (case D, means redrawn per prompt, clean prompt points, "
             "a noisy query): test MSE per coordinate of trained softmax and GMA (mean ± SE "
             "over seeds, dots: each seed; log scale; the SE bars are smaller than the markers) "
             "against the Bayes posterior mean with the prompt's mixture known, the posterior "
             "mean given the query alone (the best a model that ignores the prompt can do), "
             "the noisy query itself and the prior mean 0."),
    draw=draw_gmm,
    theory_checks=("gma.01-infinite-prompt-limit", "operator.01b-prop2.1-gauss-hermite"),
    run_unchecked=("trained models beside the Bayes rules and the infinite-prompt limits: "
                   "no theory value for a trained model to equal (the limits are tested by "
                   "the theory checks on their own points)"),
))

register_figure(Figure(
    name="gma-responsibilities",
    simulation="gma-lm",
    caption=("Responsibilities of the first GMA layer of the byte LM on the validation "
             "windows. Left: mean responsibility of each component (ranked, × K so that 1 is "
             "uniform use), mean ± SE over seeds and heads. Middle and right: for the head with "
             "the largest NMI and for a typical head (median NMI), the byte categories of "
             "the tokens each component wins (rows sum to 1); in the titles the NMI between "
             "argmax component and byte category, the same layer's NMI before training "
             "(the null the claim table judges against, where the run records it) and "
             "the NMI with the categories shuffled (same marginals)."),
    draw=draw_responsibilities,
    run_unchecked=("a reading of trained routing (NMI against the untrained layer): no "
                   "theory value; tests/test_gma_readings.py tests the readings"),
))


def draw_mqar(a, meta):
    """gma-mqar: test accuracy against training steps at each length, every mixer (mean ±
    SE band over seeds, thin lines: seeds), with chance, the most-frequent-value rule, the
    GPU run's gate and the accuracy softmax must reach before the claim table ranks."""
    from .gma_claims import LEARNT

    mixers = [str(m) for m in a["mixers"]]
    Ns = np.asarray(a["N"])
    fig, axes = plt.subplots(1, len(Ns), figsize=(6.5 * len(Ns), 4.6), squeeze=False)
    for i, (ax, N) in enumerate(zip(axes[0], Ns, strict=True)):
        for m in mixers:
            c, mk, lab = mixer_style(m)
            curve = np.asarray(a[f"{m}/acc_curve"])[i]          # (seeds, records)
            steps = np.asarray(a[f"{m}/steps"])[i]
            for row in curve:
                ax.plot(steps, row, color=c, lw=0.6, alpha=0.35)
            label = f"{lab} ({int(np.ravel(a[f'{m}/params'])[i])} params)"
            if curve.shape[0] > 1:
                mu, se = mean_se(curve, axis=0)
                ax.fill_between(steps, mu - se, mu + se, color=c, alpha=0.2, lw=0)
            else:                                 # one seed (a probe, the gate): no band
                mu, label = curve[0], label + ", one seed"
            ax.plot(steps, mu, color=c, marker=mk, ms=3, lw=1.6, label=label)
        ax.axhline(float(a["chance"]), color="k", ls="--", lw=1, label="chance (1 / keys)")
        ax.axhline(float(a["rule"][i]), color="0.35", ls=":", lw=1.4,
                   label="most-frequent-value rule (a guess among the pairs)")
        ax.axhline(float(a["target"]), color="0.6", ls="-.", lw=1,
                   label=f"{float(a['target']):g}: the GPU run's gate for softmax")
        ax.axhline(LEARNT, color="0.75", ls="-", lw=0.8,
                   label=f"{LEARNT:g}: softmax must reach it before the claim table ranks")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("training step")
        ax.set_ylabel("test accuracy at the query positions")
        ax.set_title(f"MQAR, N = {int(N)} ({_profile(meta)} profile)", fontsize=10)
    handles, labels = axes[0][-1].get_legend_handles_labels()
    ncol = min(2 * len(Ns), len(labels))
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8,
               bbox_to_anchor=(0.5, 0.0))
    rows = -(-len(labels) // ncol)
    fig.tight_layout(rect=(0, 0.05 + 0.045 * rows, 1, 1))
    return fig


register_figure(Figure(
    name="gma-mqar",
    simulation="gma-mqar",
    caption=("Multi-query associative recall with the recipe recall models use (values "
             "drawn without replacement, a short causal convolution before every mixer, "
             "warm-up and cosine decay to 10 %): test accuracy against training steps for "
             "the token mixers at equal parameter count. Bands: mean ± SE over seeds; thin "
             "lines: seeds; dashed: chance; dotted: the most-frequent-value rule; dash-dot: "
             "the GPU run's gate for softmax; thin grey: the accuracy softmax must reach "
             "before the claim table ranks the mixers. Quick profile: "
             "a pipeline check at N = 24 with 6 pairs, far too short for any mixer to learn "
             "recall; the cpu profile (N = 256, 64 pairs over 127 keys) is the run that "
             "decides (docs/topics/gma.md)."),
    draw=draw_mqar,
    run_unchecked=_TRAINED,
))
