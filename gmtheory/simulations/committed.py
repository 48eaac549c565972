"""Committed results: runs too long for a test or ``make reproduce`` (paper profiles), run
once and kept in the repository so that figures draw from them without recomputing.

``gmtheory run NAME --profile paper --commit`` runs (or loads from the cache) the profile
and copies the result to ``simulations/committed/NAME/PROFILE.npz`` (+ ``.json``), with the
git commit, the run's wall time and the machine in the sidecar.  ``gmtheory figures
--profile paper`` then draws every figure whose simulation has a committed result *for
the profile's current config* from it; ``--recompute`` ignores committed results.

A committed result is matched by its config alone, not by the code's fingerprint: it is
a record of what the code computed at its commit.  When the source has changed since,
:func:`load_committed` says which files (the figure draws it all the same, and the
caller prints the note); a result whose config no longer matches the profile (the TOML
changed) is not used.

A profile that is dropped (its TOML table removed) keeps its last committed record as
``simulations/committed/NAME/retired/PROFILE`` (:func:`load_retired`): evidence that a
README row may still quote, no longer a run that any command reproduces.
"""

from __future__ import annotations

import dataclasses
import json
import platform
from pathlib import Path

from ..cache import changed_files, load_result, mark_perturbed, perturbed, save_result
from ._base import get_simulation, make_config, profiles_dir, run_simulation

__all__ = ["committed_stem", "commit_result", "load_committed", "load_retired"]


def committed_stem(name: str, profile: str = "paper") -> Path:
    """Where the committed result of ``name`` at ``profile`` lives (without suffix)."""
    get_simulation(name)                          # unknown names fail here
    return profiles_dir() / "committed" / name / profile


def commit_result(name: str, profile: str = "paper", *,
                  results_dir: str | Path = "simulations/results",
                  progress: bool = True) -> Path:
    """Run (or load from the cache) ``name`` at ``profile`` and copy the result to
    :func:`committed_stem`, adding ``committed``: the git commit the run started from
    (``started_git``; the commit at the end where an older result lacks it), its wall time
    and the machine.  Returns the stem.  A cached result of the same config is committed
    even if the source changed since it was computed (a long run outlives edits; its
    fingerprint records the code that computed it, and :func:`load_committed` names the
    files changed since)."""
    import warnings

    from ..cache import StaleResultWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StaleResultWarning)
        arrays, meta, _ = run_simulation(name, profile, results_dir=results_dir,
                                         progress=progress, reuse_stale=True)
    prov = meta.get("provenance", {})
    meta = {k: v for k, v in meta.items() if k not in ("provenance", "arrays")}
    meta["committed"] = {"git": meta.get("started_git") or prov.get("git"),
                         "run_seconds": meta.get("seconds"),
                         "machine": platform.machine(), "platform": prov.get("platform"),
                         "jax": prov.get("jax"), "cpu_count": _cpus()}
    stem = committed_stem(name, profile)
    stem.parent.mkdir(parents=True, exist_ok=True)
    save_result(stem, arrays, meta)
    return stem


def _cpus():
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def load_committed(name: str, profile: str = "paper"):
    """``(arrays, meta, note)`` of the committed result of ``name`` at ``profile`` if there
    is one for the profile's current config, else ``None``.  ``note`` says where the
    result comes from and, if the source changed since, which files."""
    stem = committed_stem(name, profile)
    js = stem.with_suffix(".json")
    if not js.exists():
        return None
    meta = json.loads(js.read_text())
    sim = get_simulation(name)
    # the config as its sidecar stores it (JSON: tuples become lists)
    now = json.loads(json.dumps(dataclasses.asdict(make_config(sim, profile)), default=str))
    if meta.get("config") != now:
        return None
    # a record of unperturbed code, read as such by a perturbed process too (the perturbation
    # test: a check on a committed run tests what it computes from the record, while its
    # quick twin recomputes the run under the perturbation)
    was = perturbed()
    mark_perturbed(None)
    try:
        hit = load_result(stem, meta["key"])
    finally:
        mark_perturbed(was)
    if hit is None:
        return None
    arrays, meta = hit
    info = meta.get("committed", {})
    changed = changed_files(meta.get("fingerprint") or {}, sim.fingerprint())
    note = (f"{name} [{profile}]: committed result (recorded at commit "
            f"{str(info.get('git'))[:10]}; {(info.get('run_seconds') or 0) / 60:.0f} min on "
            f"{info.get('cpu_count')} {'core' if info.get('cpu_count') == 1 else 'cores'})")
    if changed:
        note += f"; source changed since in {', '.join(changed)}"
    return arrays, meta, note


def load_retired(name: str, profile: str):
    """``(arrays, meta)`` of the retired record ``committed/NAME/retired/PROFILE`` (a
    committed run of a profile that no longer exists), or ``None``.  Read as recorded: its
    config is not compared with any profile."""
    stem = committed_stem(name, profile).parent / "retired" / profile
    js = stem.with_suffix(".json")
    if not js.exists():
        return None
    was = perturbed()
    mark_perturbed(None)
    try:
        return load_result(stem, json.loads(js.read_text())["key"])
    finally:
        mark_perturbed(was)
