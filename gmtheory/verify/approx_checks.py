"""Checks for the ReLU -> softmax constructions (docs/topics/approx.md).

Each check measures the sup error of an explicit construction (evaluated through the
finite-prompt attention operator) against the exact target, requires it to stay
below the bound at every resource value, and fits the log-error slope against the
resource, which must match the bound's exponent.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from .. import approx as A
from .. import approx_compose as C
from ..comparisons import largest, smallest
from ..simulations.approx_compiled import COMPILED_NETS, box_points, random_relu_network
from ..simulations.approx_rates import (
    MAX_N,
    SHIFTED,
    measure_composed,
    measure_interpolation_affine,
)
from ..stats import fit_loglog, fit_semilog
from ._registry import Outcome, agreement, experiment, lower_bound, register_check, upper_bound

ROUND = 1e-12  # float64 slack on bounds that are attained exactly
REL = 1e-9     # relative slack on the same


def _ratio(measured, bound):
    """``measured / (bound (1 + REL) + ROUND)``, and ``+inf`` where the bound is negative:
    a bound on an error is >= 0, and the ratio of a negative bound (a sign error) would
    be negative and pass ``<= 1``."""
    m, b = np.asarray(measured, float), np.asarray(bound, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b >= 0, m / (b * (1 + REL) + ROUND), np.inf)


def _bound(r):
    """Worst ratio of the measured sup error to its proven bound (plus float64 slack)."""
    ratio = _ratio(r["measured"], r["bound"])
    return upper_bound(largest(ratio), 1.0,
                       "proven bound at every resource value; the slack (relative 1e-9, "
                       "absolute 1e-12) is float64 round-off, for bounds attained exactly "
                       "(c/beta of the two-key head)",
                       name="max over resources of measured / bound")


def _composed(target, hand_bound):
    """Comparisons for the same target through :mod:`gmtheory.approx_compose` (issue 28):
    on the construction's own domain the rules' rescalings are the identity, so the route
    computes the same heads' arithmetic and carries the same certified bound as the
    hand-built construction (``hand_bound``, from the ``approx.*_bound`` functions, per
    resource value); on :data:`SHIFTED` they rescale, and the composed bound must still hold
    at every point and resource value."""
    c = measure_composed(target)
    ratio = largest(_ratio(c["measured"], c["bound"]),
                    _ratio(c["shifted_measured"], c["shifted_bound"]))
    hb = np.asarray(hand_bound, float)
    comps = (
        agreement(largest(c["same"]), 1e-12,
                  "composed route vs the hand-built construction on its own domain: the "
                  "rescalings are u = (x - 0)/1 and 0 + 1*out, exact in float64; 1e-12 allows "
                  "for round-off only", name="max |composed - hand-built|"),
        # the bound, not only the values: a rule that adds too little error is caught here
        # (the bounds are not attained, so no measured error exceeds one 2 % too small)
        agreement(largest(np.abs(np.asarray(c["bound"], float) - hb) / np.abs(hb)), 1e-12,
                  "the composed route's certified bound vs the hand-built construction's "
                  "(approx.*_bound) on its own domain: the rules' arithmetic with identity "
                  "rescalings, exact up to float64 round-off of a few products",
                  name="max |composed bound - hand-built bound| / hand-built bound",
                  relative=True),
        upper_bound(ratio, 1.0,
                    "the composition rules' bound is proved "
                    "(docs/topics/approx.md#composition-rules); slack relative 1e-9, "
                    "absolute 1e-12 for float64 round-off",
                    name=f"max measured / composed bound (own domain and box {SHIFTED[target]})"),
    )
    return comps, {"composed_" + k: v for k, v in c.items() if k != "resource"}


def _fit(fit_fn, x, y):
    """``fit_fn(x, y)``, or ``None`` where an error is not positive (a broken construction:
    its slope comparison then FAILs with an infinite deviation instead of raising)."""
    return fit_fn(x, y) if np.all(np.asarray(y) > 0) else None


def _deviation(fit, expected):
    return abs(fit.slope - expected) if fit is not None else float("inf")


def _details(r, fit, expected):
    slope, stderr, r2 = (None, None, None) if fit is None else (fit.slope, fit.stderr, fit.r2)
    return {"slope": slope, "slope_stderr": stderr, "r2": r2,
            "expected_slope": expected, "resource": r["resource"], "measured": r["measured"],
            "bound": r["bound"], "heads": r["heads"], "layers": r["layers"],
            "max_beta": r["max_beta"]}


RATES = "approx-rates"      # the simulation the approx-rates figure draws
RATE_KEYS = ("resource", "measured", "bound", "heads", "layers", "max_beta")


def _target(run, target):
    """One target's rows of the approx-rates run (``gmtheory.simulations.approx_rates``)."""
    return {k: np.asarray(run[f"{target}/{k}"]) for k in RATE_KEYS}


def _loglog(run, target, expected, tol, why):
    r = _target(run, target)
    fit = _fit(fit_loglog, r["resource"], r["measured"])
    comps, extra = _composed(target, r["bound"])
    return Outcome(
        _bound(r),
        agreement(_deviation(fit, expected), tol, f"fitted log-log slope vs {why}",
                  name=f"|slope - ({expected:g})|"),
        *comps,
        details={**_details(r, fit, expected), **extra},
    )


def _semilog(run, target, expected_per_level, tol, why):
    r = _target(run, target)
    fit = _fit(fit_semilog, r["resource"], r["measured"])
    comps, extra = _composed(target, r["bound"])
    return Outcome(
        _bound(r),
        agreement(_deviation(fit, expected_per_level), tol,
                  f"fitted slope of log error per {why}",
                  name=f"|slope - ({expected_per_level:.4g})|"),
        *comps,
        details={**_details(r, fit, expected_per_level), **extra},
    )


@register_check(
    "approx.relu-two-key-head",
    "One softmax head over two keys gives t*sigma(beta t) with sup error exactly c/beta "
    "(c ~ 0.2785): measured <= bound and error slope -1 in beta.",
    "docs/topics/approx.md#relu-from-one-head-over-two-keys",
    experiment=RATES,
)
def check_relu():
    return _loglog(experiment("approx.relu-two-key-head"), "relu", -1.0, 0.01,
                   "beta (grid includes the maximiser; exact c/beta)")


@register_check(
    "approx.interpolation-head",
    "The p-anchor interpolation head approximates clip(y, -1, 1) within the derived bound "
    "h + 2(b-a)q/(1-q), and its error decays like 1/p; so does the d = 3 head for "
    "clip(w^T x + t, -1, 1) on 20 000 random points plus corners.",
    "docs/topics/approx.md#interpolation-head",
    experiment=RATES,
)
def check_interpolation():
    r = _target(experiment("approx.interpolation-head"), "interpolation")
    fit = fit_loglog(r["resource"] - 1, r["measured"])
    comps, extra = _composed("interpolation", r["bound"])
    aff = measure_interpolation_affine()  # the d > 1 head, d = 3
    fit_aff = fit_loglog(aff["p"] - 1, aff["measured"])
    d = aff["w"].size
    # float64 round-off of the two score forms: each score is a sum of d + 3 products of
    # size <= beta (2 |y| + 1 + 2 |t|); 16 (d + 3) ulps of that moves each softmax weight by a
    # factor <= e^{2 ds}, the output (a mean of anchors in [-1, 1]) by <= 2 * 2 ds
    ds = 16 * (d + 3) * 2.0**-52 * aff["beta"].max() * (2 * aff["y_max"] + 1 + 2 * 0.3)
    return Outcome(_bound(r),
                   agreement(abs(fit.slope + 1.0), 0.05,
                             "slope of sup error vs p-1 (anchor spacing); beta = 20/h^2 keeps "
                             "the exponential tail negligible", name="|slope - (-1)|"),
                   *comps,
                   upper_bound(largest(_ratio(aff["measured"], aff["bound"])),
                               1.0,
                               "d = 3 head for clip(w^T x + t): the scalar head's proved bound "
                               "holds for every y = w^T x + t; float64 slack as above",
                               name="d > 1 head: max over p of measured / bound"),
                   agreement(abs(fit_aff.slope + 1.0), 0.05,
                             "d = 3 head: slope of sup error vs p - 1, as for the scalar head",
                             name="d > 1 head: |slope - (-1)|"),
                   agreement(largest(aff["vs_scalar"]), 4.0 * ds,
                             "d = 3 head vs the scalar head at y = w^T x + t: equal scores "
                             "formed in two ways; tolerance from 16 (d + 3) ulps of the largest "
                             "score", name="d > 1 head: max |affine - scalar head|"),
                   details={**_details(r, fit, -1.0), "p": r["resource"], **extra,
                            "affine_measured": aff["measured"], "affine_bound": aff["bound"],
                            "affine_slope": fit_aff.slope, "affine_slope_stderr": fit_aff.stderr,
                            "affine_vs_scalar": aff["vs_scalar"], "affine_w": aff["w"],
                            "affine_d": d})


@register_check(
    "approx.max-one-head",
    "One head over n = 8 scores: 0 <= max - sum softmax(beta x)_i x_i <= log(n)/beta on "
    "random and adversarial inputs, and the worst-case error decays like 1/beta.",
    "docs/topics/approx.md#max-and-min",
    experiment=RATES,
)
def check_max_one_head():
    return _loglog(experiment("approx.max-one-head"), "max-one-head", -1.0, 0.1,
                   "beta (worst case over an adversarial family and random inputs)")


@register_check(
    "approx.max-relu-tree",
    "max over n = 8 inputs by a depth-3 tree of attention-ReLUs stays within 3c/beta, "
    "with error slope -1 in beta.",
    "docs/topics/approx.md#max-and-min",
    experiment=RATES,
)
def check_max_tree():
    return _loglog(experiment("approx.max-relu-tree"), "max-relu-tree", -1.0, 0.1,
                   "beta (4096 uniform inputs and 4096 with differences O(1/beta))")


@register_check(
    "approx.square-yarotsky",
    "Yarotsky's sawtooth with m levels of attention-ReLU hats approximates x^2 on [0,1] "
    "within 4^-(m+1) + 8c/beta, and log error falls by log 4 per level.",
    "docs/topics/approx.md#multiplication-yarotsky",
    experiment=RATES,
)
def check_square():
    return _semilog(experiment("approx.square-yarotsky"), "square", -math.log(4.0), 0.05,
                    "level m (expected -log 4)")


@register_check(
    "approx.multiply",
    "xy = 2 sq((x+y)/2) - sq(x)/2 - sq(y)/2 with attention squarings stays within 3x the "
    "squaring bound on [0,1]^2, and log error falls by about log 4 per level.",
    "docs/topics/approx.md#multiplication-yarotsky",
    experiment=RATES,
)
def check_multiply():
    return _semilog(experiment("approx.multiply"), "multiply", -math.log(4.0), 0.15,
                    "level m (expected -log 4)")


@register_check(
    "approx.reciprocal-pl",
    "1/x on [1/4, 1] by n attention-ReLUs (piecewise-linear interpolation) stays within "
    "(1-a)^2/(4a^3 n^2) + TV c/beta, with error slope -2 in n.",
    "docs/topics/approx.md#reciprocal-on-a-1",
    experiment=RATES,
)
def check_reciprocal_pl():
    return _loglog(experiment("approx.reciprocal-pl"), "reciprocal-pl", -2.0, 0.1,
                   "n (beta = 1e9 makes the attention term negligible)")


@register_check(
    "approx.reciprocal-newton",
    "Newton steps y <- y(2 - xy) built on attention multiplication (m = 10) stay within the "
    "perturbed-Newton bound R_k/a, R_{k+1} = R_k^2 + delta, at every step.",
    "docs/topics/approx.md#reciprocal-on-a-1",
    experiment=RATES,
)
def check_reciprocal_newton():
    r = _target(experiment("approx.reciprocal-newton"), "reciprocal-newton")
    comps, extra = _composed("reciprocal-newton", r["bound"])
    return Outcome(_bound(r), *comps,
                   details={"steps": r["resource"], "measured": r["measured"],
                            "bound": r["bound"], "heads": r["heads"], "layers": r["layers"],
                            **extra})


# ------------------------------------------------------------ compiled ReLU networks
COMPILED_EPS = (1e-2, 1e-3)     # the pair whose bounds must shrink >= 5x (issue 28)
COMPILED_MIN_BETA = 1e2         # the bound's slope is fitted from here up (4 decades)


@register_check(
    "approx.compiled-relu-network",
    "compile_relu_network on 7 random ReLU networks (depths 2-4, widths <= 16, d <= 4): the "
    "measured sup error on 20 000 random points plus every box corner (the approx-compiled "
    "figure's run) stays <= the certified bound at beta = 10..1e6, the bound at eps = "
    "1e-1..1e-5 meets eps, eps/10 gives a bound >= 5x smaller, and the bound's log-log "
    "slope in beta is -1.",
    "docs/topics/approx.md#compile-your-own-relu-network",
    experiment="approx-compiled",
)
def check_compiled_relu_network():
    a = experiment("approx.compiled-relu-network")      # the approx-compiled figure's run
    betas, eps = np.asarray(a["betas"]), [float(e) for e in a["eps"]]
    fit_b = betas >= COMPILED_MIN_BETA                  # the bound's slope over 4 decades
    e2, e3 = eps.index(COMPILED_EPS[0]), eps.index(COMPILED_EPS[1])
    ratios, eps_ratio, shrink, slopes, rows = [], [], [], [], []
    for i, n in enumerate(a["nets"]):
        seed, d, widths = COMPILED_NETS[int(n)]
        meas, bounds = np.asarray(a["measured"][i]), np.asarray(a["bound"][i])
        eb = np.asarray(a["eps_bound"][i])
        ratios.append(largest(_ratio(meas, bounds)))
        eps_ratio.append(largest(eb / np.asarray(eps)))
        shrink.append(eb[e2] / eb[e3])
        fit = fit_loglog(betas[fit_b], bounds[fit_b])
        slopes.append(fit)
        rows.append({"seed": seed, "d": d, "widths": list(widths), "measured": meas.tolist(),
                     "bound": bounds.tolist(), "beta_for_eps": a["eps_beta"][i].tolist(),
                     "heads": int(a["eps_heads"][i][0]), "bound_slope": fit.slope,
                     "bound_slope_stderr": fit.stderr,
                     "measured_slope": fit_loglog(betas[fit_b], meas[fit_b]).slope})
    worst = largest(abs(f.slope + 1.0) for f in slopes)
    return Outcome(
        upper_bound(largest(ratios), 1.0,
                    "the bound is proved on the box (interval arithmetic, 1-Lipschitz ReLU, "
                    "the two-key head's tail bound); slack relative 1e-9, absolute 1e-12 for "
                    "float64 round-off", name="max over networks and scales of measured / bound"),
        upper_bound(largest(eps_ratio), 1.0, "bisection returns a beta whose bound is <= eps",
                    name="max over networks and eps of bound / eps"),
        lower_bound(smallest(shrink), 5.0, "issue 28: eps/10 must give a bound >= 5x smaller",
                    name="min over networks of bound(1e-2) / bound(1e-3)"),
        agreement(worst, 0.05,
                  "the bound is K/beta plus tails e^{-beta r} of units whose interval stays r "
                  "away from 0; a unit with r ~ 1/beta inside the grid moves its share of K to "
                  "the tail, which tilts the slope over 4 decades by < 0.05 unless it carries "
                  "> 35 % of K", name="max over networks of |bound slope - (-1)|"),
        details={"networks": rows, "eps": eps, "betas": betas.tolist(),
                 "worst_slope_stderr": float(largest(f.stderr for f in slopes))},
    )


GAP_BETAS = (1.0, 4.0, 16.0, 64.0, 256.0)
GAP_SLOPE_BETAS = tuple(range(60, 241, 20))
GAP_DELTA = 0.1


@register_check(
    "approx.max-one-head-gap",
    "One head over n = 8 scores: max - sum softmax(beta x)_i x_i <= (n-1) range e^{-beta delta} "
    "(delta the top-2 gap) at every random and adversarial input and beta, and on "
    "x = (1, 1-delta, ...) the log error falls with slope -delta in beta.",
    "docs/topics/approx.md#max-and-min",
)
def check_max_gap():
    n = MAX_N
    rng = np.random.default_rng(28)
    deltas = np.linspace(1e-3, 1.0, 500)
    adv = np.concatenate([np.ones((deltas.size, 1)), 1.0 - np.tile(deltas[:, None], (1, n - 1))],
                         1)
    x = np.concatenate([rng.uniform(size=(4096, n)), adv])
    ratio = largest()
    for beta in GAP_BETAS:
        err = x.max(1) - np.asarray(A.max_one_head(jnp.asarray(x), beta))
        bound = A.max_one_head_gap_bound(x, beta)
        ratio = largest(ratio, _ratio(err, bound))
    xs = jnp.asarray(np.array([[1.0] + [1.0 - GAP_DELTA] * (n - 1)]))
    errs = [float(1.0 - A.max_one_head(xs, b)[0]) for b in GAP_SLOPE_BETAS]
    # the error is positive (a softmax average of non-tied scores is below their max); a
    # wrong construction that breaks this must FAIL the slope comparison, not raise in the
    # log of the fit
    fit = fit_semilog(np.array(GAP_SLOPE_BETAS, float), errs) if smallest(errs) > 0 else None
    slope_dev = abs(fit.slope / GAP_DELTA + 1.0) if fit is not None else float("inf")
    return Outcome(
        upper_bound(ratio, 1.0, "proved per input (each non-max weight <= e^{-beta delta}); "
                    "slack relative 1e-9, absolute 1e-12 for float64 round-off",
                    name="max over inputs and beta of measured / gap bound"),
        agreement(slope_dev, 0.02,
                  "error = (n-1) delta e^{-beta delta} / (1 + (n-1) e^{-beta delta}); the "
                  "denominator tilts the slope by < (n-1) e^{-6} = 1.7 % at beta delta >= 6",
                  name="|slope / delta - (-1)|"),
        details={"betas": list(GAP_BETAS), "slope": None if fit is None else fit.slope,
                 "slope_stderr": None if fit is None else fit.stderr,
                 "expected_slope": -GAP_DELTA, "slope_betas": list(GAP_SLOPE_BETAS),
                 "errors": errs, "inputs": int(x.shape[0]), "seed": 28},
    )


# ------------------------------------------------------------ composition rules
COMPOSED_POINTS = 20_000


def composed_expressions():
    """``(name, expression, lo, hi)``: composites in which every rule propagates a nonzero
    error (products of emulations, reciprocals of products, a ReLU network of expressions)."""
    x, y, z = C.variables([0.0, 0.0, 0.25], [1.0, 1.0, 1.0])
    lo, hi = np.array([0.0, 0.0, 0.25]), np.ones(3)
    u, v, w = C.variables([-1.0, -1.0, 0.0], [2.0, 1.0, 1.0])
    lo2, hi2 = np.array([-1.0, -1.0, 0.0]), np.array([2.0, 1.0, 1.0])
    layers, _, _, _ = random_relu_network(7, 3, (8, 8, 1))
    return (
        ("max(x*y, 1/z)", C.maximum(x * y, 1 / z), lo, hi),
        ("min(u^2, relu(v - w)), one head", C.minimum(u * u, C.relu(v - w, 1e4), form="head",
                                                     beta=1e4), lo2, hi2),
        ("1/(2.5 + u*v + w^2)", 1 / (2.5 + u * v + C.square(w, 6)), lo2, hi2),
        ("(1/z)^2 - x*y", C.square(1 / z, 6) - x * y, lo, hi),
        ("clip(u*v + w, -1/2, 1/2), 33 anchors", C.clip(u * v + w, -0.5, 0.5, 33, 1e5), lo2,
         hi2),
        ("relu network(x*y, 1/z, max(x, z))",
         C.network(layers, x * y, 1 / z, C.maximum(x, z, beta=1e4), beta=1e4), lo, hi),
        ("1/z by Newton, 4 steps", C.reciprocal(z, form="newton", steps=4, m=8, beta=None),
         lo, hi),
    )


@register_check(
    "approx.composed-expressions",
    "Expressions composed by the rules of gmtheory.approx_compose (products, squares, "
    "reciprocals, max/min, ReLU, clip and a ReLU-network node, each rescaling emulations "
    "that carry error): the measured sup error on 20 000 random points plus the box's "
    "corners stays <= the one certified bound of each expression, and every rule's bound "
    "equals the same bound by hand (the constructions' bounds, the rule written out).",
    "docs/topics/approx.md#composition-rules",
)
def check_composed_expressions():
    rng = np.random.default_rng(2028)
    rows, ratio = [], largest()
    for name, f, lo, hi in composed_expressions():
        x = box_points(rng, lo, hi, COMPOSED_POINTS)
        # the sup over the points in NumPy: XLA's CPU max reduction drops a NaN from
        # arrays of a few thousand entries (measured, jax 0.10.2)
        err = largest(jnp.abs(f(x) - f.exact(x)))
        ratio = largest(ratio, _ratio(err, f.bound))
        r = f.resources
        rows.append({"expression": name, "measured": float(err), "bound": f.bound,
                     "range": list(f.range), "heads": r.heads, "layers": r.layers,
                     "max_beta": r.max_beta, "anchors": r.anchors})
    rules = rule_bounds()
    # over |h|: a negative bound by hand would make the ratio negative and pass
    gap = largest(*(abs(b - h) / abs(h) for _, b, h in rules))
    return Outcome(
        upper_bound(ratio, 1.0, "each rule's bound is proved (docs/topics/approx.md#"
                    "composition-rules); slack relative 1e-9, absolute 1e-12 for float64 "
                    "round-off", name="max over expressions of measured / bound"),
        # the bounds are not attained (ratios 0.02-0.96), so a rule that adds too little
        # error passes the comparison above: each rule's bound is also recomputed by hand
        agreement(gap, 1e-12, "each rule's bound vs the same bound by hand from the "
                  "approx.*_bound functions or from the rule written out "
                  "(docs/topics/approx.md#composition-rules), on expressions whose arguments "
                  "are exact or read their bounds from the arguments: float64 round-off of a "
                  "few sums and products", name="max |rule bound - bound by hand| / bound",
                  relative=True, cases=len(rules)),
        details={"expressions": rows, "points": COMPOSED_POINTS, "seed": 2028,
                 "rule_bounds": [{"rule": n, "bound": b, "by_hand": h} for n, b, h in rules]},
    )


def rule_bounds():
    """``(rule, bound, bound by hand)`` for every composition rule: its certified bound
    beside the same bound computed without the rule, from the constructions'
    ``approx.*_bound`` functions where its arguments are exact, and from the documented
    rule written out (docs/topics/approx.md#composition-rules: ``sum |a_i| e_i``; ``S^2
    sigma + e (2 max|f| + e)``; the compiled bound plus ``|W_L| ... |W_1| e``; ...) where
    they carry error, with the arguments' ranges and bounds read from them.  The bounds are
    not attained, so a rule that adds too little error passes every measured comparison;
    this one catches it (the bound break of :mod:`gmtheory.verify.mutation`)."""
    x, y, z = C.variables([0.0, 0.0, 0.25], [1.0, 1.0, 1.0])
    lo, hi = np.array([0.0, 0.0, 0.25]), np.ones(3)
    beta = 1e4
    mn = C.minimum(x, y, beta=beta)
    mn3 = C.minimum(x, y, z, form="head", beta=beta)
    sq, xy = C.square(x, 6), x * y
    aff = C.affine([(2.0, sq), (-3.0, xy)], 1.0)
    layers, _, _, _ = random_relu_network(7, 3, (8, 8, 1))
    net = C.network(layers, x, y, z, beta=beta)
    net_err = C.network(layers, sq, xy, z, beta=beta)
    comp = A.compile_relu_network(layers, lo, hi, beta=beta)
    lo2 = np.array([f.emulated_range[0] for f in (sq, xy, z)])
    hi2 = np.array([f.emulated_range[1] for f in (sq, xy, z)])
    comp2 = A.compile_relu_network(layers, lo2, hi2, beta=beta)
    e = np.array([sq.bound, xy.bound, 0.0])
    for W, _ in comp2.layers:
        e = np.abs(np.asarray(W)) @ e

    def mag(r):                   # max |.| over a range (np.maximum keeps a NaN)
        return float(np.maximum(abs(r[0]), abs(r[1])))

    def width(f):                 # the emulated range's width, which the rules rescale by
        return f.emulated_range[1] - f.emulated_range[0]

    # rules whose arguments carry error, against their formulas written out
    # (docs/topics/approx.md#composition-rules); xy, sq: errors ~1e-2, ranges [0, 1]
    m = 4
    sq_xy = C.square(xy, m)
    mul = C.multiply(sq, xy, m)
    den = 1.0 + sq                                   # range [1, 2], error sq.bound
    rec = C.reciprocal(den, n=16, beta=1e4)
    lo_d, s_d = den.range[0], den.range[1] + den.bound
    rl = C.relu(xy - 0.3, beta)
    shifted = xy - 0.3
    r_tail = float(np.maximum(np.maximum(shifted.emulated_range[0],
                                         -shifted.emulated_range[1]), 0.0))
    cl = C.clip(xy, 0.2, 0.7, 9, 1e4)
    mn_err = C.minimum(sq, xy, beta=beta)
    return (("minimum, tree, exact arguments", mn.bound, A.max_relu_tree_bound(2, beta)),
            ("minimum, one head, exact arguments", mn3.bound, A.max_one_head_bound(3, beta)),
            ("affine 1 + 2 x^2 - 3 x y", aff.bound, 2.0 * sq.bound + 3.0 * xy.bound),
            ("network, exact arguments", net.bound, float(comp.bound)),
            ("network of x^2, x y, z", net_err.bound, float(comp2.bound) + float(e[0])),
            ("square of x y: S^2 sigma + e (2 max|f| + e)", sq_xy.bound,
             width(xy) ** 2 * A.square_bound(m) + xy.bound * (2 * mag(xy.range) + xy.bound)),
            ("x^2 times x y: S_f S_g mu + e_f max|g^| + e_g max|f|", mul.bound,
             width(sq) * width(xy) * A.multiply_bound(m) + sq.bound * mag(xy.emulated_range)
             + xy.bound * mag(sq.range)),
            ("1/(1 + x^2): rho/s + e / (L (L - e))", rec.bound,
             A.reciprocal_pl_bound(float(np.minimum((lo_d - den.bound) / s_d, 0.5)), 16, 1e4)
             / s_d
             + den.bound / (lo_d * (lo_d - den.bound))),
            ("relu(x y - 0.3): e + tail at the emulated range's distance from 0", rl.bound,
             shifted.bound + float(A.relu_tail_bound(beta, r_tail))),
            ("clip(x y, 0.2, 0.7), 9 anchors: e + interpolation bound", cl.bound,
             xy.bound + A.interpolation_bound(0.2, 0.7, 9, 1e4)),
            ("min(x^2, x y), tree: tree bound + max_i e_i", mn_err.bound,
             A.max_relu_tree_bound(2, beta) + float(np.maximum(sq.bound, xy.bound))))
