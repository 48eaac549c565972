"""Checks for the ReLU -> softmax constructions (docs/topics/approx.md).

Each check measures the sup error of an explicit construction (evaluated through the
finite-prompt attention operator) against the exact target, requires it to stay
below the bound at every resource value, and fits the log-error slope against the
resource, which must match the bound's exponent.
"""

from __future__ import annotations

import math

import numpy as np

from ..simulations.approx_rates import measure
from ..stats import fit_loglog, fit_semilog
from ._registry import Outcome, agreement, register_check, upper_bound

ROUND = 1e-12  # float64 slack on bounds that are attained exactly
REL = 1e-9     # relative slack on the same


def _bound(r):
    """Worst ratio of the measured sup error to its proven bound (plus float64 slack)."""
    ratio = r["measured"] / (r["bound"] * (1 + REL) + ROUND)
    return upper_bound(float(np.max(ratio)), 1.0,
                       "proven bound at every resource value; the slack (relative 1e-9, "
                       "absolute 1e-12) is float64 round-off, for bounds attained exactly "
                       "(c/beta of the two-key head)",
                       name="max over resources of measured / bound")


def _details(r, fit, expected):
    return {"slope": fit.slope, "slope_stderr": fit.stderr, "r2": fit.r2,
            "expected_slope": expected, "resource": r["resource"], "measured": r["measured"],
            "bound": r["bound"], "heads": r["heads"], "layers": r["layers"],
            "max_beta": r["max_beta"]}


def _loglog(target, expected, tol, why):
    r = measure(target)
    fit = fit_loglog(r["resource"], r["measured"])
    return Outcome(
        _bound(r),
        agreement(abs(fit.slope - expected), tol, f"fitted log-log slope vs {why}",
                  name=f"|slope - ({expected:g})|"),
        details=_details(r, fit, expected),
    )


def _semilog(target, expected_per_level, tol, why):
    r = measure(target)
    fit = fit_semilog(r["resource"], r["measured"])
    return Outcome(
        _bound(r),
        agreement(abs(fit.slope - expected_per_level), tol,
                  f"fitted slope of log error per {why}",
                  name=f"|slope - ({expected_per_level:.4g})|"),
        details=_details(r, fit, expected_per_level),
    )


@register_check(
    "approx.relu-two-key-head",
    "One softmax head over two keys gives t*sigma(beta t) with sup error exactly c/beta "
    "(c ~ 0.2785): measured <= bound and error slope -1 in beta.",
    "docs/topics/approx.md#relu-from-one-head-over-two-keys",
)
def check_relu():
    return _loglog("relu", -1.0, 0.01, "beta (grid includes the maximiser; exact c/beta)")


@register_check(
    "approx.interpolation-head",
    "The p-anchor interpolation head approximates clip(y, -1, 1) within the derived bound "
    "h + 2(b-a)q/(1-q), and its error decays like 1/p.",
    "docs/topics/approx.md#interpolation-head",
)
def check_interpolation():
    r = measure("interpolation")
    fit = fit_loglog(r["resource"] - 1, r["measured"])
    return Outcome(_bound(r),
                   agreement(abs(fit.slope + 1.0), 0.05,
                             "slope of sup error vs p-1 (anchor spacing); beta = 20/h^2 keeps "
                             "the exponential tail negligible", name="|slope - (-1)|"),
                   details={**_details(r, fit, -1.0), "p": r["resource"]})


@register_check(
    "approx.max-one-head",
    "One head over n = 8 scores: 0 <= max - sum softmax(beta x)_i x_i <= log(n)/beta on "
    "random and adversarial inputs, and the worst-case error decays like 1/beta.",
    "docs/topics/approx.md#max-and-min",
)
def check_max_one_head():
    return _loglog("max-one-head", -1.0, 0.1,
                   "beta (worst case over an adversarial family and random inputs)")


@register_check(
    "approx.max-relu-tree",
    "max over n = 8 inputs by a depth-3 tree of attention-ReLUs stays within 3c/beta, "
    "with error slope -1 in beta.",
    "docs/topics/approx.md#max-and-min",
)
def check_max_tree():
    return _loglog("max-relu-tree", -1.0, 0.1, "beta (4096 random inputs)")


@register_check(
    "approx.square-yarotsky",
    "Yarotsky's sawtooth with m levels of attention-ReLU hats approximates x^2 on [0,1] "
    "within 4^-(m+1) + 8c/beta, and log error falls by log 4 per level.",
    "docs/topics/approx.md#multiplication-yarotsky",
)
def check_square():
    return _semilog("square", -math.log(4.0), 0.05, "level m (expected -log 4)")


@register_check(
    "approx.multiply",
    "xy = 2 sq((x+y)/2) - sq(x)/2 - sq(y)/2 with attention squarings stays within 3x the "
    "squaring bound on [0,1]^2, and log error falls by about log 4 per level.",
    "docs/topics/approx.md#multiplication-yarotsky",
)
def check_multiply():
    return _semilog("multiply", -math.log(4.0), 0.15, "level m (expected -log 4)")


@register_check(
    "approx.reciprocal-pl",
    "1/x on [1/4, 1] by n attention-ReLUs (piecewise-linear interpolation) stays within "
    "(1-a)^2/(4a^3 n^2) + TV c/beta, with error slope -2 in n.",
    "docs/topics/approx.md#reciprocal-on-a-1",
)
def check_reciprocal_pl():
    return _loglog("reciprocal-pl", -2.0, 0.1, "n (beta = 1e9 makes the attention term negligible)")


@register_check(
    "approx.reciprocal-newton",
    "Newton steps y <- y(2 - xy) built on attention multiplication (m = 10) stay within the "
    "perturbed-Newton bound R_k/a, R_{k+1} = R_k^2 + delta, at every step.",
    "docs/topics/approx.md#reciprocal-on-a-1",
)
def check_reciprocal_newton():
    r = measure("reciprocal-newton")
    return Outcome(_bound(r),
                   details={"steps": r["resource"], "measured": r["measured"],
                            "bound": r["bound"], "heads": r["heads"], "layers": r["layers"]})
