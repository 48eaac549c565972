"""Attention-based linear discriminant analysis (paper Section 3,
docs/topics/lda.md#attention-based-lda).

Two classes ``Y = ±1`` with ``P(Y = 1) = pi_pos`` and ``X | Y = c ~ N(m_c, Gamma)``.
Context tokens are ``(X, Y)`` in ``R^{d+1}``, the query is ``(x, 0)`` and the
prediction is the last output coordinate of softmax attention.  In the
infinite-prompt limit it is (eqs. (6)–(7))

    f_theta(x) = w^T x + b + r sigmoid(s0 + s^T x),

with ``(w, b, r, s) = Phi(theta)`` and ``theta = (U11, u12, v21, v22)``
(:class:`LDAParams`, a pytree).  The full matrices map to ``theta`` through the
partition of ``U^T`` (not ``U``) of Lemma B.1
(docs/topics/lda.md#lemma-b1-the-label-augmented-prompt): ``U11 = (U^T)[:d, :d]``,
``u12 = (U^T)[:d, d]``, ``v21 = V[d, :d]``, ``v22 = V[d, d]`` (:func:`params_from_matrices`).

Population risks are computed by Gauss–Hermite quadrature on two-dimensional
projections, so they work in any dimension: the score depends on ``X`` only through
``(w^T X, s^T X)``.  Write ``X = m_c + A xi`` with ``A A^T = Gamma`` and let ``Q`` be
an orthonormal basis (d, 2) containing ``A^T w`` and ``A^T s``; then
``xi = Q t + xi_perp`` with ``t ~ N(0, I_2)`` independent of ``xi_perp``, so

    E[h X]     = sum_i omega_i h_i X_i,
    E[h X X^T] = sum_i omega_i h_i X_i X_i^T + E[h] A (I - Q Q^T) A^T,

with nodes ``X_i = m_c + A Q t_i``.  Gradients (Lemmas B.9/B.10) and Hessians
(Prop. B.12, Lemma B.11) are analytic on top of these moments; autodiff and finite
differences are independent cross-checks (``gmtheory verify --only lda``).

The risk uses the class-conditional form ``R = sum_c pi_c E_c log(1 + e^{-c g(X)})``,
whose gradient equals Lemma B.9's ``E[(sigma(g) - eta) grad g]`` because
``E[l'(Y, g) | X] = sigma(g) - eta(X)`` (Lemma B.7).
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from ._validation import as_float_array, check_finite, check_psd, check_shape, is_concrete
from .mixture import GaussianMixture
from .quadrature import gauss_hermite_nodes
from .training import train

__all__ = [
    "LDAProblem", "LDAParams", "Effective", "config", "CONFIGS",
    "bayes_score", "bayes_risk", "posterior", "phi", "predictor", "effective_score",
    "risk", "risk_eff", "grad", "grad_eff", "value_and_grad", "grad_and_sq_norm", "hessian",
    "hess_eff", "jacobian_phi",
    "bayes_parameters", "params_from_matrices", "lemma_b1_output", "label_augmented_mixture",
    "krylov_basis", "invariant_set_residual", "dist_E1", "dist_E2", "zeta_R",
    "reduced_loss", "sample", "prompt_predictor", "gradient_descent", "flatten", "unflatten",
    "linear_attention_optimum", "linear_limit_weight", "table3_start", "sgd_noise_floor",
]

DEFAULT_ORDER = 64
GATE_NODES = 256


class LDAParams(NamedTuple):
    """Attention parameters that matter at a query ``(x, 0)`` (Lemma B.1,
    docs/topics/lda.md#lemma-b1-the-label-augmented-prompt)."""

    U11: jax.Array  # (d, d)
    u12: jax.Array  # (d,)
    v21: jax.Array  # (d,)
    v22: jax.Array  # ()


class Effective(NamedTuple):
    """Effective coordinates ``zeta = (w, b, r, s)`` of eq. (7)."""

    w: jax.Array
    b: jax.Array
    r: jax.Array
    s: jax.Array


@jax.tree_util.register_pytree_node_class
class LDAProblem:
    """Two-class Gaussian problem ``LDAProblem(m_pos, m_neg, cov, pi_pos)`` (eq. (4),
    docs/topics/lda.md#eqs-45-model-and-bayes-score).

    Validated on construction (shapes, finite values, symmetric positive definite
    ``cov``, ``0 < pi_pos < 1``, ``m_pos != m_neg``).  A JAX pytree, so it can be
    passed to jitted functions without recompiling per problem.
    """

    def __init__(self, m_pos, m_neg, cov, pi_pos):
        m_pos = as_float_array(m_pos, "m_pos")
        m_neg = as_float_array(m_neg, "m_neg")
        cov = as_float_array(cov, "cov")
        pi_pos = as_float_array(pi_pos, "pi_pos")
        if is_concrete(m_pos, m_neg, cov, pi_pos):
            check_shape(m_pos, "m_pos", (None,), "pass the positive-class mean as a vector.")
            d = m_pos.shape[0]
            if d < 2:
                raise ValueError(f"m_pos: dimension d = {d}; attention-based LDA needs d >= 2.")
            check_shape(m_neg, "m_neg", (d,), "m_neg must have the same length as m_pos.")
            check_shape(cov, "cov", (d, d), f"pass a {d}x{d} covariance matrix.")
            check_shape(pi_pos, "pi_pos", (), "pass P(Y = 1) as a scalar.")
            for a, n in ((m_pos, "m_pos"), (m_neg, "m_neg"), (cov, "cov"), (pi_pos, "pi_pos")):
                check_finite(a, n)
            check_psd(np.asarray(cov), "cov")
            if np.linalg.eigvalsh(np.asarray(cov))[0] <= 1e-12 * max(1.0, float(np.abs(cov).max())):
                raise ValueError("cov: must be positive definite (the Bayes score uses its "
                                 "inverse); add a small ridge, e.g. cov + 1e-6 * I.")
            if not 0.0 < float(pi_pos) < 1.0:
                raise ValueError(f"pi_pos: must lie strictly between 0 and 1, got {float(pi_pos)}.")
            if np.allclose(np.asarray(m_pos), np.asarray(m_neg), rtol=0, atol=0):
                raise ValueError("m_pos, m_neg: the class means must differ.")
        self.m_pos, self.m_neg, self.cov, self.pi_pos = m_pos, m_neg, cov, pi_pos

    def tree_flatten(self):
        return (self.m_pos, self.m_neg, self.cov, self.pi_pos), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        obj = object.__new__(cls)
        obj.m_pos, obj.m_neg, obj.cov, obj.pi_pos = children
        return obj

    @property
    def d(self) -> int:
        return self.m_pos.shape[0]

    @property
    def delta_m(self):
        return self.m_pos - self.m_neg

    @property
    def s0(self):
        return jnp.log(self.pi_pos) - jnp.log1p(-self.pi_pos)

    @property
    def chol(self):
        return jnp.linalg.cholesky(self.cov)

    @property
    def symmetric(self) -> bool:
        """``m_pos == -m_neg`` (Lemma 3.2 and Theorem 3.3 need this to fail)."""
        return bool(np.allclose(np.asarray(self.m_pos), -np.asarray(self.m_neg), atol=1e-14))

    def __repr__(self):
        return (f"LDAProblem(d={self.d}, pi_pos={float(self.pi_pos):.4g}, "
                f"|delta_m|={float(jnp.linalg.norm(self.delta_m)):.4g})")


def _c1():
    return LDAProblem([1.0, 0.0], [0.0, 1.0], np.eye(2), 0.6)


def _c2():
    e1 = np.eye(20)[0]
    return LDAProblem(e1, -e1, np.eye(20), 0.5)


CONFIGS = {"C1": _c1, "C2": _c2}


def config(name: str) -> LDAProblem:
    """Table 1 configurations by name: ``"C1"`` (d = 2, asymmetric, pi = 0.6) or ``"C2"``
    (d = 20, opposite means, balanced)."""
    if name not in CONFIGS:
        raise ValueError(f"config: unknown name {name!r}; choose one of {sorted(CONFIGS)}.")
    return CONFIGS[name]()


# ---------------------------------------------------------------- Bayes score ---------

@jax.jit
def bayes_score(prob: LDAProblem):
    """``(w*, b*)`` of eq. (5)."""
    ci = jnp.linalg.inv(prob.cov)
    w = ci @ prob.delta_m
    b = -0.5 * (prob.m_pos @ ci @ prob.m_pos - prob.m_neg @ ci @ prob.m_neg) + prob.s0
    return w, b


@jax.jit
def posterior(prob: LDAProblem, x):
    """``eta(x) = P(Y = 1 | X = x)`` from the two Gaussian densities (not from eq. (5))."""
    from jax.scipy.stats import multivariate_normal as mvn

    lp = jnp.log(prob.pi_pos) + mvn.logpdf(x, prob.m_pos, prob.cov)
    ln = jnp.log1p(-prob.pi_pos) + mvn.logpdf(x, prob.m_neg, prob.cov)
    return jax.nn.sigmoid(lp - ln)


@partial(jax.jit, static_argnames=("order",))
def bayes_risk(prob: LDAProblem, order: int = 200):
    """``R*`` by 1-D Gauss–Hermite on ``f*(X) ~ N(w*^T m_c + b*, w*^T Gamma w*)``."""
    w, b = bayes_score(prob)
    t, om = (jnp.asarray(a) for a in gauss_hermite_nodes(order, 1))
    sd = jnp.sqrt(w @ prob.cov @ w)
    out = 0.0
    for c, m, p in ((1.0, prob.m_pos, prob.pi_pos), (-1.0, prob.m_neg, 1 - prob.pi_pos)):
        f = w @ m + b + sd * t[:, 0]
        out = out + p * om @ jax.nn.softplus(-c * f)
    return out


# ---------------------------------------------------------------- the map Phi ---------

@jax.jit
def phi(prob: LDAProblem, theta: LDAParams) -> Effective:
    """Eq. (7): ``w = U11 Gamma v21``, ``b = v21^T m_- - v22``,
    ``r = v21^T dm + 2 v22``, ``s = 2 u12 + U11 dm``."""
    U11, u12, v21, v22 = theta
    dm = prob.delta_m
    return Effective(U11 @ prob.cov @ v21, v21 @ prob.m_neg - v22, v21 @ dm + 2 * v22,
                     2 * u12 + U11 @ dm)


@jax.jit
def effective_score(prob: LDAProblem, zeta: Effective, x):
    """``g_zeta(x) = w^T x + b + r sigmoid(s0 + s^T x)`` (eq. (8))."""
    w, b, r, s = zeta
    return x @ w + b + r * jax.nn.sigmoid(prob.s0 + x @ s)


@jax.jit
def predictor(prob: LDAProblem, theta: LDAParams, x):
    """``f_theta(x)`` of eq. (6)."""
    return effective_score(prob, phi(prob, theta), x)


@jax.jit
def params_from_matrices(U, V) -> LDAParams:
    """Blocks of Lemma B.1 from full ``(d+1) x (d+1)`` matrices (the paper partitions ``U^T``;
    docs/topics/lda.md#lemma-b1-the-label-augmented-prompt)."""
    U, V = jnp.asarray(U), jnp.asarray(V)
    d = U.shape[0] - 1
    Ut = U.T
    return LDAParams(Ut[:d, :d], Ut[:d, d], V[d, :d], V[d, d])


@jax.jit
def label_augmented_mixture(prob: LDAProblem) -> GaussianMixture:
    """The law of the token ``(X, Y)``: components ``N((m_c, c), blockdiag(Gamma, 0))``."""
    d = prob.d
    cov = jnp.zeros((d + 1, d + 1)).at[:d, :d].set(prob.cov)
    means = jnp.stack([jnp.append(prob.m_pos, 1.0), jnp.append(prob.m_neg, -1.0)])
    return GaussianMixture(jnp.stack([prob.pi_pos, 1 - prob.pi_pos]), means,
                           jnp.stack([cov, cov]))


@jax.jit
def lemma_b1_output(prob: LDAProblem, U, V, x, y):
    """Full output vector of Lemma B.1 at the token ``(x, y)``."""
    U, V = jnp.asarray(U), jnp.asarray(V)
    d = prob.d
    Ut = U.T
    U11, u12, u21, u22 = Ut[:d, :d], Ut[:d, d], Ut[d, :d], Ut[d, d]
    s = x @ U11 + y * u21                        # U11^T x + y u21
    t = x @ u12 + y * u22
    alpha = jax.nn.sigmoid(prob.s0 + 2 * t + s @ prob.delta_m)
    top = s @ prob.cov + (1 - alpha) * prob.m_neg + alpha * prob.m_pos
    return V @ jnp.append(top, 2 * alpha - 1)


# ---------------------------------------------------------------- quadrature engine ---

def _gate_rule(center, kappa, n: int):
    """1-D rule for ``E_{t ~ N(0,1)} h(t)`` when ``h`` has a sigmoid of slope ``kappa``
    centred at ``center``: trapezoid in ``tau`` after ``t = c + sinh(tau) / kappa'``
    (``kappa' = max(|kappa|, 1)``, ``c`` = centre clipped to [-4, 4]), which puts nodes
    at spacing ~``h / kappa`` on the transition and ~``|t - c| h`` away from it.  The
    trapezoid converges geometrically in ``n`` for any slope, but the bulk of the
    Gaussian, up to ~7 from ``c``, needs ``h`` of a few hundredths: use n ~ 400-800."""
    kp = jnp.maximum(jnp.abs(kappa), 1.0)
    c = jnp.clip(center, -4.0, 4.0)
    T = jnp.arcsinh(14.0 * kp)
    tau = jnp.linspace(-1.0, 1.0, n) * T
    h = 2.0 * T / (n - 1)
    t = c + jnp.sinh(tau) / kp
    w = h * jnp.cosh(tau) / kp * jnp.exp(-0.5 * t**2) / jnp.sqrt(2 * jnp.pi)
    return t, w / jnp.sum(w)


def _nodes(prob: LDAProblem, dirs, order: int, gate_nodes: int | None = None):
    """Class-conditional nodes ``X_{c,i}`` (2, n, d), weights (2, n), and
    ``C_perp = A (I - Q Q^T) A^T`` for ``E[h(dirs X) ...]`` (module docstring).

    Tensor Gauss–Hermite of ``order`` per axis.  With ``gate_nodes``, the first axis
    (``dirs[0]`` must be the gate direction ``s``; it is then the standardised
    ``s^T X``) uses :func:`_gate_rule` with that many nodes, centred on each class's
    gate transition: needed when the gate is sharper than the GH node spacing."""
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
        t1, w1 = jax.vmap(lambda c: _gate_rule(c, kappa, gate_nodes))(center)
        tr, wr = (jnp.asarray(a) for a in gauss_hermite_nodes(order, k - 1))
        n1, nr = t1.shape[1], tr.shape[0]
        t = jnp.concatenate([jnp.broadcast_to(t1[:, :, None, None], (2, n1, nr, 1)),
                             jnp.broadcast_to(tr[None, None], (2, n1, nr, k - 1))],
                            -1).reshape(2, n1 * nr, k)
        om = (w1[:, :, None] * wr[None, None, :]).reshape(2, -1)
    X = means[:, None, :] + t @ AQ.T
    Cp = prob.cov - AQ @ AQ.T
    return X, om, Cp


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
    w, b, r, s = zeta
    sg = jax.nn.sigmoid(prob.s0 + X @ s)
    g = X @ w + b + r * sg
    c = jnp.array([1.0, -1.0])[:, None]
    loss = jax.nn.softplus(-c * g)
    if form == "eta":
        ws, bs = bayes_score(prob)
        l1 = jax.nn.sigmoid(g) - jax.nn.sigmoid(X @ ws + bs)
    else:
        l1 = -c * jax.nn.sigmoid(-c * g)          # d/dg
    l2 = jax.nn.sigmoid(g) * jax.nn.sigmoid(-g)   # d^2/dg^2
    return g, sg, loss, l1, l2


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

    The gate axis is integrated with :func:`_gate_rule` (``gate_nodes`` nodes, converged
    to round-off for any gate slope in our tests against Monte Carlo); ``gate_nodes=None``
    uses plain GH there, which is cheaper but under-resolves a sharp gate
    (``|Gamma^{1/2} s| >~ 5``: errors of 1e-5 to 1e-2 at order 64, possibly *below* R*)."""
    X, om, _ = _nodes(prob, _dirs(prob, zeta, "class"), order, gate_nodes)
    _, _, loss, _, _ = _pointwise(prob, zeta, X)
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


# ---------------------------------------------------------------- attention coords ----

def flatten(theta: LDAParams):
    """Flat vector of ``theta`` (order U11, u12, v21, v22) and the inverse map."""
    return ravel_pytree(theta)


def unflatten(like: LDAParams, vec) -> LDAParams:
    return ravel_pytree(like)[1](vec)


def _flat_eff(zeta: Effective):
    return jnp.concatenate([zeta.w, jnp.atleast_1d(zeta.b), jnp.atleast_1d(zeta.r), zeta.s])


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


@jax.jit
def jacobian_phi(prob: LDAProblem, theta: LDAParams):
    """``D Phi(theta)`` as a (2d+2) x (d^2+2d+1) matrix (flat orders of ``zeta``, ``theta``)."""
    vec, unr = ravel_pytree(theta)
    return jax.jacfwd(lambda v: _flat_eff(phi(prob, unr(v))))(vec)


@partial(jax.jit, static_argnames=("order", "form", "gate_nodes"))
def hessian(prob: LDAProblem, theta: LDAParams, order: int = DEFAULT_ORDER,
            form: str | None = None, gate_nodes: int | None = None):
    """``grad^2 R(theta) = DPhi^T grad^2 R~ DPhi + sum_j (grad R~)_j grad^2 Phi_j``
    (flat order of :func:`flatten`; ``form`` and ``gate_nodes`` as in :func:`grad_eff`)."""
    vec, unr = ravel_pytree(theta)
    zeta = phi(prob, theta)
    J = jacobian_phi(prob, theta)
    g = _flat_eff(grad_eff(prob, zeta, order, form, gate_nodes))
    Hz = hess_eff(prob, zeta, order, form, gate_nodes)
    H2 = jax.hessian(lambda v: g @ _flat_eff(phi(prob, unr(v))))(vec)
    return J.T @ Hz @ J + H2


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


# ---------------------------------------------------------------- sampling, prompts ---

@partial(jax.jit, static_argnames=("n",))
def sample(prob: LDAProblem, key, n: int):
    """``n`` i.i.d. pairs ``(X, Y)`` with ``Y in {-1, +1}``."""
    ky, kx = jax.random.split(key)
    y = jnp.where(jax.random.bernoulli(ky, prob.pi_pos, (n,)), 1.0, -1.0)
    m = jnp.where(y[:, None] > 0, prob.m_pos, prob.m_neg)
    x = m + jax.random.normal(kx, (n, prob.d), dtype=m.dtype) @ prob.chol.T
    return x, y


@partial(jax.jit, static_argnames=("kind",))
def prompt_predictor(theta: LDAParams, X, Y, x, kind: str = "softmax"):
    """Last output coordinate of attention of the queries ``(x, 0)`` (q, d) over a finite
    prompt of tokens ``(X, Y)`` (L, d), (L,): ``softmax`` or ``linear`` (1/L-normalised).
    Batched prompts: ``X`` (B, L, d), ``Y`` (B, L), ``x`` (B, q, d)."""
    U11, u12, v21, v22 = theta
    scores = jnp.einsum("...qd,de,...le->...ql", x, U11, X) + (x @ u12)[..., None] * Y[..., None, :]
    values = X @ v21 + v22 * Y                                     # (..., L)
    if kind == "softmax":
        return jnp.einsum("...ql,...l->...q", jax.nn.softmax(scores, -1), values)
    if kind == "linear":
        return jnp.einsum("...ql,...l->...q", scores, values) / X.shape[-2]
    raise ValueError(f"kind: unknown attention {kind!r}; use 'softmax' or 'linear'.")


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


@jax.jit
def linear_limit_weight(prob: LDAProblem, theta: LDAParams):
    """Infinite-prompt linear attention at ``(x, 0)``: its last coordinate is ``w^T x`` with
    ``w = U11 E[X (v21^T X + v22 Y)] + u12 E[Y (v21^T X + v22 Y)]`` (no bias path)."""
    U11, u12, v21, v22 = theta
    p = prob.pi_pos
    Exx = (p * jnp.outer(prob.m_pos, prob.m_pos) + (1 - p) * jnp.outer(prob.m_neg, prob.m_neg)
           + prob.cov)
    Exy = p * prob.m_pos - (1 - p) * prob.m_neg
    return U11 @ (Exx @ v21 + Exy * v22) + u12 * (Exy @ v21 + v22)


# ---------------------------------------------------------------- gradient descent ----

# The training engine caches its compiled program on the identity of the functions and of
# the optimiser: build them once per setting, so repeated runs (several starts, a sweep of
# problems passed as data) reuse one program.

@lru_cache(maxsize=32)
def _sgd(lr: float):
    return optax.sgd(lr)


@lru_cache(maxsize=32)
def _gd_value_and_grad(order: int):
    def vg(theta, prob, _key):
        return grad_and_sq_norm(prob, theta, order)
    return vg


@lru_cache(maxsize=32)
def _gd_metrics(order):
    def metrics(theta, prob):
        zeta = phi(prob, theta)
        return {"dist_E1": dist_E1(prob, zeta), "dist_E2": dist_E2(prob, zeta),
                "risk": risk_eff(prob, zeta, order), "theta": ravel_pytree(theta)[0]}
    return metrics


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


def gradient_descent(prob: LDAProblem, theta0: LDAParams, lr: float, steps: int,
                     record_every: int = 1, order: int = DEFAULT_ORDER, *,
                     progress: bool | None = None):
    """Population gradient descent ``theta <- theta - lr grad R(theta)`` with Lemma B.10's
    analytic gradient: :func:`gmtheory.training.train` with ``optax.sgd(lr)`` (no
    sampling; the problem is passed as ``data``, so one compiled program serves every
    problem of the same dimension).  Returns ``(theta_final, trace)`` where ``trace`` has
    ``dist_E1``, ``dist_E2``, ``risk`` (gate-resolved, :func:`risk_eff`) and the flat
    ``theta`` every ``record_every`` steps (``steps // record_every`` rows), and
    ``grad_sq``, the mean of ``|grad R|^2`` over each record (:func:`grad_and_sq_norm`)."""
    if steps % record_every:
        raise ValueError(f"steps: {steps} is not a multiple of record_every={record_every}.")
    res = train(None, theta0, _sgd(float(lr)), steps=steps, data=prob,
                value_and_grad_fn=_gd_value_and_grad(int(order)),
                record_every=record_every, metrics_fn=_gd_metrics(int(order)),
                progress=progress, desc="lda population GD")
    return res.params, {**res.history, "grad_sq": res.loss}


@partial(jax.jit, static_argnames=("order", "form", "gate_nodes"))
def _hessians(prob, theta, order, form, gate_nodes):
    return jax.vmap(lambda th: hessian(prob, th, order, form, gate_nodes))(theta)


def sgd_noise_floor(prob: LDAProblem, theta: LDAParams, lr: float, batch: int,
                    order: int = DEFAULT_ORDER, *, batched: bool = False,
                    gate_nodes: int | None = GATE_NODES, rtol: float = 1e-9):
    """Stationary excess risk of constant-step SGD (step ``lr``, ``batch`` fresh samples
    per step) near the Bayes manifold, from the linearised (Ornstein–Uhlenbeck) dynamics
    at ``theta``: returns ``(mean, sd)`` of the excess ``R(theta_t) - R*`` of a run that
    has reached its noise floor (arrays over the leading axis when ``batched``).

    Near a point of Theta* the loss is quadratic with Hessian ``H = grad^2 R(theta)``
    and, the logistic model being well specified there (``f_theta = f*``), the
    per-sample gradient covariance is the Fisher matrix ``E[eta(1-eta) grad f grad f^T]
    = H`` (Prop. B.12).  SGD ``theta <- theta - lr (H theta + xi)`` with
    ``Cov(xi) = H / batch`` then has, in each eigendirection ``lambda_i > 0`` of ``H``,
    the stationary variance ``p_i = lr / (batch (2 - lr lambda_i))``; the excess
    ``sum_i lambda_i x_i^2 / 2`` has mean ``sum_i lambda_i p_i / 2`` and variance
    ``sum_i (lambda_i p_i)^2 / 2`` (independent Gaussian modes).  Flat directions
    (eigenvalues below ``rtol`` times the largest) carry no noise and no excess.  The
    Hessian integrates the gate axis with ``gate_nodes`` nodes (:func:`risk_eff`), as
    SGD runs may end with sharp gates."""
    th = theta if batched else jax.tree.map(lambda a: jnp.asarray(a)[None], theta)
    Hs = np.asarray(_hessians(prob, th, order, None, gate_nodes))
    means, sds = [], []
    for H in Hs:
        ev = np.linalg.eigvalsh(H)
        lam = ev[ev > rtol * ev.max()]
        if np.any(lr * lam >= 2):
            raise ValueError(f"lr: {lr} is unstable for this Hessian (lr * lambda_max = "
                             f"{lr * lam.max():.3g} >= 2); constant-step SGD has no noise "
                             f"floor.")
        lp = lam * lr / (batch * (2 - lr * lam))
        means.append(0.5 * lp.sum())
        sds.append(np.sqrt(0.5 * np.sum(lp**2)))
    if batched:
        return np.array(means), np.array(sds)
    return float(means[0]), float(sds[0])
