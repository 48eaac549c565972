"""Statistics shared by checks, simulations, figures and benchmarks.

One place for the numbers that a reader compares with a tolerance:

* :func:`mean_se` — mean and standard error over an axis (``ddof = 1``);
* :func:`fit_loglog` / :func:`fit_semilog` — least-squares slopes with their standard
  error and ``R^2`` (a rate is always reported as a fitted slope, never read off two
  points);
* :func:`fit_loglog_weighted` — the log-log slope weighted by each point's Monte Carlo
  standard error, with the slope's SE propagated from those SEs (not from the residuals);
* :func:`extrapolate_inverse` / :func:`extrapolate_inverse_each` — the ``d -> inf`` limit
  of an ``O(1/d)`` finite-size bias, with its SE;
* :func:`inverse_variance_mean` — points with their own SEs pooled into one estimate;
* :func:`z_score` — a difference in units of its (combined) standard error;
* :func:`bonferroni_z` / :func:`bonferroni_t` — the two-sided threshold that ``m``
  simultaneous comparisons at family-wise level ``alpha`` must stay under.

Everything here works on NumPy arrays (JAX arrays are converted) and returns Python
floats or NumPy arrays.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import stats as _st

__all__ = ["Fit", "mean_se", "control_variate_mean", "fit_loglog", "fit_loglog_weighted",
           "fit_semilog", "fit_linear", "extrapolate_inverse", "extrapolate_inverse_each",
           "inverse_variance_mean", "z_score", "bonferroni_z", "bonferroni_t"]


class Fit(NamedTuple):
    """A least-squares line ``y = slope * x + intercept`` (in the fitted coordinates)."""

    slope: float
    intercept: float
    stderr: float      #: standard error of the slope
    r2: float          #: coefficient of determination
    n: int             #: number of points fitted

    def describe(self, unit: str = "") -> str:
        return f"{self.slope:+.3g} ± {self.stderr:.2g}{unit} (R² = {self.r2:.4f}, {self.n} points)"


def mean_se(x, axis=0):
    """Mean and standard error ``std(ddof=1) / sqrt(n)`` along ``axis``.

    Returns ``(mean, se)``.  A single sample has no standard error: it raises (an
    ``inf`` would make any z-score 0 and pass a comparison; a 0 would claim certainty).
    NaN values give a NaN mean and SE (never dropped).
    """
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        raise ValueError("x: mean_se needs at least one value, got an empty array.")
    n = x.shape[axis] if x.ndim else 1
    if n < 2:
        raise ValueError(f"x: a standard error needs at least 2 samples along axis {axis}, "
                         f"got {n}; run more seeds or repetitions (shape {x.shape}).")
    mean = np.mean(x, axis=axis)
    se = np.std(x, axis=axis, ddof=1) / np.sqrt(n)
    return mean, se


def control_variate_mean(f, controls):
    """Monte Carlo mean of ``f`` (n,) with control variates ``controls`` (n, k) of known
    mean zero: ``mean(f - controls @ beta)`` with ``beta`` the least-squares fit of ``f`` on
    the centred controls, and its SE from the residuals (``n - k - 1`` degrees of
    freedom).  The estimate is unbiased to O(1/n) and its variance is that of the part of
    ``f`` the controls do not explain (regression estimator; Glasserman, *Monte Carlo
    Methods in Financial Engineering*, sec. 4.1).  Returns ``(mean, se)``; NaN propagates."""
    f = np.asarray(f, dtype=float)
    c = np.asarray(controls, dtype=float)
    if c.ndim == 1:
        c = c[:, None]
    if f.ndim != 1 or c.shape[0] != f.shape[0]:
        raise ValueError(f"controls: need shape (n, k) with n = len(f) = {f.shape}, got "
                         f"{c.shape}.")
    n, k = c.shape
    if n < k + 3:
        raise ValueError(f"f: {n} samples cannot fit {k} control coefficients and leave a "
                         "standard error; draw more samples.")
    if not (np.all(np.isfinite(f)) and np.all(np.isfinite(c))):
        return float("nan"), float("nan")
    cc = c - c.mean(0)
    beta = np.linalg.lstsq(cc, f - f.mean(), rcond=None)[0]
    res = f - c @ beta
    m = float(res.mean())
    se = float(np.sqrt(np.sum((res - res.mean()) ** 2) / (n - k - 1) / n))
    return m, se


def fit_linear(x, y) -> Fit:
    """Least-squares line through ``(x, y)`` with the slope's standard error and ``R^2``."""
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ValueError(f"x, y: need the same number of points, got {x.size} and {y.size}.")
    if x.size < 2:
        raise ValueError(f"x: a fit needs at least 2 points, got {x.size}.")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("x, y: a fit needs finite values (a log of a non-positive number?).")
    if x.size == 2:
        slope = (y[1] - y[0]) / (x[1] - x[0])
        return Fit(float(slope), float(y[0] - slope * x[0]), float("inf"), 1.0, 2)
    res = _st.linregress(x, y)
    return Fit(float(res.slope), float(res.intercept), float(res.stderr),
               float(res.rvalue**2), int(x.size))


def fit_loglog(x, y) -> Fit:
    """Slope of ``log y`` against ``log x``: the exponent ``a`` in ``y ~ C x^a``."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("x, y: a log-log fit needs positive values; drop or floor the zeros "
                         "(and say so) before fitting.")
    return fit_linear(np.log(x), np.log(y))


def fit_loglog_weighted(x, y, se) -> Fit:
    """Weighted least-squares slope of ``log y`` against ``log x``, each point weighted by
    ``1 / var(log y_i)`` with ``sd(log y_i) = se_i / y_i`` (delta method; independent
    points, e.g. independent Monte Carlo replicates at every ``x``).  The slope's standard
    error is the one those per-point SEs imply, ``sqrt(1 / (S_w S_wxx - S_wx^2) * S_w)``,
    not the residual-based one: it is the Monte Carlo SE of the fitted slope.  ``r2`` is the
    weighted coefficient of determination."""
    x, y, se = (np.asarray(v, float).ravel() for v in (x, y, se))
    if not (x.shape == y.shape == se.shape):
        raise ValueError(f"x, y, se: need the same number of points, got {x.size}, {y.size} "
                         f"and {se.size}.")
    if x.size < 2:
        raise ValueError(f"x: a fit needs at least 2 points, got {x.size}.")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("x, y: a log-log fit needs positive values.")
    if not np.all(np.isfinite(se)) or np.any(se <= 0):
        raise ValueError("se: a weighted fit needs finite positive standard errors.")
    lx, ly = np.log(x), np.log(y)
    w = (y / se) ** 2
    sw, swx, swy = w.sum(), (w * lx).sum(), (w * ly).sum()
    swxx, swxy = (w * lx * lx).sum(), (w * lx * ly).sum()
    den = sw * swxx - swx**2
    slope = (sw * swxy - swx * swy) / den
    intercept = (swy - slope * swx) / sw
    ybar = swy / sw
    ss_tot = float((w * (ly - ybar) ** 2).sum())
    ss_res = float((w * (ly - intercept - slope * lx) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    return Fit(float(slope), float(intercept), float(np.sqrt(sw / den)), r2, int(x.size))


def extrapolate_inverse(x, y, se) -> tuple[float, float]:
    """The limit ``a`` of ``y = a + b / x`` as ``x -> inf``, fitted by weighted least squares
    to points ``(x_i, y_i)`` with independent standard errors ``se_i``, and its standard
    error (the one the per-point SEs imply, ``sqrt((X^T W X)^-1_00)``).  Two points give the
    exact line: ``a = (x_2 y_2 - x_1 y_1) / (x_2 - x_1)``.  For an O(1/x) finite-size bias
    (the error of a simulation at dimension ``d`` against its ``d -> inf`` theory)."""
    x, y, se = (np.asarray(v, float).ravel() for v in (x, y, se))
    if not (x.shape == y.shape == se.shape):
        raise ValueError(f"x, y, se: need the same number of points, got {x.size}, {y.size} "
                         f"and {se.size}.")
    if np.unique(x).size < 2:
        raise ValueError(f"x: the extrapolation needs at least 2 distinct x, got {x.tolist()}.")
    if np.any(x <= 0) or not np.all(np.isfinite(y)):
        raise ValueError("x, y: need positive x and finite y.")
    if not np.all(np.isfinite(se)) or np.any(se <= 0):
        raise ValueError("se: the extrapolation needs finite positive standard errors.")
    X = np.stack([np.ones_like(x), 1.0 / x], 1)
    w = 1.0 / se**2
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    coef = cov @ (X.T @ (w * y))
    return float(coef[0]), float(np.sqrt(cov[0, 0]))


def extrapolate_inverse_each(x, y, se, *, keep=None):
    """:func:`extrapolate_inverse` at every point of the trailing axes: ``y`` and ``se`` have
    shape ``(len(x), ...)``; returns the limits and their SEs, each of shape ``y.shape[1:]``.
    ``keep`` (boolean, shape ``y.shape[1:]``) marks the points the design simulated; the
    others are NaN.  A kept point with a non-finite value or SE raises (never dropped)."""
    y, se = np.asarray(y, float), np.asarray(se, float)
    if y.shape != se.shape or y.ndim < 1 or y.shape[0] != np.size(x):
        raise ValueError(f"y, se: need shape (len(x), ...) = ({np.size(x)}, ...), got "
                         f"{y.shape} and {se.shape}.")
    keep = np.ones(y.shape[1:], bool) if keep is None else np.asarray(keep, bool)
    lim, lim_se = np.full(y.shape[1:], np.nan), np.full(y.shape[1:], np.nan)
    for idx in zip(*np.nonzero(keep), strict=True):
        col = (slice(None),) + tuple(idx)
        lim[idx], lim_se[idx] = extrapolate_inverse(x, y[col], se[col])
    return lim, lim_se


def inverse_variance_mean(y, se) -> tuple[float, float]:
    """``sum(y / se^2) / sum(1 / se^2)`` over every element and its SE
    ``1 / sqrt(sum(1 / se^2))``: independent estimates of one quantity pooled.  A NaN in
    ``y`` gives NaN (never dropped); no element, or an SE that is not finite and positive,
    raises."""
    y, se = np.asarray(y, float).ravel(), np.asarray(se, float).ravel()
    if y.size == 0 or y.shape != se.shape:
        raise ValueError(f"y, se: need the same positive number of estimates, got {y.size} "
                         f"and {se.size}.")
    if not np.all(np.isfinite(se)) or np.any(se <= 0):
        raise ValueError("se: pooling needs finite positive standard errors.")
    w = 1.0 / se**2
    return float(np.sum(w * y) / np.sum(w)), float(1.0 / np.sqrt(np.sum(w)))


def fit_semilog(x, y) -> Fit:
    """Slope of ``log y`` against ``x``: ``-rate`` in ``y ~ C exp(-rate x)``."""
    y = np.asarray(y, float)
    if np.any(y <= 0):
        raise ValueError("y: a semi-log fit needs positive values.")
    return fit_linear(x, np.log(y))


def z_score(a, b, se_a, se_b=0.0):
    """``|a - b| / sqrt(se_a^2 + se_b^2)`` (element-wise)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    se = np.sqrt(np.asarray(se_a, float) ** 2 + np.asarray(se_b, float) ** 2)
    return np.abs(a - b) / se


def bonferroni_z(m: int, alpha: float = 0.01) -> float:
    """Two-sided normal threshold for ``m`` simultaneous comparisons at level ``alpha``."""
    if m < 1:
        raise ValueError(f"m: the number of comparisons must be >= 1, got {m}.")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: must lie in (0, 1), got {alpha}.")
    return float(_st.norm.isf(alpha / (2 * m)))


def bonferroni_t(m: int, dof, alpha: float = 0.01) -> float:
    """Two-sided Student-t threshold (``dof`` degrees of freedom) for ``m`` comparisons."""
    if m < 1:
        raise ValueError(f"m: the number of comparisons must be >= 1, got {m}.")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: must lie in (0, 1), got {alpha}.")
    return float(_st.t.isf(alpha / (2 * m), dof))
