"""Simulation registry and the resumable runner behind ``gmtheory run`` and ``figures``.

A simulation is a frozen config dataclass with ``quick`` and ``paper`` profiles, a
list of sweep points, a function computing one point from its own ``jax.random``
key (``fold_in(key(seed), index)``), and an ``assemble`` step.  Each finished point
is cached atomically, so an interrupted sweep resumes where it stopped (and a training
run inside a point resumes from its last checkpoint); the assembled result is cached as
``.npz`` + JSON sidecar.

Results know their code: the cache key holds the config, and the sidecar holds a
fingerprint of the simulation's module and of every gmtheory module it imports
(:func:`gmtheory.cache.source_fingerprint`).  When that source changes the result is
recomputed; ``reuse_stale=True`` (``gmtheory figures --reuse-stale``) draws the old one
with a warning that names the changed files.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
from tqdm.auto import tqdm

from ..cache import config_key, load_result, save_result, source_fingerprint
from ..training import checkpoint_scope

__all__ = ["Simulation", "register", "get_simulation", "SIMULATIONS", "run_simulation",
           "parse_overrides", "make_config"]

SIMULATIONS: dict[str, Simulation] = {}
PROFILES = ("quick", "paper")


@dataclass(frozen=True)
class Simulation:
    name: str
    description: str
    config_cls: type
    points: Callable  # (cfg) -> list[dict]
    run_point: Callable  # (cfg, point, key) -> dict[str, array]
    assemble: Callable  # (cfg, points, results) -> dict[str, array]
    summary: Callable | None = None  # (cfg, arrays) -> list[str]

    def fingerprint(self):
        """Fingerprint of this simulation's source and the gmtheory code it imports."""
        return source_fingerprint(self.config_cls.__module__)


def register(sim: Simulation) -> Simulation:
    SIMULATIONS[sim.name] = sim
    return sim


def get_simulation(name: str) -> Simulation:
    from . import load_all

    load_all()
    if name not in SIMULATIONS:
        raise ValueError(
            f"simulation: unknown name {name!r}; choose one of {sorted(SIMULATIONS)}."
        )
    return SIMULATIONS[name]


def _convert(value: str, typ, name: str):
    origin = typing.get_origin(typ)
    try:
        if origin is tuple:
            (inner, *_) = typing.get_args(typ)
            parts = [p for p in value.replace(":", ",").split(",") if p.strip()]
            return tuple(_convert(p.strip(), inner, name) for p in parts)
        if typ is bool:
            if value.lower() in ("1", "true", "yes"):
                return True
            if value.lower() in ("0", "false", "no"):
                return False
            raise ValueError
        if typ is int:
            return int(float(value)) if "e" in value.lower() else int(value)
        if typ is float:
            return float(value)
        return typ(value)
    except (ValueError, TypeError):
        raise ValueError(
            f"--set {name}: could not read {value!r} as {getattr(typ, '__name__', typ)}."
        ) from None


def parse_overrides(config_cls, items) -> dict:
    """Parse ``key=value`` strings (``a=1,b=2`` and tuple values ``Ls=10,100`` allowed)."""
    hints = typing.get_type_hints(config_cls)
    fields = {f.name for f in dataclasses.fields(config_cls)}
    raw: list[list[str]] = []
    for item in items or []:
        for tok in item.split(","):
            if "=" in tok:
                raw.append(tok.split("=", 1))
            elif raw and tok.strip():
                raw[-1][1] += "," + tok
            elif tok.strip():
                raise ValueError(f"--set: expected key=value, got {item!r}.")
    out = {}
    for k, v in raw:
        k = k.strip()
        if k not in fields:
            raise ValueError(
                f"--set: unknown parameter {k!r} for {config_cls.__name__}; "
                f"valid parameters: {sorted(fields)}."
            )
        out[k] = _convert(v.strip(), hints[k], k)
    return out


def make_config(sim: Simulation, profile: str = "quick", overrides: dict | None = None):
    if profile not in PROFILES:
        raise ValueError(f"profile: must be one of {PROFILES}, got {profile!r}.")
    cfg = getattr(sim.config_cls, profile)()
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    return cfg


def run_simulation(
    name: str,
    profile: str = "quick",
    overrides: dict | None = None,
    *,
    results_dir: str | Path = "simulations/results",
    force: bool = False,
    progress: bool = True,
    reuse_stale: bool = False,
):
    """Run (or load from cache) a simulation; returns ``(arrays, meta, stem)``.

    A cached result is used only if its config and its source fingerprint match; with
    ``reuse_stale`` a result of the same config but older code is used too, with a
    :class:`gmtheory.cache.StaleResultWarning`.
    """
    sim = get_simulation(name)
    cfg = make_config(sim, profile, overrides)
    fp = sim.fingerprint()
    key = config_key(sim.name, cfg)
    stem = Path(results_dir) / sim.name / f"{profile}-{key}"
    if not force:
        hit = load_result(stem, key, fp, reuse_stale=reuse_stale)
        if hit is not None:
            return hit[0], hit[1], stem
    points = sim.points(cfg)
    point_dir = stem.parent / (stem.name + ".points")
    base_key = jax.random.key(cfg.seed)
    results = []
    t0 = time.perf_counter()
    bar = tqdm(points, desc=f"{sim.name} [{profile}]", disable=not progress, leave=False)
    for i, point in enumerate(bar):
        pkey = config_key(key, fp.digest, i, point)
        pstem = point_dir / f"point-{i:04d}"
        hit = None if force else load_result(pstem, pkey)
        if hit is None:
            ckpt = point_dir / f"point-{i:04d}.train"
            if force and ckpt.exists():
                shutil.rmtree(ckpt, ignore_errors=True)
            with checkpoint_scope(ckpt):
                arrays = sim.run_point(cfg, point, jax.random.fold_in(base_key, i))
            arrays = {k: jax.device_get(v) for k, v in arrays.items()}
            save_result(pstem, arrays, {"key": pkey, "point": point, "index": i, "seed": cfg.seed,
                                        "fingerprint": fp.as_dict()})
            shutil.rmtree(ckpt, ignore_errors=True)
            results.append(arrays)
        else:
            results.append(hit[0])
    arrays = sim.assemble(cfg, points, results)
    meta = {
        "key": key,
        "simulation": sim.name,
        "profile": profile,
        "config": cfg,
        "seed": cfg.seed,
        "points": points,
        "seconds": time.perf_counter() - t0,
        "fingerprint": fp.as_dict(),
    }
    save_result(stem, arrays, meta)
    hit = load_result(stem, key, fp)
    return hit[0], hit[1], stem
