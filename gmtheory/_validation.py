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
    "check_int",
    "check_positive",
    "check_result",
]


def is_concrete(*xs) -> bool:
    """True when none of ``xs`` is a JAX tracer (so values can be inspected)."""
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def as_float_array(x, name: str):
    """Convert ``x`` to a floating JAX array, naming ``name`` on failure.

    Floating arrays (float16, bfloat16, float32, float64) keep their dtype; integer
    arrays are converted to the default float dtype (exact for |values| < 2^53).
    Complex, boolean, string and object arrays raise ``ValueError``: casting them
    would silently drop an imaginary part or give meaning to ``True``.
    """
    import jax.numpy as jnp

    if isinstance(x, jax.core.Tracer):
        return x
    if isinstance(x, jax.Array):  # already on a device: no host round trip
        if jnp.issubdtype(x.dtype, jnp.floating):
            return x
        _check_numeric_dtype(x.dtype, name)
        return x.astype(jnp.result_type(float))
    try:
        arr = np.asarray(x)
    except Exception as exc:  # ragged nesting, unconvertible objects
        raise ValueError(f"{name}: could not convert to an array ({exc}).") from exc
    if jnp.issubdtype(arr.dtype, jnp.floating):
        return jnp.asarray(arr)
    _check_numeric_dtype(arr.dtype, name)
    return jnp.asarray(arr.astype(jnp.result_type(float)))


def _check_numeric_dtype(dtype, name: str) -> None:
    """Accept integer dtypes (converted to float by the caller); reject everything else."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return
    if dtype.kind == "c":
        raise ValueError(
            f"{name}: got a complex array ({dtype}); pass real numbers "
            "(e.g. x.real if the imaginary part is zero)."
        )
    if dtype.kind == "b":
        raise ValueError(
            f"{name}: got a boolean array; pass real numbers (e.g. x.astype(float))."
        )
    if dtype.kind == "O":
        raise ValueError(f"{name}: expected a numeric array, got a ragged or object array.")
    raise ValueError(f"{name}: expected a real numeric array, got dtype {dtype}.")


def check_int(value, name: str, *, minimum: int | None = None) -> int:
    """Return ``value`` as a Python ``int``; raise unless it is an integer ``>= minimum``.

    Floats (even integral ones like ``2.0``), strings and booleans are rejected: an
    ``int()`` cast would silently truncate ``2.5`` or read ``True`` as 1.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(
            f"{name}: expected an integer, got {value!r} ({type(value).__name__})."
        )
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value}.")
    return value


def check_positive(value, name: str, why: str = "") -> float:
    """Return ``value`` as a float; raise unless it is a real number in ``(0, inf)``.

    Accepts Python and NumPy numbers and 0-d arrays; strings and booleans are refused.
    """
    ok = not isinstance(value, (str, bytes, bool, np.bool_)) and np.ndim(value) == 0
    try:
        v = float(value) if ok else float("nan")
    except (TypeError, ValueError):
        v = float("nan")
    if not 0 < v < np.inf:
        raise ValueError(f"{name}: must be a positive finite number{why}, got {value!r}.")
    return v


def check_result(x, what: str, fix: str) -> None:
    """Raise if a result computed from finite, validated inputs holds NaN or infinity.

    Such a result means float overflow (or underflow to ``0/0``); ``what`` names the
    function and ``fix`` names the arguments to rescale.  Skipped on tracers.
    """
    if not is_concrete(x):
        return
    arr = np.asarray(x)
    if not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(
            f"{what}: {bad} non-finite value(s) in the result although the inputs are "
            f"finite: the computation overflowed {arr.dtype}. {fix}"
        )


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
    """Check a stack of matrices ``(K, d, d)`` (or one ``(d, d)``) is symmetric PSD.

    Symmetry: ``|C - C^T| <= sym_tol * |C|_max``.  PSD: the smallest eigenvalue is
    ``>= -psd_tol * max_i |lambda_i|``, with ``psd_tol`` raised to ``4 d eps`` of the
    matrices' dtype when that is larger (float32).  Both are relative to the matrix's own scale
    (the round-off of ``eigvalsh`` is ``~ eps |C|``), so a covariance of scale 1e-8
    with an eigenvalue of -1e-11 is rejected like one of scale 1 with -1e-3.
    """
    if not is_concrete(covs):
        return
    c = np.asarray(covs)
    if np.issubdtype(c.dtype, np.floating) and c.shape[-1] > 0:
        # rounding a PSD matrix to a narrower float moves its eigenvalues by up to
        # ~d eps |C|: a singular float32 covariance has eigenvalues ~ -1e-8 |C|
        psd_tol = max(psd_tol, 4 * c.shape[-1] * float(np.finfo(c.dtype).eps))
    c = c.astype(np.float64)
    if c.ndim == 2:  # one matrix: name it without an index
        c = c[None]
        label = lambda k: name  # noqa: E731
    else:
        label = lambda k: f"{name}[{k}]"  # noqa: E731
    for k in range(c.shape[0]):
        scale = float(np.max(np.abs(c[k]))) if c[k].size else 0.0
        asym = float(np.max(np.abs(c[k] - c[k].T)))
        if asym > sym_tol * scale:
            raise ValueError(
                f"{label(k)}: not symmetric (max |C - C^T| = {asym:.3g}); "
                "pass a symmetric matrix, e.g. (C + C.T) / 2."
            )
        ev = np.linalg.eigvalsh(0.5 * (c[k] + c[k].T))
        if ev.size and ev[0] < -psd_tol * float(np.max(np.abs(ev))):
            raise ValueError(
                f"{label(k)}: not positive semi-definite (smallest eigenvalue {ev[0]:.3g}); "
                "pass a covariance matrix such as A @ A.T."
            )
