"""Results under concurrent runs, crashed claimants and disk faults (nothing is lost, nothing
is computed twice, nothing half-written is read as finished)."""

import errno
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from _shared import PROMPT_SMALL

import gmtheory.simulations as sims
from gmtheory import cache
from gmtheory.simulations import get_simulation, run_simulation

SMALL = PROMPT_SMALL


def _over():
    return sims.parse_overrides(get_simulation("prompt-convergence").config_cls, SMALL)


def _cli(results, env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "gmtheory.cli", "run", "prompt-convergence", "--results",
         str(results), "--no-progress", "--set", ",".join(SMALL)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.xdist_group("small-runs")
def test_two_processes_share_one_folder(tmp_path, shared_results):
    """Two ``gmtheory run`` processes on one folder compute every point once; in the
    small-runs group, so they find the programs of the same sweep (computed by the
    device tests) in the session's XLA cache, and the one-process run to compare with
    in the worker's shared folder."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    procs = [_cli(tmp_path / "shared", env) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    computed = []
    for out, _ in outs:
        line = next(x for x in out.splitlines() if x.startswith("results:"))
        computed.append(int(line.split("points computed here: ")[1].split(",")[0])
                        if "computed here" in line else 0)
    n_points = len(get_simulation("prompt-convergence").points(
        sims.make_config(get_simulation("prompt-convergence"), "quick", _over())))
    assert sum(computed) == n_points          # every point once, none twice
    assert not list((tmp_path / "shared").rglob("*.claim"))
    shared, _, _ = run_simulation("prompt-convergence", overrides=_over(),
                                  results_dir=tmp_path / "shared", progress=False)
    alone, _, _ = run_simulation("prompt-convergence", overrides=_over(),
                                 results_dir=shared_results, progress=False)
    for k in alone:
        np.testing.assert_array_equal(shared[k], alone[k])


def _point_dir(stem):
    return stem.parent / (stem.name + ".points")


def test_stale_claim_of_a_dead_process_is_recovered(tmp_path):
    a, _, stem = run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                                progress=False)
    pdir = _point_dir(stem)
    stem.with_suffix(".json").unlink()
    (pdir / "point-0001.json").unlink()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    import socket

    (pdir / "point-0001.claim").write_text(json.dumps(
        {"pid": int(dead), "host": socket.gethostname(), "time": 0}))
    b, _, _ = run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                             progress=False, poll_seconds=0.01)
    assert sims.last_run_stats()["computed"] == 1
    assert not (pdir / "point-0001.claim").exists()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_live_claim_is_waited_for(tmp_path, monkeypatch):
    """A point claimed by a live process is not recomputed: this process waits for it."""
    a, _, stem = run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                                progress=False)
    pdir = _point_dir(stem)
    stem.with_suffix(".json").unlink()
    saved = {s: (pdir / f"point-0002{s}").read_bytes() for s in (".npz", ".json")}
    for s in saved:
        (pdir / f"point-0002{s}").unlink()
    import socket

    claim = pdir / "point-0002.claim"
    # held by a live process of this host (pid 1 always exists) that claimed it just now
    claim.write_text(json.dumps({"pid": 1, "host": socket.gethostname(), "time": 9e18}))
    sleeps = []

    def other_process_finishes(sec):          # the claimant writes its result meanwhile
        sleeps.append(sec)
        for s, data in saved.items():
            (pdir / f"point-0002{s}").write_bytes(data)
        claim.unlink()

    monkeypatch.setattr(time, "sleep", other_process_finishes)
    b, _, _ = run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                             progress=False)
    assert sleeps and sims.last_run_stats()["computed"] == 0
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_live_claim_without_waiting_raises_and_keeps_the_rest(tmp_path):
    """wait=False (gmtheory reproduce's figure loop): the points this call can compute are
    computed and cached, and a point another live process holds raises instead of a wait,
    so the caller can draw another figure first."""
    a, _, stem = run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                                progress=False)
    pdir = _point_dir(stem)
    stem.with_suffix(".json").unlink()
    for p in pdir.glob("point-000[12].*"):
        p.unlink()
    import socket

    claim = pdir / "point-0002.claim"
    claim.write_text(json.dumps({"pid": 1, "host": socket.gethostname(), "time": 9e18}))
    with pytest.raises(sims.PointsHeldElsewhere, match="prompt-convergence"):
        run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                       progress=False, wait=False)
    assert (pdir / "point-0001.json").exists() and claim.exists()   # computed; still held
    claim.unlink()
    b, _, _ = run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                             progress=False, wait=False)
    assert sims.last_run_stats()["computed"] == 1
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_truncated_and_foreign_results_are_recomputed(tmp_path):
    a, _, stem = run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                                progress=False)
    pdir = _point_dir(stem)
    npz = pdir / "point-0000.npz"
    npz.write_bytes(npz.read_bytes()[: npz.stat().st_size // 2])      # truncated
    side = pdir / "point-0003.json"                                    # other code's result
    meta = json.loads(side.read_text())
    meta["fingerprint"]["digest"] = "0" * 16
    meta["key"] = "not-this-code"
    side.write_text(json.dumps(meta))
    final = json.loads(stem.with_suffix(".json").read_text())
    final["fingerprint"]["digest"] = "0" * 16
    stem.with_suffix(".json").write_text(json.dumps(final))
    b, m, _ = run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                             progress=False)
    assert sims.last_run_stats()["computed"] == 2
    assert m["fingerprint"]["digest"] != "0" * 16
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_unwritable_results_folder_names_it(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(ValueError, match="a-file"):
        run_simulation("prompt-convergence", overrides=_over(), results_dir=blocker / "res",
                       progress=False)


def test_full_disk_leaves_nothing_that_reads_as_finished(tmp_path, monkeypatch):
    real = cache.atomic_write_bytes
    calls = {"n": 0}

    def fails_on_third_write(path, data):     # point 0's .npz and .json, then point 1's .npz
        calls["n"] += 1
        if calls["n"] == 3:
            with open(str(path) + ".partial-write.tmp", "wb") as fh:
                fh.write(data[: len(data) // 3])
            os.unlink(str(path) + ".partial-write.tmp")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(cache, "atomic_write_bytes", fails_on_third_write)
    with pytest.raises(OSError, match="No space"):
        run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                       progress=False)
    monkeypatch.setattr(cache, "atomic_write_bytes", real)
    stems = list(tmp_path.rglob("point-*.json"))
    assert [p.name for p in stems] == ["point-0000.json"]     # only the finished point
    assert not list(tmp_path.rglob("*.tmp")) and not list(tmp_path.rglob("*.claim"))
    run_simulation("prompt-convergence", overrides=_over(), results_dir=tmp_path,
                   progress=False)
    assert sims.last_run_stats() == {"computed": 5, "reused": 1, "waited": 0}
