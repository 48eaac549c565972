"""Atomic, resumable result storage: ``.npz`` arrays plus a JSON sidecar.

A result ``stem`` is stored as ``stem.npz`` (arrays) and ``stem.json`` (config,
seed, package and library versions, git hash, and a key that identifies the
computation).  Both are written to a temporary file and moved into place with
``os.replace``, the JSON last: a result without a readable, matching sidecar is
treated as absent and recomputed, so an interrupted write is never mistaken for
a finished one.  A sweep stores one such pair per point, so an interrupted sweep
resumes from the points already finished.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import platform
import subprocess
import tempfile
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path

import numpy as np

__all__ = ["provenance", "config_key", "save_result", "load_result", "atomic_write_bytes",
           "environment_identity", "files_identity", "git_hash",
           "source_fingerprint", "Fingerprint", "StaleResultWarning", "changed_files",
           "try_claim", "release_claim", "check_writable", "mark_perturbed", "perturbed"]

PACKAGE_ROOT = Path(__file__).resolve().parent

# What this process has made wrong on purpose (gmtheory.verify.mutation.patch): a result it
# computes is marked with it and read back only by a process perturbed the same way, so a
# NaN injected to test the checks can never reach a clean run through the cache
_PERTURBED: list[str] = []


def mark_perturbed(what: str | None) -> None:
    """Mark (``what``: e.g. ``"icl.test_error x nan"``) or unmark (``None``) this process as
    running deliberately perturbed code."""
    _PERTURBED.clear()
    if what:
        _PERTURBED.append(str(what))


def perturbed() -> str | None:
    """The perturbation this process runs under, or ``None``."""
    return _PERTURBED[0] if _PERTURBED else None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


class StaleResultWarning(UserWarning):
    """A cached result computed by different source code was used anyway."""


@dataclass(frozen=True)
class Fingerprint:
    """Hash of the gmtheory source files a module depends on.

    ``files`` maps each file (relative to the package, e.g. ``lda.py``) to the SHA-256 of
    its bytes; ``digest`` hashes that map.  Stored in every result sidecar, so a result
    computed by other code is recomputed, and a stale one can name the files that changed.
    """

    digest: str
    files: dict

    def as_dict(self) -> dict:
        return {"digest": self.digest, "files": dict(self.files)}


def _module_file(modname: str) -> Path | None:
    parts = modname.split(".")
    if parts[0] != "gmtheory":
        return None
    base = PACKAGE_ROOT.joinpath(*parts[1:])
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _resolve_from_package(pkg: str, init: Path, name: str) -> str:
    """Where a package's ``__init__`` gets ``name`` from (its re-exports)."""
    import ast

    for node in ast.parse(init.read_bytes()).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            if any((a.asname or a.name) == name for a in node.names):
                return f"{pkg}.{node.module}"
    return pkg


def _imports(modname: str, path: Path) -> set[str]:
    """gmtheory modules that ``path`` imports (every ``import`` statement, also those
    inside functions).  A name imported from a package resolves to the submodule that
    the package re-exports it from; a name defined in a package ``__init__`` resolves
    to that ``__init__``.  The top-level ``gmtheory/__init__.py``'s imports are not
    followed (it imports everything); a subpackage's ``__init__`` (``gmtheory.lda``,
    imported whole as ``from gmtheory import lda``) brings in the submodules that it
    imports at its top level, i.e. the code behind the names it re-exports."""
    import ast

    if path.name == "__init__.py":
        if modname == "gmtheory":
            return set()
        return {f"{modname}.{node.module}" for node in ast.parse(path.read_bytes()).body
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module}
    package = modname.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "gmtheory")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            f = _module_file(mod)
            if mod.split(".")[0] != "gmtheory" or f is None:
                continue
            for a in node.names:
                if _module_file(f"{mod}.{a.name}") is not None:   # a submodule
                    out.add(f"{mod}.{a.name}")
                elif f.name == "__init__.py":                     # a package's name
                    out.add(_resolve_from_package(mod, f, a.name))
                else:
                    out.add(mod)
    return out


_FP_CACHE: dict = {}


def source_fingerprint(modules) -> Fingerprint:
    """Fingerprint of ``modules`` (names such as ``gmtheory.simulations.lda_sims``) and of
    every gmtheory module they import, transitively (see :func:`_imports`)."""
    if isinstance(modules, str):
        modules = [modules]
    seen: dict[str, Path] = {}
    todo = list(modules)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        f = _module_file(m)
        if f is None:
            continue
        seen[m] = f
        todo.extend(_imports(m, f) - set(seen))
    files = {}
    for f in seen.values():
        st = f.stat()
        ck = (str(f), st.st_mtime_ns, st.st_size)
        if ck not in _FP_CACHE:
            _FP_CACHE[ck] = hashlib.sha256(f.read_bytes()).hexdigest()
        files[f.relative_to(PACKAGE_ROOT).as_posix()] = _FP_CACHE[ck]
    files = dict(sorted(files.items()))
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
    return Fingerprint(digest, files)


def changed_files(old: dict | None, new: Fingerprint) -> list[str]:
    """Files whose hash differs between a stored fingerprint dict and ``new`` (added and
    removed files included)."""
    old_files = (old or {}).get("files", {})
    names = sorted(set(old_files) | set(new.files))
    return [n for n in names if old_files.get(n) != new.files.get(n)]


def check_writable(folder) -> Path:
    """Create ``folder`` if needed and make sure a file can be written there; otherwise raise
    a ``ValueError`` that names the folder."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".write-test.", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        why = exc.strerror or exc
        raise ValueError(f"results: cannot write to the folder {str(folder)!r} ({why}); "
                         f"choose a writable folder with --results DIR.") from None
    return folder


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def try_claim(path, *, stale_after: float = 6 * 3600.0) -> bool:
    """Claim a unit of work by creating ``path`` exclusively (atomic on POSIX file systems,
    NFS included since v3).  Returns ``True`` if this process now owns it.

    A claim left by a crashed process is recovered: on the same host when its process no
    longer exists, on another host when it is older than ``stale_after`` seconds.
    """
    import socket
    import time

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    me = {"pid": os.getpid(), "host": socket.gethostname(), "time": time.time()}
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                held = json.loads(path.read_text() or "{}")
            except (OSError, ValueError):
                held = {}
            same_host = held.get("host") == me["host"]
            dead = same_host and "pid" in held and not _pid_alive(int(held["pid"]))
            old = time.time() - float(held.get("time", time.time())) > stale_after
            if not (dead or old):
                return False
            try:  # stale: remove it and try once more
                path.unlink()
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as fh:
            json.dump(me, fh)
        return True
    return False


def release_claim(path) -> None:
    """Remove a claim made by :func:`try_claim` (no error if it is already gone)."""
    try:
        Path(path).unlink()
    except FileNotFoundError:
        pass


def git_hash() -> str | None:
    """The commit checked out where this package's source lives (``None`` outside git)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def environment_identity() -> dict:
    """What, besides our source and the config, changes the numbers a computation
    produces: the jax and jaxlib versions, ``jax_enable_x64`` and the ``XLA_FLAGS`` of this
    process (XLA:CPU has miscompiled code here before; flags such as the fusion emitters
    change the compiled program).  Part of every simulation's cache key
    (:func:`gmtheory.simulations.run_simulation`), so a result computed under another
    jaxlib or other flags is a miss, not a hit."""
    import jax
    import jaxlib

    return {"jax": jax.__version__,
            "jaxlib": getattr(getattr(jaxlib, "version", None), "__version__", None)
            or getattr(jaxlib, "__version__", "unknown"),
            "x64": bool(jax.config.read("jax_enable_x64")),
            "xla_flags": " ".join(os.environ.get("XLA_FLAGS", "").split())}


_FILES_CACHE: dict = {}


def files_identity(paths) -> dict:
    """``{name: "size:sha256-prefix"}`` of data files (the identity of a data set read from
    disk, for a cache key); hashes are reused while a file's size and mtime are unchanged."""
    out = {}
    for f in sorted(Path(p) for p in paths):
        st = f.stat()
        ck = (str(f), st.st_mtime_ns, st.st_size)
        if ck not in _FILES_CACHE:
            _FILES_CACHE[ck] = hashlib.sha256(f.read_bytes()).hexdigest()[:16]
        out[f.name] = f"{st.st_size}:{_FILES_CACHE[ck]}"
    return out


def provenance() -> dict:
    """Package version, git hash and library versions, for result sidecars."""
    import jax
    import matplotlib
    import scipy

    from . import __version__

    return {
        "gmtheory": __version__,
        "git": git_hash(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        **environment_identity(),
        "jax_backend": jax.default_backend(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "matplotlib": matplotlib.__version__,
    }


def _jsonable(obj):
    if is_dataclass(obj):
        return {k: _jsonable(v) for k, v in asdict(obj).items()}
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    return obj


def config_key(*parts) -> str:
    """Stable hash of JSON-able parts (configs, schema versions, point parameters)."""
    blob = json.dumps(_jsonable(list(parts)), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def save_result(stem: Path, arrays: dict, meta: dict) -> None:
    """Store ``arrays`` as ``stem.npz`` and ``meta`` (+ provenance) as ``stem.json``."""
    stem = Path(stem)
    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    atomic_write_bytes(stem.with_suffix(".npz"), buf.getvalue())
    sidecar = {**_jsonable(meta), "provenance": provenance(), "arrays": sorted(arrays),
               **({"perturbed": perturbed()} if perturbed() else {})}
    atomic_write_bytes(stem.with_suffix(".json"), json.dumps(sidecar, indent=2).encode())


def load_result(stem: Path, key: str, fingerprint: Fingerprint | None = None, *,
                reuse_stale: bool = False) -> tuple[dict, dict] | None:
    """Load ``(arrays, meta)`` if present, readable and computed for ``key`` by the code
    whose ``fingerprint`` is given; else ``None``.

    A missing, corrupt or foreign (different key) result returns ``None`` so the caller
    recomputes it.  So does a *stale* one (same key, other source code), unless
    ``reuse_stale``: then it is returned with a :class:`StaleResultWarning` that names
    the result and the changed files.
    """
    import warnings

    stem = Path(stem)
    npz, js = stem.with_suffix(".npz"), stem.with_suffix(".json")
    if not (npz.exists() and js.exists()):
        return None
    try:
        meta = json.loads(js.read_text())
        if meta.get("key") != key:
            return None
        if meta.get("perturbed") != perturbed():     # computed by deliberately wrong code
            return None
        if fingerprint is not None:
            stored = meta.get("fingerprint") or {}
            if stored.get("digest") != fingerprint.digest:
                if not reuse_stale:
                    return None
                changed = changed_files(stored, fingerprint)
                warnings.warn(
                    f"{stem}: stale result reused (--reuse-stale): it was computed by other "
                    f"source code; changed files: {', '.join(changed) or 'unknown'}.  Rerun "
                    f"without --reuse-stale to recompute it.", StaleResultWarning, stacklevel=2)
        with open(npz, "rb") as fh, np.load(fh) as data:  # closed even when corrupt
            arrays = {k: data[k] for k in data.files}
        if sorted(arrays) != meta.get("arrays"):
            return None
        return arrays, meta
    except (OSError, ValueError, json.JSONDecodeError, EOFError, KeyError):
        return None
    except Exception:  # zipfile.BadZipFile and other corruption
        return None
