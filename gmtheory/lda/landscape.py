"""The risk landscape: population risk, analytic gradients and Hessians (Lemmas B.9/B.10,
Prop. B.12, Lemma B.11) by Gauss-Hermite quadrature on low-dimensional projections (see
:mod:`gmtheory.lda`), the Bayes manifolds and distances to them, the invariant set, and
the optimum of linear attention."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from ..quadrature import gauss_hermite_nodes, sinh_trapezoid_rule
from .effective import flatten_effective, jacobian_phi, phi
from .problem import (
    DEFAULT_ORDER,
    GATE_NODES,
    Effective,
    LDAParams,
    LDAProblem,
    bayes_score,
    config,
)

__all__ = ["risk_eff", "grad_eff", "hess_eff", "reduced_loss", "risk", "grad",
           "value_and_grad", "grad_and_sq_norm", "hessian", "bayes_parameters",
           "table3_start", "dist_E1", "dist_E2", "zeta_R", "krylov_basis",
           "invariant_set_residual", "linear_attention_optimum"]

# ---------------------------------------------------------------- quadrature engine ---

def _nodes(prob: LDAProblem, dirs, order: int, gate_nodes: int | None = None):
    """Class-conditional nodes ``X_{c,i}`` (2, n, d), weights (2, n), and
    ``C_perp = A (I - Q Q^T) A^T`` for ``E[h(dirs X) ...]`` (module docstring): the
    nodes of :func:`_node_coords` in the d-dimensional space."""
    means, t, AQ, om, Cp = _node_coords(prob, dirs, order, gate_nodes)
    return means[:, None, :] + t @ AQ.T, om, Cp


def _projected(coords, v):
    """``v^T X_{c,i}`` (2, n) at the nodes ``coords = (means, t, AQ)`` of
    :func:`_node_coords`, without forming the (2, n, d) nodes: ``v^T m_c + t (AQ)^T v``."""
    means, t, AQ = coords
    return (means @ v)[:, None] + t @ (AQ.T @ v)


def _node_coords(prob: LDAProblem, dirs, order: int, gate_nodes: int | None = None):
    """The nodes of :func:`_nodes` in coordinates: ``X_{c,i} = m_c + AQ t_{c,i}``.
    Returns ``(means (2, d), t (2, n, k), AQ (d, k), weights (2, n), C_perp)``.

    Tensor Gauss–Hermite of ``order`` per axis.  With ``gate_nodes``, the first axis
    (``dirs[0]`` must be the gate direction ``s``; it is then the standardised
    ``s^T X``) uses :func:`gmtheory.quadrature.sinh_trapezoid_rule` with that many nodes,
    centred on each class's gate transition: needed when the gate is sharper than the GH
    node spacing."""
    A = prob.chol
    B = A.T @ dirs.T                              # (d, k)
    Q, R = jnp.linalg.qr(B)                       # orthonormal, contains range(B)
    k = Q.shape[1]
    AQ = A @ Q
    means = jnp.stack([prob.m_pos, prob.m_neg])
    if gate_nodes is None:
        t, om = (jnp.asarray(a) for a in gauss_hermite_nodes(order, k))
        t, om = jnp.broadcast_to(t, (2, *t.shape)), jnp.broadcast_to(om, (2, *om.shape))
    else:
        kappa = R[0, 0]                           # s^T X = s^T m_c + kappa t_1
        gate = prob.s0 + means @ dirs[0]
        ok = jnp.abs(kappa) > 1e-300
        center = jnp.where(ok, -gate / jnp.where(ok, kappa, 1.0), 0.0)      # (2,)
        t1, w1 = jax.vmap(lambda c: sinh_trapezoid_rule(c, kappa, gate_nodes))(center)
        tr, wr = (jnp.asarray(a) for a in gauss_hermite_nodes(order, k - 1))
        n1, nr = t1.shape[1], tr.shape[0]
        t = jnp.concatenate([jnp.broadcast_to(t1[:, :, None, None], (2, n1, nr, 1)),
                             jnp.broadcast_to(tr[None, None], (2, n1, nr, k - 1))],
                            -1).reshape(2, n1 * nr, k)
        om = (w1[:, :, None] * wr[None, None, :]).reshape(2, -1)
    return means, t, AQ, om, prob.cov - AQ @ AQ.T


def _resolve_form(prob, form):
    if form is None:
        return "eta" if prob.d <= 2 else "class"
    if form not in ("eta", "class"):
        raise ValueError(f"form: unknown {form!r}; use 'eta', 'class' or None (automatic).")
    return form


def _pointwise(prob, zeta, X, form="class"):
    """Per-node score, sigmoid gate, loss and the first two derivatives of the expected
    loss in the score.

    ``form="class"``: class-conditional ``l(c g) = softplus(-c g)``, ``l' = -c sigma(-c g)``.
    ``form="eta"``: Lemma B.7's ``E[l' | X] = sigma(g) - eta(X)``, identical for both
    classes' nodes; it vanishes node by node at a Bayes point, so gradients and
    Hessians there are exact even when a sharp gate (large ``|s|``) is poorly resolved
    by the quadrature.  Needs ``w*`` among the projection directions."""
    sg, g, loss = _class_loss(prob, zeta, X @ zeta.w, X @ zeta.s)
    c = jnp.array([1.0, -1.0])[:, None]
    if form == "eta":
        ws, bs = bayes_score(prob)
        l1 = jax.nn.sigmoid(g) - jax.nn.sigmoid(X @ ws + bs)
    else:
        l1 = -c * jax.nn.sigmoid(-c * g)          # d/dg
    l2 = jax.nn.sigmoid(g) * jax.nn.sigmoid(-g)   # d^2/dg^2
    return g, sg, loss, l1, l2


def _class_loss(prob, zeta, xw, xs):
    """Gate ``sigmoid(s0 + s^T x)``, score ``g`` and class-conditional loss
    ``softplus(-c g)`` from the projections ``xw = w^T x``, ``xs = s^T x`` (2, n)."""
    sg = jax.nn.sigmoid(prob.s0 + xs)
    g = xw + zeta.b + zeta.r * sg
    return sg, g, jax.nn.softplus(-jnp.array([1.0, -1.0])[:, None] * g)


def _class_weights(prob):
    return jnp.stack([prob.pi_pos, 1 - prob.pi_pos])[:, None]


def _dirs(prob, zeta: Effective, form: str):
    if form == "eta" and prob.d > 2:
        return jnp.stack([zeta.s, zeta.w, bayes_score(prob)[0]])
    return jnp.stack([zeta.s, zeta.w])


@partial(jax.jit, static_argnames=("order", "gate_nodes"))
def risk_eff(prob: LDAProblem, zeta: Effective, order: int = DEFAULT_ORDER,
             gate_nodes: int | None = GATE_NODES):
    """``R~(zeta)`` (eq. (8)) by 2-D Gauss–Hermite on ``(w^T X, s^T X)``.

    The gate axis is integrated with :func:`gmtheory.quadrature.sinh_trapezoid_rule`
    (``gate_nodes`` nodes, converged to round-off for any gate slope in our tests against
    Monte Carlo); ``gate_nodes=None`` uses plain GH there, which is cheaper but
    under-resolves a sharp gate
    (``|Gamma^{1/2} s| >~ 5``: errors of 1e-5 to 1e-2 at order 64, possibly *below* R*)."""
    means, t, AQ, om, _ = _node_coords(prob, _dirs(prob, zeta, "class"), order, gate_nodes)
    coords = (means, t, AQ)          # projected directly: no (2, n, d) array of nodes
    _, _, loss = _class_loss(prob, zeta, _projected(coords, zeta.w), _projected(coords, zeta.s))
    return jnp.sum(_class_weights(prob) * loss * om)


def grad_eff(prob: LDAProblem, zeta: Effective, order: int = DEFAULT_ORDER,
             form: str | None = None, gate_nodes: int | None = None) -> Effective:
    """Lemma B.9: ``(E[D X], E[D], E[D sigma_s], r E[D sigma_s (1 - sigma_s) X])`` with
    ``D = sigma(g) - eta``.  ``form``: ``"eta"`` (default for d = 2) evaluates ``D`` node
    by node, exact at Bayes points; ``"class"`` (default for d > 2) uses the
    class-conditional derivative on a 2-D projection (``"eta"`` needs a 3-D one there).
    ``gate_nodes`` as in :func:`risk_eff` (default: plain GH, for speed)."""
    return _value_and_grad_eff(prob, zeta, order, form, gate_nodes)[1]


@partial(jax.jit, static_argnames=("order", "form", "gate_nodes"))
def _value_and_grad_eff(prob, zeta, order, form, gate_nodes):
    """``(R~ on the gradient's nodes, grad_eff)``: the risk costs one softplus per node."""
    form = _resolve_form(prob, form)
    X, om, _ = _nodes(prob, _dirs(prob, zeta, form), order, gate_nodes)
    _, sg, loss, l1, _ = _pointwise(prob, zeta, X, form)
    W = _class_weights(prob) * l1 * om            # (2, n): pi_c omega_ci l'
    gw = jnp.einsum("cn,cnd->d", W, X)
    gb = jnp.sum(W)
    gr = jnp.sum(W * sg)
    gs = zeta.r * jnp.einsum("cn,cnd->d", W * sg * (1 - sg), X)
    value = jnp.sum(_class_weights(prob) * loss * om)
    return value, Effective(gw, gb, gr, gs)


@partial(jax.jit, static_argnames=("order", "form", "gate_nodes"))
def hess_eff(prob: LDAProblem, zeta: Effective, order: int = DEFAULT_ORDER,
             form: str | None = None, gate_nodes: int | None = None):
    """Hessian of ``R~`` in the flat order ``(w, b, r, s)``, shape (2d+2, 2d+2):
    ``E[l'' grad g grad g^T + l' grad^2 g]`` with the ``C_perp`` correction for the
    second moments (at a Bayes point this is Prop. B.12's ``E[eta(1-eta) ...]``).
    ``form`` and ``gate_nodes`` as in :func:`grad_eff`."""
    d = prob.d
    form = _resolve_form(prob, form)
    X, om, Cp = _nodes(prob, _dirs(prob, zeta, form), order, gate_nodes)
    _, sg, _, l1, l2 = _pointwise(prob, zeta, X, form)
    r = zeta.r
    pw = _class_weights(prob) * om
    ds = sg * (1 - sg)
    dds = ds * (1 - 2 * sg)
    one = jnp.ones_like(sg)[..., None]
    G = jnp.concatenate([X, one, sg[..., None], (r * ds)[..., None] * X], -1)  # (2, n, p)
    H = jnp.einsum("cn,cnp,cnq->pq", pw * l2, G, G)
    # second derivatives of g: d2g/dr ds = sigma_s' X, d2g/ds2 = r sigma_s'' X X^T
    rs = jnp.einsum("cn,cnd->d", pw * l1 * ds, X)
    H = H.at[d + 1, d + 2:].add(rs).at[d + 2:, d + 1].add(rs)
    H = H.at[d + 2:, d + 2:].add(r * jnp.einsum("cn,cnd,cne->de", pw * l1 * dds, X, X))
    # C_perp corrections of the X X^T moments
    e_ww = jnp.sum(pw * l2)
    e_ws = jnp.sum(pw * l2 * r * ds)
    e_ss = jnp.sum(pw * (l2 * (r * ds) ** 2 + l1 * r * dds))
    H = H.at[:d, :d].add(e_ww * Cp)
    H = H.at[:d, d + 2:].add(e_ws * Cp).at[d + 2:, :d].add(e_ws * Cp)
    H = H.at[d + 2:, d + 2:].add(e_ss * Cp)
    return H


@partial(jax.jit, static_argnames=("order",))
def reduced_loss(prob: LDAProblem, w, order: int = DEFAULT_ORDER):
    """``L(w) = R~(w, 0, 0, 0)``, the loss of Theorem 3.6's reduced flow (and of linear
    attention, which has no bias path).  The gate is constant here, so plain GH."""
    z = jnp.zeros(())
    return risk_eff(prob, Effective(w, z, z, jnp.zeros_like(w)), order, gate_nodes=None)


@partial(jax.jit, static_argnames=("order", "gate_nodes"))
def risk(prob: LDAProblem, theta: LDAParams, order: int = DEFAULT_ORDER,
         gate_nodes: int | None = GATE_NODES):
    """``R(theta) = R~(Phi(theta))`` (``gate_nodes`` as in :func:`risk_eff`)."""
    return risk_eff(prob, phi(prob, theta), order, gate_nodes)


def grad(prob: LDAProblem, theta: LDAParams, order: int = DEFAULT_ORDER,
         form: str | None = None) -> LDAParams:
    """Lemma B.10, written out block by block from Lemma B.9's effective gradient."""
    return value_and_grad(prob, theta, order, form)[1]


@partial(jax.jit, static_argnames=("order", "form"))
def value_and_grad(prob: LDAProblem, theta: LDAParams, order: int = DEFAULT_ORDER,
                   form: str | None = None):
    """``(R(theta), grad R(theta))`` with Lemma B.10's analytic gradient (:func:`grad`).

    The risk is evaluated on the gradient's own Gauss–Hermite nodes (plain GH on the
    gate axis, one softplus per node), so it costs almost nothing beside the gradient;
    for an accurate risk at a sharp gate use :func:`risk`.  This is the
    ``value_and_grad_fn`` of population training (:func:`gradient_descent`)."""
    U11, u12, v21, v22 = theta
    value, (gw, gb, gr, gs) = _value_and_grad_eff(prob, phi(prob, theta), order, form, None)
    G = prob.cov
    dm = prob.delta_m
    return value, LDAParams(jnp.outer(gw, G @ v21) + jnp.outer(gs, dm), 2 * gs,
                            G @ U11.T @ gw + gb * prob.m_neg + gr * dm, -gb + 2 * gr)


@partial(jax.jit, static_argnames=("order", "form", "gate_nodes"))
def hessian(prob: LDAProblem, theta: LDAParams, order: int = DEFAULT_ORDER,
            form: str | None = None, gate_nodes: int | None = None):
    """``grad^2 R(theta) = DPhi^T grad^2 R~ DPhi + sum_j (grad R~)_j grad^2 Phi_j``
    (flat order of :func:`flatten`; ``form`` and ``gate_nodes`` as in :func:`grad_eff`)."""
    vec, unr = ravel_pytree(theta)
    zeta = phi(prob, theta)
    J = jacobian_phi(prob, theta)
    g = flatten_effective(grad_eff(prob, zeta, order, form, gate_nodes))
    Hz = hess_eff(prob, zeta, order, form, gate_nodes)
    H2 = jax.hessian(lambda v: g @ flatten_effective(phi(prob, unr(v))))(vec)
    return J.T @ Hz @ J + H2


@partial(jax.jit, static_argnames=("order", "form"))
def grad_and_sq_norm(prob: LDAProblem, theta: LDAParams, order: int = DEFAULT_ORDER,
                     form: str | None = None):
    """``(|grad R|^2, grad R)``: the ``value_and_grad_fn`` of population training when the
    risk itself is only wanted at the records (evaluating it at every step, as
    :func:`value_and_grad` does, doubles the cost of a step: one softplus per node beside
    the gradient's sigmoids).  The squared gradient norm is free, is what the training
    engine's NaN guard checks, and its mean over a record monitors convergence."""
    g = grad(prob, theta, order, form)
    return sum(jnp.sum(a**2) for a in jax.tree.leaves(g)), g


# ---------------------------------------------------------------- Bayes manifolds -----

def bayes_parameters(prob: LDAProblem) -> LDAParams:
    """Lemma B.3: attention parameters with ``f_theta = f*`` (all have ``s = 0``).

    Case 1 (``pi != 1/2``), Case 2(a) (``pi = 1/2``, ``m_+ != -m_-``, including
    ``b* = 0``) and Case 2(b) (``pi = 1/2``, ``m_+ = -m_-``)."""
    w, b = bayes_score(prob)
    G, dm, d = prob.cov, prob.delta_m, prob.d
    pi = float(prob.pi_pos)
    if abs(pi - 0.5) > 1e-15:                                      # Case 1
        U11 = jnp.eye(d)
        v21 = jnp.linalg.solve(G, w)
        mbar = (1 - pi) * prob.m_neg + pi * prob.m_pos
        v22 = (b - v21 @ mbar) / (2 * pi - 1)
    elif not prob.symmetric:                                       # Case 2(a)
        mbar = 0.5 * (prob.m_pos + prob.m_neg)
        if abs(float(b)) > 1e-14:
            v21 = b / (mbar @ mbar) * mbar
        else:  # any nonzero vector orthogonal to mbar
            e = jnp.eye(d)[int(np.argmin(np.abs(np.asarray(mbar))))]
            v21 = e - (e @ mbar) / (mbar @ mbar) * mbar
        a = G @ v21
        U11 = jnp.outer(w, a) / (a @ a)
        v22 = jnp.zeros(())
    else:                                                          # Case 2(b)
        U11 = jnp.eye(d)
        v21 = jnp.linalg.solve(G, w)
        v22 = jnp.zeros(())
    return LDAParams(U11, -0.5 * U11 @ dm, v21, jnp.asarray(v22, dtype=w.dtype))


def table3_start(name: str, prob: LDAProblem | None = None) -> LDAParams:
    """Table 3 starts for C1 (docs/topics/lda.md#tables-1-and-3-configurations-and-starts),
    before the ``eps = 1e-6`` noise.

    ``"theta1"``: near Theta_1; the U11 entry is damaged in the available text, and the
    reconstruction ``U11 = [[1/(2b*), 0], [-1/(2b*), 1]]``, ``u12 = (10, 10)``,
    ``v21 = (2b*, 0)``, ``v22 = -b*`` lies in Theta_1^reg (|s| = 27.7).
    ``"theta2"``: ``U11 = I``, ``u12 = (-1/2, 1/2)``, ``v21 = (1, -1)`` and the printed
    ``v22``; it lies in Theta_2 with ``r != 0``."""
    prob = prob or config("C1")
    _, b = bayes_score(prob)
    if name == "theta1":
        return LDAParams(jnp.array([[1 / (2 * b), 0.0], [-1 / (2 * b), 1.0]]),
                         jnp.array([10.0, 10.0]), jnp.stack([2 * b, 0.0]), -b)
    if name == "theta2":
        pi = prob.pi_pos
        v21 = jnp.array([1.0, -1.0])
        v22 = (v21 @ prob.m_neg - b + pi * v21 @ prob.delta_m) / (1 - 2 * pi)
        return LDAParams(jnp.eye(2), jnp.array([-0.5, 0.5]), v21, v22)
    raise ValueError(f"name: unknown Table 3 start {name!r}; use 'theta1' or 'theta2'.")


@jax.jit
def dist_E1(prob: LDAProblem, zeta: Effective):
    """Distance from ``zeta`` to ``E_1 = {(w*, b*, 0, s)}`` (Thm 3.5,
    docs/topics/lda.md#thm-35-local-convergence)."""
    w, b = bayes_score(prob)
    return jnp.sqrt(jnp.sum((zeta.w - w) ** 2) + (zeta.b - b) ** 2 + zeta.r**2)


@jax.jit
def dist_E2(prob: LDAProblem, zeta: Effective):
    """Distance from ``zeta`` to ``E_2 = {(w*, b* - r p, r, 0)}``, ``p = sigma(s0)``."""
    w, b = bayes_score(prob)
    p = prob.pi_pos
    return jnp.sqrt(jnp.sum((zeta.w - w) ** 2) + jnp.sum(zeta.s**2)
                    + ((zeta.b - b) + p * zeta.r) ** 2 / (1 + p**2))


@jax.jit
def zeta_R(prob: LDAProblem, c, R) -> Effective:
    """Prop. 3.4's minimising sequence ``(w* - sigma'(s0) c, b* - sigma(s0) R, R, c/R)``."""
    w, b = bayes_score(prob)
    p = jax.nn.sigmoid(prob.s0)
    c = jnp.asarray(c, dtype=w.dtype)
    return Effective(w - p * (1 - p) * c, b - p * R, jnp.asarray(R, dtype=w.dtype), c / R)


def krylov_basis(cov, m, tol: float = 1e-10):
    """Orthonormal basis (d, k) of ``K = span{m, Gamma m, ..., Gamma^{d-1} m}``; ``k`` is
    the numerical rank (singular values above ``tol`` times the largest)."""
    cov, m = np.asarray(cov, dtype=float), np.asarray(m, dtype=float)
    d = m.shape[0]
    cols, v = [], m / np.linalg.norm(m)
    for _ in range(d):
        cols.append(v)
        v = cov @ v
        v = v / np.linalg.norm(v)
    u, sv, _ = np.linalg.svd(np.stack(cols, 1))
    k = int(np.sum(sv > tol * sv[0]))
    return jnp.asarray(u[:, :k])


@jax.jit
def invariant_set_residual(theta: LDAParams, basis):
    """How far ``theta`` is from ``T_K = {u12 = 0, v22 = 0, v21 in K^perp, U11 P_K = 0}``:
    the largest of ``|u12|, |v22|, |P_K v21|, |U11 P_K|`` (max-abs entries)."""
    P = basis @ basis.T
    return jnp.max(jnp.stack([jnp.max(jnp.abs(theta.u12)), jnp.abs(theta.v22),
                              jnp.max(jnp.abs(P @ theta.v21)),
                              jnp.max(jnp.abs(theta.U11 @ P))]))


def linear_attention_optimum(prob: LDAProblem, order: int = DEFAULT_ORDER, iters: int = 50):
    """Best infinite-prompt linear attention: its last coordinate is ``w^T x`` with no
    bias, so its optimum is ``min_w L(w)`` (Newton's method on the convex ``L``).
    Returns ``(w, L(w))``."""
    w = jnp.zeros(prob.d, dtype=prob.m_pos.dtype)
    for _ in range(iters):
        w, stop = _newton_step(prob, w, order)
        if stop:
            break
    return w, reduced_loss(prob, w, order)


@partial(jax.jit, static_argnames=("order",))
def _newton_step(prob, w, order):
    """One Newton step of :func:`linear_attention_optimum` and its stopping test."""
    d = prob.d
    z = jnp.zeros((), dtype=w.dtype)
    sel = jnp.arange(d)
    zeta = Effective(w, z, z, jnp.zeros_like(w))
    g = grad_eff(prob, zeta, order).w
    H = hess_eff(prob, zeta, order)[jnp.ix_(sel, sel)]
    step = jnp.linalg.solve(H, g)
    w = w - step
    return w, jnp.max(jnp.abs(step)) < 1e-14 * jnp.maximum(1.0, jnp.max(jnp.abs(w)))


