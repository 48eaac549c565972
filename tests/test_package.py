"""The package as a library: what importing it does."""

from __future__ import annotations


def test_import_changes_no_process_setting():
    """``import gmtheory`` leaves XLA_FLAGS alone (issue 30); the CLI sets its flags."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    code = ("import os, gmtheory, gmtheory.regimes, gmtheory.verify, gmtheory.simulations; "
            "print(os.environ.get('XLA_FLAGS'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "None"
