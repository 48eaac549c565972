"""Every registered check of `gmtheory verify` must pass or report a FINDING (they are the
real assertions); a FAIL or an error fails the test."""

import pytest

from gmtheory.verify import run_checks, select_checks

# checks that derive with sympy join the derivation tests on one xdist worker (the
# derivations are computed once per process; tests/test_derivations.py)
SYMPY = ("hermite.01", "denoising.28")
CHECK_IDS = [pytest.param(c.id, marks=pytest.mark.xdist_group("sympy"))
             if c.id.startswith(SYMPY) else c.id for c in select_checks(None)]


@pytest.mark.parametrize("check_id", CHECK_IDS)
def test_check_passes(check_id):
    (res,) = run_checks([c for c in select_checks(None) if c.id == check_id], progress=False)
    assert res.error is None, res.error
    assert res.verdict in ("PASS", "FINDING"), (res.verdict, res.comparisons, res.details)
