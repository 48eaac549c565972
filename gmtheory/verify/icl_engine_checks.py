"""The ICL pretraining simulator against its direct constructions (check icl.17,
docs/topics/icl.md#data-model-and-the-reduced-model): the O(d) context statistics
(:func:`gmtheory.icl.sample_statistics`) against ``H_Z`` built from sampled tokens, and the
ridge solvers (:func:`gmtheory.icl.ridge_cg`, :func:`gmtheory.icl.ridge_solve`) against an
explicit solve of the normal equations.  Every pretraining check rests on both; the
extrapolated Monte Carlo errors those checks compare resolve a few per cent, this one a
per cent in the statistics and float64 round-off in the solvers."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .. import icl
from .._xla import jit_long
from ..comparisons import IDENTITY_TOL, equivalence, largest
from ..problems import stream_key
from ..stats import bonferroni_t, mean_se
from ._registry import Outcome, agreement, register_check

SEED = 20261207
# the statistics' moments: 64 batches of 50 000 prompts for each construction, so the SE of
# each moment's difference is ~0.1 % of its array's scale and t SE <= 0.5 % (the power for
# IDENTITY_TOL; 40 batches left it at 0.56 %); the SE comes from the 64 batch means (63 dof)
STAT_BATCHES, STAT_BATCH = 64, 50_000
STAT_D, STAT_ELL, STAT_RHO = 4, 6, 0.1


def _stats(h, xq, yq):
    """The moments compared: E h_j, E h_j^2, E y_q x_q,j and E y_q^2 (one vector)."""
    return jnp.concatenate([h.mean(0), (h * h).mean(0), (yq[:, None] * xq).mean(0),
                            (yq * yq).mean()[None]])


@partial(jit_long, static_argnums=(1,))
def _moment_batches(w, ell, rho, keys):
    """Per batch of :data:`STAT_BATCH` prompts on task ``w``: the moments of the fast
    statistics and of the same statistics built from sampled tokens ``x_i ~ N(0, I/d)``,
    ``y_i = x_i^T w + sqrt(rho) eps_i`` and a sampled query ``(x_q, y_q)``."""
    d = w.shape[0]

    def one(key):
        kf, kx, ke, kq, kqe = jax.random.split(key, 5)
        h, xq, yq = icl.sample_statistics(kf, jnp.broadcast_to(w, (STAT_BATCH, d)), ell, rho)
        X = jax.random.normal(kx, (STAT_BATCH, ell, d)) / jnp.sqrt(d)
        y = X @ w + jnp.sqrt(rho) * jax.random.normal(ke, (STAT_BATCH, ell))
        hd = jnp.concatenate([d / ell * jnp.einsum("nl,nld->nd", y, X),
                              jnp.mean(y * y, 1, keepdims=True)], 1)
        xd = jax.random.normal(kq, (STAT_BATCH, d)) / jnp.sqrt(d)
        yd = xd @ w + jnp.sqrt(rho) * jax.random.normal(kqe, (STAT_BATCH,))
        return _stats(h, xq, yq), _stats(hd, xd, yd)
    return jax.lax.map(one, keys)


def _explicit_ridge(h, xq, yq, lam):
    """The ridge normal equations formed from the d(d+1) features and solved by NumPy, and
    their condition number."""
    h, xq, yq = (np.asarray(a) for a in (h, xq, yq))
    n = h.shape[0]
    F = np.einsum("nd,ne->nde", xq, h).reshape(n, -1)
    A = F.T @ F / n + lam * np.eye(F.shape[1])
    G = np.linalg.solve(A, F.T @ yq / n)
    return G.reshape(xq.shape[1], h.shape[1]), float(np.linalg.cond(A))


@register_check(
    "icl.17-pretraining-simulator",
    "The pretraining simulator equals its direct constructions: the O(d) context statistics "
    "(chi-square and Gaussian draws, icl.sample_statistics) have the moments of H_Z built "
    "from sampled tokens (E h_j, E h_j^2, E y_q x_q and E y_q^2, 3.2e6 prompts each, within "
    "1 % of each array's scale in the equivalence form), and the ridge solvers (conjugate "
    "gradients with the Kronecker preconditioner, icl.ridge_cg; Cholesky, icl.ridge_solve) "
    "equal an explicit solve of the normal equations to float64 round-off.",
    "docs/topics/icl.md#data-model-and-the-reduced-model",
)
def check_pretraining_simulator():
    key = stream_key(SEED, "icl17")
    w = icl.sample_pool(jax.random.fold_in(key, 0), STAT_D, 1)[0]
    fast, direct = (np.asarray(a) for a in _moment_batches(
        w, STAT_ELL, STAT_RHO, jax.random.split(jax.random.fold_in(key, 1), STAT_BATCHES)))
    mf, sf = mean_se(fast, axis=0)
    md, sd = mean_se(direct, axis=0)
    d1 = STAT_D + 1
    groups = (slice(0, d1), slice(d1, 2 * d1), slice(2 * d1, 2 * d1 + STAT_D),
              slice(2 * d1 + STAT_D, None))
    scale = np.concatenate([np.full(g.stop - g.start if g.stop else 1,
                                    np.max(np.abs(np.asarray(md)[g]))) for g in groups])
    t = bonferroni_t(mf.size, STAT_BATCHES - 1, 0.01)
    # the solvers on one pretraining set (d = 5: p = 30 <= DIRECT_MAX_PARAMS, so
    # ridge_solve takes its Cholesky path; ridge_cg is called directly)
    d, n, lam = 5, 600, 1e-2
    ell, k, _ = icl.sizes(d, 2.0, 3.0, 1.0)
    pool = icl.sample_pool(jax.random.fold_in(key, 2), d, k)
    h, xq, yq = icl.sample_statistics(jax.random.fold_in(key, 3),
                                      jnp.tile(pool, (n // k, 1)), ell, 0.1)
    G, cond = _explicit_ridge(h, xq, yq, lam)
    cg, res = icl.ridge_cg(h, xq, yq, lam, tol=1e-12, maxiter=500)
    chol, _ = icl.ridge_solve(h, xq, yq, lam, tol=1e-12, maxiter=500)
    gscale = float(np.max(np.abs(G)))
    cg_diff = largest(np.abs(np.asarray(cg) - G)) / gscale
    chol_diff = largest(np.abs(np.asarray(chol) - G)) / gscale
    return Outcome(
        equivalence(mf, md, np.hypot(sf, sd), IDENTITY_TOL,
                    f"each of the {mf.size} moments (E h_j, E h_j^2, E y_q x_q,j, E y_q^2; "
                    f"d = {STAT_D}, l = {STAT_ELL}, rho = {STAT_RHO:g}), fast sampler against "
                    f"tokens, {STAT_BATCHES * STAT_BATCH:.0e} prompts each: (|diff| + t SE) / "
                    "the largest entry of its group <= 1 %, t = "
                    f"{t:.2f} (Student t, {STAT_BATCHES - 1} dof from the batch means, "
                    "Bonferroni, 1 % family-wise)", t=t, scale=scale,
                    name="context statistics: fast vs tokens, (|diff| + t SE) / scale"),
        agreement(cg_diff, 1e-8, "conjugate gradients (relative residual 1e-12) against the "
                  f"explicit solve (d = {d}, n = {n}, lambda = {lam:g}; condition number "
                  f"{cond:.0f}): the residual times the condition number, with room",
                  name="max |G_cg - G_explicit| / max |G|", relative=True),
        agreement(chol_diff, 1e-10, "Cholesky against the explicit solve (LU): float64 "
                  "round-off of a 30 x 30 system", name="max |G_chol - G_explicit| / max |G|",
                  relative=True),
        details={"fast": np.asarray(mf).tolist(), "tokens": np.asarray(md).tolist(),
                 "se_fast": np.asarray(sf).tolist(), "se_tokens": np.asarray(sd).tolist(),
                 "t": t, "cg_residual": float(res), "condition_number": cond,
                 "cg_vs_explicit": float(cg_diff), "cholesky_vs_explicit": float(chol_diff)})
