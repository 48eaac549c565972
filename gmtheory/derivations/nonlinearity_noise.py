"""The Hermite nonlinearity–noise equivalence
(docs/topics/icl.md#the-nonlinearity-noise-equivalence).

For a single-index target ``y = f(z) + eps``, ``z = x^T w ~ N(0, 1)``,
``eps ~ N(0, sigma^2)``, write ``f = c_0 + c_1 He_1 + r`` with ``E r = E r z = 0``.
Steps (each ``lhs - rhs`` reduces to 0 with sympy):

1. the label moments that enter the exact finite-d error (``E y^2``, ``E y z``,
   ``E y^2 z^2``, ``E y^3 z``, ``E y^4``) in terms of moments of ``f`` and ``sigma^2``;
2. Parseval for the decomposition: ``E f^2 = c_0^2 + c_1^2 + E r^2``, hence
   ``rho_eff = E f^2 + sigma^2 - c_1^2`` (``- c_0^2`` more when the labels are centred);
3. the exact finite-d test error of any ``Gamma`` (the formula of
   ``gmtheory.icl.test_error_nonlinear``), written through six trace invariants of
   ``Gamma`` (checked against the matrix formula in d = 2);
4. the error of ``f`` minus the error of the Gaussian-equivalent linear target
   ``y = c_1 z + N(0, rho_eff)`` is exactly ``(1/l) [D_1 t_FR + 2 D_2 t_c + D_3 t_g]``
   with ``D_1 = E[f^2 He_2] - 2 c_1^2``, ``D_2 = E[f^3 z] - 3 c_1 E f^2`` and
   ``D_3 = E f^4 - 3 (E f^2)^2`` (the noise cancels); it vanishes as ``d -> inf`` at
   fixed ``alpha = l/d``; the equivalent linear error is ``c_1^2`` times the linear-target
   error ``e(Gamma')`` of ``icl.test_error`` with ``rho' = rho_eff / c_1^2``;
5. ``E erf(a z) erf(b z) = (2/pi) arcsin(2ab / sqrt((1 + 2a^2)(1 + 2b^2)))`` by
   differentiating in ``a``, hence ``E erf(z)^2 = (2/pi) arcsin(2/3)``
   (used by :mod:`.hermite_closed_forms`).
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from ._common import L, cancel, residual_lines, sym_matrix, sym_vector

__all__ = ["derive", "markdown", "erf_product_expectation", "erf_square_moment",
           "exact_error_function", "test_error_function"]


# ------------------------------------------------------------------ moment algebra
def _expect(expr, f, z, eps, fmoments, sigma2):
    """``E expr`` for a polynomial in ``f``, ``z``, ``eps`` with ``eps`` independent of
    ``(f, z)``, ``E eps^k = 0, sigma^2, 0, 3 sigma^4`` and ``E f^a z^b = fmoments[(a, b)]``."""
    eps_mom = {0: 1, 1: 0, 2: sigma2, 3: 0, 4: 3 * sigma2**2}
    total = sp.Integer(0)
    for (a, b, c), coeff in sp.Poly(sp.expand(expr), f, z, eps).terms():
        e = eps_mom[c]
        if e == 0:
            continue
        if (a, b) not in fmoments:
            raise KeyError(f"moment E f^{a} z^{b} not provided")
        total += coeff * fmoments[(a, b)] * e
    return total


def _error_scalar(c1, m2, Ey2z2, Ey3z, Ey4, alpha, ell, t):
    """The exact error of ``icl.test_error_nonlinear`` through the invariants ``t``."""
    b1 = (1 - 1 / ell) * c1**2 + (Ey2z2 - m2) / ell
    b2 = (1 - 1 / ell) * c1 * m2 + Ey3z / ell
    b3 = m2**2 + (Ey4 - m2**2) / ell
    return (m2 - 2 * (c1**2 * t["R"] + c1 * m2 * t["mu"])
            + m2 / alpha * t["F"] + b1 * t["FR"] + 2 * b2 * t["c"] + b3 * t["g"])


def _error_matrix(Gamma, ell, c1, m2, Ey2z2, Ey3z, Ey4, mu, R):
    """Transcription of ``gmtheory.icl.test_error_nonlinear`` (sympy matrices)."""
    d = Gamma.shape[0]
    alpha = ell / d
    b1 = (1 - 1 / ell) * c1**2 + (Ey2z2 - m2) / ell
    b2 = (1 - 1 / ell) * c1 * m2 + Ey3z / ell
    b3 = m2**2 + (Ey4 - m2**2) / ell
    B = (m2 / alpha * sp.eye(d) + b1 * R).row_join(b2 * mu).col_join(
        (b2 * mu.T).row_join(sp.Matrix([[b3]])))
    G1, g = Gamma[:, :d], Gamma[:, d]
    return (m2 - 2 * sp.Integer(1) / d * (c1**2 * (G1 * R).trace() + c1 * m2 * (g.T * mu)[0])
            + (Gamma.T * Gamma * B).trace() / d)


def _test_error_matrix(Gamma, ell, rho, mu, R):
    """Transcription of ``gmtheory.icl.test_error`` (linear target, sympy matrices)."""
    d = Gamma.shape[0]
    alpha = ell / d
    A = R.col_join((1 + rho) * mu.T)
    B = (sp.eye(d) / alpha + (1 + 1 / ell) * R / (1 + rho)).row_join(
        (1 + 2 / ell) * mu).col_join(((1 + 2 / ell) * mu.T).row_join(
            sp.Matrix([[(1 + rho) * (1 + 2 / ell)]])))
    return 1 + rho - sp.Integer(2) / d * (Gamma * A).trace() + (1 + rho) / d * (
        Gamma.T * Gamma * B).trace()


# --------------------------------------------------------------------------- steps
def _moments(out):
    f, z, eps = sp.symbols("f z varepsilon", real=True)
    c0, c1 = sp.symbols("c_0 c_1", real=True)
    F2, F2z2, F3z, F4 = (sp.Symbol(n, real=True) for n in ("F_2", "F_{2,2}", "F_{3,1}", "F_4"))
    s2 = sp.Symbol("sigma^2", nonnegative=True)
    fm = {(0, 0): 1, (1, 0): c0, (0, 1): 0, (0, 2): 1, (1, 1): c1, (2, 0): F2,
          (2, 2): F2z2, (3, 1): F3z, (4, 0): F4}
    y = f + eps
    E = lambda e: _expect(e, f, z, eps, fm, s2)
    mom = {"m2": E(y**2), "Eyz": E(y * z), "Ey2z2": E(y**2 * z**2), "Ey3z": E(y**3 * z),
           "Ey4": E(y**4)}
    out["label_moments"] = mom
    # the formulas of gmtheory.hermite.label_moments
    lib = {"m2": F2 + s2, "Eyz": c1, "Ey2z2": F2z2 + s2, "Ey3z": F3z + 3 * s2 * c1,
           "Ey4": F4 + 6 * s2 * F2 + 3 * s2**2}
    out["label_moments_residual"] = [sp.expand(mom[k] - lib[k]) for k in lib]

    # Hermite decomposition f = c0 + c1 z + r, E r = E r z = 0
    r, V = sp.symbols("r V_res", real=True)
    rm = {(0, 0): 1, (1, 0): 0, (0, 1): 0, (0, 2): 1, (1, 1): 0, (2, 0): V}
    Er = lambda e: sum(coeff * rm[(a, b)] for (a, b), coeff in
                       sp.Poly(sp.expand(e), r, z).terms())
    fdec = c0 + c1 * z + r
    out["parseval_residual"] = sp.expand(Er(fdec**2) - (c0**2 + c1**2 + V))
    out["first_coefficient_residual"] = sp.expand(Er(fdec * z) - c1)
    out["mean_residual"] = sp.expand(Er(fdec) - c0)
    m2 = c0**2 + c1**2 + V + s2
    out["rho_eff_uncentred_residual"] = sp.expand((m2 - c1**2) - (c0**2 + V + s2))
    # centred labels y - c0: the same model with c0 = 0
    out["rho_eff_centred_residual"] = sp.expand((m2 - c1**2 - c0**2) - (V + s2))
    out["_moment_symbols"] = {"c0": c0, "c1": c1, "F2": F2, "F2z2": F2z2, "F3z": F3z,
                              "F4": F4, "sigma2": s2}


def _invariants(Gamma, mu, R):
    d = Gamma.shape[0]
    G1, g = Gamma[:, :d], Gamma[:, d]
    return {"R": (G1 * R).trace() / d, "mu": (g.T * mu)[0] / d,
            "F": (G1.T * G1).trace() / d, "FR": (G1.T * G1 * R).trace() / d,
            "c": (mu.T * G1.T * g)[0] / d, "g": (g.T * g)[0] / d}


def _exact_error(out):
    ms = out["_moment_symbols"]
    c1 = ms["c1"]
    m2, Ey2z2, Ey3z, Ey4 = sp.symbols("m_2 E_{y^2z^2} E_{y^3z} E_{y^4}", real=True)
    ell = sp.Symbol("ell", positive=True)
    # matrix formula in d = 2 = scalar form through the invariants
    Gamma = sym_matrix("Gamma", 2, cols=3)
    mu, R = sym_vector("mu"), sym_matrix("R", symmetric=True)
    mat = _error_matrix(Gamma, ell, c1, m2, Ey2z2, Ey3z, Ey4, mu, R)
    sca = _error_scalar(c1, m2, Ey2z2, Ey3z, Ey4, ell / 2, ell, _invariants(Gamma, mu, R))
    out["trace_invariants_residual"] = cancel(mat - sca)
    out["_matrix_symbols"] = {"Gamma": Gamma, "mu": mu, "R": R, "ell": ell, "c1": c1,
                              "m2": m2, "Ey2z2": Ey2z2, "Ey3z": Ey3z, "Ey4": Ey4,
                              "error": mat}
    # the linear target is the Gaussian case c1 = 1, m2 = 1 + rho: test_error agrees
    rho = sp.Symbol("rho", positive=True)
    gauss = {Ey2z2: 3 + rho, Ey3z: 3 * (1 + rho), Ey4: 3 * (1 + rho) ** 2}
    out["linear_target_residual"] = cancel(
        mat.subs({c1: 1, m2: 1 + rho, **gauss}) - _test_error_matrix(Gamma, ell, rho, mu, R))
    out["_test_error"] = _test_error_matrix(Gamma, ell, rho, mu, R)
    out["_rho"] = rho

    # general d through the invariants: nonlinear minus Gaussian-equivalent
    d, alpha = sp.symbols("d alpha", positive=True)
    t = {k: sp.Symbol(f"t_{{{k}}}", real=True) for k in ("R", "mu", "F", "FR", "c", "g")}
    rho_eff = sp.Symbol("rho_eff", positive=True)
    m2e = c1**2 + rho_eff
    eq_mom = {"Ey2z2": 3 * c1**2 + rho_eff, "Ey3z": 3 * c1 * m2e, "Ey4": 3 * m2e**2}
    out["equivalent_moments"] = eq_mom
    lm = out["label_moments"]
    # rho_eff of the nonlinear target: m2 - c1^2
    on = {rho_eff: lm["m2"] - c1**2}
    e_f = _error_scalar(c1, lm["m2"], lm["Ey2z2"], lm["Ey3z"], lm["Ey4"], alpha, ell, t)
    e_eq = _error_scalar(c1, m2e, eq_mom["Ey2z2"], eq_mom["Ey3z"], eq_mom["Ey4"], alpha, ell,
                         t).subs(on)
    F2, F2z2, F3z, F4 = ms["F2"], ms["F2z2"], ms["F3z"], ms["F4"]
    D1, D2, D3 = F2z2 - F2 - 2 * c1**2, F3z - 3 * c1 * F2, F4 - 3 * F2**2
    out["deltas"] = (D1, D2, D3)
    # the moment gaps do not depend on sigma^2
    gaps = [lm["Ey2z2"] - eq_mom["Ey2z2"].subs(on), lm["Ey3z"] - eq_mom["Ey3z"].subs(on),
            lm["Ey4"] - eq_mom["Ey4"].subs(on)]
    out["moment_gap_residual"] = [sp.expand(gp - D) for gp, D in zip(gaps, (D1, D2, D3),
                                                                     strict=True)]
    diff = e_f - e_eq
    claim = (D1 * t["FR"] + 2 * D2 * t["c"] + D3 * t["g"]) / ell
    out["difference"] = claim
    out["equivalence_residual"] = cancel(diff - claim)
    out["large_d_residual"] = sp.limit(diff.subs(ell, alpha * d), d, sp.oo)
    # the equivalent linear error is c1^2 e(Gamma') with Gamma' = [Gamma1, c1 gamma]
    rho_p = rho_eff / c1**2
    tp = dict(t, mu=c1 * t["mu"], c=c1 * t["c"], g=c1**2 * t["g"])
    e_lin = _error_scalar(1, 1 + rho_p, 3 + rho_p, 3 * (1 + rho_p), 3 * (1 + rho_p) ** 2,
                          alpha, ell, tp)
    e_eq_free = _error_scalar(c1, m2e, eq_mom["Ey2z2"], eq_mom["Ey3z"], eq_mom["Ey4"],
                              alpha, ell, t)
    out["rescaling_residual"] = cancel(c1**2 * e_lin - e_eq_free)
    # examples: the gaps D for a few targets (E over z ~ N(0, 1), kinks split at 0)
    zz = sp.Symbol("z", real=True)
    phi = sp.exp(-zz**2 / 2) / sp.sqrt(2 * sp.pi)

    def E(h, fpos, fneg):          # E h(f(z), z) for f = fpos on z > 0, fneg on z < 0
        return sp.simplify(sp.integrate(h(fpos, zz) * phi, (zz, 0, sp.oo))
                           + sp.integrate(h(fneg, zz) * phi, (zz, -sp.oo, 0)))

    def gaps(fpos, fneg):
        c1_, F2_ = E(lambda v, x: v * x, fpos, fneg), E(lambda v, x: v**2, fpos, fneg)
        return [sp.simplify(E(lambda v, x: v**2 * x**2, fpos, fneg) - F2_ - 2 * c1_**2),
                sp.simplify(E(lambda v, x: v**3 * x, fpos, fneg) - 3 * c1_ * F2_),
                sp.simplify(E(lambda v, x: v**4, fpos, fneg) - 3 * F2_**2)]

    cc0, cc1 = sp.symbols("c_0 c_1", real=True)
    examples = {"\\mathrm{ReLU}(z)": gaps(zz, 0), "\\mathrm{sign}(z)": gaps(1, -1),
                "\\lvert z\\rvert": gaps(zz, -zz), "z^2": gaps(zz**2, zz**2),
                "c_0 + c_1 z": gaps(cc0 + cc1 * zz, cc0 + cc1 * zz)}
    out["delta_examples"] = examples
    out["affine_gap_residual"] = [sp.expand(v - w) for v, w in
                                  zip(examples["c_0 + c_1 z"], (0, 0, -2 * cc0**4),
                                      strict=True)]


def _erf(out):
    a, b, c = sp.symbols("a b c", positive=True)
    z = sp.Symbol("z", real=True)
    # integration by parts of int z e^{-c z^2} erf(b z) dz
    prim = -sp.exp(-c * z**2) / (2 * c)
    out["ibp_primitive_residual"] = sp.simplify(sp.diff(prim, z) - z * sp.exp(-c * z**2))
    boundary = [sp.limit(prim * sp.erf(b * z), z, lim) for lim in (sp.oo, -sp.oo)]
    out["ibp_boundary_residual"] = boundary
    rest = sp.integrate(-prim * sp.diff(sp.erf(b * z), z), (z, -sp.oo, sp.oo), conds="none")
    J = sp.simplify(rest)                      # = int z e^{-c z^2} erf(b z) dz
    out["ibp_integral"] = J
    out["ibp_integral_residual"] = sp.simplify(J - b / (c * sp.sqrt(c + b**2)))
    # d/da E erf(a z) erf(b z) = E[(2 z / sqrt(pi)) e^{-a^2 z^2} erf(b z)]
    dI = 2 / sp.sqrt(sp.pi) / sp.sqrt(2 * sp.pi) * J.subs(c, a**2 + sp.Rational(1, 2))
    out["dI_da"] = sp.simplify(dI)
    claim = 2 / sp.pi * sp.asin(2 * a * b / sp.sqrt((1 + 2 * a**2) * (1 + 2 * b**2)))
    out["erf_product_claim"] = claim
    out["erf_derivative_residual"] = sp.simplify(sp.diff(claim, a) - dI)
    out["erf_initial_residual"] = sp.limit(claim, a, 0)      # I(0) = E[0] = 0
    val = claim.subs({a: 1, b: 1})
    out["erf_square"] = sp.simplify(val)
    out["erf_square_residual"] = sp.simplify(val - 2 / sp.pi * sp.asin(sp.Rational(2, 3)))
    out["_erf_symbols"] = (a, b)


@lru_cache(maxsize=1)
def derive() -> dict:
    out: dict = {}
    for step in (_moments, _exact_error, _erf):
        step(out)
    return out


def erf_product_expectation(a=1, b=1):
    """``E erf(a z) erf(b z)`` (sympy) from the derivation."""
    d = derive()
    sa, sb = d["_erf_symbols"]
    return sp.simplify(d["erf_product_claim"].subs({sa: a, sb: b}))


def erf_square_moment():
    """``E erf(z)^2 = (2/pi) arcsin(2/3)`` as derived (sympy)."""
    return derive()["erf_square"]


def exact_error_function():
    """The exact finite-d error (d = 2) lambdified:
    ``f(Gamma (2, 3), ell, moments, mu (2,), R (2, 2)) -> float`` with ``moments`` the
    keys ``c1, m2, Ey2z2, Ey3z, Ey4`` of ``gmtheory.hermite.label_moments``."""
    s = derive()["_matrix_symbols"]
    G, mu, R = s["Gamma"], s["mu"], s["R"]
    args = [*G, *mu, R[0, 0], R[0, 1], R[1, 1], s["ell"], s["c1"], s["m2"], s["Ey2z2"],
            s["Ey3z"], s["Ey4"]]
    f = sp.lambdify(args, s["error"], "numpy")

    def call(Gamma, ell, moments, mu, R):
        import numpy as np

        Gamma, mu, R = np.asarray(Gamma), np.asarray(mu), np.asarray(R)
        return float(f(*Gamma.ravel(), *mu, R[0, 0], R[0, 1], R[1, 1], ell, moments["c1"],
                       moments["m2"], moments["Ey2z2"], moments["Ey3z"], moments["Ey4"]))

    return call


def test_error_function():
    """The linear-target error of ``icl.test_error`` (d = 2) lambdified:
    ``f(Gamma (2, 3), ell, rho, mu (2,), R (2, 2)) -> float``."""
    d = derive()
    s = d["_matrix_symbols"]
    G, mu, R = s["Gamma"], s["mu"], s["R"]
    args = [*G, *mu, R[0, 0], R[0, 1], R[1, 1], s["ell"], d["_rho"]]
    f = sp.lambdify(args, d["_test_error"], "numpy")

    def call(Gamma, ell, rho, mu, R):
        import numpy as np

        Gamma, mu, R = np.asarray(Gamma), np.asarray(mu), np.asarray(R)
        return float(f(*Gamma.ravel(), *mu, R[0, 0], R[0, 1], R[1, 1], ell, rho))

    return call


test_error_function.__test__ = False      # not a pytest test


def markdown() -> str:
    d = derive()
    lm = d["label_moments"]
    D1, D2, D3 = d["deltas"]
    eq = d["equivalent_moments"]
    lines = [
        "# Derivation: the Hermite nonlinearity–noise equivalence", "",
        "Generated by `gmtheory.derivations.nonlinearity_noise` (sympy); theory "
        "`docs/topics/icl.md#the-nonlinearity-noise-equivalence`. Target "
        "$y = f(z) + \\varepsilon$, "
        "$z = x^\\top w \\sim \\mathcal N(0,1)$, $\\varepsilon \\sim \\mathcal N(0, "
        "\\sigma^2)$; $c_k = \\mathbb E[f\\,\\mathrm{He}_k]/k!$. Moments of $f$: "
        "$F_2 = \\mathbb E f^2$, $F_{2,2} = \\mathbb E f^2 z^2$, $F_{3,1} = \\mathbb E f^3 z$, "
        "$F_4 = \\mathbb E f^4$.", "",
        "## 1. Label moments", "",
        "Expanding powers of $y = f + \\varepsilon$ with $\\varepsilon$ independent of $z$ "
        "($\\mathbb E\\varepsilon^2 = \\sigma^2$, $\\mathbb E\\varepsilon^4 = 3\\sigma^4$, odd "
        "moments 0):", "",
        "$$m_2 = \\mathbb E y^2 = " + L(lm["m2"]) + ",\\quad \\mathbb E yz = "
        + L(lm["Eyz"]) + ",\\quad \\mathbb E y^2z^2 = " + L(lm["Ey2z2"])
        + ",\\quad \\mathbb E y^3 z = " + L(lm["Ey3z"]) + ",\\quad \\mathbb E y^4 = "
        + L(lm["Ey4"]) + "$$", "",
        "— the formulas of `gmtheory.hermite.label_moments` (`label_moments_residual`).", "",
        "## 2. Decomposition and effective noise", "",
        "With $f = c_0 + c_1 z + r$, $\\mathbb E r = \\mathbb E rz = 0$, $V_{res} = "
        "\\mathbb E r^2$: $\\mathbb E f = c_0$, $\\mathbb E fz = c_1$ and $\\mathbb E f^2 = "
        "c_0^2 + c_1^2 + V_{res}$ (`mean_residual`, `first_coefficient_residual`, "
        "`parseval_residual`). The equivalent linear model $y = c_1 z + \\eta$ must match "
        "$\\mathbb E yz = c_1$ and $\\mathbb E y^2 = m_2$, so", "",
        "$$\\rho_{eff} = m_2 - c_1^2 = \\mathbb E f^2 + \\sigma^2 - c_1^2 = c_0^2 + V_{res} + "
        "\\sigma^2$$", "",
        "(`rho_eff_uncentred_residual`); with centred labels ($y - c_0$) the offset is gone: "
        "$\\rho_{eff} = V_{res} + \\sigma^2$ (`rho_eff_centred_residual`).", "",
        "## 3. The exact finite-d error", "",
        "`gmtheory.icl.test_error_nonlinear` implements, for $\\Gamma = [\\Gamma_1, "
        "\\gamma] \\in \\mathbb R^{d\\times(d+1)}$ and test-task moments $\\hat\\mu, \\hat R$,", "",
        "$$e_f(\\Gamma) = m_2 - \\tfrac2d\\big[c_1^2\\operatorname{tr}(\\Gamma_1\\hat R) + "
        "c_1 m_2\\,\\gamma^\\top\\hat\\mu\\big] + \\tfrac1d\\operatorname{tr}(\\Gamma^\\top"
        "\\Gamma B),\\quad B = \\begin{pmatrix} \\tfrac{m_2}{\\alpha}I + b_1\\hat R & b_2"
        "\\hat\\mu\\\\ b_2\\hat\\mu^\\top & b_3\\end{pmatrix},$$", "",
        "$b_1 = (1-\\tfrac1\\ell)c_1^2 + (\\mathbb E y^2z^2 - m_2)/\\ell$, $b_2 = (1 - "
        "\\tfrac1\\ell)c_1 m_2 + \\mathbb E y^3z/\\ell$, $b_3 = m_2^2 + (\\mathbb E y^4 - "
        "m_2^2)/\\ell$. Through the invariants $t_R = \\operatorname{tr}(\\Gamma_1\\hat R)/d$, "
        "$t_\\mu = \\gamma^\\top\\hat\\mu/d$, $t_F = \\|\\Gamma_1\\|_F^2/d$, $t_{FR} = "
        "\\operatorname{tr}(\\Gamma_1^\\top\\Gamma_1\\hat R)/d$, $t_c = \\hat\\mu^\\top"
        "\\Gamma_1^\\top\\gamma/d$, $t_g = \\|\\gamma\\|^2/d$:", "",
        "$$e_f = m_2 - 2(c_1^2 t_R + c_1 m_2 t_\\mu) + \\tfrac{m_2}{\\alpha}t_F + b_1 t_{FR} "
        "+ 2 b_2 t_c + b_3 t_g$$", "",
        "(`trace_invariants_residual`, symbolic $\\Gamma$ in d = 2). For a linear target "
        "($c_1 = 1$, $m_2 = 1 + \\rho$, Gaussian moments) it is the formula of "
        "`icl.test_error` (`linear_target_residual`).", "",
        "## 4. Substituting the decomposition", "",
        "The Gaussian-equivalent target $y = c_1 z + \\mathcal N(0, \\rho_{eff})$ has "
        "$\\mathbb E y^2 z^2 = " + L(eq["Ey2z2"]) + "$, $\\mathbb E y^3 z = " + L(eq["Ey3z"])
        + "$, $\\mathbb E y^4 = " + L(eq["Ey4"]) + "$. Its $c_1$ and $m_2$ are those of $f$, "
        "so every term of $e_f$ that involves only $c_1$, $m_2$ — the whole "
        "$\\ell \\to \\infty$ part — is the same. The gaps of the three fourth-order "
        "moments do not depend on $\\sigma^2$ (`moment_gap_residual`):", "",
        "$$D_1 = " + L(D1) + " = \\mathbb E[f^2\\mathrm{He}_2] - 2c_1^2,\\quad D_2 = "
        + L(D2) + ",\\quad D_3 = " + L(D3) + "$$", "",
        "and the difference of the exact errors is exactly (`equivalence_residual`)", "",
        "$$e_f(\\Gamma) - e_{eq}(\\Gamma) = " + L(d["difference"]) + ".$$", "",
        "**These are the terms that vanish as $d \\to \\infty$:** the $1/\\ell$ corrections "
        "of the fourth-order label moments, in the $\\hat R$-weighted norm of $\\Gamma_1$, "
        "the cross term $\\hat\\mu^\\top\\Gamma_1^\\top\\gamma$ and the last column "
        "$\\|\\gamma\\|^2$. At fixed $\\alpha = \\ell/d$ and invariants, their limit as "
        "$d \\to \\infty$ is $" + L(d["large_d_residual"]) + "$ (`large_d_residual`). "
        "(The other source of non-equivalence, during pretraining — the conditional "
        "statistics along each prompt's own task direction and the $O(\\ell^{-1/2})$ "
        "fluctuations of the context — is outside this formula; `icl.05` measures it.)", "",
        "Finally $e_{eq}(\\Gamma) = c_1^2\\,e(\\Gamma'; \\rho')$ with $\\Gamma' = "
        "[\\Gamma_1, c_1\\gamma]$ and $\\rho' = \\rho_{eff}/c_1^2$, where $e$ is the "
        "linear-target error of `icl.test_error` (`rescaling_residual`): scaling "
        "$y = c_1 y'$ scales the context block of $H_Z$ by $c_1$ and its last entry by "
        "$c_1^2$. Hence $e_f \\approx c_1^2 e_{Lu}(\\alpha, \\kappa, \\tau, \\rho' = "
        "\\rho_{eff}/c_1^2)$.", "",
        "Examples of $(D_1, D_2, D_3)$ (sympy integrals; kinks split at 0):", "",
        "| f | $D_1$ | $D_2$ | $D_3$ |", "|---|---|---|---|",
    ]
    for name, vals in d["delta_examples"].items():
        lines.append(f"| ${name}$ | " + " | ".join(f"${L(v)}$" for v in vals) + " |")
    lines += [
        "",
        "An affine $f$ with an offset already has $D_3 = -2c_0^4 \\ne 0$ "
        "(`affine_gap_residual`): $y$ is Gaussian but not centred, so the uncentred "
        "equivalence is exact only as $\\ell \\to \\infty$.", "",
        "## 5. $\\mathbb E\\,\\mathrm{erf}(z)^2 = \\tfrac2\\pi\\arcsin\\tfrac23$", "",
        "Let $I(a) = \\mathbb E[\\mathrm{erf}(az)\\,\\mathrm{erf}(bz)]$. Then $I(0) = 0$ and "
        "$I'(a) = \\mathbb E[\\tfrac{2z}{\\sqrt\\pi}e^{-a^2z^2}\\mathrm{erf}(bz)] = "
        "\\tfrac{2}{\\sqrt\\pi}\\tfrac{1}{\\sqrt{2\\pi}}J(a^2 + \\tfrac12)$ with $J(c) = "
        "\\int z e^{-cz^2}\\mathrm{erf}(bz)\\,dz$. Integrating by parts with the primitive "
        "$-e^{-cz^2}/(2c)$ (`ibp_primitive_residual`; boundary terms 0, "
        "`ibp_boundary_residual`), sympy integrates the Gaussian that remains:", "",
        "$$J(c) = " + L(d["ibp_integral"]) + ",\\qquad I'(a) = " + L(d["dI_da"]) + "$$", "",
        "(`ibp_integral_residual`). The claimed closed form", "",
        "$$I(a) = " + L(d["erf_product_claim"]) + "$$", "",
        "has the same derivative in $a$ (`erf_derivative_residual`) and the same value 0 at "
        "$a = 0$ (`erf_initial_residual`), so it is $I$. At $a = b = 1$:", "",
        "$$\\mathbb E\\,\\mathrm{erf}(z)^2 = " + L(d["erf_square"]) + "$$", "",
        "(`erf_square_residual`), the value `hermite_closed_forms` now uses.", "",
        "## Residuals", "",
    ]
    return "\n".join(lines + residual_lines(d))


if __name__ == "__main__":  # pragma: no cover
    print(markdown())
