"""Experiments: each has a frozen config dataclass (the typed schema) and ``quick`` and
``paper`` profiles in the repository's ``simulations/NAME.toml``.

``gmtheory run NAME [--profile quick|paper] [--config my.toml] [--set key=value ...]``
runs one.
"""

from ._base import (
    SIMULATIONS,
    PointsHeldElsewhere,
    SimConfig,
    Simulation,
    assemble_grid,
    get_simulation,
    grid,
    has_profile,
    last_run_stats,
    load_profile,
    make_config,
    parse_overrides,
    profile_path,
    read_config_file,
    register,
    result_stem,
    run_simulation,
)


def load_all() -> None:
    """Import every simulation module (each registers its simulations)."""
    from . import (  # noqa: F401
        approx_compiled,
        approx_rates,
        approx_trained,
        clean_context,
        denoising_sims,
        gated_experts,
        gma_ablations,
        gma_gmm,
        gma_lm,
        gma_mqar,
        gma_sims,
        icl_authors,
        icl_c1_zero,
        icl_denoising,
        icl_equivalence,
        icl_nonlinear_kappa,
        icl_sims,
        icl_softmax,
        icl_softmax_exact,
        lda_sims,
        prompt_convergence,
    )


__all__ = ["SIMULATIONS", "SimConfig", "Simulation", "assemble_grid", "get_simulation", "grid",
           "load_all", "last_run_stats", "load_profile", "make_config", "parse_overrides",
           "profile_path", "read_config_file", "register", "result_stem", "run_simulation",
           "PointsHeldElsewhere", "has_profile"]
