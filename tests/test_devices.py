"""Same numbers on any device count: a trained and a Monte Carlo simulation on 1 and on 4
(virtual CPU) devices, and a sweep shared by two ``jax.distributed`` processes."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _shared import DENOISE_SMALL, PROMPT_SMALL

from gmtheory.simulations import get_simulation, parse_overrides, run_simulation

RUNS = {  # one trained simulation (seeds split over devices), one Monte Carlo (prompts)
    "denoise-fig2": DENOISE_SMALL,
    "prompt-convergence": PROMPT_SMALL,
}

SCRIPT = textwrap.dedent("""
    import json, sys
    import jax
    import gmtheory
    from gmtheory import problems, sharding, training
    from gmtheory.simulations import get_simulation, parse_overrides, run_simulation
    gmtheory.enable_x64()
    sharded = []
    real = sharding.shard_leading
    def counting(tree):
        sharded.append(sharding.can_shard(tree))
        return real(tree)
    training._sharding.shard_leading = counting
    problems.shard_leading = counting
    runs = json.loads(sys.argv[2])
    for name, sets in runs.items():
        over = parse_overrides(get_simulation(name).config_cls, sets)
        run_simulation(name, overrides=over, results_dir=sys.argv[1], progress=False)
    print(json.dumps({"devices": jax.local_device_count(), "sharded": sum(sharded)}))
""")


def _env(devices):
    flags = os.environ.get("XLA_FLAGS", "")        # the test session's (tests/conftest.py)
    return {**os.environ, "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"{flags} --xla_force_host_platform_device_count={devices}".strip()}


@pytest.mark.xdist_group("small-runs")
def test_one_and_four_devices_give_the_same_numbers(tmp_path, shared_results):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "four"),
                          json.dumps(RUNS)], env=_env(4), capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["devices"] == 4 and info["sharded"] >= 2   # models and prompts were split
    for name, sets in RUNS.items():
        over = parse_overrides(get_simulation(name).config_cls, sets)
        # the one-device run in the worker's shared folder (tests of the same group reuse it)
        one, _, _ = run_simulation(name, overrides=over, results_dir=shared_results,
                                   progress=False)
        four, _, _ = run_simulation(name, overrides=over, results_dir=tmp_path / "four",
                                    progress=False)
        for k in one:
            # the same draws (fold_in(key, unit)) and the same per-unit program; XLA may
            # compile a unit's reductions (log-sum-exp over tokens, training steps) in a
            # different order for 1 or 4 devices, so agreement is to float64 round-off
            # (seen: 1e-15 relative), not always bit for bit
            np.testing.assert_allclose(four[k], one[k], rtol=1e-12, atol=1e-14, err_msg=k)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.xdist_group("small-runs")
def test_two_distributed_processes_share_a_sweep(tmp_path, shared_results):
    sets = ",".join(RUNS["prompt-convergence"])
    port = _free_port()
    procs = [subprocess.Popen(
        [sys.executable, "-m", "gmtheory.cli", "run", "prompt-convergence", "--results",
         str(tmp_path / "job"), "--no-progress", "--set", sets,
         "--coordinator", f"localhost:{port}", "--num-processes", "2", "--process-id",
         str(i)], env=_env(2), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    computed = [int(o[0].split("points computed here: ")[1].split(",")[0])
                if "computed here" in o[0] else 0 for o in outs]
    over = parse_overrides(get_simulation("prompt-convergence").config_cls,
                           RUNS["prompt-convergence"])
    # the one-process run in the worker's shared folder (the 1-vs-4 test computes it too)
    alone, meta, _ = run_simulation("prompt-convergence", overrides=over,
                                    results_dir=shared_results, progress=False)
    assert sum(computed) == len(meta["points"])        # every point once, none twice
    job, _, _ = run_simulation("prompt-convergence", overrides=over,
                               results_dir=tmp_path / "job", progress=False)
    for k in alone:  # two devices per process: round-off, as in the 1-vs-4 test
        np.testing.assert_allclose(job[k], alone[k], rtol=1e-12, atol=1e-14, err_msg=k)
