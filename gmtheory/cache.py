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
from dataclasses import asdict, is_dataclass
from pathlib import Path

import numpy as np

__all__ = ["provenance", "config_key", "save_result", "load_result", "atomic_write_bytes"]


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


def _git_hash() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def provenance() -> dict:
    """Package version, git hash and library versions, for result sidecars."""
    import jax
    import matplotlib
    import scipy

    from . import __version__

    return {
        "gmtheory": __version__,
        "git": _git_hash(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "jax": jax.__version__,
        "jax_backend": jax.default_backend(),
        "x64": bool(jax.config.read("jax_enable_x64")),
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
    sidecar = {**_jsonable(meta), "provenance": provenance(), "arrays": sorted(arrays)}
    atomic_write_bytes(stem.with_suffix(".json"), json.dumps(sidecar, indent=2).encode())


def load_result(stem: Path, key: str) -> tuple[dict, dict] | None:
    """Load ``(arrays, meta)`` if present, readable and computed for ``key``; else ``None``.

    A missing, corrupt or stale (different key) result returns ``None`` so the
    caller recomputes it.
    """
    stem = Path(stem)
    npz, js = stem.with_suffix(".npz"), stem.with_suffix(".json")
    if not (npz.exists() and js.exists()):
        return None
    try:
        meta = json.loads(js.read_text())
        if meta.get("key") != key:
            return None
        with np.load(npz) as data:
            arrays = {k: data[k] for k in data.files}
        if sorted(arrays) != meta.get("arrays"):
            return None
        return arrays, meta
    except (OSError, ValueError, json.JSONDecodeError, EOFError, KeyError):
        return None
    except Exception:  # zipfile.BadZipFile and other corruption
        return None
