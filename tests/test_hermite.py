"""gmtheory.hermite: bad input and the named kinked functions (the closed-form
comparisons run as `verify` checks in test_checks.py)."""

import numpy as np
import pytest

from gmtheory import hermite


def test_named_functions_use_their_kinks():
    np.testing.assert_allclose(hermite.linear_part("relu"), (1 / np.sqrt(2 * np.pi), 0.5),
                               atol=1e-12)
    np.testing.assert_allclose(hermite.second_moment("abs"), 1.0, atol=1e-12)


def test_kinked_function_without_kinks_reports_it():
    with pytest.raises(ValueError, match="kinks"):
        hermite.coefficients(np.abs, 2, max_order=512)


@pytest.mark.parametrize("call, match", [
    (lambda: hermite.coefficients(lambda z: np.where(z > 3, np.nan, z), 1), "f"),
    (lambda: hermite.coefficients(lambda z: z[:3], 1), "f"),          # not elementwise
    (lambda: hermite.coefficients("gelu", 1), "unknown"),
    (lambda: hermite.coefficients(np.sin, -1), "order"),
    (lambda: hermite.effective_noise(np.sin, -0.1), "noise_var"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_naive_alternative_is_the_ridge_error_for_a_linear_target():
    """For y = z + eps the alternative's linear part is the whole target (c1 = 1, rho_eff =
    rho): its prediction is the ridge ICL error itself (gmtheory.icl.e_icl_ridge), to the
    quadrature accuracy of c1."""
    from gmtheory import icl

    for alpha, tau, kappa, rho, lam in ((2.0, 2.0, 1.0, 0.1, 1e-3), (0.7, 4.0, 3.0, 0.5, 1e-2)):
        mom = hermite.label_moments(lambda z: z, rho)
        assert mom["c1"] == pytest.approx(1.0, rel=1e-12)
        np.testing.assert_allclose(
            hermite.naive_alternative(mom, alpha, tau, kappa, rho=rho, lam=lam),
            icl.e_icl_ridge(alpha, tau, kappa, rho, lam), rtol=1e-10)
        # y = 2.5 z + eps: still no extra noise, so the alternative is the equivalence's own
        # theory c1^2 e(rho/c1^2, lam/c1^2) (hermite.equivalence_error, checked by icl.05)
        mom = hermite.label_moments(lambda z: 2.5 * z, rho)
        np.testing.assert_allclose(
            hermite.naive_alternative(mom, alpha, tau, kappa, rho=rho, lam=lam),
            hermite.equivalence_error(mom, alpha, tau, kappa, lam), rtol=1e-10)
    # a nonlinear target: the alternative is the equivalence's error with rho in place of
    # rho_eff, plus the unexplained variance rho_eff - rho
    mom = hermite.label_moments(np.tanh, 0.1)
    alt = hermite.naive_alternative(mom, 2.0, 2.0, 1.0, rho=0.1, lam=1e-3)
    lin = hermite.equivalence_error({**mom, "rho_eff": 0.1}, 2.0, 2.0, 1.0, 1e-3)
    np.testing.assert_allclose(alt, lin + mom["rho_eff"] - 0.1, rtol=1e-10)
