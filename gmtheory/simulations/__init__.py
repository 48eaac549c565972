"""Experiments: each has a frozen config with ``quick`` and ``paper`` profiles.

``gmtheory run NAME [--profile quick|paper] [--set key=value ...]`` runs one.
"""

from ._base import (
    SIMULATIONS,
    Simulation,
    get_simulation,
    last_run_stats,
    make_config,
    parse_overrides,
    register,
    run_simulation,
)


def load_all() -> None:
    """Import every simulation module (each registers its simulations)."""
    from . import (  # noqa: F401
        approx_rates,
        approx_trained,
        clean_context,
        denoising_sims,
        gated_experts,
        gma_sims,
        icl_denoising,
        icl_nonlinear_kappa,
        icl_sims,
        lda_sims,
        prompt_convergence,
    )


__all__ = ["SIMULATIONS", "Simulation", "get_simulation", "load_all", "last_run_stats",
           "make_config", "parse_overrides", "register", "run_simulation"]
