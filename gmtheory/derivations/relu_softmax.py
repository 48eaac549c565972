"""Constants and bounds of the ReLU -> softmax constructions (docs/topics/approx.md).

Steps (each ``lhs - rhs`` reduces to 0 with sympy):

1. **The ReLU constant.** ``sup_t |t sigma(beta t) - ReLU(t)| = c / beta`` with
   ``c = max_{u>0} u sigma(-u)``; the maximiser solves ``(u - 1) e^{u-1} = 1/e``, so
   ``u* = 1 + W(1/e)`` and ``c = W(1/e) ~ 0.2785`` (Lambert W); with ``n`` keys (one
   winner, ``n - 1`` tied at gap ``t``) the same algebra gives ``W((n-1)/e) / beta``.
2. **The one-head max.** ``sum_i p_i x_i = LSE_beta(x) - H(p)/beta`` (entropy identity),
   ``max <= LSE_beta <= max + log(n)/beta`` and ``H <= log n`` give
   ``0 <= max - out <= log(n)/beta``; the worst case is at least ``W((n-1)/e)/beta`` and
   ``W(y) <= log(1 + y)``.
3. **The interpolation head** (``gmtheory.approx.interpolation_bound``): the score is
   ``-beta (y - a_j)^2`` up to a constant, anchors ``k`` steps beyond the two nearest
   ones have relative weight at most ``q^k``, ``q = e^{-beta h^2}``, so the error is at
   most ``h + 2 (b - a) q / (1 - q)``.
4. **The squaring and Newton bounds** that the README calls derived.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from ._common import L, cancel, residual_lines

__all__ = ["derive", "markdown", "relu_constant", "max_worst_family", "interpolation_bound",
           "square_attention_factor"]


def _sigmoid(x):
    return 1 / (1 + sp.exp(-x))


def _exp_simplify(e):
    return sp.simplify(sp.powsimp(sp.expand(e), force=True))


# --------------------------------------------------------------------------- step 1
def _relu_constant(out):
    t, s, beta, u = sp.symbols("t s beta u", positive=True)
    # t > 0: ReLU(t) - t sigma(beta t) = t sigma(-beta t);  t = -s < 0: |t sigma(beta t)|
    out["positive_side_residual"] = _exp_simplify(t - t * _sigmoid(beta * t)
                                                  - t * _sigmoid(-beta * t))
    gfun = u * _sigmoid(-u)
    out["negative_side_residual"] = _exp_simplify(s * _sigmoid(-beta * s)
                                                  - gfun.subs(u, beta * s) / beta)
    out["g"] = sp.simplify(gfun)
    E = sp.Symbol("E", positive=True)                        # E = e^u
    g_E = u / (1 + E)
    h = 1 + E - u * E                                        # numerator of g'
    dg = sp.diff(u / (1 + sp.exp(u)), u)
    out["g_prime_residual"] = _exp_simplify(dg - h.subs(E, sp.exp(u)) / (1 + sp.exp(u)) ** 2)
    out["h_prime_residual"] = _exp_simplify(sp.diff(h.subs(E, sp.exp(u)), u)
                                            + u * sp.exp(u))
    out["h_at_0"] = h.subs({E: 1, u: 0})
    # h(u) = 0  <=>  (u - 1) e^{u - 1} = 1/e
    out["lambert_form_residual"] = _exp_simplify(
        h.subs(E, sp.exp(u)) - (1 - sp.E * (u - 1) * sp.exp(u - 1)))
    # u* = 1 + w with w e^w = 1/e, i.e. e^{u*} = e e^w = 1/w
    w = sp.Symbol("w", positive=True)
    out["maximiser_residual"] = cancel(h.subs({u: 1 + w, E: 1 / w}))
    out["constant_residual"] = cancel(g_E.subs({u: 1 + w, E: 1 / w}) - w)
    out["relu_constant"] = sp.LambertW(sp.exp(-1))
    out["relu_constant_value"] = sp.N(out["relu_constant"], 30)
    # n keys: one winner and n - 1 at gap t:  u / (1 + e^u / (n - 1))
    n = sp.Symbol("n", positive=True)
    gn = u / (1 + E / (n - 1))
    hn = sp.numer(sp.together(sp.diff(u / (1 + sp.exp(u) / (n - 1)), u).subs(
        sp.exp(u), E)))
    out["family_value"] = sp.simplify(gn)
    # w_n e^{w_n} = (n - 1)/e  =>  e^{1 + w_n} = (n - 1)/w_n
    out["family_maximiser_residual"] = cancel(hn.subs({u: 1 + w, E: (n - 1) / w}))
    out["family_constant_residual"] = cancel(gn.subs({u: 1 + w, E: (n - 1) / w}) - w)
    out["family_n2_residual"] = sp.simplify(sp.LambertW((n - 1) / sp.E).subs(n, 2)
                                            - out["relu_constant"])


# --------------------------------------------------------------------------- step 2
def _max_head(out):
    beta = sp.Symbol("beta", positive=True)
    xs = sp.symbols("x_1:4", real=True)
    n = len(xs)
    S = sum(sp.exp(beta * xi) for xi in xs)
    p = [sp.exp(beta * xi) / S for xi in xs]
    logp = [beta * xi - sp.log(S) for xi in xs]
    out["log_softmax_residual"] = [sp.simplify(sp.expand_log(sp.log(pi), force=True) - lp)
                                   for pi, lp in zip(p, logp, strict=True)]
    H = -sum(pi * lp for pi, lp in zip(p, logp, strict=True))
    lse = sp.log(S) / beta
    outv = sum(pi * xi for pi, xi in zip(p, xs, strict=True))
    out["entropy_identity_residual"] = sp.simplify(outv - (lse - H / beta))
    # log n - H = KL(p || uniform) >= 0
    kl = sum(pi * (lp + sp.log(n)) for pi, lp in zip(p, logp, strict=True))
    out["kl_identity_residual"] = sp.simplify(sp.log(n) - H - kl)
    # W(y) <= log(1 + y): with y = w e^w, log(1 + y) - w = log(e^{-w} + w) >= 0
    w = sp.Symbol("w", positive=True)
    out["lambert_log_residual"] = sp.simplify(
        sp.expand_log(sp.log(1 + w * sp.exp(w)) - w - sp.log(sp.exp(-w) + w), force=True))


# --------------------------------------------------------------------------- step 3
def _interpolation(out):
    beta, h, y, t, k, aj, A, B = sp.symbols("beta h y t k a_j a b", positive=True)
    out["score_residual"] = sp.expand(beta * (2 * aj * y - aj**2)
                                      - (-beta * (y - aj) ** 2 + beta * y**2))
    ai = sp.Symbol("a_i", real=True)
    yv = ai + t                                              # y in [a_i, a_{i+1}]
    left = (yv - (ai - k * h)) ** 2 - (yv - ai) ** 2
    right = (yv - (ai + (1 + k) * h)) ** 2 - (yv - (ai + h)) ** 2
    out["left_gap_residual"] = sp.expand(left - (k**2 * h**2 + 2 * t * k * h))
    out["right_gap_residual"] = sp.expand(right - (k**2 * h**2 + 2 * k * h * (h - t)))
    outside = (A - t - (A + k * h)) ** 2 - (A - t - A) ** 2   # y = a - t below the range
    out["outside_gap_residual"] = sp.expand(outside - (k**2 * h**2 + 2 * k * h * t))
    q = sp.Symbol("q", positive=True)
    kk = sp.Symbol("k", integer=True, positive=True)
    series = sp.summation(q**kk, (kk, 1, sp.oo))
    series = series.args[0][0] if isinstance(series, sp.Piecewise) else series
    out["geometric_residual"] = sp.simplify(series - q / (1 - q))
    p = sp.Symbol("p", positive=True)
    hh = (B - A) / (p - 1)
    qq = sp.exp(-beta * hh**2)
    out["interpolation_bound"] = hh + 2 * (B - A) * qq / (1 - qq)
    out["_interp_symbols"] = (A, B, p, beta)


# --------------------------------------------------------------------------- step 4
def _square_newton(out):
    s = sp.Symbol("s", integer=True, positive=True)
    Eh = sp.Symbol("epsilon_hat", positive=True)            # error of one hat, 8 c / beta
    e_s = (2**s - 1) * Eh
    out["hat_error"] = 2 + 4 + 2                              # |2| + |-4| + |2| ReLUs
    out["hat_recursion_residual"] = sp.simplify(e_s - (Eh + 2 * e_s.subs(s, s - 1)))
    out["hat_initial_residual"] = e_s.subs(s, 0)
    total = sp.summation((2**s - 1) / sp.Integer(4) ** s, (s, 1, sp.oo))
    out["square_attention_factor"] = total
    out["square_series_residual"] = sp.simplify(total - sp.Rational(2, 3))
    xx, yy, dd = sp.symbols("x y delta", real=True)
    r = 1 - xx * yy
    y_next = yy * (2 - xx * yy) + dd
    out["newton_residual"] = sp.expand((1 - xx * y_next) - (r**2 - xx * dd))


# --------------------------------------------------------------------------- step 5
def _composition(out):
    """The algebra behind the rules of ``gmtheory.approx_compose``."""
    A, B, S, T, u, v, f, g, fh, gh, s = sp.symbols("A B S T u v f g fhat ghat s", real=True)
    out["product_rescale_residual"] = sp.expand(
        (A + S * u) * (B + T * v) - (A * B + A * T * v + B * S * u + S * T * u * v))
    out["product_error_residual"] = sp.expand(fh * gh - f * g - ((fh - f) * gh + f * (gh - g)))
    out["square_rescale_residual"] = sp.expand(
        (A + S * u) ** 2 - (A**2 + 2 * A * S * u + S**2 * u**2))
    out["square_error_residual"] = sp.expand(fh**2 - f**2 - (fh - f) * (fh + f))
    out["reciprocal_rescale_residual"] = sp.simplify((1 / (fh / s)) / s - 1 / fh)
    out["reciprocal_error_residual"] = sp.simplify(1 / fh - 1 / f - (f - fh) / (f * fh))


@lru_cache(maxsize=1)
def derive() -> dict:
    out: dict = {}
    for step in (_relu_constant, _max_head, _interpolation, _square_newton, _composition):
        step(out)
    return out


def relu_constant(digits: int = 30) -> float:
    """``c = W(1/e)`` evaluated by sympy to ``digits`` digits (returned as a float)."""
    return float(sp.N(derive()["relu_constant"], digits))


def max_worst_family(n: int) -> float:
    """``W((n-1)/e)``: the largest ``beta (max - out)`` over one winner and ``n - 1`` tied."""
    return float(sp.N(sp.LambertW(sp.Integer(int(n) - 1) / sp.E), 30))


def interpolation_bound():
    """The derived interpolation bound lambdified: ``f(a, b, p, beta)``."""
    d = derive()
    return sp.lambdify(list(d["_interp_symbols"]), d["interpolation_bound"], "numpy")


def square_attention_factor():
    """``sum_s (2^s - 1)/4^s = 2/3`` (the attention part of the squaring bound is
    ``(2/3) 8 c / beta <= 8 c / beta``)."""
    return derive()["square_attention_factor"]


def markdown() -> str:
    d = derive()
    lines = [
        "# Derivation: constants of the ReLU → softmax constructions", "",
        "Generated by `gmtheory.derivations.relu_softmax` (sympy); theory "
        "`docs/topics/approx.md`, code `gmtheory.approx`. Residuals must be 0.", "",
        "## 1. The constant $c$ of the attention-ReLU", "",
        "One head over two keys with scores $(\\beta t, 0)$ and values $(t, 0)$ outputs "
        "$t\\sigma(\\beta t)$. For $t > 0$, $\\mathrm{ReLU}(t) - t\\sigma(\\beta t) = "
        "t\\sigma(-\\beta t)$ (`positive_side_residual`); for $t = -s < 0$ the error is "
        "$s\\sigma(-\\beta s)$ (`negative_side_residual`). Both are $g(\\beta|t|)/\\beta$ "
        "with $g(u) = u\\sigma(-u) = " + L(d["g"]) + "$, so $\\sup_t|t\\sigma(\\beta t) - "
        "\\mathrm{ReLU}(t)| = c/\\beta$ with $c = \\max_{u > 0} g(u)$.", "",
        "* $g'(u) = h(u)/(1 + e^u)^2$ with $h(u) = 1 + e^u - ue^u$ "
        "(`g_prime_residual`); $h(0) = " + L(d["h_at_0"]) + "$ and $h'(u) = -ue^u < 0$ "
        "(`h_prime_residual`), so $h$ has exactly one positive root $u^*$, the maximiser.",
        "* $h(u) = 1 - e\\,(u-1)e^{u-1}$ (`lambert_form_residual`): $h(u^*) = 0 \\iff "
        "(u^*-1)e^{u^*-1} = 1/e \\iff u^* = 1 + W(1/e)$.",
        "* With $w = W(1/e)$, $e^{u^*} = e\\cdot e^{w} = 1/w$, so $h(1 + w) = 0$ "
        "(`maximiser_residual`) and $g(u^*) = \\frac{1 + w}{1 + 1/w} = w$ "
        "(`constant_residual`):", "",
        "$$c = W(1/e) = " + str(d["relu_constant_value"]) + "\\ldots$$", "",
        "the value of `gmtheory.approx.RELU_C` (a float64 root of $h$; compared in the "
        "tests). The sup is attained at $t = u^*/\\beta$.", "",
        "With $n$ keys, one winner and $n - 1$ tied at gap $t$, the error is "
        "$g_n(\\beta t)/\\beta$ with $g_n(u) = " + L(d["family_value"]) + "$; the same "
        "algebra with $w_n = W((n-1)/e)$, $e^{1 + w_n} = (n-1)/w_n$, gives the maximiser "
        "$1 + w_n$ and the maximum $w_n$ (`family_maximiser_residual`, "
        "`family_constant_residual`); $n = 2$ recovers $c$ (`family_n2_residual`).", "",
        "## 2. The $\\log(n)/\\beta$ bound of the one-head max", "",
        "With $p = \\mathrm{softmax}(\\beta x)$, $\\log p_i = \\beta x_i - \\log\\sum_j "
        "e^{\\beta x_j}$ (`log_softmax_residual`), so the output $\\sum_i p_i x_i$ "
        "equals $\\mathrm{LSE}_\\beta(x) - H(p)/\\beta$ with $\\mathrm{LSE}_\\beta = "
        "\\beta^{-1}\\log\\sum_j e^{\\beta x_j}$ and the entropy $H$ "
        "(`entropy_identity_residual`, $n = 3$ symbolic). Since $e^{\\beta\\max} \\le "
        "\\sum_j e^{\\beta x_j} \\le n e^{\\beta\\max}$, $\\max \\le \\mathrm{LSE}_\\beta$; "
        "and $\\log n - H(p) = \\mathrm{KL}(p\\,\\|\\,\\mathrm{uniform}) \\ge 0$ "
        "(`kl_identity_residual`). Hence", "",
        "$$0 \\le \\max_i x_i - \\sum_i p_i x_i = (\\max - \\mathrm{LSE}_\\beta) + "
        "\\frac{H(p)}{\\beta} \\le \\frac{\\log n}{\\beta}.$$", "",
        "Tightness: the family of section 1 reaches $W((n-1)/e)/\\beta$, and $W(y) \\le \\log(1 + "
        "y)$ because, with $y = we^w$, $\\log(1 + y) - w = \\log(e^{-w} + w) \\ge 0$ "
        "(`lambert_log_residual`); so $W((n-1)/e) \\le \\log(1 + (n-1)/e) < \\log n$, and "
        "since $W(y) = \\log y - \\log\\log y + o(1)$ the bound is sharp to leading order "
        "as $n \\to \\infty$. With a top-2 gap $\\delta$, $p_i \\le e^{-\\beta(\\max - x_i)}"
        "\\le e^{-\\beta\\delta}$ for every non-maximal $i$, which gives the second bound "
        "$(n-1)\\,\\mathrm{range}\\,e^{-\\beta\\delta}$.", "",
        "## 3. The interpolation head", "",
        "Anchors $a_j = a + jh$, $h = (b-a)/(p-1)$; the score $\\beta(2a_jy - a_j^2) = "
        "-\\beta(y - a_j)^2 + \\beta y^2$ (`score_residual`): softmax weights $\\propto "
        "e^{-\\beta(y - a_j)^2}$. For $y = a_i + t$, $t \\in [0, h]$:", "",
        "$$(y - a_{i-k})^2 - (y - a_i)^2 = k^2h^2 + 2tkh,\\qquad (y - a_{i+1+k})^2 - "
        "(y - a_{i+1})^2 = k^2h^2 + 2kh(h - t)$$", "",
        "(`left_gap_residual`, `right_gap_residual`; below the range, $y = a - t$: "
        "`outside_gap_residual`). Each is $\\ge k^2h^2 \\ge kh^2$, so an anchor $k$ steps "
        "beyond the nearest pair has weight at most $q^k$, $q = e^{-\\beta h^2}$. The two "
        "nearest anchors lie within $h$ of $\\mathrm{clip}(y, a, b)$, every anchor within "
        "$b - a$, and $\\sum_{k\\ge1} q^k = q/(1-q)$ (`geometric_residual`), on both sides:", "",
        "$$|\\mathrm{out}(y) - \\mathrm{clip}(y, a, b)| \\le " + L(d["interpolation_bound"])
        + "$$", "",
        "— `gmtheory.approx.interpolation_bound`. (The reference's form "
        "$\\max(|a|,|b|)\\varepsilon_0(\\beta) + (b-a)/p$ leaves $\\varepsilon_0$ "
        "unspecified; here the tail term plays its role.)", "",
        "## 4. The squaring and Newton bounds", "",
        "The hat $g = 2R(x) - 4R(x - \\tfrac12) + 2R(x - 1)$ uses ReLUs with coefficients "
        f"summing to {d['hat_error']} in absolute value, so one attention hat errs by at most "
        "$\\hat\\epsilon = 8c/\\beta$. $g$ is 2-Lipschitz, so the $s$-fold composition errs "
        "by $e_s = \\hat\\epsilon + 2e_{s-1}$, $e_0 = 0$, i.e. $e_s = (2^s - 1)\\hat"
        "\\epsilon$ (`hat_recursion_residual`, `hat_initial_residual`), and Yarotsky's sum "
        "$\\sum_s g_s/4^s$ errs by at most $\\hat\\epsilon\\sum_{s\\ge1}(2^s-1)/4^s = "
        + L(d["square_attention_factor"]) + "\\,\\hat\\epsilon$ (`square_series_residual`). "
        "With Yarotsky's $4^{-(m+1)}$ this gives `approx.square_bound` $4^{-(m+1)} + "
        "8c/\\beta$ (with $1/3$ to spare); `multiply_bound` is 3× it ($2 + \\tfrac12 + "
        "\\tfrac12$). Newton with a perturbed step $y' = y(2 - xy) + \\delta$: $r' = 1 - xy' "
        "= r^2 - x\\delta$ (`newton_residual`), so $|r_{k+1}| \\le r_k^2 + |\\delta|$ for "
        "$x \\le 1$: `approx.reciprocal_newton_bound`.", "",
        "## 5. The composition rules", "",
        "`gmtheory.approx_compose` maps an emulated value $\\hat f \\in [A, A + S]$ onto "
        "$u = (\\hat f - A)/S \\in [0, 1]$ and back: $(A + Su)(B + Tv) = AB + ATv + BSu + "
        "STuv$ (`product_rescale_residual`) and $(A + Su)^2 = A^2 + 2ASu + S^2u^2$ "
        "(`square_rescale_residual`), so the product's error on $[0, 1]^2$ is multiplied by "
        "$ST$ and the square's by $S^2$; for the reciprocal $\\frac1s\\cdot\\frac{1}{\\hat f/s} "
        "= 1/\\hat f$ (`reciprocal_rescale_residual`), so its error is divided by $s$. The "
        "error carried by the arguments enters through $\\hat f\\hat g - fg = "
        "(\\hat f - f)\\hat g + f(\\hat g - g)$ (`product_error_residual`), $\\hat f^2 - f^2 = "
        "(\\hat f - f)(\\hat f + f)$ (`square_error_residual`) and $1/\\hat f - 1/f = "
        "(f - \\hat f)/(f\\hat f)$ (`reciprocal_error_residual`); docs/topics/approx.md"
        "#composition-rules bounds each term.", "",
        "## Residuals", "",
    ]
    return "\n".join(lines + residual_lines(d))


if __name__ == "__main__":  # pragma: no cover
    print(markdown())
