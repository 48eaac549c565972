"""Symbolic derivation of the softmax head on in-context regression
(docs/topics/icl.md#softmax-attention-on-the-regression-task).

Given the query and the task, a score ``s = a x^T x_q`` and a label ``y`` are jointly
Gaussian (mean 0, variances ``S``, ``Y``, covariance ``C``).  From the joint moment
generating function ``exp((a^2 S u^2 + 2 a C u v + Y v^2)/2)`` of ``(s/a, y)``:

1. the tilt: ``E[y e^{a s'}] / E[e^{a s'}] = a C`` (the infinite-prompt output);
2. the delta-method variance of the ratio of the two empirical means:
   ``E[e^{2as'}(y - mu)^2] / E[e^{as'}]^2 = e^{a^2 S} (Y + mu^2)`` with ``mu = a C``;
3. with ``S = r/d``, ``C = w^T x_q/d``, the gain ``g = e a/d`` and ``t = a^2/d``, the error
   is ``rho + (1-g)^2 + g^2 V(t)``; ``g* = 1/(1+V)`` gives ``rho + V/(1+V)``;
4. as ``d -> inf``, ``V = e^t (1+rho)/(alpha t)`` is smallest at ``t = 1`` and the best
   error equals ``rho + (1+rho)/(alpha/e + 1 + rho)``, linear attention's limit at ``alpha/e``;
5. the ``chi^2_d/d`` factor: ``E[e^{t r}] = (1 - 2t/d)^{-d/2}`` for ``r = |x_q|^2``;
6. the exact error at every prompt length (:func:`gmtheory.icl_softmax.finite_prompt_error`):
   with ``beta = w^T x_q/|x_q|`` (``E beta^2 = 1``) and the label part orthogonal to
   ``x_q`` independent noise ``eta`` of variance ``(1 - 1/d + rho) S``, ``S = sum p_i^2``,
   the error given ``(r, M)`` is ``rho + (r - e M)^2 + e^2 (1 - 1/d + rho) S``, which with
   ``e = g sqrt(d/t)`` is ``rho + 1 - 2 g P + g^2 Q``;
7. the inverse powers of the softmax normaliser: ``int_0^inf lambda^{n-1} e^{-lambda Z}
   d lambda = (n-1)!/Z^n`` (n = 1, 2);
8. the small tilt: ``d/dk E sum softmax_i(k z) z_i = 1 - 1/l`` at ``k = 0`` (l = 3, 5).

:func:`derive` returns the expressions; every ``*_residual`` must be 0.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import sympy as sp

__all__ = ["derive", "markdown"]


@lru_cache(maxsize=1)
def derive() -> dict:
    a, S, Y, u, v = sp.symbols("a S Y u v", positive=True)
    C = sp.Symbol("C", real=True)
    K = sp.exp((a**2 * S * u**2 + 2 * a * C * u * v + Y * v**2) / 2)   # E e^{u s + v y}
    at = lambda expr, uu: sp.simplify(expr.subs({u: uu, v: 0}))
    m1 = at(K, 1)                                   # E e^{s}
    tilt = sp.simplify(at(sp.diff(K, v), 1) / m1)    # E[y e^s] / E[e^s]
    mu = a * C
    m2 = at(K, 2)
    second = at(sp.diff(K, v, 2), 2) - 2 * mu * at(sp.diff(K, v), 2) + mu**2 * m2
    var_ratio = sp.simplify(second / m1**2)
    g, V, rho, alpha, t = sp.symbols("g V rho alpha t", positive=True)
    err = rho + (1 - g) ** 2 + g**2 * V
    gstar = sp.solve(sp.diff(err, g), g)[0]
    Vinf = sp.exp(t) * (1 + rho) / (alpha * t)
    tstar = sp.solve(sp.diff(sp.log(Vinf), t), t)[0]
    best = sp.simplify((rho + V / (1 + V)).subs(V, Vinf.subs(t, tstar)))
    lin_at = rho + (1 + rho) / (alpha / sp.E + 1 + rho)
    d, r, _s = sp.symbols("d r s", positive=True)
    chi = sp.integrate(sp.exp(t * r) * r ** (d / 2 - 1) * sp.exp(-d * r / 2)
                       * (d / 2) ** (d / 2) / sp.gamma(d / 2), (r, 0, sp.oo),
                       conds="none")
    chi = sp.piecewise_fold(sp.simplify(chi))
    if isinstance(chi, sp.Piecewise):      # the branch t < d/2, where the integral converges
        chi = chi.args[0][0]
    exact = _exact_error_terms()
    return {
        **exact,
        "tilt": tilt, "variance_ratio": var_ratio, "g_star": gstar, "t_star": tstar,
        "best_error": best, "chi_mgf": sp.simplify(chi),
        "tilt_residual": sp.simplify(tilt - a * C),
        "variance_residual": sp.simplify(var_ratio - sp.exp(a**2 * S) * (Y + mu**2)),
        "gain_residual": sp.simplify(gstar - 1 / (1 + V)),
        "min_error_residual": sp.simplify(err.subs(g, gstar) - (rho + V / (1 + V))),
        "t_star_residual": sp.simplify(tstar - 1),
        "lu_at_alpha_over_e_residual": sp.simplify(best - lin_at),
        # on the branch t < d/2: write t = (d - s)/2 with s > 0 so the powers combine
        "chi_mgf_residual": sp.simplify(sp.powsimp(
            (chi * (1 - 2 * t / d) ** (d / 2)).subs(t, (d - _s) / 2), force=True) - 1),
    }


def _expect(expr, moments):
    """E of a polynomial in independent variables with the given moments {(x, k): E x^k}."""
    names = {x for x, _ in moments}
    out = 0
    for term in sp.Add.make_args(sp.expand(expr)):
        c, rest = term.as_independent(*names)
        for f in sp.Mul.make_args(rest):
            if f != 1:
                base, k = f.as_base_exp()
                c *= moments[(base, int(k))]
        out += c
    return sp.simplify(out)


def _exact_error_terms() -> dict:
    beta, eta, eps, r, M, Sq, d, rho, e, t, g, lam, Z = sp.symbols(
        "beta eta epsilon r M S d rho e t g lambda Z", positive=True)
    # y_q - y_hat with y_q = beta r + eps_q, y_hat = e (beta M + sum p_i eta_i)
    err = (beta * r + eps - e * (beta * M + eta)) ** 2
    mom = {(beta, 1): 0, (beta, 2): 1, (eta, 1): 0, (eta, 2): (1 - 1 / d + rho) * Sq,
           (eps, 1): 0, (eps, 2): rho}
    given = _expect(err, mom)
    stated = rho + (r - e * M) ** 2 + e**2 * (1 - 1 / d + rho) * Sq
    # e = g sqrt(d/t), M = m/sqrt(d) with m = sum p_i z_i: the P, Q form per (r, m, S)
    m = sp.Symbol("m")
    in_g = sp.expand(stated.subs({e: g * sp.sqrt(d / t), M: m / sp.sqrt(d)}))
    P_term, Q_term = r * m / sp.sqrt(t), m**2 / t + (d / t) * (1 - 1 / d + rho) * Sq
    pq_form = rho + r**2 - 2 * g * P_term + g**2 * Q_term
    laplace = [sp.integrate(lam ** (n - 1) * sp.exp(-lam * Z), (lam, 0, sp.oo))
               - sp.factorial(n - 1) / Z**n for n in (1, 2)]
    # small tilt, for l = 3 and 5 tokens: d/dk sum_i softmax_i(k z) z_i at k = 0, in
    # expectation over independent standard normal z_i, against 1 - 1/l
    k = sp.Symbol("k")
    small = 0
    for n in (3, 5):
        z = sp.symbols(f"z1:{n + 1}")
        w = [sp.exp(k * zi) for zi in z]
        slope = sp.diff(sum(wi * zi for wi, zi in zip(w, z, strict=True)) / sum(w), k).subs(k, 0)
        mz = {**{(zi, 1): 0 for zi in z}, **{(zi, 2): 1 for zi in z}}
        small += sp.Abs(_expect(slope, mz) - (1 - sp.Rational(1, n)))
    return {"exact_error_given_projection": given,
            "exact_error_residual": sp.simplify(given - stated),
            "exact_pq_residual": sp.simplify(in_g - pq_form),
            "laplace_residual": sp.simplify(sum(sp.Abs(x) for x in laplace)),
            "small_tilt_residual": sp.simplify(small)}


def markdown() -> str:
    dd = derive()
    L = sp.latex
    return "\n".join([
        "# Derivation: one softmax head on in-context regression", "",
        "Generated by `gmtheory.derivations.icl_softmax` (sympy). Score $s = a\\,x^\\top x_q$ "
        "and label $y$ jointly Gaussian given the query and the task: "
        "$\\operatorname{Var} s/a = S$, $\\operatorname{Var} y = Y$, "
        "$\\operatorname{Cov}(s/a, y) = C$.", "",
        "Tilt (the infinite-prompt output): $E[y e^{s}]/E[e^{s}] = " + L(dd["tilt"])
        + "$ (residual $" + L(dd["tilt_residual"]) + "$).", "",
        "Delta-method variance of the softmax average: $E[e^{2s}(y-\\mu)^2]/E[e^s]^2 = "
        + L(dd["variance_ratio"]) + "$ (residual $" + L(dd["variance_residual"]) + "$).", "",
        "Error $\\rho + (1-g)^2 + g^2 V$: $g^* = " + L(dd["g_star"]) + "$, minimum $\\rho + "
        "V/(1+V)$ (residuals $" + L(dd["gain_residual"]) + "$, $"
        + L(dd["min_error_residual"]) + "$).", "",
        "As $d \\to \\infty$, $V = e^t(1+\\rho)/(\\alpha t)$: $t^* = " + L(dd["t_star"])
        + "$, best error $" + L(dd["best_error"]) + "$, which is "
        "$\\rho + (1+\\rho)/(\\alpha/e + 1 + \\rho)$ (residual $"
        + L(dd["lu_at_alpha_over_e_residual"]) + "$).", "",
        "Finite $d$: $E[e^{t r}] = " + L(dd["chi_mgf"]) + "$ for $r \\sim \\chi^2_d/d$ "
        "(residual $" + L(dd["chi_mgf_residual"]) + "$).", "",
        "Every prompt length: given $r = |x_q|$ and $M = \\sum_i p_i u_i$ the error is $"
        + L(dd["exact_error_given_projection"]) + "$ (residual against "
        "$\\rho + (r - eM)^2 + e^2(1 - 1/d + \\rho)S$: $" + L(dd["exact_error_residual"])
        + "$; in the $P, Q$ form: $" + L(dd["exact_pq_residual"]) + "$); "
        "$\\int_0^\\infty \\lambda^{n-1}e^{-\\lambda Z}d\\lambda = (n-1)!/Z^n$ (residual $"
        + L(dd["laplace_residual"]) + "$); small tilt $\\partial_k E\\sum p_i z_i = "
        "1 - 1/\\ell$ (residual $" + L(dd["small_tilt_residual"]) + "$).", "",
    ])


if __name__ == "__main__":  # pragma: no cover
    print(markdown())
    Path("icl_softmax.md").write_text(markdown())
