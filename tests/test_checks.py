"""Every registered check of `gmtheory verify` must pass or report a FINDING (they are the
real assertions); a FAIL or an error fails the test."""

import pytest

from gmtheory.verify import run_checks, select_checks

CHECK_IDS = [c.id for c in select_checks(None)]


@pytest.mark.parametrize("check_id", CHECK_IDS)
def test_check_passes(check_id):
    (res,) = run_checks([c for c in select_checks(None) if c.id == check_id], progress=False)
    assert res.error is None, res.error
    assert res.verdict in ("PASS", "FINDING"), (res.verdict, res.comparisons, res.details)
