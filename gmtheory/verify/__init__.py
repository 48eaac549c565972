"""``gmtheory verify``: named checks comparing independent computations.

A check returns an :class:`Outcome` made of comparisons of declared kinds
(:func:`agreement`, :func:`equivalence`, :func:`upper_bound`, :func:`lower_bound`,
:func:`count`); its verdict is PASS, FINDING or FAIL (see :mod:`gmtheory.verify._registry`).
"""

from ._registry import (
    CHECKS,
    EXPERIMENTS,
    KINDS,
    PAPER_VARIANTS,
    Check,
    CheckResult,
    Comparison,
    Outcome,
    agreement,
    all_checks,
    count,
    equivalence,
    experiment,
    experiment_stem,
    format_table,
    lower_bound,
    read_json,
    register_check,
    rel_error,
    results_dir,
    run_checks,
    select_checks,
    set_results_dir,
    summary_line,
    upper_bound,
    write_json,
)

__all__ = ["CHECKS", "EXPERIMENTS", "PAPER_VARIANTS", "experiment", "experiment_stem",
           "results_dir",
           "set_results_dir", "KINDS", "Check", "CheckResult", "Comparison", "Outcome", "agreement",
           "equivalence", "all_checks", "count", "format_table", "lower_bound", "read_json",
           "register_check",
           "rel_error", "run_checks", "select_checks", "summary_line", "upper_bound", "write_json"]
