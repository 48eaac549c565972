"""Property-based tests (Hypothesis) of the numerical API on hostile input (issue #17, item 5).

Covered: ``GaussianMixture`` (constructors, moments, ``sample``, densities), the closed
forms of Prop. 2.1 (``softmax_attention_limit``, ``softmax_attention_limit_shared``,
``linear_attention_limit``, ``attention_gates``), the finite-prompt operators
(``softmax_attention``, ``linear_attention``, ``weighted_attention``), the GMA layer
(``gma.init``, ``gma.gma_attention`` bidirectional and causal, ``gma.responsibilities``)
and the ``--set`` parser (``parse_overrides`` on real simulation configs).  Properties:

* random valid inputs give finite outputs that agree with an independent NumPy float64
  reference written in this file (log-sum-exp softmax over tokens; eq. (2) as
  ``V sum_k alpha_k(z) (m_k + Gamma_k U z)`` with gates from log-weights; the
  materialised O(N^2) GMA affinity with explicit precision matrices; ...);
* random invalid inputs (shapes, NaN, inf, negative variances, non-PSD covariances,
  weights off the simplex, complex/boolean/string dtypes, unknown or unreadable
  ``--set`` values) raise ``ValueError`` whose message names the argument;
* scales from 1e-8 to 1e8, scores far beyond 1e4, and overflow-sized inputs (~1e150)
  either give finite results or raise ``ValueError``: never a silent NaN/inf.

Tolerances are a-priori float64 round-off bounds, computed per example from the absolute
values of the terms; none is fitted to an observed error:

* a sum of ``n`` products: ``|fl(sum x_i y_i) - sum x_i y_i| <= gamma_n sum |x_i y_i|``,
  ``gamma_n ~ n eps`` (Higham, *Accuracy and Stability of Numerical Algorithms*, Section 3.1).
  :func:`gam` uses ``8 (n + 4) eps`` with ``n`` the number of terms of the nested
  expression; the factor 8 absorbs the few-ulp error of exp/log and of the order of the
  nested products;
* softmax: if every logit carries an absolute error ``<= delta``, each probability
  changes by a factor within ``[e^{-2 delta}, e^{2 delta}]`` (exact, not first order).
  Library and reference each carry such an error, so ``|p' - p| <= p expm1(4 delta)``
  (capped at 1), with ``delta = gam(n) * (absolute magnitude of the logit's terms)``;
* Cholesky solves / log-determinants: relative error ``<= gam(d) * kappa`` with the
  condition number ``kappa <= 10`` by construction of the covariances.

Where such a bound is vacuous (logits ~1e30 make every gate an ill-conditioned hard
decision) only finiteness and normalisation remain: that is the conditioning of the
problem, not a loosened test.  Strategies draw from a few fixed shape buckets so that
the jitted cores compile a handful of times, not once per example.

Budgets: the ``gmtheory`` profile (derandomised, so the default suite is reproducible)
runs half of the ``n`` examples given per test (at least 5: drawing the examples costs
more than testing them, and the default suite has a 6-minute budget); ``pytest -m slow``
runs each property again under ``gmtheory-slow`` with ``SLOW_FACTOR`` times ``n``
(random) examples.
"""

from __future__ import annotations

import dataclasses
import re
import string
from fractions import Fraction
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gmtheory import GaussianMixture, gma
from gmtheory import operators as op
from gmtheory.simulations import SIMULATIONS, get_simulation, make_config, parse_overrides

EPS = np.finfo(np.float64).eps
TINY = 1e-290  # absolute slack for exp() underflowing to 0 or a subnormal

settings.register_profile(
    "gmtheory", deadline=None, database=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "gmtheory-slow", deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW_FACTOR = 10
BUDGETS = [pytest.param("gmtheory", id="default"),
           pytest.param("gmtheory-slow", id="slow", marks=pytest.mark.slow)]


def run(profile: str, n: int, prop) -> None:
    """Run the ``@given`` property ``prop`` with ``n / 2`` examples (at least 5), or with
    ``SLOW_FACTOR x n`` under the slow profile."""
    n = n * SLOW_FACTOR if profile == "gmtheory-slow" else max(5, n // 2)
    settings(settings.get_profile(profile), max_examples=n)(prop)()


# ----------------------------------------------------------------------------- helpers
def gam(n: int) -> float:
    """Round-off factor of an ``n``-term nested sum of products (see module docstring)."""
    return 8.0 * (n + 4) * EPS


def assert_within(got, ref, bound, what: str) -> None:
    """``got`` is finite and ``|got - ref| <= bound`` elementwise (bound may be inf)."""
    got, ref, bound = (np.asarray(a, dtype=np.float64) for a in (got, ref, bound))
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    assert np.all(np.isfinite(got)), f"{what}: non-finite output {got}"
    assert not np.any(np.isnan(bound)), f"{what}: NaN in the bound (a bug of this test)"
    err = np.abs(got - ref)
    bad = ~(err <= bound)
    assert not np.any(bad), (
        f"{what}: |error| {err[bad][:4]} exceeds the round-off bound {bound[bad][:4]} "
        f"(got {got[bad][:4]}, reference {ref[bad][:4]})")


def names_arg(exc: BaseException, *names: str) -> bool:
    """The message of ``exc`` names one of ``names`` as a whole word."""
    msg = str(exc)
    return any(re.search(r"(?<![\w.])" + re.escape(n) + r"(?![\w])", msg) for n in names)


def raises_naming(fn, *names: str):
    with pytest.raises(ValueError) as info:
        fn()
    assert names_arg(info.value, *names), (names, str(info.value))


def softmax_np(logits, axis=-1):
    """Max-subtracted (log-sum-exp) softmax in NumPy; rows of -inf only where a weight is 0."""
    mx = np.max(logits, axis=axis, keepdims=True)
    e = np.exp(logits - mx)
    return e / e.sum(axis=axis, keepdims=True)


def logsumexp_np(a, axis=-1):
    mx = np.max(a, axis=axis, keepdims=True)
    return (mx + np.log(np.sum(np.exp(a - mx), axis=axis, keepdims=True))).squeeze(axis)


def gate_error(p, delta):
    """Bound on ``|p' - p|`` for softmax probabilities with logit errors ``<= delta``."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.fmin(p * np.expm1(4.0 * delta), 1.0) + TINY + 4 * EPS * p


def safe_log(w):
    with np.errstate(divide="ignore"):
        return np.log(w)


# --------------------------------------------------------------------------- strategies
@st.composite
def unit(draw, shape, lo=-1.0, hi=1.0):
    """Arrays in ``[lo, hi]`` whose entries are 0 or of magnitude >= 1e-6.

    Products of such entries with scales 1e-8..1e8 stay far above the subnormal range,
    which XLA's CPU backend flushes to zero (an absolute error ~1e-308 that the relative
    round-off bounds here do not model, and no NaN).  Entries are nonzero except in
    one array in four, which gets zeros at random places (sparse and degenerate cases
    without making most examples trivial).
    """
    parts = []
    if hi >= 1e-6:
        parts.append(st.floats(1e-6, hi))
    if lo <= -1e-6:
        parts.append(st.floats(1e-6, -lo).map(lambda v: -v))
    signed = st.one_of(*parts)
    a = draw(hnp.arrays(np.float64, shape, elements=signed))
    if lo <= 0 <= hi and draw(st.integers(0, 3)) == 0:
        a = np.where(draw(hnp.arrays(np.bool_, shape)), 0.0, a)
    return a


def pow10(lo=-8.0, hi=8.0):
    return st.floats(lo, hi).map(lambda e: float(10.0**e))


def orthogonal(a):
    """An orthogonal matrix from any square matrix (Householder QR is always orthogonal)."""
    return np.linalg.qr(a)[0]


# (K, d): a few buckets keep compilations few; K >= 2 (gates that matter) drawn 4x as often
MIX_SHAPES = [(1, 1), (2, 3), (3, 2), (2, 3), (3, 2)]
EIG_PD = st.floats(0.1, 1.0)  # covariance eigenvalues / scale: kappa <= 10
EIG_PSD = st.one_of(st.just(0.0), EIG_PD)


@st.composite
def mixture_data(draw, singular=True, kind=None, scale=(-8.0, 8.0), shapes=MIX_SHAPES):
    """A valid mixture with its NumPy arrays and the null space of each covariance."""
    K, d = draw(st.sampled_from(shapes))
    raw = draw(unit((K,), 0.0, 1.0))
    if raw.sum() == 0:
        raw[draw(st.integers(0, K - 1))] = 1.0
    w = raw / raw.sum()
    m = draw(pow10(*scale)) * draw(unit((K, d)))
    kind = kind or draw(st.sampled_from(["full", "full", "isotropic", "shared"]))
    s = draw(pow10(*scale))
    eig = EIG_PSD if singular else EIG_PD
    if kind == "isotropic":
        lam = draw(hnp.arrays(np.float64, (K,), elements=eig))
        var = s * lam
        mix = GaussianMixture.isotropic(w, m, var)
        C = var[:, None, None] * np.eye(d)
        null = [np.eye(d) if lam[k] == 0 else np.zeros((d, 0)) for k in range(K)]
    else:
        n_q = 1 if kind == "shared" else K
        Qs = [orthogonal(draw(unit((d, d)))) for _ in range(n_q)]
        lams = [draw(hnp.arrays(np.float64, (d,), elements=eig)) for _ in range(n_q)]
        covs = []
        for Q, lam in zip(Qs, lams, strict=True):
            c = s * (Q * lam) @ Q.T
            covs.append(0.5 * (c + c.T))
        null = [Q[:, lam == 0] for Q, lam in zip(Qs, lams, strict=True)]
        if kind == "shared":
            mix = GaussianMixture.shared(w, m, covs[0])
            C = np.broadcast_to(covs[0], (K, d, d)).copy()
            null = null * K
        else:
            C = np.stack(covs)
            mix = GaussianMixture(w, m, C)
    return SimpleNamespace(mix=mix, w=w, m=m, C=C, K=K, d=d, kind=kind, null=null, s=s)


# ================================================================ GaussianMixture
@pytest.mark.parametrize("profile", BUDGETS)
def test_mixture_moments_match_numpy(profile):
    @given(mixture_data())
    def prop(md):
        w, m, C, K, d = md.w, md.m, md.C, md.K, md.d
        np.testing.assert_array_equal(md.mix.weights, w)
        np.testing.assert_array_equal(md.mix.means, m)
        np.testing.assert_array_equal(md.mix.covs, C)
        assert md.mix.n_components == K and md.mix.dim == d
        mean = np.asarray(md.mix.mean())
        assert_within(mean, w @ m, gam(K) * (w @ np.abs(m)), "mean")
        outer = C + m[:, :, None] * m[:, None, :]
        mag2 = np.einsum("k,kij->ij", w, np.abs(C) + np.abs(m)[:, :, None] * np.abs(m)[:, None])
        m2 = np.asarray(md.mix.second_moment())
        assert_within(m2, np.einsum("k,kij->ij", w, outer), gam(K + 1) * mag2, "second_moment")
        ref_mean = w @ m
        cov = np.asarray(md.mix.covariance())
        mag_cov = mag2 + np.outer(np.abs(ref_mean), np.abs(ref_mean))
        assert_within(cov, np.einsum("k,kij->ij", w, outer) - np.outer(ref_mean, ref_mean),
                      gam(2 * K + 4) * mag_cov, "covariance")
        # the covariance of a mixture is PSD; round-off E moves eigenvalues by |E|_2
        # <= d max|E_ij| (Weyl), so lambda_min >= -d * gam * max(mag)
        ev = np.linalg.eigvalsh(0.5 * (cov + cov.T))
        assert ev[0] >= -d * gam(2 * K + 4) * mag_cov.max() - TINY
        # is_shared: identical covariances are shared; ones differing by more than 1e-9
        # of their scale are not (between that and the 1e-12 tolerance: either)
        gap = np.max(np.abs(C - C[:1])) / max(np.max(np.abs(C)), 1e-300)
        if gap == 0:
            assert md.mix.is_shared()
        elif gap > 1e-9:
            assert not md.mix.is_shared()

    run(profile, 30, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_mixture_sample_stays_on_the_support(profile):
    n = 16

    @given(mixture_data(), st.integers(0, 2**32 - 1))
    def prop(md, seed):
        x, comp = md.mix.sample(jax.random.key(seed), n)
        x, comp = np.asarray(x), np.asarray(comp)
        assert x.shape == (n, md.d) and comp.shape == (n,)
        assert np.all(np.isfinite(x))
        assert np.all((comp >= 0) & (comp < md.K))
        assert np.all(md.w[comp] > 0), "sampled a component of weight 0"
        x2, comp2 = md.mix.sample(jax.random.key(seed), n)  # same key, same numbers
        np.testing.assert_array_equal(x, x2)
        np.testing.assert_array_equal(comp, comp2)
        # x - m_c lies in the range of Gamma_c: along a null direction only round-off.
        # x = m + F e with F F^T = Gamma; eigh's null vectors are orthogonal to the range
        # within ~gam(d) kappa (kappa <= 10), so the leak is <= gam(d) * (|m| + 10 d
        # sqrt(scale) |e|_max) with |e|_max <= 7 (a normal draw this large has p < 1e-11).
        for i in range(n):
            c = comp[i]
            N = md.null[c]
            if N.shape[1] == 0:
                continue
            leak = np.abs(N.T @ (x[i] - md.m[c]))
            bound = gam(md.d) * (np.abs(md.m[c]).sum() + 10 * md.d * np.sqrt(md.s) * 7.0)
            assert np.all(leak <= bound), (leak, bound)

    run(profile, 25, prop)


def _logpdf_np(md, x):
    """``log N(x; m_k, Gamma_k)`` by slogdet and solve, plus its error magnitude."""
    K, d = md.K, md.d
    lp = np.empty((x.shape[0], K))
    mag = np.empty((x.shape[0], K))
    for k in range(K):
        diff = x - md.m[k]
        sol = np.linalg.solve(md.C[k], diff.T).T
        maha = np.sum(diff * sol, axis=1)
        logdet = np.linalg.slogdet(md.C[k])[1]
        lp[:, k] = -0.5 * (maha + logdet + d * np.log(2 * np.pi))
        absdiff = np.abs(x) + np.abs(md.m[k])  # covers the rounding of x - m_k too
        mag[:, k] = np.einsum("ni,ij,nj->n", absdiff, np.abs(np.linalg.inv(md.C[k])), absdiff)
        mag[:, k] += np.abs(logdet) + d * 2.0
    return lp, mag


@pytest.mark.parametrize("profile", BUDGETS)
def test_mixture_densities_match_numpy(profile):
    @given(mixture_data(singular=False), st.data())
    def prop(md, data):
        x = data.draw(pow10()) * data.draw(unit((4, md.d)))
        x = x + md.m[data.draw(st.integers(0, md.K - 1))] * data.draw(st.sampled_from([0, 1]))
        lp_k, mag = _logpdf_np(md, x)
        logits = safe_log(md.w)[None] + lp_k
        ref = logsumexp_np(logits, axis=1)
        # solve/Cholesky: relative error <= gam(d) * kappa, kappa <= 10 by construction
        delta = 10 * gam(2 * md.d) * mag + gam(1) * np.abs(safe_log(np.where(md.w > 0, md.w, 1)))
        dmax = np.max(delta, axis=1)
        got = np.asarray(md.mix.log_prob(x))
        assert_within(got, ref, 2 * dmax + gam(md.K) * np.abs(ref), "log_prob")
        r = np.asarray(md.mix.responsibilities(x))
        r_ref = softmax_np(logits, axis=1)
        assert_within(r, r_ref, gate_error(r_ref, dmax[:, None]), "responsibilities")
        assert np.all(np.abs(r.sum(1) - 1) <= gam(md.K))
        assert np.all(r[:, md.w == 0] == 0)

    run(profile, 25, prop)


# ================================================================== closed forms
D_OUT = 2
N_Q = 5  # queries per call: one compiled softmax_limit_blocked per mixture shape


@st.composite
def closed_form_case(draw, singular=True, kind=None, score_cap=True):
    """A mixture, U, V and queries z.  ``score_cap``: also draw cases whose gate logits
    stay below ~1e4 (the tight regime) besides free scales in [1e-8, 1e8]."""
    md = draw(mixture_data(singular=singular, kind=kind))
    d = md.d
    U = draw(pow10()) * draw(unit((d, d)))
    V = draw(pow10()) * draw(unit((D_OUT, d)))
    z = draw(pow10()) * draw(unit((N_Q, d)))
    if score_cap and draw(st.booleans()):  # rescale U so that |u^T Gamma u| and |m^T u| <= 1e4
        u = np.abs(z) @ np.abs(U).T
        big = max(np.max(np.einsum("ni,kij,nj->nk", u, np.abs(md.C), u)),
                  np.max(u @ np.abs(md.m).T), 1e-300)
        target = 10.0 ** draw(st.floats(-3, 4))
        if big > target:
            U = U * min(1.0, np.sqrt(target / big), target / big)
    return md, U, V, z


def limit_np(md, U, V, z, shared=False):
    """Eq. (2) in NumPy: ``V sum_k alpha_k (m_k + Gamma_k U z)``, with its error bound."""
    w, m, C, K, d = md.w, md.m, md.C, md.K, md.d
    u = z @ U.T
    ua = np.abs(z) @ np.abs(U).T
    logw = safe_log(w)
    logits = logw[None] + u @ m.T
    mag = np.where(w > 0, np.abs(logw), 0)[None] + ua @ np.abs(m).T
    if not shared:  # eq. (3) drops the quadratic term; eq. (2) keeps it
        logits = logits + 0.5 * np.einsum("ni,kij,nj->nk", u, C, u)
        mag = mag + 0.5 * np.einsum("ni,kij,nj->nk", ua, np.abs(C), ua)
    alpha = softmax_np(logits, axis=1)
    delta = gam(2 * d + 2) * np.max(mag, axis=1, keepdims=True)
    experts = m[None] + np.einsum("kij,nj->nki", C, u)  # (n, K, d)
    eabs = np.abs(m)[None] + np.einsum("kij,nj->nki", np.abs(C), ua)
    out = np.einsum("nk,nki->ni", alpha, experts) @ V.T
    da = gate_error(alpha, delta)
    dvec = (np.einsum("nk,nki->ni", da, np.abs(experts))
            + gam(2 * d + K) * np.einsum("nk,nki->ni", alpha + da, eabs))
    bound = dvec @ np.abs(V).T + gam(d) * (np.einsum("nk,nki->ni", alpha, eabs) @ np.abs(V).T)
    return out, bound, alpha, da


@pytest.mark.parametrize("profile", BUDGETS)
def test_softmax_limit_and_gates_match_numpy(profile):
    @given(closed_form_case())
    def prop(case):
        md, U, V, z = case
        out, bound, alpha, da = limit_np(md, U, V, z)
        assert_within(op.softmax_attention_limit(md.mix, U, V, z), out, bound,
                      "softmax_attention_limit")
        a = np.asarray(op.attention_gates(md.mix, U, z))
        assert_within(a, alpha, da, "attention_gates")
        assert np.all(np.abs(a.sum(1) - 1) <= gam(md.K)) and np.all(a >= 0)
        assert np.all(a[:, md.w == 0] == 0), "a component of weight 0 got a gate"
        # a single (d,) query gives a (d_out,) row (another compiled shape: same bound)
        assert_within(op.softmax_attention_limit(md.mix, U, V, z[0]), out[0], bound[0],
                      "softmax_attention_limit, one query")

    run(profile, 40, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_shared_form_matches_eq2_and_eq3(profile):
    @given(closed_form_case(kind="shared"))
    def prop(case):
        md, U, V, z = case
        got = op.softmax_attention_limit_shared(md.mix, U, V, z)
        out3, bound3, _, _ = limit_np(md, U, V, z, shared=True)
        assert_within(got, out3, bound3, "eq. (3) vs NumPy eq. (3)")
        out2, bound2, _, _ = limit_np(md, U, V, z)  # same value in exact arithmetic
        assert_within(got, out2, bound2 + bound3, "eq. (3) vs NumPy eq. (2)")

    run(profile, 25, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_linear_limit_matches_numpy(profile):
    @given(closed_form_case(score_cap=False))
    def prop(case):
        md, U, V, z = case
        w, m, C = md.w, md.m, md.C
        M2 = np.einsum("k,kij->ij", w, C + m[:, :, None] * m[:, None, :])
        M2a = np.einsum("k,kij->ij", w, np.abs(C) + np.abs(m)[:, :, None] * np.abs(m)[:, None])
        ref = z @ (V @ M2 @ U).T
        bound = gam(3 * md.d + md.K) * (np.abs(z) @ (np.abs(V) @ M2a @ np.abs(U)).T)
        assert_within(op.linear_attention_limit(md.mix, U, V, z), ref, bound,
                      "linear_attention_limit")

    run(profile, 25, prop)


# ================================================================ finite prompts
# (B, L, n, d, d_out); B = 0 means unbatched tokens (L, d)
PROMPT_SHAPES = [(0, 1, 1, 1, 1), (0, 7, 3, 2, 2), (0, 40, 2, 3, 1), (2, 9, 2, 2, 2)]


@st.composite
def prompt_case(draw, score_cap=True):
    B, L, n, d, dv = draw(st.sampled_from(PROMPT_SHAPES))
    tshape = (L, d) if B == 0 else (B, L, d)
    tokens = draw(pow10()) * draw(unit(tshape))
    U = draw(pow10()) * draw(unit((d, d)))
    V = draw(pow10()) * draw(unit((dv, d)))
    zshape = (n, d) if B == 0 or draw(st.booleans()) else (B, n, d)
    z = draw(pow10()) * draw(unit(zshape))
    if score_cap and draw(st.booleans()):  # scores |z_i^T U z| <= 10^[-3, 4]
        big = max(float(np.max(np.abs(z))) * float(np.max(np.abs(U)))
                  * float(np.max(np.abs(tokens))) * d * d, 1e-300)
        target = 10.0 ** draw(st.floats(-3, 4))
        if big > target:
            U = U * (target / big)
    return tokens, U, V, z


def softmax_prompt_np(tokens, U, V, z):
    """``sum_i softmax_i(<U z, x_i>) V x_i`` per query by log-sum-exp, with bounds and SE."""
    d = tokens.shape[-1]
    u = z @ U.T
    ua = np.abs(z) @ np.abs(U).T
    s = u @ tokens.T  # (n, L)
    smag = ua @ np.abs(tokens).T
    p = softmax_np(s, axis=1)
    delta = gam(2 * d) * np.max(smag, axis=1, keepdims=True)
    vals = tokens @ V.T
    va = np.abs(tokens) @ np.abs(V).T
    out = p @ vals
    dp = gate_error(p, delta)
    L = tokens.shape[0]
    bound = dp @ np.abs(vals) + gam(d + L) * ((p + dp) @ va)
    # delta-method SE: se^2 = sum_i p_i^2 (v_i - T)^2; the library expands the square
    # (s2xx - 2 T s2x + T^2 s2), so its se^2 carries an absolute error of
    # ~ (expm1(8 delta) + gam) sum p^2 (|v| + |T| + bound)^2, and |se' - se| <= sqrt(|se'^2 - se^2|)
    se = np.sqrt(np.einsum("nl,nlo->no", p**2, (vals[None] - out[:, None]) ** 2))
    with np.errstate(over="ignore"):
        rel = np.fmin(np.expm1(8 * delta), 3.0) + gam(d + L)
    # ... plus the shift of the centre: |(v - T')^2 - (v - T)^2| <= |dT| (2|v| + 2|T| + |dT|)
    spread = (va[None] + np.abs(out)[:, None] + bound[:, None]) ** 2
    shift = bound[:, None] * (2 * va[None] + 2 * np.abs(out)[:, None] + bound[:, None])
    se_bound = np.sqrt(np.einsum("nl,nlo->no", (p + dp) ** 2, rel[..., None] * spread + shift))
    return out, bound, se, se_bound


@pytest.mark.parametrize("profile", BUDGETS)
def test_softmax_attention_matches_logsumexp_reference(profile):
    @given(prompt_case(), st.sampled_from([None, 3]), st.booleans())
    def prop(case, chunk, with_se):
        tokens, U, V, z = case
        got = op.softmax_attention(tokens, U, V, z, chunk=chunk, return_se=with_se)
        got, se = got if with_se else (got, None)
        batched = tokens.ndim == 3
        for b in range(tokens.shape[0] if batched else 1):
            tb = tokens[b] if batched else tokens
            zb = z[b] if z.ndim == 3 else z
            gb = got[b] if batched else got
            out, bound, se_ref, se_bound = softmax_prompt_np(tb, U, V, zb)
            assert_within(gb, out, bound, f"softmax_attention (chunk={chunk})")
            if with_se:
                assert_within(se[b] if batched else se, se_ref, se_bound, "standard error")

    run(profile, 40, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_linear_attention_matches_numpy(profile):
    @given(prompt_case(score_cap=False))
    def prop(case):
        tokens, U, V, z = case
        got = np.asarray(op.linear_attention(tokens, U, V, z))
        batched = tokens.ndim == 3
        for b in range(tokens.shape[0] if batched else 1):
            tb = tokens[b] if batched else tokens
            zb = z[b] if z.ndim == 3 else z
            L, d = tb.shape
            ref = zb @ (V @ (tb.T @ tb / L) @ U).T
            mag = np.abs(zb) @ (np.abs(V) @ (np.abs(tb).T @ np.abs(tb) / L) @ np.abs(U)).T
            assert_within(got[b] if batched else got, ref, gam(3 * d + L) * mag,
                          "linear_attention")

    run(profile, 25, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_weighted_attention_matches_numpy(profile):
    @given(prompt_case(), st.sampled_from(["softmax", "rbf"]), pow10(-4, 4), st.data())
    def prop(case, kind, h, data):
        tokens, U, V, z = case
        if tokens.ndim == 3:
            tokens = tokens[0]
        if z.ndim == 3:
            z = z[0]
        L, d = tokens.shape
        tw = data.draw(unit((L,), 0.0, 1.0))
        if not np.any(tw > 0):
            tw[data.draw(st.integers(0, L - 1))] = 1.0
        use_v = data.draw(st.booleans())
        if kind == "softmax":
            score = z @ U.T @ tokens.T
            smag = (np.abs(z) @ np.abs(U).T) @ np.abs(tokens).T
            log_score = op.softmax_score(U)
        else:
            sq = np.sum((z[:, None] - tokens[None]) ** 2, -1)
            score = -0.5 * sq / h**2
            smag = 0.5 * (np.abs(z).sum(1)[:, None] + np.abs(tokens).sum(1)[None]) ** 2 / h**2
            log_score = op.rbf_score(h)
        logw = safe_log(tw)
        logits = score + logw[None]
        mag = smag + np.where(tw > 0, np.abs(logw), 0)[None]
        delta = gam(2 * d) * np.max(np.where(tw > 0, mag, 0), axis=1, keepdims=True)
        p = softmax_np(logits, axis=1)
        vals = tokens @ V.T if use_v else tokens
        va = np.abs(tokens) @ np.abs(V).T if use_v else np.abs(tokens)
        dp = gate_error(p, delta)
        out, lse = op.weighted_attention(log_score, tokens, tw, z, V if use_v else None)
        assert_within(out, p @ vals, dp @ np.abs(vals) + gam(d + L) * ((p + dp) @ va),
                      "weighted_attention")
        lse_ref = logsumexp_np(logits, axis=1)
        assert_within(lse, lse_ref, 2 * delta[:, 0] + gam(L) * (np.abs(lse_ref) + 1),
                      "log normaliser")

    run(profile, 30, prop)


# ========================================================================== GMA
# (d_model, heads, K, lowrank rank); B = 2, N = 6 fixed
GMA_SHAPES = [(4, 1, 1, 0), (6, 2, 3, 2)]
GMA_B, GMA_N, GMA_CHUNK = 2, 6, 4


@st.composite
def gma_case(draw, shapes=GMA_SHAPES):
    d_model, H, K, r = draw(st.sampled_from(shapes))
    seed = draw(st.integers(0, 2**31 - 1))
    x = draw(pow10()) * draw(unit((GMA_B, GMA_N, d_model)))
    tokens = x[0] if draw(st.booleans()) else None  # k-means++ seeding of the means
    p = gma.init(jax.random.key(seed), d_model, heads=H, K=K, lowrank_rank=r, tokens=tokens,
                 tau0=draw(pow10(-1, 1)), dtype=jnp.float64)
    d_r = p.mu.shape[-1]
    p = p._replace(
        mu=p.mu + draw(unit((H, K, d_r))),
        rho=draw(unit((H, K, d_r), -3.0, 3.0)),
        mix_logits=draw(unit((H, K), -3.0, 3.0)),
        lowrank=None if r == 0 else p.lowrank + draw(unit((H, K, d_r, r))))
    mask = draw(hnp.arrays(np.bool_, (GMA_B, GMA_N)))
    mask[0] = True  # one row unmasked, the other random (possibly all padded)
    return p, x, mask


def gma_resp_np(p, h, z, za=None):
    """Responsibilities of head ``h`` with explicit precision matrices, and logit errors
    (``za``: a bound on ``|z|`` including its own round-off; default ``|z|``)."""
    mu, rho = np.asarray(p.mu[h]), np.asarray(p.rho[h])
    ml, tau = np.asarray(p.mix_logits[h]), float(np.exp(p.log_tau[h]))
    K, d_r = mu.shape
    sigma = gma.SIGMA_MIN + np.logaddexp(0.0, rho)
    logpi = ml - logsumexp_np(ml)
    za = np.abs(z) if za is None else za
    logits, mag = [], []
    for c in range(K):
        Lam = np.diag(sigma[c] ** -2)
        if p.lowrank is not None:
            Uc = np.asarray(p.lowrank[h, c])
            Lam = Lam + Uc @ Uc.T
        diff = z - mu[c]
        quad = np.einsum("...i,ij,...j->...", diff, Lam, diff)
        logdet = np.linalg.slogdet(Lam)[1]
        logits.append(logpi[c] - 0.5 * quad + 0.5 * logdet)
        a = za + np.abs(mu[c])
        qmag = np.einsum("...i,ij,...j->...", a, np.abs(Lam), a)
        mag.append(np.abs(logpi[c]) + 0.5 * qmag + 0.5 * np.abs(logdet) + 1.0)
    logits = np.stack(logits, -1) / tau
    delta = gam(4 * d_r + K) * np.stack(mag, -1).max(-1, keepdims=True) / tau
    return softmax_np(logits, axis=-1), delta


def gma_np(p, x, mask, causal, norm, eps=1e-6):
    """Materialised O(N^2) GMA affinity in NumPy float64, with an error bound."""
    H = p.Wq.shape[0]
    B, N, _ = x.shape
    ys, bounds = [], []
    xa = np.abs(x)
    tril = np.tril(np.ones((N, N)))
    for h in range(H):
        Wq, Wk, Wv = (np.asarray(a[h]) for a in (p.Wq, p.Wk, p.Wv))
        # |x| |W| bounds |z| and the rounding of z = x W (library and reference differ
        # in the order of that sum)
        rq, dq = gma_resp_np(p, h, x @ Wq, xa @ np.abs(Wq))
        rk, dk = gma_resp_np(p, h, x @ Wk, xa @ np.abs(Wk))
        rk = rk * mask[..., None]
        v, va = x @ Wv, xa @ np.abs(Wv)
        if norm == "query":
            A = np.einsum("bnk,bmk->bnm", rq, rk)
            if causal:
                A = A * tril
            W = A / (A.sum(-1, keepdims=True) + eps)
        else:
            if causal:
                n_t = np.cumsum(rk, axis=1)
                W = np.einsum("btk,bjk->btj", rq / (n_t + eps), rk) * tril
            else:
                W = np.einsum("btk,bjk->btj", rq / (rk.sum(1, keepdims=True) + eps), rk)
        # each weight is a ratio of affinities whose factors r carry relative errors
        # <= expm1(4 delta): the weights move by a factor within e^{+-T},
        # T = 4 (2 dq + 4 dk) covering numerator and (prefix) normaliser; capped by the
        # trivial bound |W' - W| <= W' + W
        T = 4.0 * (2 * dq.max(axis=(1, 2)) + 4 * dk.max(axis=(1, 2)))[:, None, None]
        with np.errstate(over="ignore", invalid="ignore"):
            dW = np.fmin(W * np.expm1(T), W + 2.0) + TINY
        y = W @ v
        K = rq.shape[-1]
        ys.append(y)
        bounds.append(dW @ np.abs(v) + gam(2 * (N + K) + x.shape[-1]) * ((W + dW) @ va))
    y = np.concatenate(ys, -1)
    by = np.concatenate(bounds, -1)
    Wo = np.asarray(p.Wo)
    out = y @ Wo
    bound = by @ np.abs(Wo) + gam(Wo.shape[0]) * ((np.abs(y) + by) @ np.abs(Wo))
    return out, bound


@pytest.mark.parametrize("profile", BUDGETS)
def test_gma_matches_materialised_affinity(profile):
    # the compiled layer only for the multi-head, low-rank bucket (the K = 1 bucket runs
    # in the responsibility and bad-input tests; tests/test_gma.py has K = 1 layers)
    @given(gma_case(GMA_SHAPES[1:]), st.booleans(), st.sampled_from(["query", "slot"]))
    def prop(case, causal, norm):
        p, x, mask = case
        # chunk 4 of N = 6: two chunks, the second padded (one compiled program per
        # shape bucket and mode; tests/test_gma.py covers other chunk sizes)
        got = gma.gma_attention(p, x, causal=causal, chunk=GMA_CHUNK, mask=mask,
                                normalisation=norm)
        ref, bound = gma_np(p, x, mask, causal, norm)
        assert_within(got, ref, bound, f"gma_attention(causal={causal}, {norm})")

    run(profile, 30, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_gma_responsibilities_match_explicit_gaussians(profile):
    @given(gma_case(), st.data())
    def prop(case, data):
        p, x, _ = case
        H, _, d_r = p.Wq.shape
        h = data.draw(st.integers(0, H - 1))
        z = data.draw(pow10()) * data.draw(unit((GMA_N, d_r)))
        r = np.asarray(gma.responsibilities(p, z, h))
        r_ref, delta = gma_resp_np(p, h, z)
        assert_within(r, r_ref, gate_error(r_ref, delta), "responsibilities")
        assert np.all(np.abs(r.sum(-1) - 1) <= gam(p.mu.shape[1]))

    run(profile, 30, prop)


# ====================================================== invalid inputs name the argument
def corrupt(a, how: str, rng_index: int = 0):
    """A corrupted copy of the valid array ``a``."""
    a = np.array(a, dtype=np.float64)
    flat = a.reshape(-1)
    i = rng_index % max(1, flat.size)
    if how == "nan":
        flat[i] = np.nan
    elif how == "inf":
        flat[i] = -np.inf if rng_index % 2 else np.inf
    elif how == "complex":
        return a + 1j
    elif how == "bool":
        return a > 0
    elif how == "string":
        return a.astype(str)
    elif how == "extra_axis":
        return a[None]
    elif how == "drop_axis":
        return a.reshape(-1) if a.ndim > 1 else a[0]
    elif how == "longer":
        return np.concatenate([a, a[:1]], axis=0) if a.ndim else a[None]
    return a


BAD = ["nan", "inf", "complex", "bool", "string", "extra_axis", "drop_axis", "longer"]


@pytest.mark.parametrize("profile", BUDGETS)
def test_bad_mixture_inputs_are_named(profile):
    @given(mixture_data(singular=True, scale=(-8, 8)), st.sampled_from(
        ["weights", "means", "covs", "variances", "cov"]), st.sampled_from(
        BAD + ["negative", "off_simplex", "not_psd", "asymmetric"]), st.integers(0, 99))
    def prop(md, arg, how, idx):
        w, m, C, K, d = md.w, md.m, md.C, md.K, md.d
        if arg in ("weights", "means", "covs"):
            args = {"weights": w, "means": m, "covs": C}
            make = GaussianMixture
        elif arg == "variances":
            args = {"weights": w, "means": m, "variances": md.s * np.ones(K)}
            make = GaussianMixture.isotropic
        else:
            args = {"weights": w, "means": m, "cov": C[0]}
            make = GaussianMixture.shared
        a = args[arg]
        if how == "negative":
            if arg == "means":
                return
            a = np.array(a)
            if arg in ("covs", "cov"):
                a[..., 0, 0] = -md.s  # a negative variance
            else:
                a.reshape(-1)[idx % a.size] = -abs(a.reshape(-1)[idx % a.size]) - 0.5
        elif how == "off_simplex":
            if arg != "weights":
                return
            a = w * (1 + 10.0 ** (-7 + 6 * (idx / 99)))  # sum off by 1e-7 .. 10
        elif how in ("not_psd", "asymmetric"):
            if arg not in ("covs", "cov"):
                return
            if d == 1 and how == "asymmetric":
                return
            a = np.array(a)
            s = md.s
            if how == "not_psd":  # an eigenvalue of -(1e-3 .. 1) times the scale
                Q = orthogonal(np.eye(d) + 0.1 * (idx % 7))
                lam = np.full(d, s)
                lam[0] = -s * 10.0 ** (-3 * (idx / 99))
                bad = 0.5 * ((Q * lam) @ Q.T + ((Q * lam) @ Q.T).T)
                if a.ndim == 3:
                    a[idx % K] = bad
                else:
                    a = bad
            else:
                a[..., 0, 1] += s * (1e-6 + idx / 99)
        else:
            if how == "drop_axis" and arg == "variances":
                return  # a scalar variance is valid (shared by all components)
            a = corrupt(a, how, idx)
        args[arg] = a
        # a changed shape may be reported on the argument it no longer matches
        shape_change = how in ("extra_axis", "drop_axis", "longer")
        raises_naming(lambda: make(**args), *(list(args) if shape_change else [arg]))

    run(profile, 60, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_bad_operator_inputs_are_named(profile):
    fns = {
        "softmax_attention_limit": (lambda c: op.softmax_attention_limit(
            c["mixture"], c["U"], c["V"], c["z"]), ["mixture", "U", "V", "z"]),
        "softmax_attention_limit_shared": (lambda c: op.softmax_attention_limit_shared(
            c["mixture"], c["U"], c["V"], c["z"]), ["mixture", "U", "V", "z"]),
        "linear_attention_limit": (lambda c: op.linear_attention_limit(
            c["mixture"], c["U"], c["V"], c["z"]), ["mixture", "U", "V", "z"]),
        "attention_gates": (lambda c: op.attention_gates(c["mixture"], c["U"], c["z"]),
                            ["mixture", "U", "z"]),
        "softmax_attention": (lambda c: op.softmax_attention(
            c["tokens"], c["U"], c["V"], c["z"], chunk=c["chunk"]),
            ["tokens", "U", "V", "z", "chunk"]),
        "linear_attention": (lambda c: op.linear_attention(c["tokens"], c["U"], c["V"],
                                                           c["z"]), ["tokens", "U", "V", "z"]),
        "weighted_attention": (lambda c: op.weighted_attention(
            op.rbf_score(1.0), c["tokens"], c["token_weights"], c["z"], c["V"]),
            ["tokens", "token_weights", "V", "z"]),
    }

    @given(closed_form_case(kind="shared", score_cap=False), st.sampled_from(sorted(fns)),
           st.data())
    def prop(case, name, data):
        md, U, V, z = case
        fn, argnames = fns[name]
        L = 5
        c = {"mixture": md.mix, "U": U, "V": V, "z": z, "tokens": z[:L] * 1.0 + 0.5,
             "token_weights": np.full(L, 0.2), "chunk": 2}
        arg = data.draw(st.sampled_from(argnames))
        if arg == "mixture":
            c[arg] = data.draw(st.sampled_from([md.w, "mixture", None, (md.w, md.m, md.C)]))
        elif arg == "chunk":
            c[arg] = data.draw(st.sampled_from([0, -3, 2.5, "4", True, np.nan]))
        else:
            # shape changes that stay valid: V with more rows (d_out), more queries z,
            # more tokens, or tokens with a batch axis of 1
            valid = {"V": {"longer"}, "z": {"longer"}, "tokens": {"longer", "extra_axis"}}
            hows = [h for h in BAD if h not in valid.get(arg, ())]
            how = data.draw(st.sampled_from(hows + (["negative", "zero"]
                                                    if arg == "token_weights" else [])))
            if how == "negative":
                bad = np.full(L, 0.2)
                bad[data.draw(st.integers(0, L - 1))] = -1e-3
            elif how == "zero":
                bad = np.zeros(L)
            else:
                bad = corrupt(c[arg], how, data.draw(st.integers(0, 99)))
            c[arg] = bad
        raises_naming(lambda: fn(c), arg)

    run(profile, 60, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_bad_gma_inputs_are_named(profile):
    @given(gma_case(), st.sampled_from(
        ["x", "mask", "chunk", "causal", "eps", "normalisation", "params", "head", "z",
         "init"]), st.data())
    def prop(case, arg, data):
        p, x, mask = case
        H, d_model, d_r = p.Wq.shape
        kw = {"causal": True, "chunk": 2, "mask": mask, "normalisation": "query",
              "eps": 1e-6}
        if arg == "x":
            how = data.draw(st.sampled_from([h for h in BAD if h != "longer"]))
            bad = corrupt(x, how, data.draw(st.integers(0, 99)))
            if how == "drop_axis":
                bad = x[..., :-1]
            raises_naming(lambda: gma.gma_attention(p, bad, **kw), "x")
        elif arg == "params":
            field = data.draw(st.sampled_from(["Wq", "Wk", "Wv", "Wo", "mu", "rho",
                                               "mix_logits", "log_tau"]))
            how = data.draw(st.sampled_from(["nan", "inf", "extra_axis", "longer"]))
            if field == "Wq" and how in ("extra_axis", "longer"):
                how = "nan"  # Wq defines the shapes the others are checked against
            bad = p._replace(**{field: jnp.asarray(corrupt(getattr(p, field), how, 3))})
            raises_naming(lambda: gma.gma_attention(bad, x, **kw), f"params.{field}")
        elif arg == "head":
            h = data.draw(st.sampled_from([H, -1, 1.0, "0", None]))
            raises_naming(lambda: gma.responsibilities(p, jnp.zeros((3, d_r)), h), "head")
        elif arg == "z":
            how = data.draw(st.sampled_from(["nan", "inf", "complex", "bool", "longer_d"]))
            z = np.zeros((3, d_r))
            bad = np.zeros((3, d_r + 1)) if how == "longer_d" else corrupt(z, how, 1)
            raises_naming(lambda: gma.responsibilities(p, bad, 0), "z")
        elif arg == "init":
            which, val = data.draw(st.sampled_from([
                ("d_model", 0), ("d_model", 2.0), ("heads", 0), ("K", 0), ("K", 1.5),
                ("d_r", 0), ("d_v", -1), ("lowrank_rank", -1), ("tau0", 0.0),
                ("tau0", -1.0), ("tau0", np.nan), ("tau0", np.inf), ("dtype", jnp.int32),
                ("tokens", np.full((4, 8), np.nan)), ("tokens", np.ones((4, 7))),
                ("tokens", np.ones((0, 8)))]))
            kwargs = {"d_model": 8, "heads": 2, "K": 3, which: val}
            d_mod = kwargs.pop("d_model")
            names = ("K", "heads", "K, heads") if which in ("K", "heads") else (which,)
            raises_naming(lambda: gma.init(jax.random.key(0), d_mod, **kwargs), *names)
        else:
            val = {"mask": data.draw(st.sampled_from([
                       np.full(mask.shape, 2), mask[:, :-1], np.full(mask.shape, 0.5)])),
                   "chunk": data.draw(st.sampled_from([0, 2.5, "3", True])),
                   "causal": data.draw(st.sampled_from(["yes", 1, None])),
                   "eps": data.draw(st.sampled_from([0.0, -1e-6, np.nan, np.inf])),
                   "normalisation": data.draw(st.sampled_from(["keys", None, 1]))}[arg]
            raises_naming(lambda: gma.gma_attention(p, x, **{**kw, arg: val}), arg)

    run(profile, 60, prop)


# ===================================================== extreme scales: finite or raise
def finite_or_named_error(fn, names):
    """Call ``fn``: every output must be finite, or it raises ValueError naming an argument."""
    try:
        out = fn()
    except ValueError as exc:
        assert names_arg(exc, *names), str(exc)
        return False
    for a in jax.tree_util.tree_leaves(out):
        assert np.all(np.isfinite(np.asarray(a))), "silent non-finite output"
    return True


@pytest.mark.parametrize("profile", BUDGETS)
def test_overflow_scales_raise_instead_of_nan(profile):
    """Scales up to 1e200: float64 overflows (|x|^2 ~ 1e400) inside every operator; each
    must then raise a ValueError naming what to rescale, never return NaN/inf."""
    names = ["U", "V", "z", "tokens", "mixture", "means", "covs", "x"]

    @given(mixture_data(shapes=[(2, 3)], kind="shared", scale=(50, 200)), pow10(50, 200),
           pow10(50, 200), st.sampled_from(["limit", "shared", "linear", "gates", "prompt",
                                            "linear_prompt", "weighted", "moments",
                                            "gma"]))
    def prop(md, su, sz, which):
        d = md.d
        U, V = su * np.eye(d), np.eye(d)
        z = sz * np.ones((2, d))
        with np.errstate(over="ignore"):
            x_gma = sz * np.ones((1, 3, d)) * su  # may be inf: then x itself is refused
        toks = np.concatenate([z, -z])
        calls = {
            "limit": lambda: op.softmax_attention_limit(md.mix, U, V, z),
            "shared": lambda: op.softmax_attention_limit_shared(md.mix, U, V, z),
            "linear": lambda: op.linear_attention_limit(md.mix, U, V, z),
            "gates": lambda: op.attention_gates(md.mix, U, z),
            "prompt": lambda: op.softmax_attention(toks, U, V, z, chunk=2, return_se=True),
            "linear_prompt": lambda: op.linear_attention(toks, U, V, z),
            "weighted": lambda: op.weighted_attention(op.softmax_score(U), toks,
                                                      np.ones(4), z),
            "moments": lambda: (md.mix.second_moment(), md.mix.covariance()),
            "gma": lambda: gma.gma_attention(
                gma.init(jax.random.key(0), d, heads=1, K=2, dtype=jnp.float64),
                x_gma),
        }
        finite_or_named_error(calls[which], names + ["log_score", which])

    run(profile, 30, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_scales_1e_minus8_to_1e8_stay_finite(profile):
    """Every argument at its own scale in [1e-8, 1e8]: all outputs finite (no raise)."""
    @given(closed_form_case(score_cap=False), prompt_case(score_cap=False),
           gma_case(GMA_SHAPES[1:]))
    def prop(case, pcase, gcase):
        md, U, V, z = case
        for fn in (lambda: op.softmax_attention_limit(md.mix, U, V, z),
                   lambda: op.linear_attention_limit(md.mix, U, V, z),
                   lambda: op.attention_gates(md.mix, U, z),
                   lambda: md.mix.sample(jax.random.key(0), 4)):
            assert finite_or_named_error(fn, []), "raised inside the 1e-8..1e8 range"
        tokens, U2, V2, z2 = pcase
        for fn in (lambda: op.softmax_attention(tokens, U2, V2, z2, return_se=True),
                   lambda: op.linear_attention(tokens, U2, V2, z2)):
            assert finite_or_named_error(fn, [])
        p, x, mask = gcase
        for causal in (False, True):
            assert finite_or_named_error(
                lambda c=causal: gma.gma_attention(p, x, causal=c, mask=mask, chunk=GMA_CHUNK),
                [])

    run(profile, 20, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_float32_inputs_stay_finite_or_raise(profile):
    """float32 arguments at scales 1e-8..1e8: the gate logits (|U z|^2 |Gamma| up to
    1e40) can overflow float32's 3e38; then a ValueError names what to rescale."""
    names = ["U", "V", "z", "tokens", "mixture"]

    @given(closed_form_case(score_cap=False), prompt_case(score_cap=False))
    def prop(case, pcase):
        md, U, V, z = case
        f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731
        mix32 = GaussianMixture(f32(md.w / md.w.sum()), f32(md.m), f32(md.C))
        finite_or_named_error(lambda: op.softmax_attention_limit(mix32, f32(U), f32(V),
                                                                 f32(z)), names)
        tokens, U2, V2, z2 = pcase
        finite_or_named_error(lambda: op.softmax_attention(f32(tokens), f32(U2), f32(V2),
                                                           f32(z2)), names)
        finite_or_named_error(lambda: op.linear_attention(f32(tokens), f32(U2), f32(V2),
                                                          f32(z2)), names)

    run(profile, 15, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_integer_arrays_are_read_as_floats(profile):
    """Integer arrays are converted exactly (|v| < 2^53): the same numbers as float64
    input, bit for bit (same compiled program after the conversion).  GMA used to cast
    its output back to the integer dtype of x, truncating it."""
    ints = lambda shape: hnp.arrays(np.int64, shape, elements=st.integers(-9, 9))  # noqa: E731

    @given(ints((N_Q, 2)), ints((2, 2)), ints((7, 2)), ints((2, GMA_N, 4)))
    def prop(z, U, toks, x):
        mix = GaussianMixture(np.array([1, 0]), np.array([[1, 0], [0, 1]]),
                              np.stack([np.eye(2, dtype=int)] * 2))
        f = lambda a: a.astype(np.float64)  # noqa: E731
        for fn in (op.softmax_attention_limit, op.linear_attention_limit):
            np.testing.assert_array_equal(fn(mix, U, U, z), fn(mix, f(U), f(U), f(z)))
        np.testing.assert_array_equal(op.attention_gates(mix, U, z),
                                      op.attention_gates(mix, f(U), f(z)))
        for fn in (op.softmax_attention, op.linear_attention):
            np.testing.assert_array_equal(fn(toks, U, U, z), fn(f(toks), f(U), f(U), f(z)))
        p = gma.init(jax.random.key(0), 4, heads=1, K=1, dtype=jnp.float64)
        y = gma.gma_attention(p, x, causal=True, chunk=GMA_CHUNK)
        assert jnp.issubdtype(y.dtype, jnp.floating)
        np.testing.assert_array_equal(y, gma.gma_attention(p, f(x), causal=True,
                                                           chunk=GMA_CHUNK))

    run(profile, 10, prop)


# ================================================================= the --set parser
PC = get_simulation("prompt-convergence").config_cls  # int, float, tuple[int], tuple[float]


def _icl_config_with_str_tuple():
    from gmtheory.simulations import SIMULATIONS, load_all

    load_all()
    for sim in SIMULATIONS.values():
        hints = __import__("typing").get_type_hints(sim.config_cls)
        if any(str(t) == "tuple[str, ...]" for t in hints.values()):
            return sim.config_cls
    raise AssertionError("no config with a tuple[str, ...] field")


STR_CFG = _icl_config_with_str_tuple()
SIM_OF = {sim.config_cls: sim for sim in SIMULATIONS.values()}   # config class -> simulation


def _fields(cls):
    import typing

    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _fmt_int(v: int, style: int) -> str:
    if style == 1 and v != 0 and v % 1000 == 0:  # exponent notation of an integral value
        return f"{v // 1000}e3"
    if style == 2:
        return f"+{v}" if v >= 0 else str(v)
    return str(v)


@st.composite
def override_values(draw, cls):
    """A random subset of a config's fields with valid values, as (expected, items)."""
    fields = _fields(cls)
    keys = draw(st.lists(st.sampled_from(sorted(fields)), unique=True, min_size=1,
                         max_size=5))
    ints = st.integers(-(2**62), 2**62)
    floats = st.floats(allow_nan=False, allow_infinity=False)
    words = st.text(string.ascii_letters + string.digits + "_-.", min_size=1, max_size=8)
    expected, parts = {}, []
    for k in keys:
        t = fields[k]
        style = draw(st.integers(0, 2))
        if t is int:
            v = draw(ints)
            s = _fmt_int(v, style)
        elif t is float:
            v = draw(floats)
            s = repr(v) if style else f"{v:.17g}"
        elif t is str:
            v = draw(words)
            s = v
        elif t is bool:  # e.g. gma-recall's listops_causal
            v = draw(st.booleans())
            s = (("false", "true"), ("no", "YES"), ("0", "1"))[style][v]
        else:
            inner = t.__args__[0]
            elem = {int: ints, float: floats, str: words}[inner]
            v = tuple(draw(st.lists(elem, min_size=1, max_size=4)))
            fmt = {int: lambda a, st_=style: _fmt_int(a, st_), float: repr, str: str}[inner]
            s = ",".join(fmt(a) for a in v)
        expected[k] = v
        parts.append(f"{k}={s}")
    # one --set per item, or several joined by commas
    if draw(st.booleans()):
        items = parts
    else:
        items = [",".join(parts)]
    return expected, items


@pytest.mark.parametrize("profile", BUDGETS)
def test_set_parser_round_trips_valid_values(profile):
    @given(st.sampled_from([PC, STR_CFG]).flatmap(
        lambda cls: st.tuples(st.just(cls), override_values(cls))))
    def prop(arg):
        cls, (expected, items) = arg
        got = parse_overrides(cls, items)
        assert got == expected
        for k, v in got.items():  # exact types: a float field never comes back as int
            assert type(v) is type(expected[k])
            if isinstance(v, tuple):
                assert all(type(a) is type(b) for a, b in zip(v, expected[k], strict=True))
        # the config accepts their types (laid over its quick profile, the only source of
        # values); a value its own validation refuses is named by field, not a TypeError
        try:
            make_config(SIM_OF[cls], "quick", got)
        except ValueError as e:
            named = str(e).split(":")[0]
            assert any(k in named.split(", ") for k in got), e

    run(profile, 60, prop)


VALUE_TEXT = st.text(alphabet=string.printable.replace(",", "").replace("=", "")
                     .replace(":", "") + "٣１é", max_size=12)


def _ref_number(text: str):
    """Independent reference: the exact rational value of an ASCII numeric literal."""
    t = text.strip()
    if not t.isascii() or "/" in t:
        return None
    try:
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        return None


@pytest.mark.parametrize("profile", BUDGETS)
def test_set_parser_never_reads_garbage(profile):
    """Any text for an int/float/tuple field: either the exact number it spells (finite,
    integral for ints) or a ValueError naming the key; never a truncated or NaN value."""
    fields = _fields(PC)
    numeric = sorted(k for k, t in fields.items() if t in (int, float)
                     or getattr(t, "__args__", (None,))[0] in (int, float))

    @given(st.sampled_from(numeric), st.one_of(
        VALUE_TEXT,
        st.floats().map(repr),
        st.sampled_from(["nan", "inf", "-inf", "1e400", "-1e400", "2.5", "1e3", "1.0",
                         "9223372036854775808", "1e-400", "", " ", "0x10", "1_000"])))
    def prop(key, text):
        t = fields[key]
        inner = t if t in (int, float) else t.__args__[0]
        try:
            got = parse_overrides(PC, [f"{key}={text}"])[key]
        except ValueError as exc:
            assert names_arg(exc, key), str(exc)
            ref = _ref_number(text)
            if inner is int and ref is not None and ref.denominator == 1 \
                    and abs(ref) < 2**63 and re.fullmatch(r"\s*[+-]?\d+\s*", text):
                raise AssertionError(f"plain integer {text!r} refused") from exc
            return
        vals = got if isinstance(got, tuple) else (got,)
        assert len(vals) == 1
        v = vals[0]
        assert type(v) is inner
        ref = _ref_number(text)
        if inner is int:
            assert ref is not None and ref.denominator == 1 and v == ref, (text, v)
        else:
            assert np.isfinite(v), (text, v)
            assert v == float(text), (text, v)

    run(profile, 80, prop)


@pytest.mark.parametrize("profile", BUDGETS)
def test_set_parser_unknown_and_repeated_keys(profile):
    fields = _fields(PC)

    @given(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True),
           st.sampled_from(sorted(fields)), st.booleans())
    def prop(key, known, repeat):
        if repeat:
            with pytest.raises(ValueError, match=re.escape(f"--set {known}")):
                parse_overrides(PC, [f"{known}=1", f"{known}=2"])
            return
        assume(key not in fields)
        with pytest.raises(ValueError) as info:
            parse_overrides(PC, [f"reps=3,{key}=1"])
        assert repr(key) in str(info.value) and "valid parameters" in str(info.value)

    run(profile, 30, prop)
