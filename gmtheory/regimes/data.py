"""Your own data as a Gaussian mixture: project, fit, check the fit, then explore.

``[data]`` in a spec (or ``gmtheory explore --data FILE.npy [--labels FILE.npy]``) replaces
``[mixture]``: the samples are centred and projected on their first ``dim`` principal
components (``dim <= 16``), a Gaussian mixture with full covariances is fitted by
scikit-learn's :class:`~sklearn.mixture.GaussianMixture` (the optional extra
``pip install 'gmtheory[data]'``) on a training split, the number of components chosen by
BIC unless given, and its held-out log-likelihood per sample is reported with its SE
beside the regimes.  With labels (classification) one mixture is fitted per class and its
components carry the class.  The result is an ordinary mixture: every regime, check and
figure of ``gmtheory explore`` then applies to it (docs/explore.md#your-own-data).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["fit_mixture", "load_arrays", "MAX_DIM"]

MAX_DIM = 16          # explore's dimensions (Gauss-Hermite up to gh_max_dim, then MC)


class DataError(ValueError):
    """Bad data: the message names the argument and the fix (a SpecError upstream)."""


def load_arrays(path, labels=None, *, base: Path | None = None):
    """The samples ``(n, d)`` (and the labels ``(n,)``) from ``.npy`` files; relative paths
    are read from ``base`` (the spec's folder)."""
    def read(p, what):
        p = Path(p)
        if base is not None and not p.is_absolute():
            p = base / p
        if not p.is_file():
            raise DataError(f"{what}: no such file {p}; give the path of a .npy file.")
        try:
            return np.load(p, allow_pickle=False)
        except ValueError as exc:
            raise DataError(f"{what}: {p} is not a NumPy .npy array ({exc}); save it with "
                            "numpy.save.") from None
    X = read(path, "data.path")
    y = None if labels is None else read(labels, "data.labels")
    return X, y


def _check(X, y, dim):
    X = np.asarray(X)
    if X.ndim != 2:
        raise DataError(f"data.path: expected samples as rows of a 2-D array (n, d), got shape "
                        f"{X.shape}; reshape it to (n_samples, n_features).")
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise DataError(f"data.path: expected real numbers, got dtype {X.dtype}.")
    X = X.astype(float)
    bad = np.flatnonzero(~np.all(np.isfinite(X), axis=1))
    if bad.size:
        raise DataError(f"data.path: {bad.size} row(s) hold NaN or inf (first: row "
                        f"{bad[0]}); drop or impute them before exploring.")
    n, d = X.shape
    if n < 2:
        raise DataError(f"data.path: {n} sample(s); a mixture needs at least 2 (and more "
                        "samples than dimensions).")
    if y is not None:
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n:
            raise DataError(f"data.labels: need one label per sample ({n}), got shape "
                            f"{y.shape}.")
        if y.dtype.kind not in "iuf":
            raise DataError(f"data.labels: labels must be integers (class numbers), got "
                            f"{y.dtype} values; map them to 0, 1, ... first.")
        if y.dtype.kind == "f":
            if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
                raise DataError("data.labels: labels must be integers (class numbers), got "
                                "non-integer values.")
            y = y.astype(int)
    if dim is None:
        dim = min(d, MAX_DIM)
    if not isinstance(dim, int | np.integer) or isinstance(dim, bool) or not 1 <= dim <= MAX_DIM:
        raise DataError(f"data.dim: must be an integer in 1..{MAX_DIM}, got {dim!r}.")
    dim = int(min(dim, d))
    return X, y, dim


def fit_mixture(X, y=None, *, dim=None, components=None, max_components=6, holdout=0.2,
                seed=0):
    """Project ``X`` and fit a Gaussian mixture (per class when labels ``y`` are given).

    Returns ``(mixture, labels, info)``: ``mixture`` a dict of ``weights``, ``means`` and
    ``covs`` (lists) in the ``dim``-dimensional principal subspace, ``labels`` the class of
    each component (None without ``y``), and ``info`` what the report prints (the
    projection's explained variance, the components chosen and their BIC, the held-out
    log-likelihood per sample with its SE)."""
    try:
        from sklearn.mixture import GaussianMixture as SkGMM
    except ModuleNotFoundError:
        raise DataError("data: fitting a mixture to data needs scikit-learn; install the "
                        "extra: pip install 'gmtheory[data]'.") from None
    X, y, dim = _check(X, y, dim)
    n, d = X.shape
    if not 0 < holdout < 1:
        raise DataError(f"data.holdout: must lie in (0, 1), got {holdout!r}.")
    if components is not None and (not isinstance(components, int) or components < 1):
        raise DataError(f"data.components: must be an integer >= 1, got {components!r}.")
    if not isinstance(max_components, int) or max_components < 1:
        raise DataError(f"data.max_components: must be an integer >= 1, got "
                        f"{max_components!r}.")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    n_test = int(round(holdout * n))
    if n_test < 2:
        raise DataError(f"data.holdout: {holdout:g} of {n} samples leaves {n_test} held out; "
                        "the held-out log-likelihood needs at least 2 (more samples or a "
                        "larger holdout).")
    test, train = perm[:n_test], perm[n_test:]
    # principal subspace of the training split (centred there)
    mu = X[train].mean(0)
    _, s, vt = np.linalg.svd(X[train] - mu, full_matrices=False)
    P = vt[:dim].T                                          # (d, dim)
    explained = float(np.sum(s[:dim] ** 2) / np.sum(s**2)) if np.sum(s**2) > 0 else 1.0
    Z = (X - mu) @ P
    groups = [np.arange(n)] if y is None else [np.flatnonzero(y == c) for c in np.unique(y)]
    classes = [None] if y is None else [int(c) for c in np.unique(y)]
    if y is not None and len(classes) < 2:
        raise DataError(f"data.labels: need at least two classes, got {classes}.")
    weights, means, covs, comp_labels, chosen, bics, at_max = [], [], [], [], [], [], []
    ll_test = np.zeros(n_test)
    for ci, (idx, c) in enumerate(zip(groups, classes, strict=True)):
        tr = np.intersect1d(idx, train)
        need = dim + 1
        if tr.size < need + 1:
            raise DataError(f"data: {tr.size} training sample(s)"
                            + (f" of class {c}" if c is not None else "")
                            + f" in d = {dim}: a full covariance needs more samples than "
                            f"dimensions; pass a smaller data.dim (<= {max(1, tr.size - 2)}) "
                            "or more samples.")
        if components is not None and components * need > tr.size:
            raise DataError(f"data.components: {components} components in d = {dim} need "
                            f"{components * need} training samples"
                            + (f" of class {c}" if c is not None else "")
                            + f", there are {tr.size}; give fewer components or a smaller "
                            "data.dim.")
        Ks = [components] if components is not None else list(range(1, max_components + 1))
        Ks = [k for k in Ks if k * need <= tr.size] or [1]
        fits = [SkGMM(k, covariance_type="full", random_state=seed, reg_covar=1e-6,
                      n_init=2).fit(Z[tr]) for k in Ks]
        bic = [f.bic(Z[tr]) for f in fits]
        best = fits[int(np.argmin(bic))]
        share = tr.size / train.size
        weights += (share * best.weights_).tolist()
        means += best.means_.tolist()
        covs += best.covariances_.tolist()
        comp_labels += [ci] * best.n_components
        chosen.append(int(best.n_components))
        at_max.append(components is None and best.n_components == max_components)
        bics.append(float(min(bic)))
        if y is None:
            ll_test = best.score_samples(Z[test])
        else:
            # the class-conditional densities, weighted by the class shares, make the
            # mixture of all classes: its held-out log-likelihood is that of the samples
            ll_test = np.logaddexp(ll_test, np.log(share) + best.score_samples(Z[test])) \
                if ci else np.log(share) + best.score_samples(Z[test])
    w = np.asarray(weights)
    w = (w / w.sum()).tolist()
    info = {"samples": int(n), "features": int(d), "dim": int(dim),
            "explained_variance": explained, "train": int(train.size), "holdout": n_test,
            "components": chosen, "bic": bics, "max_components": max_components,
            "components_at_max": bool(any(at_max)),
            "heldout_loglik": float(np.mean(ll_test)),
            "heldout_loglik_se": float(np.std(ll_test, ddof=1) / np.sqrt(n_test)),
            "classes": None if y is None else classes}
    return ({"weights": w, "means": means, "covs": covs},
            None if y is None else comp_labels, info)
