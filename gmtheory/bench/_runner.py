"""The shared runner of the benchmarks: timing, compiled memory, available memory and
whole-process timing (the subprocess runner for the authors' code).

Methodology: jit, one warm-up call, ``block_until_ready``, median of ``repeats``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time

import jax
from tqdm.auto import tqdm

from .._xla import jit_long

__all__ = ["time_fn", "time_runs", "available_memory_bytes", "MEMORY_SAFETY", "stamped"]


def stamped(res: dict, fn) -> dict:
    """``res`` with the ``provenance`` (commit, library versions, backend) and the source
    ``fingerprint`` of the benchmark function ``fn``'s module and the gmtheory code it
    imports: what a committed benchmark JSON records, so that a number is tied to the code
    that measured it (tests/test_measured.py)."""
    from ..cache import provenance, source_fingerprint

    fp = source_fingerprint(fn.__module__)
    return {**res, "provenance": provenance(),
            "fingerprint": {"digest": fp.digest, "files": fp.files}}


def time_runs(fn, *args, repeats: int = 5) -> list[float]:
    """Wall time of each of ``repeats`` calls ``fn(*args)`` after one warm-up (each blocks
    until ready), in the order run: the spread that :func:`time_fn`'s median hides."""
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats: expected a positive integer, got {repeats!r}.")
    jax.block_until_ready(fn(*args))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        ts.append(time.perf_counter() - t0)
    return ts


def time_fn(fn, *args, repeats: int = 5) -> float:
    """Median wall time of ``fn(*args)`` after one warm-up (blocks until ready)."""
    return statistics.median(time_runs(fn, *args, repeats=repeats))


def progress_bar(name: str, progress: bool, **kw):
    """The progress bar of ``gmtheory bench NAME`` (stderr; hidden by ``--no-progress``)."""
    return tqdm(desc=f"bench {name}", disable=not progress, leave=False, **kw)


def compiled_with_memory(fn, *args):
    """AOT-compiled ``fn`` and its compiled temporary memory (bytes; NaN if unknown)."""
    c = jit_long(fn, fused=True).lower(*args).compile()
    return c, temp_memory_bytes(c)


def temp_memory_bytes(compiled) -> float:
    """XLA's temporary-memory estimate of a compiled executable (NaN if not reported)."""
    try:
        return float(compiled.memory_analysis().temp_size_in_bytes)
    except Exception:  # backend without memory analysis
        return float("nan")


def available_memory_bytes() -> float:
    """Memory the OS can still give this process (``MemAvailable``), or inf if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return 1024.0 * float(line.split()[1])
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return float("inf")


# Peak resident memory over XLA's compiled temporary-memory estimate; measured 1.75 for
# xla softmax forward+backward at N = 8192 on the CPU (7.2 GiB peak for a 4.1 GiB
# estimate), so a case is run only if twice its estimate is available.
MEMORY_SAFETY = 2.0


def timed_process(cmd, cwd, env=None) -> tuple[float, str]:
    """Wall time of ``cmd`` as a whole process (interpreter start, imports, compilation and
    all) and its last output line; raises with the output's tail if it fails."""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode:
        tail = (r.stdout + r.stderr)[-2000:]
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed in {cwd} (exit {r.returncode}):\n"
                           f"{tail}")
    lines = (r.stdout + r.stderr).strip().splitlines()
    return dt, lines[-1] if lines else ""

