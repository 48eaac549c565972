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

Modules: :mod:`~gmtheory.lda.problem` (the problem, its parameters, Bayes score and
sampling), :mod:`~gmtheory.lda.effective` (the map ``Phi`` and the predictors),
:mod:`~gmtheory.lda.landscape` (risk, gradients, Hessians, Bayes manifolds) and
:mod:`~gmtheory.lda.dynamics` (gradient descent, the SGD noise floor); every public name
is re-exported here, so ``lda.X`` is the way to call them.
"""

from .dynamics import gradient_descent, sgd_noise_floor
from .effective import (
    effective_score,
    flatten,
    jacobian_phi,
    lemma_b1_output,
    linear_limit_weight,
    params_from_matrices,
    phi,
    predictor,
    prompt_predictor,
    unflatten,
)
from .landscape import (
    bayes_parameters,
    dist_E1,
    dist_E2,
    grad,
    grad_and_sq_norm,
    grad_eff,
    hess_eff,
    hessian,
    invariant_set_residual,
    krylov_basis,
    linear_attention_optimum,
    reduced_loss,
    risk,
    risk_eff,
    table3_start,
    value_and_grad,
    zeta_R,
)
from .problem import (
    CONFIGS,
    DEFAULT_ORDER,
    GATE_NODES,
    Effective,
    LDAParams,
    LDAProblem,
    bayes_risk,
    bayes_score,
    config,
    label_augmented_mixture,
    posterior,
    sample,
)

__all__ = [
    "LDAProblem", "LDAParams", "Effective", "config", "CONFIGS", "DEFAULT_ORDER", "GATE_NODES",
    "bayes_score", "bayes_risk", "posterior", "phi", "predictor", "effective_score",
    "risk", "risk_eff", "grad", "grad_eff", "value_and_grad", "grad_and_sq_norm", "hessian",
    "hess_eff", "jacobian_phi",
    "bayes_parameters", "params_from_matrices", "lemma_b1_output", "label_augmented_mixture",
    "krylov_basis", "invariant_set_residual", "dist_E1", "dist_E2", "zeta_R",
    "reduced_loss", "sample", "prompt_predictor", "gradient_descent", "flatten", "unflatten",
    "linear_attention_optimum", "linear_limit_weight", "table3_start", "sgd_noise_floor",
]
