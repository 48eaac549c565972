"""ICL asymptotics: the Marchenko–Pastur fixed point, the ridge equation and the
``tau, kappa -> inf`` limit (Lu et al. 2025; docs/topics/icl.md#asymptotic-theory).

Steps (each ``lhs - rhs`` reduces to 0 with sympy):

1. **Marchenko–Pastur from the resolvent.** For ``G = (x I + (1/k) sum_j w_j w_j^T)^{-1}``,
   ``w_j ~ N(0, I_d)``, ``k = kappa d``: the trace of ``I = x G + (1/k) sum_j w_j w_j^T G``,
   Sherman–Morrison for each ``w_j^T G w_j`` and the concentration
   ``w_j^T G_{-j} w_j ~ d M`` give ``1 = x M + M / (1 + M/kappa)``, i.e. the fixed point
   ``M = (x + 1/(1 + M/kappa))^{-1}``; its positive root is ``icl.M_kappa``, its implicit
   derivative is ``icl.dM_kappa``, and ``kappa -> inf`` gives ``1/(1 + x)``.
2. **The ridge equation.** The pretraining features ``vec(x_q h^T)`` have covariance
   ``(1/d) I (x) Sigma_h`` with ``E[h_1 h_1^T | w] = (1 + 1/l) w w^T + q I`` (Isserlis),
   ``q = (1 + rho)/alpha``, so the normalised Stieltjes transform of the feature covariance
   at ``eps`` is ``M_kappa(q + eps)``.  The deterministic equivalent of ridge regression,
   ``eps - lambda = (eps/n) tr Sigma (Sigma + eps)^{-1}``, with ``p/n = 1/tau``, becomes
   ``1 - tau + tau lambda/eps - eps M_kappa(q + eps) = 0``: the equation whose root
   ``icl.ridge_epsilon`` finds.  For ``kappa = inf`` its root is explicit.
3. **The limit ``tau, kappa -> inf``**: ``eps -> lambda``, ``c_eps -> 0`` and
   ``e_ICL -> (1+q)/(1+q+lambda)^2 - 2/(1+q+lambda) + 1 + rho``, which at ``lambda -> 0``
   is ``rho + (1 + rho)/(alpha + 1 + rho)`` (``icl.limit_large``); the ridgeless ICL and
   IDG errors have the same limit.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from ._common import L, cancel, residual_lines, sym_matrix, sym_vector

__all__ = ["derive", "markdown", "M_kappa_function", "dM_kappa_function",
           "ridge_equation_function", "ridge_root_kappa_inf_function", "limit_function",
           "ridge_error_function"]

x, kappa = sp.symbols("x kappa", positive=True)
M = sp.Symbol("M", positive=True)
alpha, tau, rho, lam, eps = sp.symbols("alpha tau rho lambda epsilon", positive=True)


def M_closed(xx, kk):
    """Transcription of ``icl.M_kappa``."""
    a = xx + 1 - 1 / kk
    return 2 / (a + sp.sqrt(a**2 + 4 * xx / kk))


def dM_closed(xx, kk):
    """Transcription of ``icl.dM_kappa``."""
    a = xx + 1 - 1 / kk
    Mv = M_closed(xx, kk)
    return -sp.Rational(1, 2) * Mv**2 * (1 + (xx + 1 + 1 / kk) / sp.sqrt(a**2 + 4 * xx / kk))


def ridge_error(Mf, dMf, eps_, q, *, rho_, tau_):
    """Transcription of ``icl.e_icl_ridge`` given ``M = Mf(nu)``, ``M' = dMf(nu)``."""
    nu = q + eps_
    Mv, dMv = Mf(nu), dMf(nu)
    c = ((rho_ + nu - nu**2 * Mv - eps_ * (1 - 2 * nu * Mv - nu**2 * dMv))
         / (1 - 2 * eps_ * Mv - eps_**2 * dMv - tau_))
    e = ((1 + q) * (1 - 2 * nu * Mv - nu**2 * dMv - c * (Mv + eps_ * dMv))
         - 2 * (1 - nu * Mv) + 1 + rho_)
    return e, c


# --------------------------------------------------------------------------- step 1
def _marchenko_pastur(out):
    # Sherman–Morrison (d = 2, symbolic symmetric A, vector w, k > 0)
    A = sym_matrix("A", symmetric=True)
    w = sym_vector("w")
    k = sp.Symbol("k", positive=True)
    lhs = (w.T * (A + w * w.T / k).inv() * w)[0]
    Aw = (w.T * A.inv() * w)[0]
    out["sherman_morrison_residual"] = cancel(lhs - Aw / (1 + Aw / k))
    # (1/(k d)) sum_j w_j^T G w_j with w_j^T G_{-j} w_j ~ d M and k = kappa d
    d = sp.Symbol("d", positive=True)
    per = d * M / (1 + d * M / (kappa * d))
    out["trace_term_residual"] = cancel((kappa * d) * per / ((kappa * d) * d)
                                        - M / (1 + M / kappa))
    trace_eq = 1 - x * M - M / (1 + M / kappa)           # = 0
    fixed = M - 1 / (x + 1 / (1 + M / kappa))            # = 0
    out["fixed_point_form_residual"] = cancel(trace_eq + (x + 1 / (1 + M / kappa)) * fixed)
    quad = sp.expand(cancel(-trace_eq * (1 + M / kappa)))
    claim_quad = x / kappa * M**2 + (x + 1 - 1 / kappa) * M - 1
    out["quadratic"] = claim_quad
    out["quadratic_residual"] = sp.expand(quad - claim_quad)
    mr = sp.Symbol("m")                                 # unrestricted sign
    r1, r2 = sp.solve(claim_quad.subs(M, mr), mr)
    out["root_product_residual"] = sp.simplify(r1 * r2 + kappa / x)   # < 0: one positive
    Mc = M_closed(x, kappa)
    out["M_kappa"] = Mc
    out["M_kappa_root_residual"] = sp.simplify(sp.expand(claim_quad.subs(M, Mc)))
    # implicit derivative of the quadratic against icl.dM_kappa
    dM_impl = -sp.diff(claim_quad, x) / sp.diff(claim_quad, M)
    out["dM_implicit"] = sp.factor(dM_impl)
    out["dM_kappa_residual"] = sp.simplify(dM_impl.subs(M, Mc) - dM_closed(x, kappa))
    out["M_inf_residual"] = sp.simplify(sp.limit(Mc, kappa, sp.oo) - 1 / (1 + x))
    out["dM_inf_residual"] = sp.simplify(sp.limit(dM_closed(x, kappa), kappa, sp.oo)
                                         + 1 / (1 + x) ** 2)


# --------------------------------------------------------------------------- step 2
def _isserlis_fourth(Sigma, idx):
    """``E x_i x_j x_k x_l`` for ``x ~ N(0, Sigma)`` by differentiating the MGF."""
    n = Sigma.shape[0]
    u = sp.Matrix(sp.symbols(f"u_1:{n + 1}", real=True))
    mgf = sp.exp((u.T * Sigma * u)[0] / 2)
    expr = mgf
    for i in idx:
        expr = sp.diff(expr, u[i])
    return sp.simplify(expr.subs({ui: 0 for ui in u}))


def _ridge(out):
    d, ell = sp.symbols("d ell", positive=True)
    w = sym_vector("w")
    Sigma = sp.eye(2) / d                                   # x ~ N(0, I/d)
    # E[(x^T w)^2 x x^T] by Isserlis
    E4 = sp.Matrix(2, 2, lambda i, j: sum(
        w[a] * w[b] * _isserlis_fourth(Sigma, (a, b, i, j)) for a in range(2)
        for b in range(2)))
    ww = (w.T * w)[0]
    out["isserlis_residual"] = cancel(E4 - ((w.T * Sigma * w)[0] * Sigma
                                            + 2 * Sigma * w * w.T * Sigma))
    # h_1 = (d/l) sum_i y_i x_i with y = x^T w + eps, Var eps = rho
    Ey2xx = E4 + rho * Sigma                                # E[y^2 x x^T]
    Eyx = Sigma * w                                         # E[y x]
    Ehh = d**2 / ell * Ey2xx + d**2 * (ell - 1) / ell * Eyx * Eyx.T
    claim = (1 + 1 / ell) * w * w.T + (ww + d * rho) / ell * sp.eye(2)
    out["feature_covariance_residual"] = cancel(Ehh - claim)
    # sphere tasks |w|^2 = d: the isotropic part is q = (1 + rho)/alpha, alpha = l/d
    out["feature_q_residual"] = cancel(((d + d * rho) / ell).subs(ell, alpha * d)
                                       - (1 + rho) / alpha)
    # tr Sigma (Sigma + eps)^{-1} = p - eps tr (Sigma + eps)^{-1}  (d = 2 instance)
    S = sym_matrix("S", symmetric=True)
    Ri = (S + eps * sp.eye(2)).inv()
    out["trace_split_residual"] = cancel((S * Ri).trace() - (2 - eps * Ri.trace()))
    # deterministic equivalent with p/n = 1/tau and m = (1/p) tr (Sigma + eps)^{-1}
    m = sp.Symbol("m", positive=True)
    det_eq = eps - lam - eps / tau * (1 - eps * m)          # = 0
    ridge_eq = 1 - tau + tau * lam / eps - eps * m           # = 0
    out["ridge_equation"] = ridge_eq
    out["ridge_rearrangement_residual"] = cancel(det_eq * (-tau / eps) - ridge_eq)
    q = (1 + rho) / alpha
    F = ridge_eq.subs(m, M_closed(q + eps, kappa))
    out["ridge_F"] = F
    out["ridge_infinity_residual"] = sp.simplify(
        sp.limit(eps * M_closed(q + eps, kappa), eps, sp.oo) - 1)
    # kappa = inf: M = 1/(1 + q + eps) and the root is explicit
    Finf = sp.together(ridge_eq.subs(m, 1 / (1 + q + eps)))
    poly = sp.Poly(sp.numer(Finf), eps)
    a2, a1, a0 = poly.all_coeffs()                    # the product of the roots is < 0
    out["ridge_inf_product_residual"] = cancel(a0 / a2 + lam * (1 + q))
    disc = sp.sqrt(a1**2 - 4 * a2 * a0)
    root = (-a1 - disc) / (2 * a2)     # a2 < 0: this is the positive root
    out["ridge_inf_root"] = sp.simplify(root)
    out["ridge_inf_root_residual"] = sp.simplify(sp.expand(poly.as_expr().subs(eps, root)))
    out["_ridge_inf_root"] = root


# --------------------------------------------------------------------------- step 3
def _factor_roots(e):
    """Factor the radicands of square roots (``sqrt((a + b)^2) -> a + b`` for positives)."""
    return e.replace(lambda t: t.is_Pow and t.exp == sp.S.Half,
                     lambda t: sp.sqrt(sp.factor(t.base)))


def _limits(out):
    q = (1 + rho) / alpha
    root = out["_ridge_inf_root"]
    out["eps_tau_limit_residual"] = sp.simplify(_factor_roots(sp.limit(root, tau, sp.oo)) - lam)
    Minf = lambda v: 1 / (1 + v)
    dMinf = lambda v: -1 / (1 + v) ** 2
    e_eps, c_eps = ridge_error(Minf, dMinf, eps, q, rho_=rho, tau_=tau)
    out["c_eps_tau_limit_residual"] = sp.simplify(sp.limit(c_eps.subs(eps, lam), tau, sp.oo))
    e_lim = sp.limit(e_eps.subs(eps, lam), tau, sp.oo)
    claim = (1 + q) / (1 + q + lam) ** 2 - 2 / (1 + q + lam) + 1 + rho
    out["ridge_tau_limit"] = sp.simplify(claim)
    out["ridge_tau_limit_residual"] = sp.simplify(e_lim - claim)
    lim0 = sp.limit(claim, lam, 0)
    target = rho + (1 + rho) / (alpha + 1 + rho)
    out["limit_large"] = target
    out["limit_large_residual"] = sp.simplify(lim0 - target)
    # ridgeless formulas (transcriptions of icl.e_icl_ridgeless / e_idg_ridgeless, tau > 1)
    mm = Minf(q)
    kstar = 1
    e_icl = ((kstar - 1 / (tau - 1)) * (1 + q) * q**2 * mm**2
             + (3 - 2 * tau) / (tau - 1) * q**2 * mm + q * (1 + (1 + rho) * mm / (tau - 1))
             + rho * mm / (tau - 1) + rho)
    e_idg = tau / (tau - 1) * (rho + q * (1 - q * mm))
    out["ridgeless_icl_limit_residual"] = sp.simplify(sp.limit(e_icl, tau, sp.oo) - target)
    out["ridgeless_idg_limit_residual"] = sp.simplify(sp.limit(e_idg, tau, sp.oo) - target)
    out["_ridge_error"] = (e_eps, c_eps)


@lru_cache(maxsize=1)
def derive() -> dict:
    out: dict = {}
    for step in (_marchenko_pastur, _ridge, _limits):
        step(out)
    return out


# ------------------------------------------------------------------- lambdified forms
def M_kappa_function():
    """The positive root of the MP quadratic, lambdified: ``f(x, kappa)``."""
    return sp.lambdify([x, kappa], derive()["M_kappa"], "numpy")


def dM_kappa_function():
    """The implicit derivative ``-Q_x / Q_M`` at the root: ``f(x, kappa)``."""
    d = derive()
    return sp.lambdify([x, kappa], d["dM_implicit"].subs(M, d["M_kappa"]), "numpy")


def ridge_equation_function():
    """``F(eps) = 1 - tau + tau lam/eps - eps M_kappa(q + eps)``:
    ``f(eps, alpha, tau, kappa, rho, lam)``."""
    return sp.lambdify([eps, alpha, tau, kappa, rho, lam], derive()["ridge_F"], "numpy")


def ridge_root_kappa_inf_function():
    """The explicit ``kappa = inf`` root: ``f(alpha, tau, rho, lam)``."""
    return sp.lambdify([alpha, tau, rho, lam], derive()["ridge_inf_root"], "numpy")


def ridge_error_function():
    """``e_ICL`` (ridge, ``kappa = inf``) as a function of its root:
    ``f(eps, alpha, tau, rho)``."""
    return sp.lambdify([eps, alpha, tau, rho], derive()["_ridge_error"][0], "numpy")


def limit_function():
    """``rho + (1 + rho)/(alpha + 1 + rho)`` from the sympy limit: ``f(alpha, rho)``."""
    return sp.lambdify([alpha, rho], derive()["limit_large"], "numpy")


def markdown() -> str:
    d = derive()
    lines = [
        "# Derivation: ICL asymptotics (Marchenko–Pastur, ridge equation, large limit)", "",
        "Generated by `gmtheory.derivations.icl_asymptotics` (sympy); theory "
        "`docs/topics/icl.md#asymptotic-theory`. Residuals are reduced by sympy and must be "
        "0.", "",
        "## 1. The Marchenko–Pastur fixed point from the resolvent", "",
        "Let $G = (xI + \\tfrac1k\\sum_{j=1}^k w_jw_j^\\top)^{-1}$ with $w_j \\sim "
        "\\mathcal N(0, I_d)$, $k = \\kappa d$, and $M = \\tfrac1d\\operatorname{tr}G$ (a "
        "Stieltjes transform at $-x$). Take $\\tfrac1d\\operatorname{tr}$ of $I = xG + "
        "\\tfrac1k\\sum_j w_jw_j^\\top G$: $1 = xM + \\tfrac{1}{kd}\\sum_j w_j^\\top G w_j$. "
        "Sherman–Morrison, $w^\\top(A + ww^\\top/k)^{-1}w = \\frac{w^\\top A^{-1}w}{1 + "
        "w^\\top A^{-1}w/k}$ (`sherman_morrison_residual`, symbolic $A$), with $A = "
        "G_{-j}^{-1}$ ($G_{-j}$ the resolvent without $w_j$), and the concentration "
        "$w_j^\\top G_{-j}w_j \\approx \\operatorname{tr}G_{-j} \\approx dM$ (the step that "
        "is not algebra; `icl.01` checks the result against a sampled pool) give "
        "$\\tfrac{1}{kd}\\sum_j w_j^\\top Gw_j \\approx \\frac{M}{1 + M/\\kappa}$ "
        "(`trace_term_residual`). Hence", "",
        "$$1 = xM + \\frac{M}{1 + M/\\kappa}\\iff M = \\Big(x + \\frac{1}{1 + M/\\kappa}"
        "\\Big)^{-1}$$", "",
        "(`fixed_point_form_residual`), i.e. the quadratic $" + L(d["quadratic"])
        + " = 0$ (`quadratic_residual`). The product of its roots is $-\\kappa/x < 0$ "
        "(`root_product_residual`), so exactly one root is positive; a Stieltjes transform "
        "at $-x < 0$ is positive, so", "",
        "$$M_\\kappa(x) = " + L(d["M_kappa"]) + "$$", "",
        "(`M_kappa_root_residual`), the formula of `gmtheory.icl.M_kappa`. Implicit "
        "differentiation of the quadratic gives $M'_\\kappa = " + L(d["dM_implicit"])
        + "$, which at the root equals `icl.dM_kappa`'s $-\\tfrac12 M^2[1 + (x + 1 + "
        "1/\\kappa)/\\sqrt{(x+1-1/\\kappa)^2 + 4x/\\kappa}]$ (`dM_kappa_residual`). As "
        "$\\kappa \\to \\infty$: $M_\\infty(x) = 1/(1+x)$ and $M'_\\infty = -1/(1+x)^2$ "
        "(`M_inf_residual`, `dM_inf_residual`).", "",
        "## 2. The ridge equation", "",
        "**Feature covariance.** Pretraining regresses $y_q$ on the features "
        "$\\mathrm{vec}(x_q h^\\top)$, $h = ((d/\\ell)\\sum_i y_i x_i,\\ \\tfrac1\\ell\\sum_i "
        "y_i^2)$, with $x_q$ independent of $h$: the covariance is $\\tfrac1d I\\otimes"
        "\\Sigma_h$. For $x \\sim \\mathcal N(0, I/d)$, Isserlis gives $\\mathbb E[(x^\\top "
        "w)^2xx^\\top] = (w^\\top\\Sigma w)\\Sigma + 2\\Sigma ww^\\top\\Sigma$ "
        "(`isserlis_residual`, from the MGF), hence", "",
        "$$\\mathbb E[h_1h_1^\\top\\mid w] = (1 + \\tfrac1\\ell)ww^\\top + \\frac{\\|w\\|^2 + "
        "d\\rho}{\\ell}I$$", "",
        "(`feature_covariance_residual`), and with $\\|w\\|^2 = d$ the isotropic part is "
        "$q = (1+\\rho)/\\alpha$ (`feature_q_residual`). Averaging over the pool, the "
        "$h_1$ block is $(1 + \\tfrac1\\ell)\\tfrac1k\\sum_j w_jw_j^\\top + qI$: its "
        "normalised Stieltjes transform at $\\epsilon$ tends to $M_\\kappa(q + \\epsilon)$ "
        "(the last coordinate of $h$ is one of $d + 1$; the factor $1 + 1/\\ell \\to 1$).", "",
        "**Deterministic equivalent.** For ridge regression with $n$ samples of $p$ "
        "features of covariance $\\Sigma$ (after the scaling $n\\lambda/d$ of the penalty), "
        "the same leave-one-out argument as in section 1 gives $\\epsilon - \\lambda = "
        "\\tfrac{\\epsilon}{n}\\operatorname{tr}\\Sigma(\\Sigma + \\epsilon)^{-1}$ (this "
        "step assumes independent samples, which prompts sharing a task are not when "
        "$\\kappa < \\infty$: the resulting equation is Lu et al.'s, and `icl.04` checks it "
        "against pretraining simulations). With "
        "$\\operatorname{tr}\\Sigma(\\Sigma+\\epsilon)^{-1} = p - \\epsilon\\operatorname{tr}"
        "(\\Sigma+\\epsilon)^{-1}$ (`trace_split_residual`), $p/n \\to 1/\\tau$ and $m = "
        "\\tfrac1p\\operatorname{tr}(\\Sigma + \\epsilon)^{-1}$:", "",
        "$$1 - \\tau + \\frac{\\tau\\lambda}{\\epsilon} - \\epsilon\\, m = 0,\\qquad "
        "m = M_\\kappa(q + \\epsilon)$$", "",
        "(`ridge_rearrangement_residual`) — the equation whose smallest positive root "
        "`icl.ridge_epsilon` brackets. At $\\epsilon \\to 0^+$ it is $+\\infty$ "
        "($\\tau\\lambda/\\epsilon$) and at $\\epsilon \\to \\infty$ it tends to $-\\tau$ "
        "because $\\epsilon M_\\kappa(q+\\epsilon) \\to 1$ (`ridge_infinity_residual`), so a "
        "root exists. For $\\kappa = \\infty$ the equation is a quadratic in $\\epsilon$ "
        "whose roots have product $-\\lambda(1+q) < 0$ (`ridge_inf_product_residual`); "
        "the positive one is", "",
        "$$\\epsilon_\\infty = " + L(d["ridge_inf_root"]) + "$$", "",
        "(`ridge_inf_root_residual`).", "",
        "## 3. The limit $\\tau, \\kappa \\to \\infty$", "",
        "With $\\kappa = \\infty$, $\\epsilon_\\infty \\to \\lambda$ as $\\tau \\to \\infty$ "
        "(`eps_tau_limit_residual`), the coefficient $c_\\epsilon$ of `icl.e_icl_ridge` "
        "tends to 0 (its denominator contains $-\\tau$; `c_eps_tau_limit_residual`), and", "",
        "$$e_{ICL} \\to \\frac{1 + q}{(1 + q + \\lambda)^2} - \\frac{2}{1 + q + \\lambda} "
        "+ 1 + \\rho,\\qquad q = \\frac{1+\\rho}{\\alpha}$$", "",
        "(`ridge_tau_limit_residual`). As $\\lambda \\to 0$:", "",
        "$$e_{ICL} \\to " + L(d["limit_large"]) + "$$", "",
        "(`limit_large_residual`), `icl.limit_large`. The ridgeless $e_{ICL}$ and "
        "$e_{IDG}$ ($\\tau > 1$, $\\kappa = \\infty$, $k^* = 1$) have the same limit "
        "(`ridgeless_icl_limit_residual`, `ridgeless_idg_limit_residual`).", "",
        "## Residuals", "",
    ]
    return "\n".join(lines + residual_lines(d))


if __name__ == "__main__":  # pragma: no cover
    print(markdown())
