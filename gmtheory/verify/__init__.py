"""``gmtheory verify``: named checks comparing independent computations.

A check returns an :class:`Outcome` made of comparisons of declared kinds
(:func:`agreement`, :func:`upper_bound`, :func:`lower_bound`, :func:`count`); its verdict
is PASS, FINDING or FAIL (see :mod:`gmtheory.verify._registry`).
"""

from ._registry import (
    CHECKS,
    KINDS,
    Check,
    CheckResult,
    Comparison,
    Outcome,
    agreement,
    all_checks,
    count,
    format_table,
    lower_bound,
    read_json,
    register_check,
    rel_error,
    run_checks,
    select_checks,
    summary_line,
    upper_bound,
    write_json,
)

__all__ = ["CHECKS", "KINDS", "Check", "CheckResult", "Comparison", "Outcome", "agreement",
           "all_checks", "count", "format_table", "lower_bound", "read_json", "register_check",
           "rel_error", "run_checks", "select_checks", "summary_line", "upper_bound", "write_json"]
