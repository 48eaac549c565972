"""Symbolic derivation of the Gaussian tilt identity, Prop. 2.1 and eq. (3).

Theory: the proof of Prop. 2.1 (paper App. A.1),
docs/topics/operator.md#prop-21-softmax-gated-affine-experts.

Steps, each proved by reducing ``lhs - rhs`` to 0 with sympy:

1. **1-D tilt by integration.** ``int e^{u x} N(x; m, s^2) dx = e^{u m + s^2 u^2 / 2}`` and
   ``int x e^{u x} N(x; m, s^2) dx = (m + s^2 u) e^{u m + s^2 u^2/2}`` (sympy integrates).
2. **d-D tilt by completing the square** (d = 2, symbolic symmetric Gamma):
   ``u^T x - 1/2 (x-m)^T G^{-1} (x-m) = -1/2 (x-m-Gu)^T G^{-1} (x-m-Gu) + u^T m + 1/2 u^T G u``,
   so the tilted Gaussian is ``N(m + G u, G)`` with normaliser ``exp(u^T m + u^T G u / 2)``.
3. **Prop. 2.1** (M = 2, d = 2): summing numerators and denominators over components gives
   ``T = V sum_k alpha_k (m_k + G_k U z)`` with
   ``alpha = softmax(log pi_k + m_k^T U z + 1/2 (Uz)^T G_k (Uz))``.
4. **Eq. (3)**: with ``G_1 = G_2`` the gates reduce to ``softmax(log pi_k + m_k^T U z)``.

:func:`derive` returns the expressions; :func:`prop21_function` lambdifies the
closed form with ``modules="jax"`` so tests can compare it with the library;
:func:`write_markdown` prints every step as LaTeX into a Markdown file.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import sympy as sp

__all__ = ["derive", "prop21_function", "markdown", "write_markdown", "PROP21_ARGS"]

# argument order of the lambdified Prop. 2.1 expression
PROP21_ARGS = ("pi1", "m1", "m2", "G1", "G2", "U", "V", "z")


def _sym_matrix(name, symmetric=False):
    a, b, c, d = sp.symbols(f"{name}_11 {name}_12 {name}_21 {name}_22", real=True)
    if symmetric:
        return sp.Matrix([[a, b], [b, d]])
    return sp.Matrix([[a, b], [c, d]])


@lru_cache(maxsize=1)
def derive() -> dict:
    """Run the derivation; every ``*_residual`` entry is a sympy expression equal to 0."""
    out: dict = {}
    # 1. one-dimensional tilt, by integration
    x, u, m = sp.symbols("x u m", real=True)
    s = sp.symbols("s", positive=True)
    dens = sp.exp(-(x - m) ** 2 / (2 * s**2)) / sp.sqrt(2 * sp.pi * s**2)
    mgf = sp.simplify(sp.integrate(sp.exp(u * x) * dens, (x, -sp.oo, sp.oo), conds="none"))
    first = sp.simplify(sp.integrate(x * sp.exp(u * x) * dens, (x, -sp.oo, sp.oo), conds="none"))
    mgf_claim = sp.exp(u * m + s**2 * u**2 / 2)
    out["mgf_1d"] = mgf
    out["mgf_1d_residual"] = sp.simplify(mgf - mgf_claim)
    out["tilted_mean_1d"] = sp.simplify(first / mgf)
    out["tilted_mean_1d_residual"] = sp.simplify(first / mgf - (m + s**2 * u))

    # 2. d-dimensional tilt by completing the square (d = 2, symbolic SPD Gamma)
    G = _sym_matrix("G", symmetric=True)
    xv = sp.Matrix(sp.symbols("x_1 x_2", real=True))
    mv = sp.Matrix(sp.symbols("m_1 m_2", real=True))
    uv = sp.Matrix(sp.symbols("u_1 u_2", real=True))
    Gi = G.inv()
    lhs = (uv.T * xv)[0] - sp.Rational(1, 2) * ((xv - mv).T * Gi * (xv - mv))[0]
    shift = xv - mv - G * uv
    rhs = (-sp.Rational(1, 2) * (shift.T * Gi * shift)[0] + (uv.T * mv)[0]
           + sp.Rational(1, 2) * (uv.T * G * uv)[0])
    out["tilt_exponent_lhs"] = lhs
    out["tilt_exponent_rhs"] = rhs
    out["tilt_residual"] = sp.simplify(sp.expand(lhs - rhs))

    # 3. Prop. 2.1 for M = 2 components in d = 2
    pi1 = sp.symbols("pi_1", positive=True)
    m1 = sp.Matrix(sp.symbols("m1_1 m1_2", real=True))
    m2 = sp.Matrix(sp.symbols("m2_1 m2_2", real=True))
    G1, G2 = _sym_matrix("Ga", True), _sym_matrix("Gb", True)
    U, V = _sym_matrix("U"), _sym_matrix("V")
    zv = sp.Matrix(sp.symbols("z_1 z_2", real=True))
    uz = U * zv
    weights = (pi1, 1 - pi1)
    means, covs = (m1, m2), (G1, G2)
    # numerator / denominator of eq. (1) from the tilt identity (step 2)
    Z = [sp.exp((uz.T * mk)[0] + sp.Rational(1, 2) * (uz.T * Gk * uz)[0])
         for mk, Gk in zip(means, covs, strict=True)]
    num = sum((w * Zk * (mk + Gk * uz) for w, Zk, mk, Gk in zip(weights, Z, means, covs,
                                                               strict=True)), sp.zeros(2, 1))
    den = sum(w * Zk for w, Zk in zip(weights, Z, strict=True))
    T_ratio = V * num / den
    logits = [sp.log(w) + (uz.T * mk)[0] + sp.Rational(1, 2) * (uz.T * Gk * uz)[0]
              for w, mk, Gk in zip(weights, means, covs, strict=True)]
    alpha = [sp.exp(lk) / (sp.exp(logits[0]) + sp.exp(logits[1])) for lk in logits]
    T_closed = V * (alpha[0] * (m1 + G1 * uz) + alpha[1] * (m2 + G2 * uz))
    out["prop21"] = T_closed
    out["prop21_gates"] = alpha
    out["prop21_residual"] = sp.simplify(sp.powsimp(sp.expand_log(T_ratio - T_closed,
                                                                  force=True)))

    # 4. eq. (3): shared covariance, the quadratic offsets cancel
    alpha_shared_cov = [a.subs(dict(zip(G2, G1, strict=True))) for a in alpha]
    lin_logits = [sp.log(w) + (uz.T * mk)[0] for w, mk in zip(weights, means, strict=True)]
    alpha_eq3 = [sp.exp(lk) / (sp.exp(lin_logits[0]) + sp.exp(lin_logits[1]))
                 for lk in lin_logits]
    out["eq3_gates"] = alpha_eq3
    out["eq3_residual"] = sp.simplify(alpha_shared_cov[0] - alpha_eq3[0])
    out["symbols"] = {"pi1": pi1, "m1": m1, "m2": m2, "G1": G1, "G2": G2, "U": U, "V": V,
                      "z": zv}
    return out


def prop21_function():
    """Lambdified Prop. 2.1 (M = 2, d = 2) with ``modules="jax"``.

    Call as ``f(pi1, m1, m2, G1, G2, U, V, z)`` with ``m*``/``z`` of shape (2,) and
    matrices (2, 2); returns the output vector of shape (2,).
    """
    import jax.numpy as jnp

    d = derive()
    syms = d["symbols"]
    flat = [syms["pi1"], *syms["m1"], *syms["m2"], *[syms["G1"][i] for i in (0, 1, 3)],
            *[syms["G2"][i] for i in (0, 1, 3)], *syms["U"], *syms["V"], *syms["z"]]
    f = sp.lambdify(flat, list(d["prop21"]), modules="jax")

    def call(pi1, m1, m2, G1, G2, U, V, z):
        args = [pi1, *m1, *m2, G1[0, 0], G1[0, 1], G1[1, 1], G2[0, 0], G2[0, 1], G2[1, 1],
                *jnp.ravel(U), *jnp.ravel(V), *z]
        return jnp.stack([jnp.asarray(v) for v in f(*args)])

    return call


def write_markdown(path: str | Path) -> Path:
    """Write every step of the derivation as LaTeX (``$$ ... $$``) into ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown())
    return path


def markdown() -> str:
    """Every step of the derivation as Markdown with LaTeX (``$$ ... $$``)."""
    d = derive()
    L = sp.latex
    x, u, m, s = sp.symbols("x u m s")
    lines = [
        "# Derivation: Gaussian tilt, Prop. 2.1 and eq. (3)", "",
        "Generated by `gmtheory.derivations.attention_mgf` (sympy). Each residual is "
        "`simplify(lhs - rhs)`; all must be 0.", "",
        "## 1. One-dimensional tilt (sympy integration)", "",
        "$$\\int e^{u x}\\,\\mathcal N(x; m, s^2)\\,dx = " + L(d["mgf_1d"]) + "$$", "",
        f"Residual against $e^{{um + s^2u^2/2}}$: ${L(d['mgf_1d_residual'])}$.", "",
        "$$\\frac{\\int x e^{u x}\\,\\mathcal N\\,dx}{\\int e^{u x}\\,\\mathcal N\\,dx} = "
        + L(d["tilted_mean_1d"]) + "$$", "",
        f"Residual against $m + s^2 u$: ${L(d['tilted_mean_1d_residual'])}$.", "",
        "## 2. Tilt in d = 2 by completing the square", "",
        "$$u^\\top x - \\tfrac12 (x-m)^\\top G^{-1} (x-m) = -\\tfrac12 (x-m-Gu)^\\top G^{-1}"
        "(x-m-Gu) + u^\\top m + \\tfrac12 u^\\top G u$$", "",
        f"Residual (symbolic symmetric $G$): ${L(d['tilt_residual'])}$. Hence "
        "$\\mathbb E[e^{u^\\top X}] = e^{u^\\top m + u^\\top G u/2}$ and "
        "$\\mathbb E[X e^{u^\\top X}] = (m + G u)\\,\\mathbb E[e^{u^\\top X}]$.", "",
        "## 3. Prop. 2.1 (M = 2, d = 2)", "",
        "Gates:", "",
        "$$\\alpha_1 = " + L(d["prop21_gates"][0]) + "$$", "",
        "Residual of (ratio of tilted sums) − (gated experts), per coordinate: $"
        + L(d["prop21_residual"].T) + "$.", "",
        "## 4. Eq. (3): shared covariance", "",
        "$$\\alpha_1\\big|_{G_1 = G_2} = " + L(d["eq3_gates"][0]) + "$$", "",
        f"Residual: ${L(d['eq3_residual'])}$: the quadratic offsets cancel.", "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(write_markdown(sys.argv[1] if len(sys.argv) > 1 else "derivations.md").read_text())
