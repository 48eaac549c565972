"""Input validation shared by the public functions.

Every check raises ``ValueError`` whose message names the argument and says how
to fix it.  Checks run only on concrete arrays: inside ``jit``/``vmap``/``grad``
the values are tracers and cannot be inspected, so validation is skipped there
(validate once outside the transformation, as ``GaussianMixture`` does).
"""

from __future__ import annotations

import jax
import numpy as np

__all__ = [
    "is_concrete",
    "as_float_array",
    "check_finite",
    "check_shape",
    "check_psd",
]


def is_concrete(*xs) -> bool:
    """True when none of ``xs`` is a JAX tracer (so values can be inspected)."""
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def as_float_array(x, name: str):
    """Convert ``x`` to a floating JAX array, naming ``name`` on failure."""
    import jax.numpy as jnp

    if isinstance(x, jax.core.Tracer):
        return x
    try:
        arr = np.asarray(x)
    except Exception as exc:  # pragma: no cover - exotic inputs
        raise ValueError(f"{name}: could not convert to an array ({exc}).") from exc
    if arr.dtype == object:
        raise ValueError(f"{name}: expected a numeric array, got a ragged or object array.")
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(jnp.result_type(float))
    return jnp.asarray(arr)


def check_finite(x, name: str) -> None:
    """Raise if ``x`` (concrete) holds NaN or infinity."""
    if not is_concrete(x):
        return
    arr = np.asarray(x)
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(
            f"{name}: contains {bad} non-finite value(s) (NaN or inf); pass finite numbers."
        )


def check_shape(x, name: str, expected: tuple, hint: str = "") -> None:
    """Check ``x.shape`` against ``expected``; ``None`` entries match any size."""
    shape = tuple(x.shape)
    ok = len(shape) == len(expected) and all(
        e is None or e == s for e, s in zip(expected, shape, strict=False)
    )
    if not ok:
        want = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        raise ValueError(
            f"{name}: expected shape {want}, got {shape}." + (f" {hint}" if hint else "")
        )


def check_psd(covs, name: str, *, sym_tol: float = 1e-8, psd_tol: float = 1e-10) -> None:
    """Check a stack of matrices ``(K, d, d)`` is symmetric positive semi-definite.

    Symmetry: ``|C - C^T| <= sym_tol * max(1, |C|_max)``.  PSD: the smallest
    eigenvalue is ``>= -psd_tol * max(1, lambda_max)`` (round-off of ``eigvalsh``
    on a matrix of that scale).
    """
    if not is_concrete(covs):
        return
    c = np.asarray(covs, dtype=np.float64)
    for k in range(c.shape[0]):
        scale = max(1.0, float(np.max(np.abs(c[k]))))
        asym = float(np.max(np.abs(c[k] - c[k].T)))
        if asym > sym_tol * scale:
            raise ValueError(
                f"{name}[{k}]: not symmetric (max |C - C^T| = {asym:.3g}); "
                "pass a symmetric matrix, e.g. (C + C.T) / 2."
            )
        ev = np.linalg.eigvalsh(0.5 * (c[k] + c[k].T))
        if ev[0] < -psd_tol * max(1.0, float(ev[-1])):
            raise ValueError(
                f"{name}[{k}]: not positive semi-definite (smallest eigenvalue {ev[0]:.3g}); "
                "pass a covariance matrix such as A @ A.T."
            )
