"""Symbolic derivations for denoising (paper Section 4, docs/topics/denoising.md).

Model: ``X ~ sum_k pi_k N(m_k, Gamma)``, ``Z = X + eps``, ``eps ~ N(0, xi^2 I)``,
``S = Gamma + xi^2 I``.  Every step reduces ``lhs - rhs`` to 0 with sympy (d = 2 or 3
with symbolic matrices, M = 2 components):

1. eq. (10) from Bayes' rule: the 1-D posterior by integration, the d-D posterior by
   completing the square, the posterior weights as a softmax, and Tweedie's formula;
2. eq. (11) for ``Gamma = gamma^2 I`` and equal-norm means (the offsets cancel);
3. the linear optimum ``A* = Sigma_X (Sigma_X + xi^2 I)^{-1}`` and ``R(A*)`` from the
   normal equations of ``R(A) = E|X - A Z|^2``;
4. ``R(A) - R(f*) = E|A Z - f*(Z)|^2`` (orthogonality of the posterior mean);
5. the App. C.6 two-head constructions satisfy (C1)–(C3) and sum to ``f*``;
6. from Prop. C.4's conditions, one head is exact iff ``gamma^2 = xi^2``;
7. Prop. 4.4: the residual two-head read-out equals ``f*``;
8. Prop. 4.3: ``f*`` on the line ``c + u delta`` is ``u -> tanh(lambda^2 u)``, the
   stability ``lambda^2 (1 - u^2) < 1`` of its positive root, ``u_lambda = 0`` for
   ``lambda <= 1`` and the ``sqrt(3/(2n))`` law at ``lambda = 1``.

:func:`derive` returns the expressions; :func:`bayes_denoiser_function`,
:func:`two_head_function` and :func:`linear_optimum_function` lambdify the closed forms
for the tests against :mod:`gmtheory.denoising`.

Length: over 600 lines because it is Section 4 whole: ten sympy steps that
:func:`derive` runs into one dictionary, whose stored symbols the lambdified forms read,
as every derivations module has one ``derive()`` for its section of the paper.
"""

from __future__ import annotations

from functools import lru_cache

import sympy as sp

from ._common import L, cancel, circle_point, residual_lines, sym_matrix, sym_vector

__all__ = ["derive", "markdown", "bayes_denoiser_function", "two_head_function",
           "opposite_heads_function", "linear_optimum_function", "transition_map"]

HALF = sp.Rational(1, 2)


def _exp_simplify(e):
    return sp.simplify(sp.powsimp(sp.expand(e.rewrite(sp.exp)), force=True))


def _sigmoid(x):
    return 1 / (1 + sp.exp(-x))


def _expect_quadratic(expr, X, e, mean, second, xi2):
    """``E expr`` for a polynomial of degree <= 2 in the entries of ``X`` and ``e`` with
    ``E X = mean``, ``E X X^T = second``, ``E e = 0``, ``E e e^T = xi2 I`` and ``X``
    independent of ``e``."""
    gens = [*X, *e]
    poly = sp.Poly(sp.expand(expr), *gens)
    n = len(X)
    total = sp.Integer(0)
    for monom, coeff in poly.terms():
        if sum(monom) > 2:
            raise ValueError("degree > 2")
        idx = [i for i, p in enumerate(monom) for _ in range(p)]
        if not idx:
            total += coeff
        elif len(idx) == 1:
            i = idx[0]
            total += coeff * (mean[i] if i < n else 0)
        else:
            i, j = idx
            if i < n and j < n:
                total += coeff * second[i, j]
            elif i >= n and j >= n:
                total += coeff * (xi2 if i == j else 0)
            else:
                total += 0   # E X_i e_j = E X_i E e_j = 0
    return total


# --------------------------------------------------------------------------- step 1
def _eq10(out):
    # 1-D posterior by integration, in the offset y = x - m (w = z - m)
    y, w = sp.symbols("y w", real=True)
    g, xi = sp.symbols("gamma xi", positive=True)
    prior = sp.exp(-y**2 / (2 * g**2)) / sp.sqrt(2 * sp.pi * g**2)
    lik = sp.exp(-(w - y) ** 2 / (2 * xi**2)) / sp.sqrt(2 * sp.pi * xi**2)
    joint = sp.expand(prior * lik)
    evidence = sp.simplify(sp.integrate(joint, (y, -sp.oo, sp.oo), conds="none"))
    first = sp.simplify(sp.integrate(y * joint, (y, -sp.oo, sp.oo), conds="none"))
    s1 = g**2 + xi**2
    out["posterior_1d_evidence"] = evidence
    out["evidence_1d_residual"] = sp.simplify(
        evidence - sp.exp(-w**2 / (2 * s1)) / sp.sqrt(2 * sp.pi * s1))
    out["posterior_mean_1d"] = sp.simplify(first / evidence)
    out["posterior_mean_1d_residual"] = sp.simplify(first / evidence - g**2 / s1 * w)

    # d = 2, symbolic SPD Gamma: completing the square in x
    G = sym_matrix("Gamma", symmetric=True)
    xv, zv, mv = sym_vector("x"), sym_vector("z"), sym_vector("m")
    xi2 = xi**2
    eye = sp.eye(2)
    S = G + xi2 * eye
    Si, Gi = S.inv(), G.inv()
    P = Gi + eye / xi2                                   # posterior precision
    mu_post = P.inv() * (Gi * mv + zv / xi2)
    lhs = (-HALF * ((xv - mv).T * Gi * (xv - mv))[0]
           - HALF * ((zv - xv).T * (zv - xv))[0] / xi2)
    rhs = (-HALF * ((xv - mu_post).T * P * (xv - mu_post))[0]
           - HALF * ((zv - mv).T * Si * (zv - mv))[0])
    out["complete_square_residual"] = cancel(lhs - rhs)
    claim = G * Si * zv + xi2 * Si * mv
    out["posterior_mean_residual"] = cancel(mu_post - claim)
    out["shrinkage_identity_residual"] = cancel(eye - G * Si - xi2 * Si)

    # posterior weights: the Gaussian log-density minus the softmax logit is k-independent
    Pm = sym_matrix("P", symmetric=True)                 # S^{-1}, symbolic
    m1, m2 = sym_vector("m1"), sym_vector("m2")
    pi1 = sp.Symbol("pi_1", positive=True)
    quad = [-HALF * ((zv - mk).T * Pm * (zv - mk))[0] for mk in (m1, m2)]
    logit = [(mk.T * Pm * zv)[0] - HALF * (mk.T * Pm * mk)[0] for mk in (m1, m2)]
    common = -HALF * (zv.T * Pm * zv)[0]
    out["logit_residual"] = [sp.expand(q - lg - common) for q, lg in zip(quad, logit,
                                                                          strict=True)]
    weights = (pi1, 1 - pi1)
    dens = [w * sp.exp(q) for w, q in zip(weights, quad, strict=True)]
    beta1_bayes = dens[0] / (dens[0] + dens[1])
    lg = [sp.log(w) + t for w, t in zip(weights, logit, strict=True)]
    beta1_softmax = sp.exp(lg[0]) / (sp.exp(lg[0]) + sp.exp(lg[1]))
    out["eq10_gates"] = beta1_softmax
    out["posterior_weight_residual"] = sp.simplify(sp.powsimp(sp.expand(
        beta1_bayes - beta1_softmax), force=True))

    # Tweedie: z + xi^2 grad log p_Z = eq. (10) (explicit S^{-1} of the symbolic Gamma)
    E1, E2 = sp.symbols("E_1 E_2", positive=True)
    q_expl = [-HALF * ((zv - mk).T * Si * (zv - mk))[0] for mk in (m1, m2)]
    logp = sp.log(pi1 * sp.exp(q_expl[0]) + (1 - pi1) * sp.exp(q_expl[1]))
    grad = sp.Matrix([sp.diff(logp, zi) for zi in zv])
    grad = grad.subs({sp.exp(q_expl[0]): E1, sp.exp(q_expl[1]): E2})
    b1 = pi1 * E1 / (pi1 * E1 + (1 - pi1) * E2)
    f_star = G * Si * zv + xi2 * Si * (b1 * m1 + (1 - b1) * m2)
    out["eq10"] = f_star
    out["tweedie_residual"] = cancel(zv + xi2 * grad - f_star)
    out["_eq10_symbols"] = {"pi1": pi1, "m1": m1, "m2": m2, "Gamma": G, "xi": xi, "z": zv}
    # the function the library implements, with the softmax gates
    f10 = G * Si * zv + xi2 * Si * (m1 * sp.Symbol("beta_1") + m2 * (1 - sp.Symbol("beta_1")))
    logits = [sp.log(w) + (mk.T * Si * zv)[0] - HALF * (mk.T * Si * mk)[0]
              for w, mk in zip(weights, (m1, m2), strict=True)]
    out["_eq10_callable"] = (f10, logits)


# --------------------------------------------------------------------------- step 2
def _eq11(out):
    g, xi, r = sp.symbols("gamma xi r", positive=True)
    t1, t2 = sp.symbols("t_1 t_2", real=True)
    m1, m2 = circle_point(t1, r), circle_point(t2, r)    # equal norms
    s = g**2 + xi**2
    G = g**2 * sp.eye(2)
    Si = (G + xi**2 * sp.eye(2)).inv()
    offsets = [-HALF * (mk.T * Si * mk)[0] for mk in (m1, m2)]
    out["eq11_offset_residual"] = sp.simplify(offsets[0] - offsets[1])
    out["eq11_linear_residual"] = sp.simplify(G * Si - g**2 / s * sp.eye(2))
    out["eq11_barycentre_residual"] = sp.simplify(xi**2 * Si - xi**2 / s * sp.eye(2))
    a1, a2, b1_, b2_ = sp.symbols("a_1 a_2 b_1 b_2", real=True)
    u1, u2 = sp.Matrix([a1, a2]), sp.Matrix([b1_, b2_])
    out["eq11_unequal_offset_gap"] = sp.factor(
        -HALF * ((u1.T * Si * u1)[0] - (u2.T * Si * u2)[0]))


# --------------------------------------------------------------------------- step 3
def _linear_optimum(out):
    xi = sp.Symbol("xi", positive=True)
    xi2 = xi**2
    Sx = sym_matrix("Sigma", symmetric=True)
    A = sym_matrix("A")
    X, e = sym_vector("X"), sym_vector("e")
    mean = sym_vector("mu")
    resid = X - A * (X + e)
    R = _expect_quadratic((resid.T * resid)[0], X, e, mean, Sx, xi2)
    eye = sp.eye(2)
    claim = ((eye - A) * Sx * (eye - A).T).trace() + xi2 * (A * A.T).trace()
    out["risk_linear_residual"] = sp.expand(R - claim)
    # second moment of the mixture from the Gaussian MGF (M = 2)
    u = sym_vector("u")
    G = sym_matrix("Gamma", symmetric=True)
    m1, m2 = sym_vector("m1"), sym_vector("m2")
    pi1 = sp.Symbol("pi_1", positive=True)
    mgf = sum((w * sp.exp((u.T * mk)[0] + HALF * (u.T * G * u)[0])
               for w, mk in ((pi1, m1), (1 - pi1, m2))), sp.Integer(0))
    second = sp.Matrix(2, 2, lambda i, j: sp.diff(mgf, u[i], u[j]).subs({u[0]: 0, u[1]: 0}))
    out["second_moment_residual"] = sp.simplify(
        second - (G + pi1 * m1 * m1.T + (1 - pi1) * m2 * m2.T))
    # normal equations
    a = list(A)
    grad = [sp.diff(R, ai) for ai in a]
    sol = sp.solve(grad, a, dict=True)[0]
    A_star = A.subs(sol)
    claim_A = Sx * (Sx + xi2 * eye).inv()
    out["A_star"] = claim_A.applyfunc(sp.factor)
    out["normal_equations_residual"] = sp.simplify(A_star - claim_A)
    out["risk_at_optimum_residual"] = sp.simplify(
        R.subs(sol) - (Sx.trace() - (Sx * (Sx + xi2 * eye).inv() * Sx).trace()))
    H = sp.hessian(R, a)
    out["hessian_residual"] = sp.simplify(
        H - 2 * sp.kronecker_product(eye, Sx + xi2 * eye))
    out["_linear_symbols"] = {"Sigma": Sx, "xi": xi}


# --------------------------------------------------------------------------- step 4
def _orthogonality(out):
    # any finite joint law of (X, Z) in R^2: support {x_1, x_2} x {z_1, z_2}
    p = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"p_{i + 1}{j + 1}", positive=True))
    xs = [sym_vector(f"x{i + 1}") for i in range(2)]
    zs = [sym_vector(f"z{j + 1}") for j in range(2)]
    gs = [sym_vector(f"g{j + 1}") for j in range(2)]
    A = sym_matrix("A")
    pz = [p[0, j] + p[1, j] for j in range(2)]
    fstar = [(p[0, j] * xs[0] + p[1, j] * xs[1]) / pz[j] for j in range(2)]
    sq = lambda v: (v.T * v)[0]
    cross = sum((p[i, j] * ((xs[i] - fstar[j]).T * gs[j])[0]
                 for i in range(2) for j in range(2)), sp.Integer(0))
    out["orthogonality_residual"] = cancel(cross)
    RA = sum((p[i, j] * sq(xs[i] - A * zs[j]) for i in range(2) for j in range(2)),
             sp.Integer(0))
    Rf = sum((p[i, j] * sq(xs[i] - fstar[j]) for i in range(2) for j in range(2)),
             sp.Integer(0))
    gap = sum((pz[j] * sq(A * zs[j] - fstar[j]) for j in range(2)), sp.Integer(0))
    out["excess_identity_residual"] = cancel(RA - Rf - gap)

    # the denoising law with one component (f* affine): the same identity in closed form
    xi = sp.Symbol("xi", positive=True)
    G = sym_matrix("Gamma", symmetric=True)
    m = sym_vector("m")
    X, e = sym_vector("X"), sym_vector("e")
    S = G + xi**2 * sp.eye(2)
    Si = S.inv()
    Zv = X + e
    f = G * Si * Zv + xi**2 * Si * m
    second = G + m * m.T
    E = lambda expr: _expect_quadratic(expr, X, e, m, second, xi**2)
    RA = E(sq(X - A * Zv))
    Rf = E(sq(X - f))
    gap = E(sq(A * Zv - f))
    out["excess_gaussian_residual"] = cancel(RA - Rf - gap)
    out["bayes_risk_gaussian_residual"] = cancel(Rf - xi**2 * (G * Si).trace())


# --------------------------------------------------------------------------- step 5
def _two_heads(out):
    g, xi = sp.symbols("gamma xi", positive=True)
    g2, x2 = g**2, xi**2
    s = g2 + x2
    a = x2 / s
    eye = sp.eye(3)
    # rotation-covariant construction: WLOG m1 = (p, 0, 0), m2 = (q, w, 0), w != 0
    # (U -> Q U Q^T, V -> Q V Q^T for a rotation Q); e_3 spans the complement of E
    p_, q_ = sp.symbols("p q", real=True)
    w_ = sp.Symbol("w", positive=True)
    m1, m2 = sp.Matrix([p_, 0, 0]), sp.Matrix([q_, w_, 0])
    M = m1.row_join(m2)
    Mp = (M.T * M).inv() * M.T
    PE = M * Mp
    dm = m1 - m2
    V1 = a * m1 * Mp[0, :] + a / 2 * (eye - PE)
    V2 = a * m2 * Mp[1, :] + a / 2 * (eye - PE)
    c0 = g2 / (x2 * s)
    c1 = (x2 - g2) / (x2 * s)
    U1 = c0 * eye + c1 * m2 * dm.T / (m2.T * dm)[0]
    U2 = c0 * eye + c1 * m1 * dm.T / (m1.T * dm)[0]
    simp = cancel
    out["C1_residual"] = [simp(U.T * dm - dm / s) for U in (U1, U2)]
    out["C2_residual"] = [simp(V1 * m1 - a * m1), simp(V1 * m2), simp(V2 * m1),
                          simp(V2 * m2 - a * m2)]
    out["C3_residual"] = simp(s * (V1 * U1 + V2 * U2) - g2 / s * eye)
    # exactness: each gate equals beta by (C1); then the sum of the heads is f*
    beta, pi1 = sp.symbols("beta pi_1", positive=True)
    z = sym_vector("z", 3)
    gate_gap = [simp((U * z).T * dm - z.T * dm / s) for U in (U1, U2)]
    out["two_head_gate_residual"] = gate_gap
    bary = beta * m1 + (1 - beta) * m2
    heads = sum((V * (s * eye) * U * z + V * bary for U, V in ((U1, V1), (U2, V2))),
                sp.zeros(3, 1))
    f11 = g2 / s * z + a * bary
    out["two_head_exact_residual"] = simp(heads - f11)
    out["_two_head"] = {"position": (p_, q_, w_), "gamma": g, "xi": xi,
                        "heads": ((U1, V1), (U2, V2))}



def _opposite_heads(out):
    g, xi = sp.symbols("gamma xi", positive=True)
    g2, x2 = g**2, xi**2
    s = g2 + x2
    a = x2 / s
    eye = sp.eye(3)
    beta = sp.Symbol("beta", positive=True)
    z = sym_vector("z", 3)
    simp = cancel
    # opposite means m1 = -m2 = m (d = 3, rational rotation for the unit e, n)
    # rotation covariance again: WLOG e = m/|m| = e_1 and the unit normal n = e_2
    r = sp.Symbol("r", positive=True)
    e, n = eye[:, 0], eye[:, 1]
    m = r * e
    P = e * e.T
    Qp = eye - P
    A_ = x2 / (2 * s) * P + g2 / (2 * s) * Qp
    B_ = (g2 - x2) / (2 * s) * e * n.T
    Uo = [(eye + n * e.T) / s, (eye - n * e.T) / s]
    Vo = [A_ + B_, A_ - B_]
    dmo = 2 * m
    out["opposite_C1_residual"] = [simp(U.T * dmo - dmo / s) for U in Uo]
    out["opposite_C2prime_residual"] = [simp(V * m - x2 / (2 * s) * m) for V in Vo]
    out["opposite_C3_residual"] = simp(s * (Vo[0] * Uo[0] + Vo[1] * Uo[1]) - g2 / s * eye)
    bary_o = beta * m + (1 - beta) * (-m)
    heads_o = sum((V * (s * eye) * U * z + V * bary_o for U, V in zip(Uo, Vo, strict=True)),
                  sp.zeros(3, 1))
    out["opposite_exact_residual"] = simp(heads_o - (g2 / s * z + a * bary_o))
    out["_opposite"] = {"r": r, "gamma": g, "xi": xi,
                        "heads": tuple(zip(Uo, Vo, strict=True)), "e": e, "n": n}


def _degenerate(out):
    """Remark 4.2 / Prop. C.3: gamma = 0, f* = beta_1 m1 + beta_2 m2 (d = 2)."""
    xi = sp.Symbol("xi", positive=True)
    x2 = xi**2
    beta = sp.Symbol("beta", positive=True)
    z = sym_vector("z")
    p_, q_ = sp.symbols("p q", real=True)
    w_ = sp.Symbol("w", positive=True)
    m1, m2 = sp.Matrix([p_, 0]), sp.Matrix([q_, w_])     # independent, canonical position
    M = m1.row_join(m2)
    Mi = M.inv()
    dm = m1 - m2
    V1, V2 = m1 * Mi[0, :], m2 * Mi[1, :]
    U1 = m2 * dm.T / (x2 * (m2.T * dm)[0])
    U2 = m1 * dm.T / (x2 * (m1.T * dm)[0])
    out["degenerate_conditions_residual"] = cancel([
        V1 * m1 - m1, V1 * m2, V2 * m1, V2 * m2 - m2, V1 * U1, V2 * U2,
        U1.T * dm - dm / x2, U2.T * dm - dm / x2])
    bary = beta * m1 + (1 - beta) * m2
    heads = sum((x2 * V * U * z + V * bary for U, V in ((U1, V1), (U2, V2))), sp.zeros(2, 1))
    out["degenerate_two_head_residual"] = cancel(heads - bary)
    # opposite means m1 = -m2 = m: one head, n orthogonal to m
    r, nu = sp.symbols("r nu", positive=True)
    m, n = sp.Matrix([r, 0]), sp.Matrix([0, nu])
    mm, nn = (m.T * m)[0], (n.T * n)[0]
    U = (m + n) * m.T / (x2 * mm)
    V = m * (m.T / mm - n.T / nn)
    out["degenerate_opposite_conditions_residual"] = cancel([V * m - m, V * n + m, V * U,
                                                             U.T * m - m / x2])
    bary_o = beta * m - (1 - beta) * m
    out["degenerate_one_head_residual"] = cancel(x2 * V * U * z + V * bary_o - bary_o)


# --------------------------------------------------------------------------- step 6
def _single_head(out):
    g2, x2 = sp.symbols("gamma^2 xi^2", positive=True)
    s = g2 + x2
    a = x2 / s
    q = g2 / s**2
    eye = sp.eye(2)
    m1, m2 = sym_vector("m1"), sym_vector("m2")
    dm = m1 - m2
    U, V = sym_matrix("U"), sym_matrix("V")
    # condition (1): s V U = gamma^2/s I  =>  V = q U^{-1}
    v_sol = sp.solve(list(s * V * U - g2 / s * eye), list(V), dict=True)[0]
    out["single_head_V_residual"] = sp.simplify(V.subs(v_sol) - q * U.inv())
    # condition (3) with V = q U^{-1}, multiplied by U: q m_i = a U m_i  (linear in U)
    eqs = [*(q * m1 - a * U * m1), *(q * m2 - a * U * m2)]
    u_sol = sp.solve(eqs, list(U), dict=True)[0]
    U_sol = sp.simplify(U.subs(u_sol))
    out["single_head_U"] = U_sol
    out["single_head_U_residual"] = sp.simplify(U_sol - g2 / (x2 * s) * eye)
    # condition (2): dm^T U^T dm = |dm|^2 / s; with U dm = (q/a) dm this is a scalar eq.
    cond = sp.simplify(((dm.T * U_sol * dm)[0] - (dm.T * dm)[0] / s) / (dm.T * dm)[0])
    out["single_head_condition"] = sp.factor(cond)
    sols = sp.solve(cond, g2)
    out["single_head_solutions"] = sols
    out["single_head_solution_residual"] = [sp.simplify(sols[0] - x2)] if len(sols) == 1 \
        else [sp.Integer(len(sols))]
    # exchanged orientation: V m1 = a m2, V m2 = a m1, U^T dm = -dm / s
    eqs_x = [*(q * m2 - a * U * m1), *(q * m1 - a * U * m2)]
    ux = sp.solve(eqs_x, list(U), dict=True)[0]
    Ux = sp.simplify(U.subs(ux))
    cond_x = sp.simplify(((dm.T * Ux * dm)[0] + (dm.T * dm)[0] / s) / (dm.T * dm)[0])
    sols_x = sp.solve(cond_x, g2)
    out["single_head_exchanged_solutions"] = sols_x
    out["single_head_exchanged_residual"] = [sp.simplify(sols_x[0] - x2)] \
        if len(sols_x) == 1 else [sp.Integer(len(sols_x))]
    # converse: at gamma^2 = xi^2, U = S^{-1}, V = I/2 meet (1)-(3)
    at = {g2: x2}
    Uc, Vc = eye / (2 * x2), eye / 2
    out["single_head_converse_residual"] = [
        sp.simplify((s * Vc * Uc - g2 / s * eye).subs(at)),
        sp.simplify((Uc.T * dm - dm / s).subs(at)),
        sp.simplify((Vc * m1 - a * m1).subs(at)), sp.simplify((Vc * m2 - a * m2).subs(at))]


# --------------------------------------------------------------------------- step 7
def _residual_icl(out):
    g, xi = sp.symbols("gamma xi", positive=True)
    s = g**2 + xi**2
    a = xi**2 / s
    eye = sp.eye(2)
    m1, m2 = sym_vector("m1"), sym_vector("m2")
    z = sym_vector("z")
    beta = sp.Symbol("beta", positive=True)
    U1, V1 = eye / s, a * eye
    out["prop44_gate_residual"] = sp.simplify((m1 - m2).T * U1 * z - (m1 - m2).T * z / s)
    head1 = V1 * (s * eye) * U1 * z + V1 * (beta * m1 + (1 - beta) * m2)
    head2 = sp.zeros(2, 1)             # U2 = V2 = 0: constant gate, zero value
    W = eye.row_join(-2 * a * eye)
    out_vec = W * (z + head1).col_join(z + head2)
    f11 = g**2 / s * z + a * (beta * m1 + (1 - beta) * m2)
    out["prop44_output"] = sp.simplify(out_vec)
    out["prop44_residual"] = sp.simplify(out_vec - f11)


# --------------------------------------------------------------------------- step 8
def _transition(out):
    xi, r = sp.symbols("xi r", positive=True)
    t1, t2 = sp.symbols("t_1 t_2", real=True)
    m1, m2 = circle_point(t1, r), circle_point(t2, r)
    z = sym_vector("z")
    c, delta = (m1 + m2) / 2, (m1 - m2) / 2
    out["midpoint_orthogonal_residual"] = cancel((c.T * delta)[0])
    # eq. (11) with gamma = 0, pi = 1/2: f* = beta_1 m1 + beta_2 m2, beta_1 = sigma(logit)
    logit = ((m1 - m2).T * z)[0] / xi**2
    arg = ((z - c).T * delta)[0] / xi**2
    out["tanh_argument_residual"] = cancel(logit - 2 * arg)      # uses <c, delta> = 0
    y = sp.Symbol("y", real=True)
    out["sigmoid_tanh_residual"] = _exp_simplify(2 * _sigmoid(2 * y) - 1 - sp.tanh(y))
    tau = sp.Symbol("tau", real=True)                            # tau = tanh(arg)
    beta1 = (1 + tau) / 2
    out["tanh_form_residual"] = cancel(beta1 * m1 + (1 - beta1) * m2 - (c + tau * delta))
    u, lam = sp.Symbol("u", real=True), sp.Symbol("lambda", positive=True)
    on_line = arg.subs({z[0]: c[0] + u * delta[0], z[1]: c[1] + u * delta[1]},
                       simultaneous=True)
    out["line_map_residual"] = cancel(on_line - u * (delta.T * delta)[0] / xi**2)
    # the one-dimensional map F(u) = tanh(lambda^2 u)
    F = sp.tanh(lam**2 * u)
    dF = sp.diff(F, u)
    out["derivative_residual"] = sp.simplify(dF - lam**2 * (1 - F**2))
    gfun = F - u
    g2 = sp.diff(gfun, u, 2)
    out["concavity_residual"] = sp.simplify(
        g2 + 2 * lam**4 * sp.tanh(lam**2 * u) * (1 - sp.tanh(lam**2 * u) ** 2))
    out["F_prime_at_0"] = dF.subs(u, 0)
    out["slope_at_0_residual"] = sp.simplify(dF.subs(u, 0) - lam**2)
    # at lambda = 1: 1/tanh(u)^2 - 1/u^2 = 2/3 + O(u^2)  =>  1/u_n^2 ~ 2n/3
    ser = sp.series(1 / sp.tanh(u) ** 2 - 1 / u**2, u, 0, 2).removeO()
    out["critical_series"] = ser
    out["critical_series_residual"] = sp.simplify(ser - sp.Rational(2, 3))
    n = sp.Symbol("n", positive=True)
    out["critical_law_residual"] = sp.simplify(
        sp.limit(sp.sqrt(3 / (2 * n)) * sp.sqrt(2 * n / 3 + sp.Symbol("C", positive=True)),
                 n, sp.oo) - 1)
    out["_transition"] = {"F": F, "u": u, "lambda": lam}


@lru_cache(maxsize=1)
def derive() -> dict:
    """Run every step; each ``*_residual`` entry is 0.  Keys starting with ``_`` hold the
    symbols used by the lambdified functions."""
    out: dict = {}
    for step in (_eq10, _eq11, _linear_optimum, _orthogonality, _two_heads, _opposite_heads,
                 _degenerate, _single_head,
                 _residual_icl, _transition):
        step(out)
    return out


@lru_cache(maxsize=1)
def single_head_solutions():
    """Step 6 alone: ``(solutions, xi2)`` — the values of ``gamma^2 > 0`` for which Prop.
    C.4's conditions (1)-(3) admit one exact head, and the symbol ``xi^2`` (check
    ``denoising.28`` requires the list to be exactly ``[xi^2]``)."""
    out: dict = {}
    _single_head(out)
    sols = out["single_head_solutions"]
    xi2 = next(iter(set().union(*(e.free_symbols for e in sols)))) if sols else None
    return sols, xi2


# ------------------------------------------------------------------- lambdified forms
def bayes_denoiser_function():
    """Eq. (10) (M = 2, d = 2) lambdified with numpy: ``f(pi1, m1, m2, Gamma, xi, z)``
    with ``m*``, ``z`` of shape (2,) and ``Gamma`` (2, 2); returns shape (2,)."""
    import numpy as np

    d = derive()
    sy = d["_eq10_symbols"]
    f10, logits = d["_eq10_callable"]
    G = sy["Gamma"]
    args = [sy["pi1"], *sy["m1"], *sy["m2"], G[0, 0], G[0, 1], G[1, 1], sy["xi"], *sy["z"]]
    lin = sp.lambdify(args + [sp.Symbol("beta_1")], list(f10), "numpy")
    lg = sp.lambdify(args, logits, "numpy")

    def call(pi1, m1, m2, Gamma, xi, z):
        a = [pi1, *m1, *m2, Gamma[0, 0], Gamma[0, 1], Gamma[1, 1], xi, *z]
        l1, l2 = lg(*a)
        b1 = 1.0 / (1.0 + np.exp(l2 - l1))
        return np.array(lin(*a, b1), dtype=float)

    return call


def two_head_function():
    """The non-collinear two-head construction lambdified in the canonical position
    ``m1 = (p, 0, 0)``, ``m2 = (q, w, 0)`` (d = 3): ``f(p, q, w, gamma, xi)`` ->
    ``[(U1, V1), (U2, V2)]``; rotate (``Q U Q^T``) for other positions."""
    import numpy as np

    d = derive()["_two_head"]
    args = [*d["position"], d["gamma"], d["xi"]]
    mats = [M for head in d["heads"] for M in head]
    f = sp.lambdify(args, mats, "numpy")

    def call(p, q, w, gamma, xi):
        U1, V1, U2, V2 = (np.array(M, dtype=float) for M in f(p, q, w, gamma, xi))
        return [(U1, V1), (U2, V2)]

    return call


def opposite_heads_function():
    """The opposite-means construction lambdified for ``m = r e_1``, ``n = e_2`` (d = 3):
    ``f(r, gamma, xi) -> [(U1, V1), (U2, V2)]``; rotate for other positions."""
    import numpy as np

    d = derive()["_opposite"]
    mats = [M for head in d["heads"] for M in head]
    f = sp.lambdify([d["r"], d["gamma"], d["xi"]], mats, "numpy")

    def call(r, gamma, xi):
        U1, V1, U2, V2 = (np.array(M, dtype=float) for M in f(r, gamma, xi))
        return [(U1, V1), (U2, V2)]

    return call


def linear_optimum_function():
    """``A* = Sigma_X (Sigma_X + xi^2 I)^{-1}`` (d = 2) lambdified: ``f(Sigma_X, xi)``."""
    import numpy as np

    d = derive()
    sy = d["_linear_symbols"]
    S = sy["Sigma"]
    f = sp.lambdify([S[0, 0], S[0, 1], S[1, 1], sy["xi"]], d["A_star"], "numpy")
    return lambda Sx, xi: np.array(f(Sx[0, 0], Sx[0, 1], Sx[1, 1], xi), dtype=float)


def transition_map():
    """``(F, u, lambda)``: the derived map ``F(u) = tanh(lambda^2 u)`` of Prop. 4.3."""
    t = derive()["_transition"]
    return t["F"], t["u"], t["lambda"]


# ------------------------------------------------------------------------- Markdown
def markdown() -> str:
    d = derive()
    lines = [
        "# Derivation: denoising (paper Section 4; `docs/topics/denoising.md`)", "",
        "Generated by `gmtheory.derivations.denoising` (sympy). Model: "
        "$X \\sim \\sum_k \\pi_k\\,\\mathcal N(m_k, \\Gamma)$, $Z = X + \\varepsilon$, "
        "$\\varepsilon \\sim \\mathcal N(0, \\xi^2 I)$, $S = \\Gamma + \\xi^2 I$. Every "
        "residual is `lhs - rhs` reduced by sympy (`cancel` for rational expressions, "
        "`simplify` otherwise) and must be 0 (table at the end).", "",
        "## 1. Eq. (10) from Bayes' rule", "",
        "**One dimension, by integration.** With prior $\\mathcal N(m, \\gamma^2)$ and "
        "likelihood $\\mathcal N(z; x, \\xi^2)$, sympy integrates the evidence and the "
        "first moment (offsets $y = x - m$, $w = z - m$):", "",
        "$$p(z) = " + L(d["posterior_1d_evidence"]) + ",\\qquad \\mathbb E[X - m\\mid Z=z] = "
        + L(d["posterior_mean_1d"]) + "$$", "",
        "i.e. $\\mathcal N(z; m, \\gamma^2+\\xi^2)$ and $m + \\frac{\\gamma^2}{\\gamma^2+\\xi^2}"
        "(z-m)$ (residuals `evidence_1d_residual`, `posterior_mean_1d_residual`).", "",
        "**d = 2, completing the square** (symbolic symmetric $\\Gamma$):", "",
        "$$-\\tfrac12 (x-m)^\\top\\Gamma^{-1}(x-m) - \\tfrac{1}{2\\xi^2}\\|z-x\\|^2 = "
        "-\\tfrac12 (x-\\mu)^\\top P (x-\\mu) - \\tfrac12 (z-m)^\\top S^{-1}(z-m),$$", "",
        "$P = \\Gamma^{-1} + \\xi^{-2} I$, $\\mu = P^{-1}(\\Gamma^{-1}m + \\xi^{-2}z)$ "
        "(`complete_square_residual`). So $Z \\mid C=k \\sim \\mathcal N(m_k, S)$ and "
        "$\\mathbb E[X\\mid Z=z, C=k] = \\mu = \\Gamma S^{-1} z + \\xi^2 S^{-1} m_k$ "
        "(`posterior_mean_residual`), using $I - \\Gamma S^{-1} = \\xi^2 S^{-1}$ "
        "(`shrinkage_identity_residual`).", "",
        "**Posterior weights.** $\\log \\mathcal N(z; m_k, S) = m_k^\\top S^{-1}z - "
        "\\tfrac12 m_k^\\top S^{-1} m_k - \\tfrac12 z^\\top S^{-1} z + \\text{const}$ "
        "(`logit_residual`); the last two terms do not depend on $k$ and cancel in Bayes' "
        "rule, so $\\beta_k(z) = P(C=k\\mid Z=z)$ is the softmax", "",
        "$$\\beta_k(z) = \\frac{\\pi_k e^{\\ell_k(z)}}{\\sum_l \\pi_l e^{\\ell_l(z)}},"
        "\\qquad \\ell_k(z) = m_k^\\top S^{-1} z - \\tfrac12 m_k^\\top S^{-1} m_k$$", "",
        "(`posterior_weight_residual`: Bayes' ratio of the two Gaussian densities minus this "
        "softmax, with a symbolic symmetric $S^{-1}$). Summing over $k$:", "",
        "$$f^*(z) = \\Gamma S^{-1} z + \\xi^2 S^{-1} \\sum_k \\beta_k(z)\\,m_k. "
        "\\tag{10}$$", "",
        "**Tweedie.** Differentiating $\\log p_Z$ with sympy, $z + \\xi^2\\nabla\\log p_Z(z)$ "
        "equals (10) (`tweedie_residual`).", "",
        "## 2. Eq. (11): $\\Gamma = \\gamma^2 I$, equal-norm means", "",
        "Means on a circle of radius $r$ (rational parametrisation). The offsets "
        "$-\\tfrac12 m_k^\\top S^{-1}m_k$ are equal (`eq11_offset_residual`) and cancel in "
        "the softmax; $\\Gamma S^{-1} = \\tfrac{\\gamma^2}{\\gamma^2+\\xi^2}I$ and "
        "$\\xi^2 S^{-1} = \\tfrac{\\xi^2}{\\gamma^2+\\xi^2}I$ (`eq11_linear_residual`, "
        "`eq11_barycentre_residual`):", "",
        "$$f^*(z) = \\frac{\\gamma^2}{\\gamma^2+\\xi^2} z + \\frac{\\xi^2}{\\gamma^2+\\xi^2}"
        "\\sum_k \\beta_k(z) m_k,\\quad \\beta_k = \\mathrm{softmax}_k\\Big(\\log\\pi_k + "
        "\\frac{m_k^\\top z}{\\gamma^2+\\xi^2}\\Big). \\tag{11}$$", "",
        "With unequal norms the offsets differ by $" + L(d["eq11_unequal_offset_gap"])
        + "$, which dot-product attention cannot encode.", "",
        "## 3. The linear optimum", "",
        "Expanding $\\|X - A(X+\\varepsilon)\\|^2$ and taking expectations term by term "
        "($\\mathbb E XX^\\top = \\Sigma_X$, $\\mathbb E\\varepsilon\\varepsilon^\\top = "
        "\\xi^2 I$, $X \\perp \\varepsilon$): "
        "$R(A) = \\operatorname{tr}((I-A)\\Sigma_X(I-A)^\\top) + \\xi^2\\|A\\|_F^2$ "
        "(`risk_linear_residual`), with $\\Sigma_X = \\Gamma + \\sum_k\\pi_k m_k m_k^\\top$ "
        "from the second derivative of the mixture's MGF (`second_moment_residual`). "
        "Solving $\\partial R/\\partial A = 0$:", "",
        "$$A^* = " + L(d["A_star"]) + " = \\Sigma_X(\\Sigma_X + \\xi^2 I)^{-1}$$", "",
        "(`normal_equations_residual`), $R(A^*) = \\operatorname{tr}\\Sigma_X - "
        "\\operatorname{tr}(\\Sigma_X(\\Sigma_X+\\xi^2 I)^{-1}\\Sigma_X)$ "
        "(`risk_at_optimum_residual`), and the Hessian is $2\\,I\\otimes(\\Sigma_X + "
        "\\xi^2 I) \\succ 0$ (`hessian_residual`), so $A^*$ is the unique minimiser.", "",
        "## 4. $R(A) - R(f^*) = \\mathbb E\\|AZ - f^*(Z)\\|^2$", "",
        "For any joint law, $\\mathbb E[(X - f^*(Z))^\\top g(Z)] = 0$ because "
        "$\\mathbb E[X - f^*(Z)\\mid Z] = 0$. Sympy proves it for every law on a 2×2 "
        "support with symbolic probabilities $p_{ij}$, points $x_i, z_j \\in \\mathbb R^2$ "
        "and values $g(z_j)$ (`orthogonality_residual`; the algebra is the same for any "
        "support, and the tower property extends it to any law), and then "
        "$R(A) - R(f^*) - \\mathbb E\\|AZ - f^*(Z)\\|^2 = 0$ (`excess_identity_residual`): "
        "expand $\\|X - AZ\\|^2 = \\|X - f^*\\|^2 + \\|f^* - AZ\\|^2 + 2(X-f^*)^\\top"
        "(f^* - AZ)$. On the denoising law with one component (affine $f^*$) the same "
        "identity holds in closed form (`excess_gaussian_residual`), with "
        "$R(f^*) = \\xi^2\\operatorname{tr}(\\Gamma S^{-1})$ "
        "(`bayes_risk_gaussian_residual`).", "",
        "## 5. The App. C.6 two-head construction", "",
        "Every matrix of the construction is built from $m_1, m_2$ by rotation-covariant "
        "operations (outer and inner products, $M^+$, projections), so $(U_i, V_i) \\to "
        "(QU_iQ^\\top, QV_iQ^\\top)$ under a rotation $Q$ and it suffices to take d = 3, "
        "$m_1 = (p, 0, 0)$, $m_2 = (q, w, 0)$ with symbolic $p, q$ and $w > 0$ "
        "(non-collinear; $e_3$ spans the complement of $E = \\mathrm{span}(m_1, m_2)$). "
        "$M = [m_1, m_2]$, $M^+ = (M^\\top M)^{-1}M^\\top$ with rows $\\mu_i^\\top$, "
        "$P_E = MM^+$, $s = \\gamma^2+\\xi^2$, $a = \\xi^2/s$, $\\Delta m = m_1 - m_2$:", "",
        "$$V_i = a\\,m_i\\mu_i^\\top + \\tfrac a2 (I - P_E),\\qquad U_1 = "
        "\\frac{\\gamma^2}{\\xi^2 s} I + \\frac{\\xi^2-\\gamma^2}{\\xi^2 s}\\,"
        "\\frac{m_2\\Delta m^\\top}{\\langle m_2,\\Delta m\\rangle},\\quad U_2 = (1 "
        "\\leftrightarrow 2).$$", "",
        "(C1) $U_i^\\top\\Delta m = \\Delta m/s$ (`C1_residual`); (C2) $V_i m_i = a m_i$, "
        "$V_i m_j = 0$ (`C2_residual`); (C3) $s(V_1U_1 + V_2U_2) = \\tfrac{\\gamma^2}{s}I$ "
        "(`C3_residual`). On $\\mu_Z$ a head is $V S U z + V\\sum_k\\alpha_k m_k$ (eq. (3)); "
        "(C1) makes each gate's logit difference $\\langle U_i z, \\Delta m\\rangle$ equal "
        "to $\\langle z, \\Delta m\\rangle/s$, that of (11) (`two_head_gate_residual`), so "
        "$\\alpha = \\beta$ and the two heads sum to $f^*$ (`two_head_exact_residual`). "
        "Opposite means $m_1 = -m_2 = m$ (d = 3; by the same covariance $e = m/\\|m\\| = "
        "e_1$ and the unit normal $n = e_2$): $U_{1,2} = s^{-1}(I \\pm n e^\\top)$, "
        "$V_{1,2} = A \\pm B$ with $A = \\tfrac{\\xi^2}{2s}ee^\\top + "
        "\\tfrac{\\gamma^2}{2s}(I - ee^\\top)$, "
        "$B = \\tfrac{\\gamma^2-\\xi^2}{2s} e n^\\top$ satisfy (C1), (C2′) $V_i m = "
        "\\tfrac{\\xi^2}{2s}m$, (C3) and are exact (`opposite_*_residual`).", "",
        "**Degenerate mixtures ($\\gamma = 0$, Remark 4.2 / Prop. C.3).** Here $f^* = "
        "\\beta_1 m_1 + \\beta_2 m_2$ and a head reads $\\xi^2 VUz + V\\sum_k\\alpha_k m_k$. "
        "For independent means (d = 2, canonical position) $V_i = m_i\\mu_i^\\top$, $U_1 = "
        "\\frac{m_2\\Delta m^\\top}{\\xi^2\\langle m_2, \\Delta m\\rangle}$, $U_2 = "
        "\\frac{m_1\\Delta m^\\top}{\\xi^2\\langle m_1, \\Delta m\\rangle}$ give $V_im_i = "
        "m_i$, $V_im_j = 0$, $V_iU_i = 0$, $U_i^\\top\\Delta m = \\Delta m/\\xi^2$ "
        "(`degenerate_conditions_residual`) and two heads sum to $f^*$ "
        "(`degenerate_two_head_residual`). For opposite means $m_1 = -m_2 = m$, $n \\perp m$: "
        "$U = \\frac{(m + n)m^\\top}{\\xi^2\\|m\\|^2}$, $V = m(\\frac{m^\\top}{\\|m\\|^2} - "
        "\\frac{n^\\top}{\\|n\\|^2})$ satisfy $Vm = m$, $Vn = -m$, $VU = 0$, $U^\\top m = "
        "m/\\xi^2$ (`degenerate_opposite_conditions_residual`): one head is exact "
        "(`degenerate_one_head_residual`).", "",
        "## 6. One head is exact iff $\\gamma^2 = \\xi^2$ (Prop. C.4)", "",
        "Start from Prop. C.4's conditions for one head $(U, V)$ with symbolic 2×2 "
        "entries and non-collinear $m_1, m_2$: (1) $sVU = \\tfrac{\\gamma^2}{s}I$, "
        "(2) $U^\\top\\Delta m = \\Delta m/s$, (3) $Vm_i = a m_i$.", "",
        "* Solving (1) for $V$: $V = q U^{-1}$, $q = \\gamma^2/s^2$ "
        "(`single_head_V_residual`).",
        "* Substituting in (3) and multiplying by $U$: $q m_i = a U m_i$, four linear "
        "equations whose solution is $U = " + L(d["single_head_U"])
        + "$ (`single_head_U_residual`).",
        "* (2) gives $\\Delta m^\\top U^\\top\\Delta m = \\|\\Delta m\\|^2/s$; with the "
        "solved $U$, divided by $\\|\\Delta m\\|^2$: $" + L(d["single_head_condition"])
        + " = 0$.",
        "* `solve` for $\\gamma^2 > 0$ returns $" + L(d["single_head_solutions"])
        + "$: the only solution is $\\gamma^2 = \\xi^2$ (`single_head_solution_residual`).",
        "* The exchanged orientation ($Vm_1 = am_2$, $Vm_2 = am_1$, $U^\\top\\Delta m = "
        "-\\Delta m/s$) gives $" + L(d["single_head_exchanged_solutions"])
        + "$ (`single_head_exchanged_residual`).",
        "* Conversely, at $\\gamma^2 = \\xi^2$, $U = S^{-1}$ and $V = I/2$ meet (1)–(3) "
        "(`single_head_converse_residual`).", "",
        "## 7. Prop. 4.4: residual in-context denoising", "",
        "$U_1 = S^{-1}$, $V_1 = aI$, $U_2 = V_2 = 0$, $W_{out} = (I, -2aI)$. With "
        "$U_1 = S^{-1}$ the gate is that of (11) (`prop44_gate_residual`); the second head "
        "is 0. The read-out of $(z + T_1;\\ z + T_2)$ is", "",
        "$$" + L(d["prop44_output"]) + "$$", "",
        "which is $f^*$ of (11) (`prop44_residual`) for every task: the weights hold "
        "only $\\gamma^2, \\xi^2$.", "",
        "## 8. Prop. 4.3: the clustering transition", "",
        "$\\gamma = 0$, $\\pi = (\\tfrac12, \\tfrac12)$, equal norms; $c = (m_1+m_2)/2$, "
        "$\\delta = (m_1-m_2)/2$, $\\langle c, \\delta\\rangle = 0$ "
        "(`midpoint_orthogonal_residual`). By (11) with $\\gamma = 0$, $f^*(z) = \\beta_1 m_1 "
        "+ \\beta_2 m_2$ with $\\beta_1 = \\sigma(\\langle z, \\Delta m\\rangle/\\xi^2)$; "
        "the logit is $2\\langle z - c, \\delta\\rangle/\\xi^2$ "
        "(`tanh_argument_residual`), $2\\sigma(2y) - 1 = \\tanh y$ "
        "(`sigmoid_tanh_residual`), and $\\beta_1 m_1 + (1-\\beta_1) m_2 = c + "
        "(2\\beta_1 - 1)\\delta$ (`tanh_form_residual`), so $f^*(z) = c + \\delta\\tanh("
        "\\langle z - c, \\delta\\rangle/\\xi^2)$. On the line $z = c + u\\delta$ the "
        "argument is $\\lambda^2 u$ with $\\lambda = \\|\\delta\\|/\\xi$ "
        "(`line_map_residual`): the iteration is "
        "$u_{n+1} = F(u_n) = \\tanh(\\lambda^2 u_n)$, with fixed points $u = "
        "\\tanh(\\lambda^2 u)$.", "",
        "* $F'(u) = \\lambda^2(1 - F(u)^2)$ (`derivative_residual`), so at a fixed point "
        "$F'(u_\\lambda) = \\lambda^2(1 - u_\\lambda^2)$, and $F'(0) = \\lambda^2$ "
        "(`slope_at_0_residual`).",
        "* $g(u) = \\tanh(\\lambda^2 u) - u$ has $g'' = -2\\lambda^4\\tanh(\\lambda^2 u)"
        "(1 - \\tanh^2(\\lambda^2 u)) < 0$ for $u > 0$ (`concavity_residual`).",
        "* $\\lambda \\le 1$: $g'(u) = \\lambda^2(1 - \\tanh^2) - 1 < 0$ for $u > 0$, so "
        "$g$ decreases from $g(0) = 0$: no positive root, $u_\\lambda = 0$, and "
        "$|F(u)| < |u|$, so $u_n \\to 0$ (geometrically with ratio $\\to \\lambda^2$ when "
        "$\\lambda < 1$).",
        "* $\\lambda > 1$: $g'(0) = \\lambda^2 - 1 > 0$ and $g(1) = \\tanh\\lambda^2 - 1 < 0$, "
        "so a positive root $u_\\lambda \\in (0, 1)$ exists; it is unique because $g$ is "
        "strictly concave on $(0, \\infty)$, and concavity with $g(0) = g(u_\\lambda) = 0$ "
        "forces $g'(u_\\lambda) < 0$, i.e. **$F'(u_\\lambda) = \\lambda^2(1 - "
        "u_\\lambda^2) < 1$**: the fixed points $c \\pm u_\\lambda\\delta$ are stable, and "
        "the midpoint is unstable ($F'(0) = \\lambda^2 > 1$).",
        "* $\\lambda = 1$: $1/\\tanh(u)^2 - 1/u^2 = " + L(d["critical_series"])
        + " + O(u^2)$ (`critical_series_residual`), so $1/u_{n+1}^2 = 1/u_n^2 + 2/3 + "
        "O(u_n^2)$, $1/u_n^2 = 2n/3 + O(\\log n)$ and $u_n\\sqrt{2n/3} \\to 1$: "
        "$|u_n| \\approx \\sqrt{3/(2n)}$ (`critical_law_residual`: $\\sqrt{3/(2n)}"
        "\\sqrt{2n/3 + C} \\to 1$).", "",
        "The two-head matrices are lambdified by `two_head_function()` and "
        "`opposite_heads_function()` and compared, after a random rotation, with "
        "`gmtheory.denoising.two_head_construction` in "
        "`tests/test_derivations.py`, as are eq. (10) (`bayes_denoiser`), $A^*$ "
        "(`linear_optimum`) and $u_\\lambda$ (`u_lambda`).", "",
        "## Residuals", "",
    ]
    return "\n".join(lines + residual_lines(d))


if __name__ == "__main__":  # pragma: no cover
    print(markdown())
