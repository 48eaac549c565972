"""Simulation registry and the resumable runner behind ``gmtheory run`` and ``figures``.

A simulation is a frozen config dataclass (the typed schema of its parameters, a
:class:`SimConfig`), a ``quick`` and a ``paper`` profile in the TOML file
``simulations/NAME.toml`` of the repository (:func:`load_profile`; ``gmtheory run NAME
--config my.toml`` lays a user's file over one), a list of sweep points, a function
computing one point from its own ``jax.random`` key (``fold_in(key(seed), index)``), and
an ``assemble`` step.  Each finished point
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
import itertools
import shutil
import sys
import time
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
from tqdm.auto import tqdm

from ..cache import (
    check_writable,
    config_key,
    environment_identity,
    git_hash,
    load_result,
    release_claim,
    save_result,
    source_fingerprint,
    try_claim,
)
from ..training import checkpoint_scope, quiet

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["Simulation", "SimConfig", "register", "get_simulation", "SIMULATIONS",
           "run_simulation", "result_stem", "parse_overrides", "make_config", "last_run_stats",
           "profiles_dir", "profile_path", "load_profile", "read_config_file", "grid",
           "assemble_grid", "PointsHeldElsewhere", "has_profile"]

SIMULATIONS: dict[str, Simulation] = {}
#: quick: every simulation, for the tests and ``make reproduce``; paper: the papers' sizes
#: (often GPU-sized); cpu: opt-in, sized to decide a claim on a 2-core CPU in under an hour
#: (only simulations whose TOML has a ``[cpu]`` table).  Each is ``[quick]`` with its own
#: table laid over it.
PROFILES = ("quick", "paper", "cpu")


@dataclass(frozen=True, kw_only=True)
class SimConfig:
    """The field every simulation's config has: the seed of its ``jax.random`` keys (each
    point draws from ``fold_in(key(seed), index)``).  Configs subclass it."""

    seed: int


@dataclass(frozen=True)
class Simulation:
    name: str
    description: str
    config_cls: type
    points: Callable  # (cfg) -> list[dict]
    run_point: Callable  # (cfg, point, key) -> dict[str, array]
    assemble: Callable  # (cfg, points, results) -> dict[str, array]
    summary: Callable | None = None  # (cfg, arrays) -> list[str]
    data: Callable | None = None  # (cfg) -> JSON-able identity of the data read from disk

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
    """Read one ``--set`` value as ``typ``; a ``ValueError`` names the key and the value.

    Numbers must be ASCII and finite: ``nan``, ``inf`` and overflowing literals
    (``1e400``) are refused, since a non-finite config value only shows up later as a
    NaN result.  Integers accept exponent notation when the value is integral
    (``reps=1e3``) but not ``2.5``, which ``int()`` would silently truncate.
    """
    import decimal
    import math

    tname = getattr(typ, "__name__", str(typ))

    def bad(why: str = "") -> ValueError:
        return ValueError(f"--set {name}: could not read {value!r} as {tname}{why}.")

    origin = typing.get_origin(typ)
    if origin is tuple:
        (inner, *_) = typing.get_args(typ)
        parts = [p.strip() for p in value.replace(":", ",").split(",") if p.strip()]
        if not parts:
            raise ValueError(f"--set {name}: expected one or more comma-separated values, "
                             f"got {value!r}.")
        return tuple(_convert(p, inner, name) for p in parts)
    if typ is bool:
        if value.lower() in ("1", "true", "yes"):
            return True
        if value.lower() in ("0", "false", "no"):
            return False
        raise bad(" (use true/false, yes/no or 1/0)")
    if typ in (int, float) and not value.isascii():
        raise bad(" (only ASCII digits are read)")
    if typ is int:
        try:
            out = int(value)
        except ValueError:
            out = None
        if out is None:
            try:  # Python's float syntax ("1e3", "2.0"), read exactly
                float(value)
                num = decimal.Decimal(value.strip())
            except (ValueError, decimal.InvalidOperation):
                raise bad() from None
            if not num.is_finite() or num != num.to_integral_value():
                raise bad(" (not a finite integer)")
            if num.adjusted() > 18:  # before int(): "1e999999999" would take forever
                raise bad(" (beyond the 64-bit integer range)")
            out = int(num)
        if abs(out) > 2**63 - 1:
            raise bad(" (beyond the 64-bit integer range)")
        return out
    if typ is float:
        try:
            out = float(value)
        except ValueError:
            raise bad() from None
        if not math.isfinite(out):
            raise bad(" (not a finite number: nan, inf and values beyond ~1.8e308 are refused)")
        return out
    try:
        return typ(value)
    except (ValueError, TypeError, ArithmeticError):
        raise bad() from None


def parse_overrides(config_cls, items) -> dict:
    """Parse ``key=value`` strings (``a=1,b=2`` and tuple values ``Ls=10,100`` allowed).

    ``items`` is a list of strings (one per ``--set``) or one string.  An unknown key, a
    key given twice, an item without ``=`` or an unreadable value raises ``ValueError``
    naming the key (see :func:`_convert` for the value rules).
    """
    if isinstance(items, str):
        items = [items]
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
        if k in out:
            raise ValueError(f"--set {k}: given more than once.")
        out[k] = _convert(v.strip(), hints[k], k)
    return out


def grid(*, keep: Callable | None = None, **axes) -> list[dict]:
    """The points of the product grid of named axes, the last axis varying fastest:
    ``grid(d=(2, 5), sep=(1.0, 2.0))`` is ``[{"d": 2, "sep": 1.0}, {"d": 2, "sep": 2.0},
    {"d": 5, "sep": 1.0}, {"d": 5, "sep": 2.0}]``; ``keep(point)`` drops the points for
    which it is false (a sweep that skips some cells)."""
    pts = [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]
    return pts if keep is None else [p for p in pts if keep(p)]


def assemble_grid(points, results, axes: dict, keys=None, *, fill=None) -> dict:
    """Each result array of a sweep over ``grid(**axes)`` stacked into shape
    ``(len(axis1), len(axis2), ..., *result_shape)`` (``keys``: which results; default
    all).  The points must be ``grid(**axes)`` in its order (extra point keys allowed);
    with ``fill`` (e.g. ``np.nan``) they may skip cells (``grid(keep=...)``), which hold
    ``fill``."""
    shape = tuple(len(v) for v in axes.values())
    cells = {tuple(p.values()): i for i, p in enumerate(grid(**axes))}
    at = [cells.get(tuple(p.get(a) for a in axes)) for p in points]
    full = fill is None
    if None in at or at != sorted(set(at)) or (full and len(at) != len(cells)):
        raise ValueError(f"assemble_grid: the points are not the grid of axes {list(axes)}"
                         + ("" if full else " (or part of it, in its order)") + ".")
    keys = list(results[0]) if keys is None else keys
    out = {}
    for k in keys:
        rows = np.stack([np.asarray(r[k]) for r in results])
        if full:
            out[k] = rows.reshape(*shape, *rows.shape[1:])
        else:
            flat = np.full((len(cells), *rows.shape[1:]), fill,
                           dtype=np.result_type(rows, np.asarray(fill)))
            flat[at] = rows
            out[k] = flat.reshape(*shape, *rows.shape[1:])
    return out


def profiles_dir() -> Path:
    """The folder of the simulations' profiles (``NAME.toml``): the repository's top-level
    ``simulations/`` folder, which an editable install (``make``, ``pip install -e``) or a
    source checkout finds beside the package; a regular install carries a copy as the
    package data ``gmtheory/simulations/profiles/`` (``pyproject.toml`` maps the folder).
    """
    checkout = Path(__file__).resolve().parents[2] / "simulations"
    if any(checkout.glob("*.toml")):
        return checkout
    return Path(__file__).resolve().parent / "profiles"


def profile_path(name: str) -> Path:
    """The TOML file of simulation ``name``'s profiles."""
    return profiles_dir() / f"{name}.toml"


def _toml_value(value, typ, where: str):
    """A TOML value as the field type ``typ``: arrays become tuples, integers are accepted
    for floats (``lr = 1`` is ``1.0``); anything else of the wrong type is refused."""
    tname = getattr(typ, "__name__", str(typ))
    if typing.get_origin(typ) is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{where}: expected an array of {typing.get_args(typ)[0].__name__}"
                             f", got {value!r}.")
        inner = typing.get_args(typ)[0]
        return tuple(_toml_value(v, inner, where) for v in value)
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typ in (int, float, str, bool) and type(value) is typ:
        return value
    raise ValueError(f"{where}: expected {tname}, got {value!r}.")


def _typed(config_cls, table: dict, where: str) -> dict:
    """Check the keys of one TOML table against ``config_cls`` and convert its values."""
    hints = typing.get_type_hints(config_cls)
    fields = [f.name for f in dataclasses.fields(config_cls)]
    out = {}
    for k, v in table.items():
        if k not in fields:
            raise ValueError(f"{where}: unknown key {k!r} for {config_cls.__name__}; valid "
                             f"keys: {', '.join(fields)}.")
        out[k] = _toml_value(v, hints[k], f"{where}: {k}")
    return out


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML ({e}).") from None


def has_profile(sim: Simulation, profile: str) -> bool:
    """Whether ``sim`` has ``profile``: quick and paper always; cpu where its TOML has a
    ``[cpu]`` table."""
    if profile not in PROFILES:
        raise ValueError(f"profile: must be one of {PROFILES}, got {profile!r}.")
    return profile != "cpu" or "cpu" in _read_toml(profile_path(sim.name))


def load_profile(sim: Simulation, profile: str = "quick") -> dict:
    """The fields of ``sim``'s ``profile`` as read from ``simulations/NAME.toml``: the
    ``[quick]`` table, and for ``paper`` or ``cpu`` the ``[quick]`` table updated by that
    profile's table (which lists what differs; a missing ``[paper]`` is quick, a missing
    ``[cpu]`` is an error: the cpu profile is opt-in).  Values are converted to the config's
    field types; an unknown key, table or value of the wrong type raises ``ValueError``
    naming the file and profile."""
    if profile not in PROFILES:
        raise ValueError(f"profile: must be one of {PROFILES}, got {profile!r}.")
    path = profile_path(sim.name)
    if not path.exists():
        raise ValueError(f"simulation {sim.name!r}: no profile file {path}.")
    doc = _read_toml(path)
    extra = sorted(set(doc) - set(PROFILES))
    if extra:
        raise ValueError(f"{path}: unknown table or key {extra[0]!r}; a profile file holds "
                         f"the tables {list(PROFILES)}.")
    if profile == "cpu" and "cpu" not in doc:
        raise ValueError(f"profile: {sim.name!r} has no cpu profile (no [cpu] table in "
                         f"{path}); use quick or paper, or add one.")
    out = {}
    for p in dict.fromkeys(("quick", profile)):        # quick, then the profile on top
        if not isinstance(doc.get(p, {}), dict):
            raise ValueError(f"{path}: {p!r} must be a table ([{p}]).")
        out.update(_typed(sim.config_cls, doc.get(p, {}), f"{path} [{p}]"))
    return out


def read_config_file(sim: Simulation, path) -> tuple[str | None, dict]:
    """A user's run file (``gmtheory run NAME --config my.toml``): top-level keys are
    config fields, plus optionally ``profile = "quick"|"paper"`` (the base they are laid
    over; or ``"cpu"``) and ``simulation = "NAME"`` (checked against ``sim``).  Returns the profile
    (``None`` when the file names none) and the converted fields."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--config: no such file {str(path)!r}.")
    doc = dict(_read_toml(path))
    profile = doc.pop("profile", None)
    if profile is not None and profile not in PROFILES:
        raise ValueError(f"{path}: profile must be one of {PROFILES}, got {profile!r}.")
    named = doc.pop("simulation", sim.name)
    if named != sim.name:
        raise ValueError(f"{path}: written for simulation {named!r}, not {sim.name!r}.")
    return profile, _typed(sim.config_cls, doc, str(path))


def make_config(sim: Simulation, profile: str = "quick", overrides: dict | None = None):
    """The config of ``sim``'s ``profile`` (from its TOML file) with ``overrides`` (typed
    values, e.g. from :func:`parse_overrides` or :func:`read_config_file`) on top.  The
    TOML file is the only source of values (config classes hold none): a field that the
    ``[quick]`` table lacks raises ``ValueError`` naming the file and the field."""
    values = {**load_profile(sim, profile), **(overrides or {})}
    missing = [f.name for f in dataclasses.fields(sim.config_cls) if f.name not in values]
    if missing:
        raise ValueError(f"{profile_path(sim.name)} [quick]: missing {', '.join(missing)}; "
                         f"the [quick] table lists every field of {sim.config_cls.__name__}.")
    return sim.config_cls(**values)


_LAST_STATS: dict = {}


def last_run_stats() -> dict:
    """Points computed, reused and waited for by the last :func:`run_simulation` of this
    process (``{}`` when its assembled result was served from the cache)."""
    return dict(_LAST_STATS)


def _compute_point(sim, cfg, point, i, base_key, pstem, pkey, fp, force):
    ckpt = pstem.parent / f"{pstem.name}.train"
    if force and ckpt.exists():
        shutil.rmtree(ckpt, ignore_errors=True)
    with checkpoint_scope(ckpt):
        arrays = sim.run_point(cfg, point, jax.random.fold_in(base_key, i))
    arrays = {k: jax.device_get(v) for k, v in arrays.items()}
    save_result(pstem, arrays, {"key": pkey, "point": point, "index": i, "seed": cfg.seed,
                                "fingerprint": fp.as_dict()})
    shutil.rmtree(ckpt, ignore_errors=True)
    return arrays


def result_stem(name: str, profile: str = "quick", overrides: dict | None = None, *,
                results_dir: str | Path = "simulations/results") -> tuple[Path, str]:
    """``(stem, key)`` of the cached result of ``name`` at ``profile`` with ``overrides``:
    where :func:`run_simulation` reads and writes it.  The key holds the config, the
    environment that changes the numbers (jax/jaxlib, x64, XLA_FLAGS) and the identity of
    any data read from disk; the source is checked separately by its fingerprint."""
    sim = get_simulation(name)
    return _stem_key(sim, make_config(sim, profile, overrides), profile, results_dir)[:2]


class PointsHeldElsewhere(RuntimeError):
    """:func:`run_simulation` with ``wait=False`` found points that another process is
    computing, and nothing else left to do: the caller may do other work and call again
    (the points this call computed are cached)."""


def _stem_key(sim, cfg, profile, results_dir):
    env = environment_identity()
    data = sim.data(cfg) if sim.data is not None else None
    key = config_key(sim.name, cfg, env, data)
    return Path(results_dir) / sim.name / f"{profile}-{key}", key, env, data


def run_simulation(
    name: str,
    profile: str = "quick",
    overrides: dict | None = None,
    *,
    results_dir: str | Path = "simulations/results",
    force: bool = False,
    progress: bool = True,
    reuse_stale: bool = False,
    poll_seconds: float = 0.5,
    claim_stale_after: float = 6 * 3600.0,
    wait: bool = True,
):
    """Run (or load from cache) a simulation; returns ``(arrays, meta, stem)``.

    A cached result is used only if its config and its source fingerprint match; with
    ``reuse_stale`` a result of the same config but older code is used too, with a
    :class:`gmtheory.cache.StaleResultWarning`.

    Several processes may run the same simulation on one results folder at once (two
    shells, or the processes of a ``jax.distributed`` job): each point is claimed with an
    atomic create-exclusive file before it is computed, so no point is computed twice; a
    process waits (polling every ``poll_seconds``) for the points that others hold, and a
    claim left by a crashed process is recovered (:func:`gmtheory.cache.try_claim`).
    ``last_run_stats()`` says how many points this call computed, reused and waited for.
    With ``wait=False`` it raises :class:`PointsHeldElsewhere` instead of waiting for
    them (``gmtheory reproduce`` then draws another figure first and comes back).
    """
    sim = get_simulation(name)
    cfg = make_config(sim, profile, overrides)
    _LAST_STATS.clear()
    fp = sim.fingerprint()
    stem, key, env, data = _stem_key(sim, cfg, profile, results_dir)
    if not force:
        hit = load_result(stem, key, fp, reuse_stale=reuse_stale)
        if hit is not None:
            return hit[0], hit[1], stem
    points = sim.points(cfg)
    point_dir = check_writable(stem.parent / (stem.name + ".points"))
    base_key = jax.random.key(cfg.seed)
    results: dict[int, dict] = {}
    stats = {"computed": 0, "reused": 0, "waited": 0}
    t0 = time.perf_counter()
    started_git = git_hash()      # a long run outlives edits: the commit it started from
    # several processes (jax.distributed, or two shells on one folder) share the points:
    # each starts with its own share and claims a point atomically before computing it
    nproc, rank = jax.process_count(), jax.process_index()
    order = sorted(range(len(points)), key=lambda i: ((i - rank) % nproc, i))
    pkeys = [config_key(key, fp.digest, i, p) for i, p in enumerate(points)]
    bar = tqdm(total=len(points), desc=f"{sim.name} [{profile}]", disable=not progress,
               leave=False)
    pending = list(order)
    while pending:
        waiting = []
        for i in pending:
            pstem = point_dir / f"point-{i:04d}"
            hit = None if force else load_result(pstem, pkeys[i])
            if hit is not None:
                results[i] = hit[0]
                stats["reused"] += 1
                bar.update()
                continue
            claim = point_dir / f"point-{i:04d}.claim"
            if not try_claim(claim, stale_after=claim_stale_after):
                waiting.append(i)          # another process is computing it
                continue
            try:
                hit = None if force else load_result(pstem, pkeys[i])  # finished meanwhile?
                if hit is not None:
                    results[i] = hit[0]
                    stats["reused"] += 1
                else:
                    with quiet(not progress):      # no training bars under progress=False
                        results[i] = _compute_point(sim, cfg, points[i], i, base_key, pstem,
                                                    pkeys[i], fp, force)
                    stats["computed"] += 1
            finally:
                release_claim(claim)
            bar.update()
        if waiting:
            if not wait:
                bar.close()
                raise PointsHeldElsewhere(f"{sim.name}: {len(waiting)} point(s) are being "
                                          "computed by another process.")
            stats["waited"] += 1
            time.sleep(poll_seconds)
        pending = waiting
        force = False                      # points claimed elsewhere are taken as they are
    bar.close()
    results = [results[i] for i in range(len(points))]
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
        "environment": env,
        "data_identity": data,
        "points_computed": stats["computed"],
        "started_git": started_git,
    }
    save_result(stem, arrays, meta)
    _LAST_STATS.clear()
    _LAST_STATS.update(stats)
    hit = load_result(stem, key, fp)
    return hit[0], hit[1], stem
