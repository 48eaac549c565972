"""``report.md`` of an exploration: the problem, a table per point, every comparison."""

from __future__ import annotations

import math

COLUMNS = {
    "denoising": [("bayes_risk", "Bayes (MMSE)"), ("linear_risk", "linear attention"),
                  ("head1_risk", "1 softmax head"), ("head2_risk", "2 heads"),
                  ("head3_risk", "3 heads"), ("prompt_risk", "1 head, L-token prompt"),
                  ("trained_risk", "head trained on L-token prompts")],
    "classification": [("bayes_error", "Bayes error"), ("linear_error", "linear attention"),
                       ("softmax_error", "softmax head"), ("prompt_error", "head, L-token prompt"),
                       ("trained_error", "head trained on L-token prompts"),
                       ("bayes_risk", "Bayes risk"), ("linear_risk", "linear risk"),
                       ("softmax_risk", "softmax risk")],
}


def fmt(v, se=None):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    s = f"{v:.4g}"
    if se and se > 1e-12 * abs(v):
        s += f" ± {se:.2g}"
    return s


def columns(res):
    have = set().union(*(p.keys() for p in res.points))
    return [(k, lab) for k, lab in COLUMNS[res.problem.task] if k in have]


def report_markdown(res, *, figure: str | None = None) -> str:
    prob = res.problem
    lines = [f"# gmtheory explore: {prob.name}", ""]
    n_fail = sum(p["verdict"] == "FAIL" for p in res.points)
    lines += [f"Task: **{prob.task}**; mixture of {prob.n_components} Gaussians in d = "
              f"{prob.dim}" + (f", {prob.n_classes} classes (labels {list(prob.labels)})"
                               if prob.labels else f", noise xi = {prob.noise}")
              + f"; seed {prob.seed}.",
              f"Points: {len(res.points)} ({', '.join(f'{a} = {list(v)}' for a, v in prob.vary.items()) or 'no axes'}); "  # noqa: E501
              f"verdict **{res.verdict}** ({n_fail} point(s) failed); {res.seconds:.1f} s.", ""]
    if prob.data:
        lines += _data_lines(prob.data, prob.labels is not None)
    if figure:
        lines += [f"![regimes]({figure})", ""]
    cols = columns(res)
    axes = list(prob.vary)
    head = axes + [lab for _, lab in cols] + ["verdict"]
    lines += ["Values ± their error: the Monte Carlo SE, or the adaptive quadrature's measured "
              "error (closed forms are exact). Risks are " + ("mean squared errors E|f(Z) - X|^2."
                                     if prob.task == "denoising" else
                                     "the paper's logistic (2 classes) or cross-entropy loss; "
                                     "errors are 0-1 errors."), "",
              "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in res.points:
        row = [fmt(p["params"][a]) for a in axes]
        row += [fmt(p.get(k), p.get(f"{k}_se")) for k, _ in cols]
        lines.append("| " + " | ".join(row + [p["verdict"]]) + " |")
    lines.append("")
    if prob.task == "denoising":
        lines += ["Gap recovered by the heads, 1 - excess / (linear_risk - bayes_risk):", ""]
        for p in res.points:
            g = {M: fmt(p.get(f"head{M}_gap_recovered"), p.get(f"head{M}_gap_recovered_se"))
                 for M in prob.options.heads}
            rec = ", ".join(
                f"{M} head(s) {g[M]} (search objective over "
                f"{len(p[f'head{M}_starts'])} starts: {fmt(min(p[f'head{M}_starts']))} to "
                f"{fmt(max(p[f'head{M}_starts']))})"
                for M in prob.options.heads)
            extra = (f"; construction: {p['construction']}, excess "
                     f"{fmt(p['construction_excess'], p.get('construction_excess_se'))}"
                     if "construction" in p else "")
            lines.append(f"* {_where(p, axes)}: {rec}{extra}")
        lines.append("")
    if prob.task == "denoising":
        lines += _head_family(res)
    lines += ["## Methods", ""]
    p0 = res.points[0]
    for k in ("bayes_method", "eval_method", "fit_method", "softmax_method", "setting"):
        if k in p0:
            lines.append(f"* {k.replace('_', ' ')}: {p0[k]}")
    lines += ["", "## Comparisons", "",
              "Kinds and thresholds as in `gmtheory verify`: PASS when every comparison "
              "holds, FAIL otherwise.", ""]
    for p in res.points:
        lines.append(f"### {_where(p, axes)}: {p['verdict']}")
        lines.append("")
        for c in p["comparisons"]:
            mark = "holds" if c["holds"] else "**does not hold**"
            op = ">=" if c["kind"] == "lower_bound" else "<="
            detects = ("" if c.get("resolution") is None else
                       f"; detects a relative error above {c['resolution']:.2g}")
            lines.append(f"* {c['name']}: {c['measured']:.3g} {op} {c['threshold']:.3g} "
                         f"({c['kind']}, {mark}{detects}) — {c['why']}")
        lines.append("")
    for c in res.sweep_comparisons:
        if c["holds"] is None:
            lines.append(f"* sweep: {c['name']}: {c['verdict']} — {c['why']}")
            continue
        lines.append(f"* sweep: {c['name']}: {c['measured']:.3g} <= {c['threshold']:.3g} "
                     f"({c['verdict']}; slope {c['slope']:.3f} ± {c['slope_se']:.2g}) — "
                     f"{c['why']}")
    return "\n".join(lines) + "\n"


HEAD_FAMILY = (
    "What the models can express (infinite prompt, Prop. 2.1 on mu_Z): linear attention is a "
    "linear map z -> A z (Lemma C.7), and its best A is the best linear denoiser. One softmax "
    "head is sum_k alpha_k(z) V (m_k + S_k U z), a gated affine map. Its linear part comes "
    "from small U, where the gates tend to the weights pi_k: with U = eps B and V of order "
    "1/eps (to keep V S U finite) the head also outputs the constant V m_bar, m_bar = sum_k "
    "pi_k m_k, which grows like 1/eps. So unless m_bar = 0 one head cannot approach linear "
    "attention's best map, and it can be worse than linear attention. A second head with "
    "U = 0 outputs a constant V' m_bar that cancels it, so two heads can approach any linear "
    "map (and do at least as well as linear attention in the limit).")


def _head_family(res) -> list[str]:
    """The head family, the best model at each point, and why one head loses to linear
    attention where it does."""
    lines = ["## What the heads can express", "", HEAD_FAMILY, ""]
    axes = list(res.problem.vary)
    for p in res.points:
        best = p.get("best_model")
        if best is None:
            continue
        note = ""
        r1, s1 = p.get("head1_risk"), p.get("head1_risk_se") or 0.0
        if r1 is not None and r1 > p["linear_risk"] + 4 * s1:
            worse = f"; one head is worse than linear attention here (by " \
                    f"{fmt(r1 - p['linear_risk'])})"
            note = (worse + f": the mixture mean has |m_bar| = {fmt(p['mixture_mean_norm'])}, "
                    "which one head cannot cancel" if p.get("mixture_mean_norm", 0) > 1e-12
                    else worse + " although m_bar = 0: its search did not reach the linear "
                    "limit (raise options.starts or maxiter)")
        lines.append(f"* {_where(p, axes)}: best model {best}, risk "
                     f"{fmt(p['best_risk'], p.get('best_risk_se'))}{note}")
    return lines + [""]


def data_summary(prob) -> str:
    """One line on how well the mixture fitted to the user's data describes them."""
    i = prob.data
    return (f"{prob.name}: {i['samples']} samples of {i['features']} features -> {i['dim']} "
            f"principal components ({i['explained_variance']:.0%} of the variance); held-out "
            f"log-likelihood {i['heldout_loglik']:.4g} ± {i['heldout_loglik_se']:.2g} per "
            "sample")


def _data_lines(info, per_class) -> list[str]:
    """How the mixture was fitted to the user's data, and how well it fits."""
    comps = "+".join(map(str, info["components"]))
    k = f"{comps} components" + (" (per class)" if per_class else "")
    cap = (f" — at the largest number tried ({info['max_components']}): raise "
           "data.max_components" if info.get("components_at_max") else "")
    return [f"Data: {info['samples']} samples of {info['features']} features from "
            f"`{info['path']}`, projected on {info['dim']} principal components "
            f"({info['explained_variance']:.0%} of the variance); Gaussian mixture of {k} "
            f"with full covariances, chosen by BIC on {info['train']} training samples{cap}; "
            f"held-out log-likelihood {info['heldout_loglik']:.4g} ± "
            f"{info['heldout_loglik_se']:.2g} per sample ({info['holdout']} samples). The "
            "regimes below are those of the fitted mixture.", ""]


def _where(p, axes):
    return ", ".join(f"{a} = {fmt(p['params'][a])}" for a in axes) or "the problem"
