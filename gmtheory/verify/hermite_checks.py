"""Hermite expansion checks (docs/topics/icl.md#hermite-coefficients): adaptive quadrature against
sympy closed forms, Parseval, Stein's identity and the effective noise."""

from __future__ import annotations

from math import factorial

import numpy as np
from scipy.integrate import quad

from .. import hermite
from ..comparisons import largest
from ..derivations import hermite_closed_forms as hcf
from ..stats import fit_loglog
from ._registry import Outcome, agreement, register_check


@register_check(
    "hermite.01-closed-forms",
    "Adaptive Gauss-Hermite (piecewise Gauss-Legendre at kinks) reproduces the sympy closed "
    "forms of c_0..c_3 and E f^2 for ReLU, sign, |z|, z^2, z^3, erf, sin and cos.",
    "docs/topics/icl.md#hermite-coefficients",
)
def check_closed_forms():
    ref = hcf.numeric()
    det, worst = {}, largest()
    for name, v in ref.items():
        f, kinks = hcf.NUMPY[name], hcf.KINKS.get(name)
        c = hermite.coefficients(f, 3, kinks=kinks)
        m2 = hermite.second_moment(f, kinks=kinks)
        e = float(largest(np.abs(c - v["c"]), abs(m2 - v["m2"]) / largest(1.0, v["m2"])))
        det[name] = {"max_error": e, "c1": float(c[1])}
        worst = largest(worst, e)
    return Outcome(agreement(worst, 1e-10, "two independent computations (symbolic "
                             "integration vs adaptive quadrature stopped at 1e-12 agreement)",
                             name="max error of c_0..c_3 and E f^2"), details=det)


@register_check(
    "hermite.02-parseval-and-stein",
    "sum_k k! c_k^2 -> E f^2 (tanh, softplus, erf: truncation at k = 80 below 1e-8; ReLU: "
    "the tail decays as k^-3/2, fitted over k = 10..80), and c_1 = E f'(z) (Stein) against "
    "scipy.quad.",
    "docs/topics/icl.md#hermite-coefficients",
)
def check_parseval_stein():
    phi = lambda z: np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)
    fns = {"tanh": (np.tanh, lambda z: 1 - np.tanh(z) ** 2, None),
           "softplus": (lambda z: np.logaddexp(0, z), lambda z: 1 / (1 + np.exp(-z)), None),
           "erf": (hcf.NUMPY["erf"], lambda z: 2 / np.sqrt(np.pi) * np.exp(-z * z), None),
           "relu": (hcf.NUMPY["relu"], lambda z: (z > 0).astype(float), (0.0,))}
    det, parseval, stein_worst, relu_slope = {}, largest(), largest(), None
    for name, (f, fp, kinks) in fns.items():
        K = 80
        c = hermite.coefficients(f, K, kinks=kinks)
        parts = np.array([factorial(k) * c[k] ** 2 for k in range(K + 1)])
        m2 = hermite.second_moment(f, kinks=kinks)
        stein = quad(lambda z, fp=fp: fp(np.array(z)) * phi(z), -40, 40, points=[0.0],
                     epsabs=1e-14, epsrel=1e-13, limit=200)[0]
        d = {"parseval_gap": float(m2 - parts.sum()), "stein_error": abs(c[1] - stein)}
        det[name] = d
        stein_worst = largest(stein_worst, d["stein_error"])
        if name != "relu":
            parseval = largest(parseval, abs(d["parseval_gap"]))
        else:
            # ReLU's even coefficients give k! c_k^2 ~ k^-5/2, so the Parseval tail after k
            # decays like k^-3/2 (a positive, shrinking gap holds by construction: not tested)
            ks = (10, 20, 40, 80)
            gaps = [m2 - parts[: k + 1].sum() for k in ks]
            relu_slope = fit_loglog(ks, gaps)
            det[name].update({"gaps_k10_20_40_80": gaps, "tail_slope": relu_slope.slope,
                              "tail_slope_r2": relu_slope.r2})
    return Outcome(
        agreement(parseval, 1e-8, "Parseval truncated at k = 80 for tanh, softplus, erf "
                  "(tanh's poles at i pi/2 make its tail ~1e-8 at k = 40)",
                  name="max |E f^2 - sum_{k<=80} k! c_k^2|"),
        agreement(stein_worst, 1e-10, "Stein's identity: adaptive Hermite quadrature (1e-12) "
                  "against adaptive scipy.quad (1e-13)", name="max |c_1 - E f'(z)|"),
        agreement(abs(relu_slope.slope + 1.5), 0.1,
                  "ReLU tail exponent -3/2: the next-order correction to k! c_k^2 ~ k^-5/2 is "
                  "relative O(1/k), which moves a fit over k = 10..80 by O(1/10)",
                  name="|ReLU tail slope - (-3/2)|"),
        details=det)


def _gauss_quad(g, kinks) -> float:
    """``E g(Z)``, ``Z ~ N(0, 1)``, by SciPy's adaptive QUADPACK on the real line split at
    the kinks: a quadrature independent of :func:`gmtheory.hermite.expectation`."""
    from scipy import integrate

    edges = [-np.inf, *sorted(kinks or ()), np.inf]
    dens = lambda z: g(z) * np.exp(-0.5 * z * z) / np.sqrt(2 * np.pi)   # noqa: E731
    return float(sum(integrate.quad(dens, a, b, epsabs=1e-14, epsrel=1e-13, limit=200)[0]
                     for a, b in zip(edges[:-1], edges[1:], strict=True)))


@register_check(
    "hermite.03-effective-noise",
    "rho_eff = E f^2 + sigma^2 - c_1^2 (and - c_0^2 when centred) equals the variance of "
    "the residual y - c_1 z (y - c_0 - c_1 z) computed by quadrature of the residual itself.",
    "docs/topics/icl.md#the-nonlinearity-noise-equivalence",
)
def check_effective_noise():
    det, worst = {}, largest()
    sigma2 = 0.1
    for name in ("relu", "sign", "erf", "sin", "z3"):
        f, kinks = hcf.NUMPY[name], hcf.KINKS.get(name)
        # the residual side, independently: SciPy's quadrature for c0 = E f, c1 = E f z and
        # the residual variances (the formula side is gmtheory.hermite throughout)
        c0 = _gauss_quad(lambda z, f=f: f(z), kinks)
        c1 = _gauss_quad(lambda z, f=f: f(z) * z, kinks)
        direct = _gauss_quad(lambda z, f=f, c1=c1: (f(z) - c1 * z) ** 2, kinks) + sigma2
        direct_c = _gauss_quad(lambda z, f=f, c0=c0, c1=c1: (f(z) - c0 - c1 * z) ** 2,
                               kinks) + sigma2
        e = float(largest(abs(hermite.effective_noise(f, sigma2, kinks=kinks) - direct),
                          abs(hermite.effective_noise(f, sigma2, centred=True, kinks=kinks)
                              - direct_c)))
        det[name] = {"rho_eff": direct, "rho_eff_centred": direct_c, "error": e}
        worst = largest(worst, e)
    return Outcome(agreement(worst, 1e-10, "orthogonality of He_0, He_1 to the residual; "
                             "the formula by gmtheory.hermite's quadrature, the residual "
                             "variance by SciPy's QUADPACK (epsrel 1e-13): independent rules",
                             name="max |rho_eff formula - residual variance|"), details=det)
