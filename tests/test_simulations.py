"""Quick profiles are tested; paper profiles are opt-in (-m slow)."""

import numpy as np
import pytest

from gmtheory.simulations import get_simulation, make_config, run_simulation
from gmtheory.stats import fit_loglog


def _check_prompt_convergence(a):
    for name in ("mse_soft", "mse_lin"):
        slope = fit_loglog(a["Ls"], np.sqrt(a[name].mean(1)))[0]
        assert -0.6 <= slope <= -0.4, (name, slope)
    # measured L*MSE increases with u^T Gamma u (the ESS law)
    assert np.all(np.diff(a["lmse"]) > 0)


@pytest.mark.slow   # the same rates and ESS law are checks operator.05b and operator.06, and
# small prompt-convergence sweeps run in test_devices and test_robustness
def test_prompt_convergence_quick(tmp_path):
    a, meta, _ = run_simulation("prompt-convergence", "quick", results_dir=tmp_path,
                                progress=False)
    _check_prompt_convergence(a)
    cfg = make_config(get_simulation("prompt-convergence"), "quick")
    assert meta["config"]["reps"] == cfg.reps and meta["seed"] == cfg.seed


@pytest.mark.slow
@pytest.mark.parametrize("name", ["prompt-convergence", "gated-experts"])
def test_paper_profiles(tmp_path, name):
    a, _, _ = run_simulation(name, "paper", results_dir=tmp_path, progress=False)
    if name == "prompt-convergence":
        _check_prompt_convergence(a)
    else:
        np.testing.assert_allclose(a["gates"].sum(-1), 1.0, atol=1e-12)
