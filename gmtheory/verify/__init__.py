"""``gmtheory verify``: named checks comparing independent computations."""

from ._registry import (
    CHECKS,
    Check,
    CheckResult,
    Outcome,
    format_table,
    register_check,
    run_checks,
    select_checks,
    write_json,
)

__all__ = ["CHECKS", "Check", "CheckResult", "Outcome", "format_table", "register_check",
           "run_checks", "select_checks", "write_json"]
