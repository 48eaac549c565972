"""The memorisation -> in-context-learning transition in task diversity kappa for nonlinear
single-index targets ``y = f(x^T w) + eps`` (docs/topics/icl.md#asymptotic-theory and
docs/topics/icl.md#the-nonlinearity-noise-equivalence; issue #19).

``icl-nonlinear-kappa``: g_task = e_ICL - e_IDG against kappa (log grid 0.1 .. 100) for
f in {ReLU, sign, tanh, erf, |z|} at two (alpha, tau > 1), with

* simulations on the nonlinear target (exact O(l + d) context statistics, ridge
  pretraining, exact finite-d test errors of the nonlinear formula, ICL and IDG);
* simulations on the equivalent linear target ``c1 z + N(0, rho_eff)`` built from the same
  pool, token projections, noise vector and queries as each nonlinear trial (common random
  numbers: the paired difference isolates what the nonlinearity changes);
* the d -> infinity theory ``c1^2 e_Lu(alpha, tau, kappa, rho_eff / c1^2)`` (ridgeless; the
  constants ``c0^2 + V_res + sigma^2`` of the query side are ``c1^2 rho'`` and cancel in
  g_task); for ``c1 = 0`` (|z|) the equivalence leaves pure noise:
  ``e_ICL = e_IDG = m2 tau / (tau - 1)`` at every kappa, g_task = 0.

The transition point ``kappa_1/2`` is where g_task falls to half its value at
``kappa_ref`` (0.215, the second grid point: the smallest kappa every d of the quick
profile simulates); the theory's is also given against kappa -> 0 (:data:`KAPPA_ZERO`).
Sizes follow the reference protocol (:func:`icl.sizes`); a kappa with fewer than two tasks
or fewer than two prompts per task at that d is not simulated (one task is a degenerate
pool; with fewer than two prompts per task the rounding ``n = round(tau d^2 / k) k`` moves
tau by more than 25 %), and the theory is also evaluated at every simulated point's own
rounded sizes.  One compilation per (d, alpha): the target is selected by a traced index,
kappa by traced sizes, shapes padded over the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import brentq
from scipy.special import erf

from .. import hermite, icl, stats
from .._xla import jit_long
from ._base import SimConfig, Simulation, register

__all__ = ["NonlinearKappaConfig", "FUNCTIONS", "target_moments", "paired_trials", "theory",
           "half_point", "half_point_theory", "simulated", "KAPPAS", "KAPPA_ZERO",
           "paired_statistics"]

#: name -> (numpy f, kinks for quadrature); the JAX versions are in the same order below
FUNCTIONS = {"relu": (lambda z: np.maximum(z, 0.0), (0.0,)), "sign": (np.sign, (0.0,)),
             "tanh": (np.tanh, None), "erf": (erf, None), "abs": (np.abs, (0.0,))}
_JAX_FS = (lambda z: jnp.maximum(z, 0.0), jnp.sign, jnp.tanh, jax.scipy.special.erf, jnp.abs)
_INDEX = {name: i for i, name in enumerate(FUNCTIONS)}

KAPPAS = tuple(float(f"{k:.3g}") for k in np.geomspace(0.1, 100.0, 10))


@lru_cache(maxsize=64)
def target_moments(name: str, rho: float) -> dict:
    """Hermite data of ``y = f(z) + eps`` (:func:`gmtheory.hermite.label_moments`), with
    ``c1`` set to exactly 0 where it vanishes by symmetry (|z|: quadrature gives ~1e-17)."""
    fn, kinks = FUNCTIONS[name]
    mom = dict(hermite.label_moments(fn, rho, kinks=kinks))
    if name == "abs":
        mom["c1"], mom["Ey3z"] = 0.0, 0.0
        mom["rho_eff"] = mom["m2"]
    return mom


def _gaussian_moments(c1, rho_eff):
    """Label moments of the equivalent linear target ``c1 z + N(0, rho_eff)``."""
    m2 = c1 * c1 + rho_eff
    return {"c1": c1, "m2": m2, "Ey2z2": 3 * c1 * c1 + rho_eff, "Ey3z": 3 * c1 * m2,
            "Ey4": 3 * m2 * m2}


def simulated(d: int, tau: float, kappa: float) -> bool:
    """Whether ``(d, tau, kappa)`` is simulated: at least two tasks (``k = floor(kappa d)
    >= 2``; one task is a degenerate pool) and at least two prompts per task
    (``tau d^2 / k >= 2``; fewer, and the protocol's ``n = round(tau d^2 / k) k`` moves
    tau by more than 25 %)."""
    _, k, _ = icl.sizes(d, 1.0, tau, kappa)
    return k >= 2 and tau * d * d / k >= 2


# ---------------------------------------------------------------- simulator -----------

def paired_statistics(key, W, ell: int, rho, fidx, c1, rho_eff):
    """Context statistics ``h`` (2, n, d+1), queries ``x_q`` (n, d) and targets ``y_q``
    (2, n) for ``y = f(z) + sqrt(rho) eps`` (index 0, ``f = FUNCTIONS[fidx]``, traced) and
    for its equivalent linear target ``y = c1 z + sqrt(rho_eff) eps`` (index 1), built from
    the same token projections ``z_i``, the same noise vector ``eps``, the same orthogonal
    direction and the same queries (common random numbers: each target has its exact law,
    and their difference is measured with far less noise than either).

    The construction of :func:`gmtheory.icl.sample_statistics` (O(l + d) per prompt after
    the ``z_i``): ``x_i = (z_i / |w|^2) w + x_perp``, so
    ``(d/l) sum y_i x_i = (d / |w|^2) a w + sqrt(s2 / alpha) g_perp`` with
    ``a = (1/l) sum y_i z_i``, ``s2 = (1/l) sum y_i^2``.  Two exact shortcuts:

    * the noise enters ``a`` and ``s2`` only through its coordinates on ``span(z, f(z))``
      and its squared norm; with the orthonormal basis ``u1 = z/|z|``, ``u2`` (``f(z)``
      minus its ``u1`` part, normalised): ``eps.z = |z| g1``, ``eps.f = (f.u1) g1 +
      |f_perp| g2``, ``|eps|^2 = g1^2 + g2^2 + chi2_{l-2}`` with ``g1, g2 ~ N(0, 1)``:
      three draws per prompt instead of ``l``;
    * the ``z_i`` are JAX float32 normals (2.5x faster on CPU) used in float64: each draw
      is rounded at 6e-8 relative and the tails are cut at |z| ~ 5.4 (probability 7e-8
      per draw), far below the Monte Carlo error of any reported number."""
    n, d = W.shape
    kz, ke, kg, kq, kqe = jax.random.split(key, 5)
    w2 = jnp.sum(W * W, 1)
    z = jax.random.normal(kz, (n, ell), jnp.float32).astype(W.dtype) * jnp.sqrt(w2 / d)[:, None]
    fz = jax.lax.switch(fidx, _JAX_FS, z)
    zz, fzz, ff = jnp.sum(z * z, 1), jnp.sum(fz * z, 1), jnp.sum(fz * fz, 1)
    f_par = fzz / jnp.sqrt(zz)
    f_perp = jnp.sqrt(jnp.maximum(ff - f_par * f_par, 0.0))
    ke1, ke2 = jax.random.split(ke)
    g1, g2 = jax.random.normal(ke1, (2, n))
    ee = g1 * g1 + g2 * g2 + 2.0 * jax.random.gamma(ke2, (ell - 2) / 2.0, (n,))   # |eps|^2
    ez, ef = jnp.sqrt(zz) * g1, f_par * g1 + f_perp * g2                          # eps.z, eps.f
    s, s_eq = jnp.sqrt(rho), jnp.sqrt(rho_eff)
    a = jnp.stack([fzz + s * ez, c1 * zz + s_eq * ez]) / ell
    s2 = jnp.stack([ff + 2 * s * ef + rho * ee,
                    c1 * c1 * zz + 2 * c1 * s_eq * ez + rho_eff * ee]) / ell
    g = jax.random.normal(kg, (n, d))
    g = g - (jnp.sum(g * W, 1) / w2)[:, None] * W
    top = (d / w2 * a)[..., None] * W + jnp.sqrt(s2 * d / ell)[..., None] * g
    h = jnp.concatenate([top, s2[..., None]], -1)
    xq = jax.random.normal(kq, (n, d)) / jnp.sqrt(d)
    zq = jnp.sum(xq * W, 1)
    eq = jax.random.normal(kqe, (n,))
    yq = jnp.stack([jax.lax.switch(fidx, _JAX_FS, zq) + s * eq, c1 * zq + s_eq * eq])
    return h, xq, yq


def _paired_one(key, d, ell, k_max, n_max, k, n, rho, lam, fidx, mom, tol, maxiter):
    kp, ks = jax.random.split(key)
    task_ok = jnp.arange(k_max) < k
    row_ok = (jnp.arange(n_max) < n)[:, None]
    pool = icl.sample_pool(kp, d, k_max)
    W = pool[jnp.arange(n_max) % k]                   # task j repeated n / k times
    mp = pool * task_ok[:, None]
    mu, R = mp.sum(0) / k, mp.T @ mp / k               # IDG test: the pool's moments
    h, xq, yq = paired_statistics(ks, W, ell, rho, fidx, mom["c1"], mom["rho_eff"])
    h, xq, yq = h * row_ok, xq * row_ok, yq * row_ok[:, 0]
    out, res = [], []
    # two sequential solves: a vmapped CG fused with the sampler miscompiles on XLA:CPU
    # (jax 0.10.2: residuals ~2 instead of 1e-10), so each target gets its own loop
    for i, m in enumerate((mom, _gaussian_moments(mom["c1"], mom["rho_eff"]))):
        G, r = icl.ridge_cg(h[i], xq, yq[i], lam / d, tol=tol, maxiter=maxiter, n=n)
        out += [icl.test_error_nonlinear(G, ell, m), icl.test_error_nonlinear(G, ell, m, mu, R)]
        res.append(r)
    return jnp.stack([*out, jnp.maximum(*res)])


@partial(jit_long, static_argnames=("d", "ell", "k_max", "n_max", "maxiter"))
def _paired_batch(keys, d, ell, k_max, n_max, k, n, rho, lam, fidx, mom, tol, maxiter):
    return jax.lax.map(lambda key: _paired_one(key, d, ell, k_max, n_max, k, n, rho, lam, fidx,
                                               mom, tol, maxiter), keys)


def paired_trials(key, d: int, alpha: float, tau: float, kappa: float, f: str, rho: float,
                  lam: float, trials: int, pad_to: tuple[int, int] | None = None,
                  tol: float = 1e-10, maxiter: int = 500) -> dict:
    """``trials`` ridge-pretraining runs (reference protocol sizes, :func:`icl.sizes`), each
    on a fresh pool, on the nonlinear target ``f`` and on its equivalent linear target with
    the same pool and queries.  Trial ``t`` uses ``fold_in(key, t)``.  Returns arrays
    (trials,): ``nonlinear_icl``, ``nonlinear_idg``, ``equivalent_icl``,
    ``equivalent_idg`` (exact test errors) and ``residual`` (max CG residual).
    ``pad_to=(k_max, n_max)`` shares one compilation across a kappa sweep at fixed
    (d, alpha)."""
    if f not in FUNCTIONS:
        raise ValueError(f"f: unknown target {f!r}; choose one of {sorted(FUNCTIONS)}.")
    ell, k, n = icl.sizes(d, alpha, tau, kappa)
    k_max, n_max = pad_to or (k, n)
    if k > k_max or n > n_max:
        raise ValueError(f"pad_to: ({k_max}, {n_max}) is smaller than (k, n) = ({k}, {n}).")
    mom = target_moments(f, float(rho))
    tm = {key_: jnp.asarray(mom[key_], float) for key_ in ("c1", "m2", "rho_eff", "Ey2z2",
                                                          "Ey3z", "Ey4")}
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(trials))
    out = np.asarray(_paired_batch(keys, d, ell, k_max, n_max, k, n, float(rho), float(lam),
                                   _INDEX[f], tm, tol, maxiter))
    worst = float(np.max(out[:, 4]))
    if not worst <= 1e3 * tol:
        raise RuntimeError(f"ridge solve: relative residual {worst:.2e} (tolerance {tol:g}); "
                           "the fitted Gamma cannot be trusted (raise maxiter?).")
    return {"nonlinear_icl": out[:, 0], "nonlinear_idg": out[:, 1],
            "equivalent_icl": out[:, 2], "equivalent_idg": out[:, 3], "residual": out[:, 4]}


# ---------------------------------------------------------------- theory ---------------

def theory(f: str, alpha: float, tau: float, kappa: float, rho: float) -> tuple[float, float]:
    """d -> infinity ridgeless ``(e_ICL, e_IDG)`` of the equivalent linear model (tau != 1):
    ``c1^2 e_Lu(alpha, tau, kappa, rho_eff / c1^2)``, whose irreducible part
    ``c1^2 rho' = c0^2 + V_res + sigma^2`` is the constant the equivalence adds on the
    query side; for ``c1 = 0``, ``m2 tau / (tau - 1)`` (tau > 1) or ``m2 / (1 - tau)``."""
    mom = target_moments(f, float(rho))
    c1, m2 = mom["c1"], mom["m2"]
    if c1 == 0.0:
        e = m2 * tau / (tau - 1) if tau > 1 else m2 / (1 - tau)
        return e, e
    rp = mom["rho_eff"] / c1**2
    return (c1**2 * icl.e_icl_ridgeless(alpha, tau, kappa, rp),
            c1**2 * icl.e_idg_ridgeless(alpha, tau, kappa, rp))


KAPPA_ZERO = 1e-4   # the theory's kappa -> 0 value (g_task within 2e-4 of its limit there)


def half_point_theory(alpha: float, tau: float, rho_prime: float, kappa_ref: float = KAPPA_ZERO):
    """Theory ``kappa_1/2`` of the equivalent linear model at noise ``rho' = rho_eff / c1^2``:
    ``g_task(kappa) = g_task(kappa_ref) / 2`` (ridgeless, tau > 1; brentq in log kappa on
    the first bracket of a fine grid).  The factor ``c1^2`` cancels, so ``kappa_1/2``
    depends on f only through ``rho'``; ``kappa_ref = KAPPA_ZERO`` is the kappa -> 0 value."""
    g = lambda k: icl.g_task_ridgeless(alpha, tau, k, rho_prime)
    g0 = g(kappa_ref)
    grid = np.geomspace(kappa_ref, 1e3, 600)
    i = int(np.nonzero(np.array([g(k) for k in grid]) < g0 / 2)[0][0])
    return float(np.exp(brentq(lambda t: g(np.exp(t)) - g0 / 2, np.log(grid[i - 1]),
                               np.log(grid[i]), xtol=1e-12)))


def half_point(kappas, g_mean, g_se, kappa_ref):
    """``kappa_1/2`` of a simulated sweep: the first crossing, beyond ``kappa_ref``, of half
    the value at ``kappa_ref``, linear in log kappa between the bracketing points, and its
    standard error by the delta method (the values involved are independent runs).
    ``(nan, nan)`` if ``kappa_ref`` was not simulated or there is no crossing."""
    kappas, g, s = (np.asarray(v, float) for v in (kappas, g_mean, g_se))
    ok = np.isfinite(g) & (kappas >= kappa_ref)
    kappas, g, s = kappas[ok], g[ok], s[ok]
    if kappas.size < 2 or not np.isclose(kappas[0], kappa_ref):
        return float("nan"), float("nan")
    h = g[0] / 2
    below = np.nonzero(g[1:] < h)[0]
    if g[0] <= 0 or below.size == 0:
        return float("nan"), float("nan")
    j = int(below[0]) + 1
    la, lb, ga, gb = np.log(kappas[j - 1]), np.log(kappas[j]), g[j - 1], g[j]
    t = (ga - h) / (ga - gb)
    lk = la + (lb - la) * t
    # d t / d g_a, d t / d g_b, d t / d g_0 (h = g_0 / 2); for j - 1 = 0, g_a is g_0
    dga = ((ga - gb) - (ga - h)) / (ga - gb) ** 2
    dgb = (ga - h) / (ga - gb) ** 2
    dg0 = -0.5 / (ga - gb)
    if j - 1 == 0:
        var = (dga + dg0) ** 2 * s[0] ** 2 + dgb**2 * s[j] ** 2
    else:
        var = dga**2 * s[j - 1] ** 2 + dgb**2 * s[j] ** 2 + dg0**2 * s[0] ** 2
    k_half = float(np.exp(lk))
    return k_half, float(k_half * (lb - la) * np.sqrt(var))


# ---------------------------------------------------------------- the sweep ------------

@dataclass(frozen=True, kw_only=True)
class NonlinearKappaConfig(SimConfig):
    ds: tuple[int, ...]
    alphas: tuple[float, ...]
    taus: tuple[float, ...]              # paired with alphas (tau = 0.2 alpha)
    kappas: tuple[float, ...]
    kappa_ref: float                      # kappa_1/2: half of g_task at kappa_ref
    fs: tuple[str, ...]
    rho: float
    lam: float
    trials: int
    dmmse_fs: tuple[str, ...]  # dMMSE at d = max(ds), alphas[0]
    dmmse_draws: int                        # test prompts per kappa, ICL and IDG each


def _pad(cfg, d, alpha, tau):
    sz = [icl.sizes(d, alpha, tau, k) for k in cfg.kappas if simulated(d, tau, k)]
    return max(s[1] for s in sz), max(s[2] for s in sz)


_FIELDS = ("nonlinear_icl", "nonlinear_idg", "equivalent_icl", "equivalent_idg")


def _dmmse_point(cfg, p, key):
    """The Bayes predictor with the pretraining pool as prior (dMMSE) for the nonlinear
    target ``f``, at each kappa: one pool (its own key), ``dmmse_draws`` ICL and IDG test
    prompts; ``(kappa, test, (mean, se))``, the SE over test prompts."""
    d, alpha, tau, f = p["d"], p["alpha"], p["tau"], p["f"]
    ell = icl.sizes(d, alpha, tau, cfg.kappas[0])[0]
    k_max = _pad(cfg, d, alpha, tau)[0]
    out = np.full((len(cfg.kappas), 2, 2), np.nan)
    for i, kappa in enumerate(cfg.kappas):
        if not simulated(d, tau, kappa):
            continue
        k = icl.sizes(d, alpha, tau, kappa)[1]
        kp, kt = jax.random.split(jax.random.fold_in(key, i))
        pool = icl.sample_pool(kp, d, k_max)
        r = icl.dmmse_errors(kt, pool, ell, cfg.rho, draws=cfg.dmmse_draws, k=k,
                             f=_JAX_FS[_INDEX[f]])
        out[i] = [r["icl"], r["idg"]]
    return {"dmmse": out}


def _point(cfg, p, key):
    if p.get("dmmse"):
        return _dmmse_point(cfg, p, key)
    d, alpha, tau, f = p["d"], p["alpha"], p["tau"], p["f"]
    pad = _pad(cfg, d, alpha, tau)
    out = {k: np.full((len(cfg.kappas), cfg.trials), np.nan) for k in _FIELDS}
    out["residual"] = np.full(len(cfg.kappas), np.nan)
    out["sizes"] = np.array([icl.sizes(d, alpha, tau, k) for k in cfg.kappas], float)
    for i, kappa in enumerate(cfg.kappas):
        if not simulated(d, tau, kappa):
            continue
        r = paired_trials(jax.random.fold_in(key, i), d, alpha, tau, kappa, f, cfg.rho,
                          cfg.lam, cfg.trials, pad_to=pad)
        for k in _FIELDS:
            out[k][i] = r[k]
        out["residual"][i] = float(np.max(r["residual"]))
    return out


def _points(cfg):
    unknown = sorted(set(cfg.dmmse_fs) - set(FUNCTIONS))
    if unknown:
        raise ValueError(f"dmmse_fs: unknown target {unknown[0]!r}; choose from "
                         f"{sorted(FUNCTIONS)}.")
    if cfg.dmmse_fs and cfg.dmmse_draws < 2:
        raise ValueError(f"dmmse_draws: {cfg.dmmse_draws} test prompts give no standard "
                         "error; use at least 2 (or dmmse_fs = [] for no dMMSE).")
    return ([{"d": int(d), "alpha": float(a), "tau": float(t), "f": f}
             for d in cfg.ds for a, t in zip(cfg.alphas, cfg.taus, strict=True)
             for f in cfg.fs]
            + [{"d": int(max(cfg.ds)), "alpha": float(cfg.alphas[0]),
                "tau": float(cfg.taus[0]), "f": f, "dmmse": True} for f in cfg.dmmse_fs])


def _assemble(cfg, points, res):
    dm = [r["dmmse"] for p, r in zip(points, res, strict=True) if p.get("dmmse")]
    res = [r for p, r in zip(points, res, strict=True) if not p.get("dmmse")]
    nd, na, nf, nk = len(cfg.ds), len(cfg.alphas), len(cfg.fs), len(cfg.kappas)
    shape = (nd, na, nf, nk)
    pairs = list(zip(cfg.alphas, cfg.taus, strict=True))
    out = {"ds": np.array(cfg.ds), "alphas": np.array(cfg.alphas), "taus": np.array(cfg.taus),
           "kappas": np.array(cfg.kappas), "trials": np.asarray(cfg.trials),
           "kappa_ref": np.asarray(cfg.kappa_ref), "fs": np.array(cfg.fs),
           "rho": np.asarray(cfg.rho)}
    for which in ("nonlinear", "equivalent"):
        e1 = np.array([r[f"{which}_icl"] for r in res]).reshape(*shape, -1)
        e2 = np.array([r[f"{which}_idg"] for r in res]).reshape(*shape, -1)
        for name, v in (("icl", e1), ("idg", e2), ("g", e1 - e2)):
            with np.errstate(invalid="ignore"):
                out[f"{which}_{name}_mean"], out[f"{which}_{name}_se"] = stats.mean_se(v, -1)
    # the paired ratio nonlinear / equivalent-linear, trial by trial (same pool, token
    # projections and queries)
    for name in ("icl", "idg"):
        nl = np.array([r[f"nonlinear_{name}"] for r in res]).reshape(*shape, -1)
        eq = np.array([r[f"equivalent_{name}"] for r in res]).reshape(*shape, -1)
        with np.errstate(invalid="ignore"):
            out[f"ratio_{name}_mean"], out[f"ratio_{name}_se"] = stats.mean_se(nl / eq, -1)
    # dMMSE (nonlinear targets) at d = max(ds), alphas[0]: (f, kappa, test, (mean, se))
    out["dmmse_fs"] = np.array(cfg.dmmse_fs, dtype=str)
    out["dmmse"] = np.array(dm).reshape(len(cfg.dmmse_fs), nk, 2, 2)
    diff = np.array([r["nonlinear_icl"] - r["nonlinear_idg"] - r["equivalent_icl"]
                     + r["equivalent_idg"] for r in res]).reshape(*shape, -1)
    with np.errstate(invalid="ignore"):
        out["g_diff_mean"], out["g_diff_se"] = stats.mean_se(diff, -1)   # paired
    out["residual"] = np.array([r["residual"] for r in res]).reshape(shape)
    sizes = np.array([r["sizes"] for r in res]).reshape(*shape, 3)
    out["sizes"] = sizes                                            # (l, k, n)
    # theory: a fine kappa grid at the nominal (alpha, tau), and at each simulated point's
    # own sizes (l/d, n/d^2, k/d: the protocol's rounding)
    grid = np.geomspace(0.05, 200.0, 241)
    th = np.array([[[theory(f, a, t, k, cfg.rho) for k in grid] for f in cfg.fs]
                   for a, t in pairs])                             # (na, nf, grid, 2)
    out["kappa_grid"] = grid
    out["theory_icl"], out["theory_idg"] = th[..., 0], th[..., 1]
    out["theory_g"] = th[..., 0] - th[..., 1]
    at = np.full((*shape, 2), np.nan)
    for idx in np.ndindex(*shape):
        if np.isfinite(out["nonlinear_g_mean"][idx]):
            d = cfg.ds[idx[0]]
            ell, k, n = sizes[idx]
            at[idx] = theory(cfg.fs[idx[2]], ell / d, n / d**2, k / d, cfg.rho)
    out["theory_at_sizes_icl"], out["theory_at_sizes_idg"] = at[..., 0], at[..., 1]
    out["theory_at_sizes_g"] = at[..., 0] - at[..., 1]
    # Hermite data and transition points
    mom = [target_moments(f, cfg.rho) for f in cfg.fs]
    out["hermite"] = np.array([[m["c0"], m["c1"], m["m2"], m["rho_eff"]] for m in mom])
    rps = [m["rho_eff"] / m["c1"] ** 2 if m["c1"] != 0 else np.inf for m in mom]
    half = lambda a, t, rp, ref: half_point_theory(a, t, rp, ref) if np.isfinite(rp) else np.nan
    out["half_theory_zero"] = np.array([[half(a, t, rp, KAPPA_ZERO) for rp in rps]
                                        for a, t in pairs])
    out["half_theory"] = np.array([[half(a, t, rp, cfg.kappa_ref) for rp in rps]
                                   for a, t in pairs])
    sh = np.full((nd, na, nf, 2, 2), np.nan)                        # (.., which, (k, se))
    for i, j, q in np.ndindex(nd, na, nf):
        for w, which in enumerate(("nonlinear", "equivalent")):
            sh[i, j, q, w] = half_point(cfg.kappas, out[f"{which}_g_mean"][i, j, q],
                                        out[f"{which}_g_se"][i, j, q], cfg.kappa_ref)
    out["half_sim"] = sh
    rp = np.geomspace(0.03, 3.0, 40)           # kappa_1/2 against rho' (theory), for the figure
    out["rho_prime_grid"] = rp
    out["half_theory_vs_rho_prime"] = np.array([[half_point_theory(a, t, r, cfg.kappa_ref)
                                                 for r in rp] for a, t in pairs])
    return out


def _summary(cfg, a):
    pairs = list(zip(cfg.alphas, cfg.taus, strict=True))
    lines = [f"(alpha, tau) = {pairs}, rho = {cfg.rho}, lambda = {cfg.lam:g}, d = "
             f"{list(cfg.ds)}, {cfg.trials} trials per point; kappa {cfg.kappas[0]:g} .. "
             f"{cfg.kappas[-1]:g} ({len(cfg.kappas)} points, log grid); max CG residual "
             f"{np.nanmax(a['residual']):.1e}"]
    for d in cfg.ds:
        miss = [f"tau = {t:g}: kappa = " + ", ".join(f"{k:g}" for k in cfg.kappas
                                                      if not simulated(d, t, k))
                for t in cfg.taus if not all(simulated(d, t, k) for k in cfg.kappas)]
        if miss:
            lines.append(f"d = {d}: not simulated (k < 2 tasks or < 2 prompts per task): "
                         + "; ".join(miss))
    lines.append(f"transition kappa_1/2: g_task falls to half its value at kappa_ref = "
                 f"{cfg.kappa_ref:g} (theory also against kappa -> 0, i.e. {KAPPA_ZERO:g}); "
                 "simulations +- SE (delta method); theory depends on f only via "
                 "rho' = rho_eff/c1^2")
    head = (f"  {'alpha':>5} {'f':>5} {'c1':>6} {'rho_eff':>7} {'rho_eff/c1^2':>12} "
            f"{'th(k->0)':>8} {'th(ref)':>7}")
    for d in cfg.ds:
        head += f" | d={d:<3} {'nonlinear':>11} {'equiv-linear':>12}"
    lines.append(head)
    fmt = lambda k, s: f"{k:5.3f}+-{s:5.3f}" if np.isfinite(k) else f"{'-':>11}"
    for j, (al, _) in enumerate(pairs):
        for q, f in enumerate(cfg.fs):
            c0, c1, m2, re = a["hermite"][q]
            rp = f"{re / c1**2:12.3f}" if c1 != 0 else f"{'inf (c1=0)':>12}"
            row = (f"  {al:5g} {f:>5} {c1:6.3f} {re:7.3f} {rp} {a['half_theory_zero'][j, q]:8.3f}"
                   f" {a['half_theory'][j, q]:7.3f}")
            for i in range(len(cfg.ds)):
                (k1, s1), (k2, s2) = a["half_sim"][i, j, q]
                row += f" | {'':5} {fmt(k1, s1)} {fmt(k2, s2):>12}"
            lines.append(row)
    lin = [q for q, f in enumerate(cfg.fs) if a["hermite"][q][1] != 0]
    for i, d in enumerate(cfg.ds):
        hs = a["half_sim"][i][:, lin]                               # (alpha, f, which, 2)
        dev = hs[..., 0, 0] - a["half_theory"][:, lin]
        z_th = dev / hs[..., 0, 1]
        z_eq = (hs[..., 0, 0] - hs[..., 1, 0]) / np.hypot(hs[..., 0, 1], hs[..., 1, 1])
        lines.append(f"  d = {d} (c1 != 0): kappa_1/2 nonlinear - theory(ref) mean "
                     f"{np.nanmean(dev):+.3f} (z from {np.nanmin(z_th):+.1f} to "
                     f"{np.nanmax(z_th):+.1f}); nonlinear vs equivalent-linear max |z| "
                     f"{np.nanmax(np.abs(z_eq)):.1f}")
    if "abs" in cfg.fs:
        q = list(cfg.fs).index("abs")
        m2 = a["hermite"][q][2]
        lines.append("c1 = 0 (|z|): the equivalence leaves pure noise, e_ICL = e_IDG = "
                     "m2 tau/(tau-1) at every kappa; exactly, e_IDG >= m2 for every Gamma")
        for i, d in enumerate(cfg.ds):
            for j, (al, t) in enumerate(pairs):
                e1, e2 = a["nonlinear_icl_mean"][i, j, q], a["nonlinear_idg_mean"][i, j, q]
                geq = np.nanmax(np.abs(a["equivalent_g_mean"][i, j, q]))
                g, se = a["nonlinear_g_mean"][i, j, q], a["nonlinear_g_se"][i, j, q]
                r = int(np.nanargmax(g))
                lines.append(
                    f"  d = {d}, alpha = {al:g}: e_IDG/m2 in [{np.nanmin(e2) / m2:.3f}, "
                    f"{np.nanmax(e2) / m2:.3f}], e_ICL/m2 in [{np.nanmin(e1) / m2:.3f}, "
                    f"{np.nanmax(e1) / m2:.3f}] (tau/(tau-1) = {t / (t - 1):.3f}); largest "
                    f"g_task {g[r]:.4f} +- {se[r]:.4f} at kappa = {cfg.kappas[r]:g}; "
                    f"equivalent-linear |g_task| <= {geq:.1e}")
    for i, d in enumerate(cfg.ds):
        parts = []
        for name in ("icl", "idg"):
            r = a[f"ratio_{name}_mean"][i][:, lin] - 1
            parts.append(f"e_{name.upper()} {np.nanmin(r):+.3f} .. {np.nanmax(r):+.3f}")
        lines.append(f"  d = {d} (c1 != 0): paired ratio nonlinear / equivalent-linear - 1: "
                     + "; ".join(parts))
    for q, f in enumerate(cfg.dmmse_fs):
        dm, m2 = a["dmmse"][q], target_moments(f, cfg.rho)["m2"]
        ok = np.isfinite(dm[:, 0, 0])
        lines.append(f"dMMSE ({f}, d = {max(cfg.ds)}, alpha = {cfg.alphas[0]:g}, "
                     f"{cfg.dmmse_draws} prompts per test): e_ICL/m2 "
                     f"{np.min(dm[ok, 0, 0]) / m2:.2f} .. {np.max(dm[ok, 0, 0]) / m2:.2f}, "
                     f"e_IDG/m2 {np.min(dm[ok, 1, 0]) / m2:.3f} .. "
                     f"{np.max(dm[ok, 1, 0]) / m2:.3f} over kappa "
                     f"{cfg.kappas[0]:g} .. {np.asarray(cfg.kappas)[ok][-1]:g}")
    for i, d in enumerate(cfg.ds):
        parts = []
        for which in ("nonlinear", "equivalent"):
            rel = np.abs(a[f"{which}_g_mean"][i][:, lin] - a["theory_at_sizes_g"][i][:, lin]) \
                / a["theory_at_sizes_g"][i][:, lin]
            parts.append(f"{which} {np.nanmedian(rel):.2f} (max {np.nanmax(rel):.2f})")
        z = np.abs(a["g_diff_mean"][i][:, lin] / a["g_diff_se"][i][:, lin])
        scale = (a["nonlinear_icl_mean"][i] + a["nonlinear_idg_mean"][i])[:, lin]
        rel_diff = np.nanmax(np.abs(a["g_diff_mean"][i][:, lin]) / scale)
        lines.append(f"d = {d} (c1 != 0): g_task vs theory at the simulated sizes, median rel. "
                     f"gap " + ", ".join(parts) + "; nonlinear - equivalent (paired): max "
                     f"|diff|/(e_ICL + e_IDG) {rel_diff:.3f}, "
                     f"max |z| {np.nanmax(z):.1f}")
    return lines


register(Simulation(
    name="icl-nonlinear-kappa",
    description="g_task against kappa for nonlinear single-index targets and their "
                "equivalent linear targets (ReLU, sign, tanh, erf, |z|).",
    config_cls=NonlinearKappaConfig, points=_points, run_point=_point, assemble=_assemble,
    summary=_summary))
