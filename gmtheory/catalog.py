"""The numbered results of the references and the forms in which the toolkit has them.

Each :class:`Result` names, for one theorem, proposition, lemma or equation of a
reference, its four forms:

* **derivation** — keys ``module.key`` of ``gmtheory.derivations.<module>.derive()``
  (usually residuals, which must be 0);
* **closed form** — dotted names of library functions;
* **estimate** — ids of ``gmtheory verify`` checks (quadrature, Monte Carlo, root finding);
* **trained** — names of ``gmtheory run`` simulations (a trained model where learning is
  involved; otherwise a simulation, which the note says);

with a one-line reason wherever a form is absent, and the figures that show it.  This
module is plain data: it imports nothing from ``verify``, ``simulations`` or ``figures``.
:func:`problems` checks the table against registries that the caller passes in
(``tests/test_catalog.py`` does so with the real ones), and :func:`four_forms_markdown`
renders it (``gmtheory derive`` writes ``derivations/four-forms.md``).

Length: over 600 lines because ``RESULTS`` is one table with an entry per numbered result
(the code is about 120 lines); splitting the table by topic would scatter the one list
that ``problems`` checks for completeness.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["Form", "Result", "RESULTS", "REFERENCES", "NOT_LISTED", "FORMS", "problems",
           "four_forms_markdown", "resolve"]

REFERENCES = {  # the works cited (docs/index.md#references)
    "SGM": "Gabet, Boursier and Boyer 2026, arXiv 2610.11798",
    "ICL": "Lu, Letey, Zavatone-Veth, Maiti and Pehlevan, PNAS 2025, arXiv 2405.11751",
    "R2S": "Hu, Lu, Lee and Liu 2026, arXiv 2604.24878",
    "GMA": "Huang and Raza 2026, arXiv 2606.18283",
}

FORMS = ("derivation", "closed_form", "estimate", "trained")


@dataclass(frozen=True)
class Form:
    """One form of a result: present when ``names`` is non-empty; ``note`` says why it is
    absent (required then) or qualifies it."""

    names: tuple[str, ...] = ()
    note: str = ""

    @property
    def present(self) -> bool:
        return bool(self.names)


def _f(*names: str, note: str = "") -> Form:
    return Form(tuple(names), note)


def _no(reason: str) -> Form:
    return Form((), reason)


@dataclass(frozen=True)
class Result:
    id: str
    reference: str            # "SGM docs/topics/operator.md#...": key of REFERENCES, then
    #                           the heading of the docs that states the result
    label: str                # "Prop. 2.1"
    statement: str
    derivation: Form
    closed_form: Form
    estimate: Form
    trained: Form
    figures: tuple[str, ...] = field(default_factory=tuple)


NO_LEARNING = "nothing to learn: an identity of the limit operator"

RESULTS: tuple[Result, ...] = (
    # ------------------------------------------------------------ SGM: the operator
    Result("prop-2.1", "SGM docs/topics/operator.md#prop-21-softmax-gated-affine-experts",
           "Prop. 2.1, eq. (2)",
           "Softmax attention on a Gaussian mixture is a softmax-gated sum of affine experts.",
           _f("attention_mgf.tilt_residual", "attention_mgf.prop21_residual"),
           _f("gmtheory.operators.softmax_attention_limit"),
           _f("operator.01a-prop2.1-monte-carlo", "operator.01b-prop2.1-gauss-hermite",
              "operator.01c-large-scores"),
           _f("prompt-convergence", "gated-experts",
              note="finite-prompt simulation; " + NO_LEARNING),
           ("prompt-convergence", "gated-experts")),
    Result("eq-3", "SGM docs/topics/operator.md#eq-3-shared-covariance", "Eq. (3)",
           "With a shared covariance the quadratic offsets cancel: V Γ U z + V Σ α_k m_k.",
           _f("attention_mgf.eq3_residual"),
           _f("gmtheory.operators.softmax_attention_limit_shared"),
           _f("operator.02-eq3-shared-covariance"),
           _f("gated-experts", note="simulation of the gates; " + NO_LEARNING),
           ("gated-experts",)),
    Result("gaussian-prompt", "SGM docs/topics/operator.md#the-gaussian-prompt", "Gaussian prompt",
           "T[N(m, Γ)](z) = V(m + Γ U z): affine, the softmax leaves no trace.",
           _f("attention_mgf.mgf_1d_residual", "attention_mgf.tilted_mean_1d_residual"),
           _f("gmtheory.operators.softmax_attention_limit"),
           _f("operator.03-gaussian-prompt"),
           _no("the one-component case of Prop. 2.1; " + NO_LEARNING)),
    Result("prop-A.1", "SGM docs/topics/operator.md#prop-a1-generalised-scores", "Prop. A.1",
           "Any positive alignment: T_a[Σ π_k μ_k] = Σ r_k T_a[μ_k] with r_k ≥ 0, Σ r_k = 1.",
           _no("linearity of the integral in one line; no symbolic step to check"),
           _f("gmtheory.operators.mixture_decomposition"),
           _f("operator.04-propA1-decomposition"),
           _no("an identity on measures; " + NO_LEARNING)),
    Result("linear-attention", "SGM docs/topics/operator.md#lemma-c7-linear-attention-has-no-gates",
           "Linear attention, Lemma C.7",
           "T_lin[μ](z) = V E[zzᵀ] U z: linear in z, mixture weights fixed.",
           _no("an exchange of sum and integral; no symbolic step to check"),
           _f("gmtheory.operators.linear_attention_limit"),
           _f("operator.05a-linear-attention", "operator.05b-linear-prompt-rate"),
           _f("prompt-convergence", note="finite-prompt simulation; " + NO_LEARNING),
           ("prompt-convergence",)),
    Result("prompt-rate",
           "SGM docs/topics/operator.md#finite-prompts-rate-and-effective-sample-size",
           "Finite-prompt rate and ESS [derived]",
           "The empirical operator converges at L^-1/2 with effective sample size "
           "L (E w)²/E w².",
           _no("a delta-method rate, not an identity"),
           _f("gmtheory.operators.effective_sample_size",
              "gmtheory.operators.finite_prompt_variance"),
           _f("operator.06-softmax-prompt-rate-and-ess"),
           _f("prompt-convergence", note="finite-prompt simulation"),
           ("prompt-convergence",)),
    # ---------------------------------------------------------------- SGM: LDA
    Result("eq-5", "SGM docs/topics/lda.md#eqs-45-model-and-bayes-score", "Eq. (5)",
           "Bayes score f*(x) = w*ᵀx + b* = log η/(1 − η).",
           _no("the log-ratio of two Gaussian densities; the same algebra is derived for "
               "the denoising posterior (denoising.logit_residual)"),
           _f("gmtheory.lda.bayes_score"),
           _f("lda.08-bayes-score"),
           _no("the target of learning, not a learned model")),
    Result("lemma-B.1", "SGM docs/topics/lda.md#lemma-b1-the-label-augmented-prompt",
           "Lemma B.1, eqs. (6)–(7)",
           "At (x, 0) the last output is f_θ(x) = wᵀx + b + r σ(s₀ + sᵀx) with (w, b, r, s) "
           "= Φ(θ).",
           _f("lda_effective.quad_offset_residual", "lda_effective.gate_residual",
              "lda_effective.affine_part_residual", "lda_effective.amplitude_residual"),
           _f("gmtheory.lda.phi", "gmtheory.lda.predictor", "gmtheory.lda.lemma_b1_output"),
           _f("lda.07-effective-predictor"),
           _f("lda-finite-prompt", note="softmax heads trained on finite C1 prompts"),
           ("lda-finite-prompt",)),
    Result("lemma-B.3", "SGM docs/topics/lda.md#lemma-b3-bayes-realising-parameters", "Lemma B.3",
           "Explicit Bayes-realising parameters (cases 1, 2(a), 2(b)), all with s = 0.",
           _no("explicit parameter choices; eqs. (6)–(7) at s = 0 are derived in "
               "lda_effective"),
           _f("gmtheory.lda.bayes_parameters"),
           _f("lda.09-bayes-parameters"),
           _no("constructed, not trained")),
    Result("lemma-B.4", "SGM docs/topics/lda.md#lemmas-b4-b7-and-remark-b5-why-the-logistic-loss",
           "Lemma B.4",
           "The logistic population risk is minimised by the Bayes score.",
           _no("a pointwise variational argument, not an identity"),
           _f("gmtheory.lda.bayes_score"),
           _f("lda.10-logistic-minimiser", "lda.24-sweep-bayes-bounds",
              "lda.25-finite-prompt-bounds"),
           _f("lda-sweep", "lda-finite-prompt",
              note="no trained head below R*; linear attention at R* iff b* = 0"),
           ("lda-sweep", "lda-finite-prompt")),
    Result("lemma-B.10", "SGM docs/topics/lda.md#lemmas-b9-and-b10-gradients", "Lemmas B.9–B.10",
           "Effective and attention-parameter gradients; ∇R = DΦᵀ ∇R̃.",
           _f("lda_effective.lemma_b10_residual"),
           _f("gmtheory.lda.grad", "gmtheory.lda.grad_eff", "gmtheory.lda.jacobian_phi"),
           _f("lda.11-gradients"),
           _f("lda-fig1", note="population gradient descent with these gradients"),
           ("fig1",)),
    Result("thm-3.1", "SGM docs/topics/lda.md#thm-31-the-effective-landscape", "Thm 3.1",
           "Every critical point of R̃ is a global minimiser; argmin R̃ = E₁ ∪ E₂.",
           _no("a convexity argument in (w, b, r) at fixed s, not an identity"),
           _f("gmtheory.lda.risk_eff", "gmtheory.lda.bayes_risk"),
           _f("lda.12-effective-landscape"),
           _f("lda-sweep", "lda-sgd", note="trained heads reach R* (excess risk)"),
           ("lda-sweep", "fig5")),
    Result("lemma-3.2", "SGM docs/topics/lda.md#lemma-32-regularity-of-phi", "Lemma 3.2",
           "DΦ is surjective iff m₁ ≠ −m₋₁ and v₂₁ ≠ 0.",
           _no("a rank statement; the Jacobian is symbolic in lda_effective "
               "(lemma_b10_residual) and its rank is measured numerically"),
           _f("gmtheory.lda.jacobian_phi"),
           _f("lda.13-phi-regularity"),
           _no("a property of the parametrisation")),
    Result("thm-3.3", "SGM docs/topics/lda.md#thm-33-strict-saddles", "Thm 3.3, Lemma B.22",
           "If m₁ ≠ −m₋₁, every critical point is a global minimiser or a strict saddle.",
           _no("the negative-curvature direction is checked numerically, not symbolically"),
           _f("gmtheory.lda.hessian"),
           _f("lda.14-strict-saddle"),
           _no("checked by the gradient-descent runs inside lda.14, not by a simulation")),
    Result("prop-3.4", "SGM docs/topics/lda.md#prop-34-minimising-sequences-at-infinity",
           "Prop. 3.4",
           "Minimising sequences at infinity: g_{ζ_R} → f* in L¹ as R → ∞.",
           _no("an asymptotic expansion in 1/R, checked numerically"),
           _f("gmtheory.lda.zeta_R"),
           _f("lda.15-minimising-sequence"),
           _no("a sequence of parameters, not a training run")),
    Result("lemma-B.13", "SGM docs/topics/lda.md#prop-b12-and-lemma-b13-the-effective-hessian",
           "Prop. B.12, Lemma B.13, Prop. B.30",
           "Kernels of the effective Hessian on E₁ (s ≠ 0, s = 0) and on E₂.",
           _no("kernel dimensions are measured numerically"),
           _f("gmtheory.lda.hess_eff"),
           _f("lda.16-effective-hessian"),
           _no("a property of the risk at its minimisers")),
    Result("morse-bott", "SGM docs/topics/lda.md#lemma-b26-the-regular-manifold-is-morse-bott",
           "Lemma B.26 (Θ₁ Morse–Bott), Cor. B.31 (Θ₂ not)",
           "∇²R has d²+d−1 zero eigenvalues on Θ₁^reg, d²+d on Θ₂ where dim TΘ₂ = d².",
           _no("eigenvalue counts are measured numerically"),
           _f("gmtheory.lda.hessian"),
           _f("lda.17-morse-bott-theta1", "lda.18-not-morse-bott-theta2"),
           _f("lda-fig1", note="gradient descent near Θ₁ and Θ₂ (Fig. 1)"),
           ("fig1",)),
    Result("thm-3.5", "SGM docs/topics/lda.md#thm-35-local-convergence", "Thm 3.5",
           "Local exponential convergence of gradient flow near Θ₁^reg.",
           _no("a dynamical statement"),
           _f("gmtheory.lda.dist_E1", "gmtheory.lda.dist_E2"),
           _f("lda.19-figure1-convergence"),
           _f("lda-fig1", note="population gradient descent from Table 3's starts"),
           ("fig1",)),
    Result("thm-3.6", "SGM docs/topics/lda.md#thm-36-global-convergence-on-an-invariant-subspace",
           "Thm 3.6",
           "From the invariant subspace T_K, gradient flow converges globally to w*.",
           _no("a dynamical statement"),
           _f("gmtheory.lda.krylov_basis", "gmtheory.lda.invariant_set_residual"),
           _f("lda.20-krylov-invariance", "lda.23-figures4-5-sgd"),
           _f("lda-sgd", note="SGD from the Fig. 4 and Fig. 5 initialisations"),
           ("fig4", "fig5")),
    Result("prop-B.35", "SGM docs/topics/lda.md#prop-b35-krylov-feasibility", "Prop. B.35",
           "K = R^d iff Γ has distinct eigenvalues and m meets every eigenspace.",
           _no("a linear-algebra fact, checked on examples"),
           _f("gmtheory.lda.krylov_basis"),
           _f("lda.21-krylov-dimension"),
           _no("a property of (Γ, m)")),
    Result("lemma-B.32", "SGM docs/topics/lda.md#lemmas-b32-and-b6-coercivity", "Lemmas B.6, B.32",
           "E[X₊] = μΦ(μ/σ) + σφ(μ/σ); L(w) ≥ C₁‖w‖ (coercivity).",
           _no("a Gaussian integral and an inequality, checked numerically"),
           _f("gmtheory.lda.reduced_loss", note="the reduced loss L(w); the constant C₁ "
              "is computed inside the check"),
           _f("lda.22-coercivity"),
           _no("a property of the loss")),
    # ---------------------------------------------------------- SGM: denoising
    Result("eq-10", "SGM docs/topics/denoising.md#eqs-910-the-bayes-denoiser",
           "Eq. (10), Prop. C.1",
           "Bayes denoiser f*(z) = ΓS⁻¹z + ξ²S⁻¹ Σ β_k(z) m_k (= Tweedie).",
           _f("denoising.posterior_mean_residual", "denoising.posterior_weight_residual",
              "denoising.tweedie_residual"),
           _f("gmtheory.denoising.bayes_denoiser", "gmtheory.denoising.tweedie_denoiser",
              "gmtheory.denoising.posterior_mean", "gmtheory.denoising.posterior_trace"),
           _f("denoising.24-bayes-denoiser", "denoising.34-posterior-any-covariance"),
           _no("the target of learning; trained models of it are the Thm 4.1 rows")),
    Result("eq-11", "SGM docs/topics/denoising.md#eq-11-isotropic-equal-norm-means", "Eq. (11)",
           "Γ = γ²I and equal norms: the offsets cancel, β = softmax(log π + mᵀz/s).",
           _f("denoising.eq11_offset_residual", "denoising.eq11_linear_residual"),
           _f("gmtheory.denoising.bayes_denoiser", "gmtheory.denoising.posterior_weights"),
           _f("denoising.25-equal-norm-form"),
           _no("the target of learning")),
    Result("noisy-prompt", "SGM docs/topics/denoising.md#attention-on-the-noisy-prompt",
           "Attention on μ_Z",
           "T[μ_Z](z) = V S U z + V Σ α_k m_k (eq. (3) on the noisy prompt).",
           _f("attention_mgf.eq3_residual"),
           _f("gmtheory.denoising.heads_output", "gmtheory.denoising.noisy_mixture"),
           _f("denoising.26-attention-on-noisy-prompt"),
           _no(NO_LEARNING)),
    Result("thm-4.1-i", "SGM docs/topics/denoising.md#thm-41-i-and-prop-c5-two-exact-heads",
           "Thm 4.1 (i), Prop. C.5 (App. C.6)",
           "Two heads realise f* exactly: (C1)–(C3), non-collinear and opposite means.",
           _f("denoising.C1_residual", "denoising.C2_residual", "denoising.C3_residual",
              "denoising.two_head_exact_residual", "denoising.opposite_exact_residual"),
           _f("gmtheory.denoising.two_head_construction"),
           _f("denoising.27-two-heads-exact", "denoising.33-figure2-two-heads",
              "denoising.35-phase-diagram"),
           _f("denoise-fig2", "denoise-sweep",
              note="two heads trained by online SGD (Fig. 2) and over a phase diagram"),
           ("denoise-fig2", "denoise-phase")),
    Result("thm-4.1-ii",
           "SGM docs/topics/denoising.md#thm-41-ii-and-prop-c4-one-head-needs-equal-variances",
           "Thm 4.1 (ii), Prop. C.4",
           "One head is exact iff γ² = ξ².",
           _f("denoising.single_head_solution_residual",
              "denoising.single_head_exchanged_residual",
              "denoising.single_head_converse_residual"),
           _f("gmtheory.denoising.single_head_construction"),
           _f("denoising.28-single-head", "denoising.35-phase-diagram"),
           _f("denoise-sweep", note="best single head (L-BFGS) over (ξ/γ, separation)"),
           ("denoise-phase", "denoise-fig2")),
    Result("thm-4.1-iii", "SGM docs/topics/denoising.md#thm-41-iii-and-prop-c6-the-linear-gap",
           "Thm 4.1 (iii), Prop. C.6",
           "Linear attention keeps a positive gap R(A*) − R(f*) = E‖A*Z − f*(Z)‖² > 0.",
           _f("denoising.normal_equations_residual", "denoising.risk_at_optimum_residual",
              "denoising.excess_identity_residual", "denoising.excess_gaussian_residual"),
           _f("gmtheory.denoising.linear_optimum", "gmtheory.denoising.linear_risk",
              "gmtheory.denoising.linear_gap"),
           _f("denoising.29-linear-gap", "denoising.35-phase-diagram"),
           _f("denoise-sweep", note="linear attention over the phase diagram; trained "
              "multi-head/two-layer linear networks run inside denoising.29"),
           ("denoise-phase", "denoise-fig2")),
    Result("prop-C.3", "SGM docs/topics/denoising.md#remark-42-and-prop-c3-degenerate-mixtures",
           "Remark 4.2, Prop. C.3",
           "γ = 0: two heads (independent means) or one head (opposite means) are exact.",
           _f("denoising.degenerate_two_head_residual", "denoising.degenerate_one_head_residual"),
           _f("gmtheory.denoising.degenerate_construction"),
           _f("denoising.30-degenerate"),
           _no("constructed; the single-head optimisation runs inside denoising.30")),
    Result("prop-4.3",
           "SGM docs/topics/denoising.md#prop-43-the-denoising-to-clustering-transition",
           "Prop. 4.3",
           "Iterating f*: collapse to the midpoint for λ ≤ 1, two stable fixed points "
           "±u_λ for λ > 1 (u = tanh(λ²u), λ²(1 − u²) < 1).",
           _f("denoising.line_map_residual", "denoising.derivative_residual",
              "denoising.concavity_residual", "denoising.critical_series_residual"),
           _f("gmtheory.denoising.u_lambda", "gmtheory.denoising.iterate_denoiser"),
           _f("denoising.31-clustering-transition"),
           _f("denoise-iterates", note="iterated Bayes denoiser; nothing is trained"),
           ("denoise-fig3", "denoise-transition")),
    Result("prop-4.4",
           "SGM docs/topics/denoising.md#prop-44-in-context-denoising-with-residual-attention",
           "Prop. 4.4",
           "Residual two-head attention with task-independent weights is the Bayes denoiser "
           "of every task.",
           _f("denoising.prop44_residual", "denoising.prop44_gate_residual"),
           _f("gmtheory.denoising.residual_icl_parameters", "gmtheory.denoising.residual_icl"),
           _f("denoising.32-residual-icl", "denoising.36-trained-icl-bounds"),
           _f("icl-denoising", note="residual two-head attention trained on prompts of L "
              "tokens"),
           ("icl-denoising",)),
    # ------------------------------------------------------------- ICL reference
    Result("icl-exact-error", "ICL docs/topics/icl.md#exact-test-error-of-a-fixed-gamma",
           "Exact finite-d test error",
           "e(Γ) = 1 + ρ − (2/d) tr(Γ𝒜) + ((1+ρ)/d) tr(ΓᵀΓℬ) for any Γ; on the ICL test "
           "it is least, 1 + ρ − c, at Γ* = [cI, 0], c = 1/((1+ρ)/α + 1 + 1/ℓ).",
           _f("nonlinearity_noise.linear_target_residual",
              "nonlinearity_noise.trace_invariants_residual"),
           _f("gmtheory.icl.test_error", "gmtheory.icl.optimum_error"),
           _f("icl.03-exact-error-vs-monte-carlo", "icl.02-consistency-limits"),
           _f("icl-finite-d", "icl-softmax",
              note="ridge-pretrained Γ* evaluated with it; linear attention's best error "
                   "beside the softmax head's"),
           ("icl-finite-d", "icl-softmax")),
    Result("icl-simulator", "ICL docs/topics/icl.md#data-model-and-the-reduced-model",
           "Pretraining simulator",
           "H_Z in O(d) per prompt from χ² and Gaussian draws; ridge Γ* by preconditioned "
           "conjugate gradients (Cholesky for d(d+1) ≤ 400).",
           _no("an exact reparametrisation of the token sums, written in the docstring"),
           _f("gmtheory.icl.sample_statistics", "gmtheory.icl.ridge_cg",
              "gmtheory.icl.ridge_solve"),
           _f("icl.17-pretraining-simulator"),
           _no("the engine every ICL simulation runs; nothing trained here")),
    Result("icl-mp", "ICL docs/topics/icl.md#marchenko-pastur-resolvent", "Marchenko–Pastur M_κ",
           "M = (x + 1/(1 + M/κ))⁻¹, M_κ(x) = 2/(x + 1 − 1/κ + √(…)), M_∞ = 1/(1+x).",
           _f("icl_asymptotics.fixed_point_form_residual",
              "icl_asymptotics.M_kappa_root_residual", "icl_asymptotics.dM_kappa_residual",
              "icl_asymptotics.M_inf_residual"),
           _f("gmtheory.icl.M_kappa", "gmtheory.icl.dM_kappa"),
           _f("icl.01-marchenko-pastur"),
           _no("a spectral property of the task pool; nothing to learn")),
    Result("icl-ridge", "ICL docs/topics/icl.md#ridge-equation", "Ridge equation and ridge e_ICL",
           "ε is the root of 1 − τ + τλ/ε − ε M_κ(q + ε) = 0; e_ICL(ε).",
           _f("icl_asymptotics.feature_covariance_residual",
              "icl_asymptotics.ridge_rearrangement_residual",
              "icl_asymptotics.ridge_inf_root_residual"),
           _f("gmtheory.icl.ridge_epsilon", "gmtheory.icl.e_icl_ridge"),
           _f("icl.02-consistency-limits", "icl.04-simulation-approaches-theory",
              "icl.04-simulation-approaches-theory-paper", "icl.13-double-descent-limit",
              "icl.13-double-descent-limit-paper", "icl.14-alpha-limit",
              "icl.14-alpha-limit-paper"),
           _f("icl-double-descent", "icl-alpha", "icl-finite-d",
              note="ridge pretraining simulations"),
           ("icl-double-descent", "icl-alpha", "icl-finite-d")),
    Result("icl-ridgeless", "ICL docs/topics/icl.md#ridgeless-errors",
           "Ridgeless e_ICL, e_IDG, g_task",
           "Closed forms on both sides of τ = 1; double descent, non-monotone α, the κ "
           "transition.",
           _no("transcribed from Lu et al.; only their τ → ∞ limit is derived "
               "(icl_asymptotics.ridgeless_icl_limit_residual)"),
           _f("gmtheory.icl.e_icl_ridgeless", "gmtheory.icl.e_idg_ridgeless",
              "gmtheory.icl.g_task_ridgeless"),
           _f("icl.02-consistency-limits", "icl.07-authors-quick-figure",
              "icl.07-authors-quick-figure-paper", "icl.15-gtask-readings",
              "icl.16-infinite-data-pool-optimum"),
           _f("icl-double-descent", "icl-alpha", "icl-gtask", "icl-authors",
              note="ridge pretraining simulations; the authors' protocol beside their data"),
           ("icl-double-descent", "icl-alpha", "icl-gtask", "icl-authors")),
    Result("icl-limit", "ICL docs/topics/icl.md#asymptotic-theory", "τ, κ → ∞ limit",
           "e_ICL → ρ + (1 + ρ)/(α + 1 + ρ).",
           _f("icl_asymptotics.ridge_tau_limit_residual", "icl_asymptotics.limit_large_residual",
              "icl_asymptotics.ridgeless_icl_limit_residual"),
           _f("gmtheory.icl.limit_large"),
           _f("icl.02-consistency-limits"),
           _no("a limit of the theory; no finite simulation reaches it")),
    Result("icl-softmax", "SGM docs/topics/icl.md#softmax-attention-on-the-regression-task",
           "Softmax head on ICL regression [derived]",
           "One softmax head: linear in the infinite-prompt limit (error ρ); at finite "
           "prompts its best error is ρ + V*/(1 + V*), linear attention's at prompt length "
           "ℓ/e as d → ∞.",
           _f("icl_softmax.tilt_residual", "icl_softmax.variance_residual",
              "icl_softmax.min_error_residual", "icl_softmax.t_star_residual",
              "icl_softmax.lu_at_alpha_over_e_residual", "icl_softmax.chi_mgf_residual"),
           _f("gmtheory.icl_softmax.softmax_head_optimum", "gmtheory.icl_softmax.isotropic_error"),
           _f("icl.09-softmax-regression", "icl.09-softmax-regression-paper"),
           _f("icl-softmax", note="softmax and linear heads trained online on fresh prompts"),
           ("icl-softmax",)),
    Result("icl-softmax-exact",
           "SGM docs/topics/icl.md#the-isotropic-head-at-every-prompt-length",
           "Softmax head at every prompt length [derived]",
           "The isotropic head's exact error at any (ℓ, d): its tokens enter through their "
           "projections on the query, the softmax moments are one-dimensional integrals.",
           _f("icl_softmax.exact_error_residual", "icl_softmax.exact_pq_residual",
              "icl_softmax.laplace_residual", "icl_softmax.small_tilt_residual"),
           _f("gmtheory.icl_softmax.finite_prompt_error",
              "gmtheory.icl_softmax.finite_prompt_optimum"),
           _f("icl.11-softmax-every-prompt-length", "icl.11-softmax-every-prompt-length-paper"),
           _f("icl-softmax-exact", note="Monte Carlo of the d-dimensional head"),
           ("icl-softmax-exact",)),
    Result("icl-dmmse", "ICL docs/topics/icl.md#dmmse", "dMMSE",
           "Posterior mean of y over a uniform prior on the finite task pool.",
           _no("a posterior over a finite pool, no closed form to derive"),
           _f("gmtheory.icl.dmmse_error", note="Monte Carlo; on a pool of two tasks its IDG "
              "error is a 2-D integral (icl.12)"),
           _f("icl.12-dmmse-two-task-pool", "icl.07-authors-quick-figure",
              "icl.07-authors-quick-figure-paper"),
           _f("icl-gtask", "icl-authors", note="beside the pretrained model's g_task"),
           ("icl-gtask", "icl-authors")),
    Result("hermite-coefficients", "ICL docs/topics/icl.md#hermite-coefficients",
           "Hermite coefficients",
           "c_k and E f² of ReLU, sign, |z|, z², z³, erf, sin, cos.",
           _f("hermite_closed_forms.relu", "hermite_closed_forms.sign",
              "hermite_closed_forms.abs", "hermite_closed_forms.erf"),
           _f("gmtheory.derivations.hermite_closed_forms.numeric"),
           _f("hermite.01-closed-forms", "hermite.02-parseval-and-stein"),
           _no("properties of fixed functions; nothing to learn")),
    Result("erf-square", "ICL docs/topics/icl.md#hermite-coefficients",
           "E erf(z)² = (2/π) arcsin(2/3)",
           "From E erf(az)erf(bz) = (2/π) arcsin(2ab/√((1+2a²)(1+2b²))).",
           _f("nonlinearity_noise.erf_derivative_residual",
              "nonlinearity_noise.erf_square_residual"),
           _f("gmtheory.derivations.nonlinearity_noise.erf_square_moment"),
           _f("hermite.01-closed-forms"),
           _no("a Gaussian integral; nothing to learn")),
    Result("icl-nonlinear-error", "ICL docs/topics/icl.md#the-nonlinearity-noise-equivalence",
           "Exact error for y = f(xᵀw) + ε",
           "e = m₂ − (2/d)[c₁² tr(Γ₁R̂) + c₁m₂ γᵀμ̂] + (1/d) tr(ΓᵀΓB).",
           _f("nonlinearity_noise.label_moments_residual",
              "nonlinearity_noise.trace_invariants_residual"),
           _f("gmtheory.icl.test_error_nonlinear", "gmtheory.hermite.label_moments"),
           _f("icl.03-exact-error-vs-monte-carlo"),
           _f("icl-equivalence", note="Γ* pretrained on nonlinear targets"),
           ("icl-equivalence",)),
    Result("icl-equivalence", "ICL docs/topics/icl.md#the-nonlinearity-noise-equivalence",
           "Nonlinearity–noise equivalence",
           "f acts as the linear target c₁z plus noise ρ_eff = E f² + σ² − c₁² (− c₀² "
           "when centred), up to O(1/ℓ) terms.",
           _f("nonlinearity_noise.rho_eff_uncentred_residual",
              "nonlinearity_noise.equivalence_residual", "nonlinearity_noise.large_d_residual",
              "nonlinearity_noise.rescaling_residual"),
           _f("gmtheory.hermite.effective_noise"),
           _f("hermite.03-effective-noise", "icl.05-nonlinearity-noise-equivalence",
              "icl.05-nonlinearity-noise-equivalence-paper", "icl.10-ridge-rescaling",
              "icl.10-ridge-rescaling-paper"),
           _f("icl-equivalence", note="pretraining on f and on its linear equivalent"),
           ("icl-equivalence", "icl-equivalence-ridge")),
    Result("icl-c1-zero", "ICL docs/topics/icl.md#nothing-learnable-when-c1-0",
           "c₁ = 0: nothing learnable",
           "The ridgeless error is m₂τ/(τ−1) (τ > 1) or m₂/(1−τ) (τ < 1).",
           _no("the c₁ = 0 case of the equivalence; not derived separately"),
           _f("gmtheory.simulations.icl_c1_zero.predicted",
              note="m₂ by quadrature (gmtheory.hermite.label_moments)"),
           _f("icl.06-nothing-learnable", "icl.06-nothing-learnable-paper"),
           _f("icl-c1-zero", note="ridge pretraining on |z| and z², the exact error of each Γ"),
           ("icl-c1-zero",)),
    Result("icl-nonlinear-kappa", "ICL docs/topics/icl.md#the-nonlinearity-noise-equivalence",
           "Equivalence across task diversity",
           "For y = f(xᵀw) + ε, g_task(κ) ≈ c₁² g_Lu(κ; ρ_eff/c₁²): the memorisation → ICL "
           "transition moves with f only through ρ_eff/c₁²; with c₁ = 0 nothing is learnable "
           "at any κ.",
           _f("nonlinearity_noise.equivalence_residual", "nonlinearity_noise.rescaling_residual"),
           _f("gmtheory.icl.g_task_ridgeless", "gmtheory.hermite.label_moments"),
           _f("icl.08-nonlinear-kappa-equivalence", "icl.08-nonlinear-kappa-equivalence-paper"),
           _f("icl-nonlinear-kappa", note="pretraining on f and on its linear equivalent, "
              "κ from 0.1 to 100"),
           ("icl-nonlinear-kappa",)),
    # ------------------------------------------------------------------ R2S reference
    Result("relu-block", "R2S docs/topics/approx.md#relu-from-one-head-over-two-keys",
           "ReLU from one head",
           "sup_t |t σ(βt) − ReLU(t)| = c/β, c = W(1/e) ≈ 0.2785.",
           _f("relu_softmax.maximiser_residual", "relu_softmax.constant_residual"),
           _f("gmtheory.approx.relu", "gmtheory.approx.relu_bound"),
           _f("approx.relu-two-key-head"),
           _f("approx-rates", "approx-trained",
              note="measured construction; trained attention-ReLU networks of the same "
                   "size"),
           ("approx-rates", "approx-trained")),
    Result("interpolation-head", "R2S docs/topics/approx.md#interpolation-head",
           "Interpolation head",
           "p anchors approximate clip(y, a, b) within h + 2(b − a)q/(1 − q).",
           _f("relu_softmax.left_gap_residual", "relu_softmax.right_gap_residual",
              "relu_softmax.geometric_residual"),
           _f("gmtheory.approx.interpolation_head", "gmtheory.approx.interpolation_head_affine",
              "gmtheory.approx.interpolation_bound"),
           _f("approx.interpolation-head"),
           _f("approx-rates", "approx-trained",
              note="measured construction; trained networks of the same size"),
           ("approx-rates", "approx-trained")),
    Result("max-one-head", "R2S docs/topics/approx.md#max-and-min", "max/min with one head",
           "0 ≤ max − Σ softmax(βx)_i x_i ≤ log(n)/β.",
           _f("relu_softmax.entropy_identity_residual", "relu_softmax.kl_identity_residual",
              "relu_softmax.family_constant_residual"),
           _f("gmtheory.approx.max_one_head", "gmtheory.approx.max_one_head_bound"),
           _f("approx.max-one-head"),
           _f("approx-rates", "approx-trained",
              note="measured construction; trained networks of the same size"),
           ("approx-rates", "approx-trained")),
    Result("max-relu-tree", "R2S docs/topics/approx.md#max-and-min", "max by a ReLU tree",
           "max(x, y) = y + ReLU(x − y), depth ⌈log₂ n⌉, error ⌈log₂ n⌉ c/β.",
           _no("the ReLU constant composed with the 1-Lipschitz max; no new constant"),
           _f("gmtheory.approx.max_relu_tree", "gmtheory.approx.max_relu_tree_bound"),
           _f("approx.max-relu-tree"),
           _f("approx-rates", "approx-trained",
              note="measured construction; trained networks of the same size"),
           ("approx-rates", "approx-trained")),
    Result("square", "R2S docs/topics/approx.md#multiplication-yarotsky", "x² (Yarotsky)",
           "x − Σ_{s≤m} g_s(x)/4^s within 4^-(m+1) + 8c/β.",
           _f("relu_softmax.hat_recursion_residual", "relu_softmax.square_series_residual"),
           _f("gmtheory.approx.square", "gmtheory.approx.square_bound"),
           _f("approx.square-yarotsky"),
           _f("approx-rates", "approx-trained",
              note="measured construction; trained networks of the same size"),
           ("approx-rates", "approx-trained")),
    Result("multiply", "R2S docs/topics/approx.md#multiplication-yarotsky", "xy",
           "xy = 2 sq((x+y)/2) − sq(x)/2 − sq(y)/2 within 3× the squaring bound.",
           _no("the polarisation identity with coefficients 2 + ½ + ½; no new constant"),
           _f("gmtheory.approx.multiply", "gmtheory.approx.multiply_bound"),
           _f("approx.multiply"),
           _f("approx-rates", "approx-trained",
              note="measured construction; trained networks of the same size"),
           ("approx-rates", "approx-trained")),
    Result("reciprocal-pl", "R2S docs/topics/approx.md#reciprocal-on-a-1", "1/x piecewise linear",
           "n attention-ReLUs within (1−a)²/(4a³n²) + TV·c/β on [a, 1].",
           _no("the interpolation error h² max|f''|/8 is standard; not derived here"),
           _f("gmtheory.approx.reciprocal_pl", "gmtheory.approx.reciprocal_pl_bound"),
           _f("approx.reciprocal-pl"),
           _f("approx-rates", "approx-trained",
              note="measured construction; trained networks of the same size"),
           ("approx-rates", "approx-trained")),
    Result("reciprocal-newton", "R2S docs/topics/approx.md#reciprocal-on-a-1", "1/x by Newton",
           "y ← y(2 − xy) with attention products: R_{k+1} = R_k² + δ.",
           _f("relu_softmax.newton_residual"),
           _f("gmtheory.approx.reciprocal_newton", "gmtheory.approx.reciprocal_newton_bound"),
           _f("approx.reciprocal-newton"),
           _f("approx-rates", "approx-trained",
              note="measured construction; trained networks of the same size"),
           ("approx-rates", "approx-trained")),
    Result("max-one-head-gap", "R2S docs/topics/approx.md#max-and-min",
           "max with one head: gap bound",
           "0 ≤ max − Σ softmax(βx)_i x_i ≤ (n − 1)·range·e^{−βδ}, δ the top-2 gap.",
           _no("each non-maximal softmax weight is ≤ e^{−βδ}; one line, no sympy needed"),
           _f("gmtheory.approx.max_one_head", "gmtheory.approx.max_one_head_gap_bound"),
           _f("approx.max-one-head-gap"),
           _no("measured inside the check; no figure yet"),
           ()),
    Result("compiled-relu-network", "R2S docs/topics/approx.md#compile-your-own-relu-network",
           "Compile your own ReLU network",
           "Any ReLU network on a box, one attention-ReLU head per hidden unit, within the "
           "bound of interval arithmetic and 1-Lipschitz error propagation.",
           _no("interval arithmetic and the two-key head's tail bound; proof in the docs"),
           _f("gmtheory.approx.compile_relu_network", "gmtheory.approx.relu_network_bound"),
           _f("approx.compiled-relu-network"),
           _f("approx-compiled", note="compiled random networks over beta and eps; nothing "
              "trained"),
           ("approx-compiled",)),
    Result("composition-rules", "R2S docs/topics/approx.md#composition-rules",
           "Composition rules",
           "Sums, products, squares, reciprocals, max/min, ReLU, clip and ReLU networks of "
           "emulated expressions on a box, with one certified sup-error bound.",
           _f("relu_softmax.product_rescale_residual", "relu_softmax.product_error_residual",
              "relu_softmax.square_rescale_residual", "relu_softmax.square_error_residual",
              "relu_softmax.reciprocal_rescale_residual",
              "relu_softmax.reciprocal_error_residual"),
           _f("gmtheory.approx_compose.variables", "gmtheory.approx_compose.multiply",
              "gmtheory.approx_compose.reciprocal", "gmtheory.approx_compose.maximum"),
           _f("approx.composed-expressions"),
           _no("measured inside the check on seven composites; no figure"),
           ()),
    # ------------------------------------------------------------------ GMA layer
    Result("gma-prompt-limit", "GMA docs/topics/gma.md#gaussian-mixture-attention-gmtheorygma",
           "GMA's infinite-prompt limit",
           "On L i.i.d. tokens from μ, the GMA head's output tends to "
           "r(q)ᵀ E[r(x) vᵀ] / r(q)ᵀ E[r(x)] at the L^-1/2 rate (delta method).",
           _no("the law of large numbers for a ratio of two sample means; no new algebra"),
           _f("gmtheory.gma_analysis.prompt_limit", "gmtheory.gma_analysis.limit_moments",
              "gmtheory.gma_analysis.limit_variance"),
           _f("gma.01-infinite-prompt-limit"),
           _f("gma-gmm", note="trained GMA models of in-context GMM classification, "
              "evaluated at L = ∞ beside their finite-prompt accuracy"),
           ("gma-gmm",)),
    Result("gma-layer-forms", "GMA docs/topics/gma.md#gaussian-mixture-attention-gmtheorygma",
           "GMA layer forms",
           "The linear-time forms of the GMA layer (fused, chunked, causal, masked) equal its "
           "O(N²) definition R_q R_kᵀ V, and its routes are Gaussian-mixture posteriors.",
           _no("a reordering of finite sums; no symbolic step to check"),
           _f("gmtheory.gma.naive_attention", "gmtheory.gma.responsibilities"),
           _f("gma.02-layer-forms"),
           _no("an identity of the layer's code paths; nothing is trained for it"),
           ()),
    Result("gma-softmax-limit",
           "GMA docs/topics/gma.md#gma-against-softmax-attention-on-the-same-mixture",
           "GMA vs Prop. 2.1",
           "With components equal to an isotropic, equal-weight, equal-norm mixture, GMA's "
           "infinite-prompt limit is Prop. 2.1's softmax limit (U = I/σ², V = W_vᵀ) less the "
           "tilt W_vᵀ q; with the prompt's means moved (case B), it is not.",
           _no("two lines of algebra in the docs: equal gates, tilted means m_c + q"),
           _f("gmtheory.operators.softmax_attention_limit", "gmtheory.gma_analysis.prompt_limit",
              "gmtheory.gma_analysis.limit_moments"),
           _f("gma.03-softmax-limit"),
           _no("both sides are limits; nothing is trained for this statement"),
           ("gma-gmm",)),
)

NOT_LISTED = (
    "Gaussian Mixture Attention (`docs/topics/gma.md#gaussian-mixture-attention-gmtheorygma`) "
    "is a layer this project defines; its only "
    "numbered-style statement here is the infinite-prompt limit above (layer tests: "
    "`tests/test_gma.py`; benchmark: `gmtheory bench gma`).",
    "Clean-context denoising (Smart, Bietti and Sengupta; "
    "`docs/topics/denoising.md#clean-context-denoising-smart-bietti-and-sengupta`) is an "
    "external comparison, run by the `clean-context` simulation.",
)


# -------------------------------------------------------------------------- validation
def resolve(dotted: str):
    """Import ``package.module.attr`` and return the attribute (raises if missing)."""
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def problems(*, derivations: dict | None = None, checks: Iterable[str] | None = None,
             simulations: Iterable[str] | None = None, figures: Iterable[str] | None = None,
             import_closed_forms: bool = True) -> list[str]:
    """Every way the table is not true of the registries given.

    ``derivations``: ``{module: derive() dict}`` (e.g. ``derivations.derive_all()``);
    ``checks``, ``simulations``, ``figures``: registered names.  A registry passed as
    ``None`` is not checked.
    """
    out = []
    ids = [r.id for r in RESULTS]
    if len(set(ids)) != len(ids):
        out.append("duplicate result ids")
    checks = None if checks is None else set(checks)
    simulations = None if simulations is None else set(simulations)
    figures = None if figures is None else set(figures)
    for r in RESULTS:
        if r.reference.split()[0] not in REFERENCES:
            out.append(f"{r.id}: unknown reference {r.reference!r}")
        for form in FORMS:
            f = getattr(r, form)
            if not f.present and not f.note:
                out.append(f"{r.id}: {form} is absent without a reason")
        if derivations is not None:
            for key in r.derivation.names:
                mod, _, k = key.partition(".")
                if mod not in derivations or k not in derivations[mod]:
                    out.append(f"{r.id}: derivation {key!r} does not exist")
        if import_closed_forms:
            for name in r.closed_form.names:
                try:
                    obj = resolve(name)
                except (ImportError, AttributeError) as e:
                    out.append(f"{r.id}: closed form {name!r} does not import ({e})")
                    continue
                if not callable(obj):
                    out.append(f"{r.id}: closed form {name!r} is not callable")
        if checks is not None:
            out += [f"{r.id}: check {c!r} is not registered" for c in r.estimate.names
                    if c not in checks]
        if simulations is not None:
            out += [f"{r.id}: simulation {s!r} is not registered" for s in r.trained.names
                    if s not in simulations]
        if figures is not None:
            out += [f"{r.id}: figure {g!r} is not registered" for g in r.figures
                    if g not in figures]
    return out


# --------------------------------------------------------------------------- rendering
def _cell(form: Form, fmt: Callable[[str], str]) -> str:
    if not form.present:
        return f"— *{form.note}*"
    text = ", ".join(fmt(n) for n in form.names)
    return text + (f" *({form.note})*" if form.note else "")


def _reference_cell(reference: str) -> str:
    """``"SGM docs/topics/lda.md#thm-35-local-convergence"`` -> the key, then the pointer
    in a code span."""
    key, _, pointer = reference.partition(" ")
    return f"{key}, `{pointer}`" if pointer else key


def four_forms_markdown(link: Callable[[str], str] | None = None) -> str:
    """The table "four forms per result" as Markdown.

    ``link(module) -> str`` gives the target of a derivation link (``None``: no links).
    """
    def deriv(key):
        mod = key.partition(".")[0]
        return f"[`{key}`]({link(mod)})" if link else f"`{key}`"

    code = lambda n: f"`{n}`"
    lines = [
        "# Four forms per result", "",
        "Generated by `gmtheory derive` from `gmtheory/catalog.py`. For every numbered "
        "result of the references that the toolkit implements: the **derivation** "
        "(sympy residuals, `gmtheory.derivations`), the **closed form** (library "
        "function), the **estimate** (`gmtheory verify` checks: quadrature, Monte Carlo, "
        "root finding) and the **trained model or simulation** (`gmtheory run`). A dash "
        "marks an absent form, with the reason. `tests/test_catalog.py` checks that every "
        "name below exists.", "",
        "References: " + "; ".join(f"{k} = {v}" for k, v in REFERENCES.items())
        + " (`docs/index.md#references`). The reference column names the heading of the "
        "documentation that states the result.", "",
    ]
    counts = {f: sum(getattr(r, f).present for r in RESULTS) for f in FORMS}
    n = len(RESULTS)
    lines += [f"{n} results; present: derivation {counts['derivation']}, closed form "
              f"{counts['closed_form']}, estimate {counts['estimate']}, trained model or "
              f"simulation {counts['trained']}; all four: "
              f"{sum(all(getattr(r, f).present for f in FORMS) for r in RESULTS)}.", ""]
    lines += ["| result | reference | statement | derivation | closed form | estimate | "
              "trained model / simulation | figures |",
              "|---|---|---|---|---|---|---|---|"]
    esc = lambda s: s.replace("|", "\\|")
    math = lambda s: esc(s).replace("[", "\\[").replace("]", "\\]")  # T[mu](z) is no link
    for r in RESULTS:
        lines.append(" | ".join([
            f"| **{esc(r.label)}**", _reference_cell(r.reference), math(r.statement),
            esc(_cell(r.derivation, deriv)), esc(_cell(r.closed_form, code)),
            esc(_cell(r.estimate, code)), esc(_cell(r.trained, code)),
            ", ".join(code(f) for f in r.figures) or "—"]) + " |")
    lines += ["", "Not in the table:", ""] + [f"* {t}" for t in NOT_LISTED] + [""]
    return "\n".join(lines)
