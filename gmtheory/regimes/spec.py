"""A Gaussian-mixture problem as data: the TOML spec of ``gmtheory explore``.

A spec names a task, a mixture, the task's parameters, optional sweep axes and numerical
options (docs/explore.md#the-spec)::

    task = "denoising"            # or "classification"
    [mixture]
    weights = [0.2, 0.5, 0.3]
    means = [[1.5, 0.0, -0.5], [-1.0, 1.0, 0.0], [0.0, -1.5, 1.0]]
    covs = [[[0.5, 0.1, 0.0], [0.1, 0.3, 0.0], [0.0, 0.0, 0.2]], ...]  # or [0.5, 0.3, 0.2]
    [denoising]                   # or [classification] with labels = [0, 1, 1]
    noise = 0.7
    [vary]
    noise = [0.4, 1.0]            # or {start = 0.4, stop = 1.0, num = 5}

Every malformed spec raises :class:`SpecError` (a ``ValueError``) whose one-line message
names the file, the field path and the fix.  :class:`Problem` is the same object in
Python; :func:`load_spec` reads a file, :func:`problem_from_dict` a parsed dict.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["Problem", "Options", "SpecError", "load_spec", "problem_from_dict", "TASKS",
           "AXES", "sweep_points", "at_point"]

TASKS = ("denoising", "classification")
#: sweep axes that are not paths into the mixture; ``mixture.weights[k]``,
#: ``mixture.means[k][j]`` and ``mixture.covs[k][i][j]`` (or ``mixture.covs[k]`` for a
#: per-component variance) address single entries.
AXES = {
    "noise": "denoising noise level xi (Z = X + xi eps)",
    "separation": "scales every mean about the weighted centre: m_k -> c + s (m_k - c)",
    "cov_scale": "multiplies every covariance",
    "L": "prompt length of the finite-prompt evaluation (integers >= 2)",
    "d": ("embeds the mixture in R^d (integers >= its dimension): means padded with zeros, "
          "each covariance extended by its mean variance on the new coordinates (an "
          "isotropic mixture stays isotropic)"),
}
MAX_AXIS_DIM = 64
_PATH = re.compile(r"^mixture\.(weights|means|covs)((?:\[\d+\])+)$")
MAX_POINTS = 10_000


class SpecError(ValueError):
    """A malformed spec: the message names the field path and the fix."""


def _err(source, path, msg):
    where = f"{source}: " if source else ""
    return SpecError(f"{where}{path}: {msg}")


@dataclass(frozen=True)
class Options:
    """Numerical options (``[options]``); defaults are sized for a laptop CPU."""

    starts: int = 4            #: random starts per head search (plus structured starts)
    heads: tuple = (1, 2)      #: head counts to search (denoising); 1 for classification
    mc_samples: int = 200_000  #: Monte Carlo samples of every MC estimate (SE reported)
    fit_samples: int = 4096    #: fixed samples of the head searches above the GH dimension
    order: int = 16            #: Gauss-Hermite order per dimension where d <= gh_max_dim
    fit_order: int = 10        #: the (coarser) GH order of the head searches' objective
    gh_max_dim: int = 3        #: largest d integrated on a tensor Gauss-Hermite grid
    max_order: int = 128       #: highest GH order the adaptive Bayes quadrature tries
    prompts: int = 64          #: prompts per L (finite-prompt evaluation)
    queries: int = 256         #: queries per prompt (finite-prompt evaluation)
    maxiter: int = 300         #: L-BFGS iterations per start
    train_steps: int = 200     #: Adam steps of the head trained on L-token prompts (0: none)
    train_seeds: int = 2       #: independently trained heads per L
    train_prompts: int = 8     #: prompts per training step
    train_queries: int = 32    #: queries per prompt and training step

    _POSITIVE = ("starts", "mc_samples", "fit_samples", "order", "fit_order", "gh_max_dim",
                 "max_order",
                 "prompts", "train_seeds", "train_prompts", "train_queries",
                 "queries", "maxiter")


@dataclass(frozen=True)
class Problem:
    """A Gaussian-mixture problem: ``task``, mixture arrays, task parameters, axes.

    ``covs`` is ``(K, d, d)``.  ``noise`` is the denoising ``xi``; ``labels`` maps each
    component to a class (classification).  ``vary`` maps an axis name (:data:`AXES` or a
    mixture path) to a tuple of values; ``L`` is the prompt length when not swept.
    """

    task: str
    weights: tuple
    means: tuple
    covs: tuple
    noise: float | None = None
    labels: tuple | None = None
    L: int | None = None
    vary: dict = field(default_factory=dict)
    options: Options = field(default_factory=Options)
    seed: int = 0
    name: str = "problem"
    data: dict | None = None   #: how the mixture was fitted to data ([data]), else None

    # ------------------------------------------------------------------ arrays
    @property
    def dim(self) -> int:
        return len(self.means[0])

    @property
    def n_components(self) -> int:
        return len(self.weights)

    @property
    def n_classes(self) -> int:
        return len(set(self.labels)) if self.labels is not None else 0

    def mixture(self):
        """The :class:`gmtheory.GaussianMixture` of the clean data ``X``."""
        from ..mixture import GaussianMixture

        return GaussianMixture(np.array(self.weights), np.array(self.means),
                               np.array(self.covs))

    def as_dict(self) -> dict:
        """JSON-able description (the cache key and the sidecar)."""
        d = dataclasses.asdict(self)
        d["options"] = dataclasses.asdict(self.options)
        return d

    # ------------------------------------------------------------- validation
    @classmethod
    def create(cls, *, task, weights, means, covs, noise=None, labels=None, L=None,
               vary=None, options=None, seed=0, name="problem", source="", data=None):
        """Validated constructor (what :func:`problem_from_dict` calls); field paths in
        messages follow the TOML layout."""
        if task not in TASKS:
            raise _err(source, "task", f"unknown task {task!r}; use one of {list(TASKS)}.")
        w = _vector(weights, "mixture.weights", source)
        K = w.size
        if np.any(w < 0):
            raise _err(source, "mixture.weights", f"must be non-negative, got {w.tolist()}.")
        if abs(w.sum() - 1.0) > 1e-8:
            raise _err(source, "mixture.weights",
                       f"must sum to 1, got sum {w.sum():.10g}; divide them by their sum.")
        m = _matrix(means, "mixture.means", source)
        if m.shape[0] != K:
            raise _err(source, "mixture.means",
                       f"has {m.shape[0]} rows but mixture.weights has {K} entries; give one "
                       "mean per component.")
        d = m.shape[1]
        c = _covs(covs, K, d, source)
        if task == "denoising":
            if noise is None:
                raise _err(source, "denoising.noise",
                           "missing; give the noise level xi > 0 (Z = X + xi eps).")
            noise = _positive(noise, "denoising.noise", source)
            if labels is not None:
                raise _err(source, "classification.labels",
                           "given for a denoising task; remove it or set task = "
                           "\"classification\".")
        else:
            if labels is None:
                raise _err(source, "classification.labels",
                           f"missing; give one class label per component ({K} integers).")
            if noise is not None:
                raise _err(source, "denoising.noise",
                           "given for a classification task; remove it or set task = "
                           "\"denoising\".")
            if not isinstance(labels, (list, tuple)) or len(labels) != K:
                n = len(labels) if isinstance(labels, (list, tuple)) else "not a list"
                raise _err(source, "classification.labels",
                           f"needs one label per component ({K}), got {n}.")
            if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                       for v in labels):
                raise _err(source, "classification.labels",
                           f"labels must be integers >= 0, got {list(labels)}.")
            classes = sorted(set(labels))
            if len(classes) < 2:
                raise _err(source, "classification.labels",
                           "need at least two classes; label the components with 0, 1, ...")
            if classes != list(range(len(classes))):
                raise _err(source, "classification.labels",
                           f"classes must be numbered 0..C-1 without gaps, got {classes}.")
            labels = tuple(int(v) for v in labels)
        opts = _options(options or {}, source)
        if L is not None:
            L = _int_at_least(L, "L", 2, source)
        prob = cls(task=task, weights=tuple(w.tolist()), means=tuple(map(tuple, m.tolist())),
                   covs=tuple(tuple(map(tuple, ck)) for ck in c.tolist()), noise=noise,
                   labels=labels, L=L, vary={}, options=opts, seed=int(seed), name=str(name),
                   data=data)
        axes = vary_axes(vary or {}, prob, source)
        return dataclasses.replace(prob, vary=axes)


# ------------------------------------------------------------------ readers
def load_spec(path=None, *, data=None, labels=None, noise=None, dim=None) -> Problem:
    """Read a TOML spec (standard library ``tomllib``) into a validated :class:`Problem`.

    ``data`` (a ``.npy`` file of samples, with optional ``labels``) stands for the spec's
    ``[data]`` (what ``gmtheory explore --data`` passes); without a spec it makes one:
    classification when ``labels`` are given, else denoising at noise ``noise``."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    if path is None:
        if data is None:
            raise SpecError("spec: give SPEC.toml, or --data FILE.npy (with --labels or "
                            "--noise) to explore your own data.")
        raw, source = {"name": Path(data).stem}, ""
        if labels is not None:
            raw["task"] = "classification"
        elif noise is None:
            raise SpecError("--noise: denoising your data needs the noise level xi; pass "
                            "--noise XI, or --labels FILE.npy for classification.")
        else:
            raw["task"] = "denoising"
    else:
        path = Path(path)
        if not path.is_file():
            raise SpecError(f"{path}: no such spec file; give the path of a TOML file.")
        try:
            raw = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise SpecError(f"{path}: not valid TOML ({exc}); see "
                            "docs/explore.md#the-spec.") from None
        raw.setdefault("name", path.stem)
        source = str(path)
    if data is not None:
        if "mixture" in raw:
            raise SpecError(f"--data: {source} gives [mixture]; drop one of them.")
        raw["data"] = {**raw.get("data", {}), "path": str(Path(data).resolve())}
        if labels is not None:
            raw["data"]["labels"] = str(Path(labels).resolve())
    if dim is not None:
        raw.setdefault("data", {})["dim"] = dim
    if noise is not None:
        raw["denoising"] = {**raw.get("denoising", {}), "noise": noise}
    return problem_from_dict(raw, source=source)


_TOP = {"task", "name", "seed", "mixture", "data", "denoising", "classification", "vary",
        "options", "prompt"}
DATA_KEYS = {"path", "labels", "dim", "components", "max_components", "holdout"}


def problem_from_dict(raw: dict, *, source: str = "") -> Problem:
    """Validate a parsed spec (the TOML layout as a dict) into a :class:`Problem`."""
    if not isinstance(raw, dict):
        raise _err(source, "spec", "expected a table of fields.")
    _unknown(raw, _TOP, "", source)
    if "task" not in raw:
        raise _err(source, "task", f"missing; set task = one of {list(TASKS)}.")
    task = raw["task"]
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise _err(source, "seed", f"must be an integer >= 0, got {seed!r}.")
    data_info = None
    if "data" in raw:
        raw, data_info = _from_data(raw, seed, source)
    mix = raw.get("mixture")
    if not isinstance(mix, dict):
        raise _err(source, "mixture", "missing; give [mixture] with weights, means and covs.")
    _unknown(mix, {"weights", "means", "covs"}, "mixture", source)
    for k in ("weights", "means", "covs"):
        if k not in mix:
            raise _err(source, f"mixture.{k}", "missing.")
    den = raw.get("denoising", {})
    cls_ = raw.get("classification", {})
    _unknown(den, {"noise"}, "denoising", source)
    _unknown(cls_, {"labels"}, "classification", source)
    prompt = raw.get("prompt", {})
    _unknown(prompt, {"L"}, "prompt", source)
    return Problem.create(task=task, weights=mix["weights"], means=mix["means"],
                          covs=mix["covs"], noise=den.get("noise"), labels=cls_.get("labels"),
                          L=prompt.get("L"), vary=raw.get("vary"), options=raw.get("options"),
                          seed=seed, name=raw.get("name", "problem"), source=source,
                          data=data_info)


def _from_data(raw, seed, source):
    """``[data]``: fit the mixture (gmtheory.regimes.data) and put it in ``[mixture]`` (and
    the components' classes in ``classification.labels``)."""
    from .data import DataError, fit_mixture, load_arrays

    spec = raw["data"]
    _unknown(spec, DATA_KEYS, "data", source)
    if "mixture" in raw:
        raise _err(source, "data", "given with [mixture]; keep one of them.")
    if "path" not in spec:
        raise _err(source, "data.path", "missing; give the .npy file of the samples.")
    if raw.get("task") == "classification" and "labels" not in spec:
        raise _err(source, "data.labels", "missing; classification of data needs a .npy file "
                   "of one class label per sample.")
    if raw.get("task") == "denoising" and "labels" in spec:
        raise _err(source, "data.labels", "given for a denoising task; remove it or set task "
                   "= \"classification\".")
    if "labels" in raw.get("classification", {}):
        raise _err(source, "classification.labels", "given with [data]; the components' "
                   "classes come from data.labels.")
    base = Path(source).parent if source and Path(source).is_file() else None
    try:
        X, y = load_arrays(spec["path"], spec.get("labels"), base=base)
        mix, labels, info = fit_mixture(
            X, y, dim=spec.get("dim"), components=spec.get("components"),
            max_components=spec.get("max_components", 6), holdout=spec.get("holdout", 0.2),
            seed=seed)
    except DataError as exc:                 # "data.<field>: what is wrong and the fix"
        field_, _, msg = str(exc).partition(": ")
        raise _err(source, field_, msg) from None
    info = {"path": str(spec["path"]), **info}
    raw = {k: v for k, v in raw.items() if k != "data"}
    raw["mixture"] = mix
    if labels is not None:
        raw["classification"] = {**raw.get("classification", {}), "labels": labels}
    return raw, info


# ---------------------------------------------------------------- field checks
def _unknown(table, allowed, prefix, source):
    if not isinstance(table, dict):
        raise _err(source, prefix or "spec", "expected a table.")
    for k in table:
        if k not in allowed:
            path = f"{prefix}.{k}" if prefix else k
            raise _err(source, path, f"unknown key; valid keys here: {sorted(allowed)}.")


def _number(x, path, source):
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise _err(source, path, f"expected a number, got {x!r}.")
    if not math.isfinite(x):
        raise _err(source, path, f"must be finite, got {x!r}.")
    return float(x)


def _positive(x, path, source):
    x = _number(x, path, source)
    if not x > 0:
        raise _err(source, path, f"must be > 0, got {x!r}.")
    return x


def _int_at_least(x, path, lo, source):
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    if isinstance(x, bool) or not isinstance(x, int) or x < lo:
        raise _err(source, path, f"must be an integer >= {lo}, got {x!r}.")
    return x


def _vector(x, path, source):
    if not isinstance(x, (list, tuple)) or not x:
        raise _err(source, path, "expected a non-empty list of numbers.")
    return np.array([_number(v, f"{path}[{i}]", source) for i, v in enumerate(x)])


def _matrix(x, path, source):
    if not isinstance(x, (list, tuple)) or not x:
        raise _err(source, path, "expected a non-empty list of rows.")
    rows = [_vector(r, f"{path}[{i}]", source) for i, r in enumerate(x)]
    n = rows[0].size
    for i, r in enumerate(rows):
        if r.size != n:
            raise _err(source, f"{path}[{i}]",
                       f"has {r.size} entries but {path}[0] has {n}; all rows need the same "
                       "dimension d.")
    return np.stack(rows)


def _covs(x, K, d, source):
    path = "mixture.covs"
    if not isinstance(x, (list, tuple)) or len(x) != K:
        n = len(x) if isinstance(x, (list, tuple)) else "not a list"
        raise _err(source, path, f"needs one entry per component ({K}), got {n}; give d x d "
                   "matrices or one variance per component.")
    out = []
    for k, ck in enumerate(x):
        p = f"{path}[{k}]"
        if isinstance(ck, (int, float)) and not isinstance(ck, bool):
            v = _number(ck, p, source)
            if v < 0:
                raise _err(source, p, f"a variance must be >= 0, got {v}.")
            out.append(v * np.eye(d))
            continue
        c = _matrix(ck, p, source)
        if c.shape != (d, d):
            raise _err(source, p, f"expected a {d} x {d} matrix (d = {d} from mixture.means), "
                       f"got {c.shape[0]} x {c.shape[1]}.")
        scale = max(1.0, float(np.abs(c).max()))
        if np.abs(c - c.T).max() > 1e-10 * scale:
            raise _err(source, p, "must be symmetric; use (C + C^T) / 2.")
        lo = float(np.linalg.eigvalsh(c)[0])
        if lo < -1e-10 * scale:
            raise _err(source, p, f"must be positive semi-definite (smallest eigenvalue {lo:.3g});"
                       " use a Gram matrix A A^T or add a ridge.")
        out.append(c)
    return np.stack(out)


def _options(raw, source):
    if not isinstance(raw, dict):
        raise _err(source, "options", "expected a table.")
    fields = {f.name: f for f in dataclasses.fields(Options)}
    _unknown(raw, set(fields), "options", source)
    kw = {}
    for k, v in raw.items():
        if k == "heads":
            vals = v if isinstance(v, (list, tuple)) else [v]
            if not vals:
                raise _err(source, "options.heads", "expected a non-empty list of head counts.")
            kw[k] = tuple(_int_at_least(h, f"options.heads[{i}]", 1, source)
                          for i, h in enumerate(vals))
        else:
            kw[k] = _int_at_least(v, f"options.{k}", 1 if k in Options._POSITIVE else 0, source)
    return Options(**kw)


def _axis_values(spec, path, source):
    if isinstance(spec, dict):
        _unknown(spec, {"start", "stop", "num", "log"}, path, source)
        for k in ("start", "stop", "num"):
            if k not in spec:
                raise _err(source, f"{path}.{k}", "missing; a range is {start, stop, num}.")
        a = _number(spec["start"], f"{path}.start", source)
        b = _number(spec["stop"], f"{path}.stop", source)
        n = _int_at_least(spec["num"], f"{path}.num", 1, source)
        if spec.get("log", False):
            if a <= 0 or b <= 0:
                raise _err(source, path, "a log range needs start, stop > 0.")
            return tuple(np.geomspace(a, b, n).tolist())
        return tuple(np.linspace(a, b, n).tolist())
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise _err(source, path, "empty axis; give at least one value.")
        return tuple(_number(v, f"{path}[{i}]", source) for i, v in enumerate(spec))
    raise _err(source, path, f"expected a list of values or {{start, stop, num}}, got {spec!r}.")


def vary_axes(raw, prob: Problem, source):
    """The validated ``vary`` table of a spec: axis name -> tuple of values."""
    if not isinstance(raw, dict):
        raise _err(source, "vary", "expected a table of axes.")
    out = {}
    total = 1
    for name, spec in raw.items():
        path = f"vary.{name}" if re.fullmatch(r"\w+", name) else f'vary."{name}"'
        if name not in AXES and not _PATH.match(name):
            raise _err(source, path, f"unknown axis; use one of {sorted(AXES)} or a mixture "
                       "entry such as \"mixture.means[0][1]\", \"mixture.weights[0]\", "
                       "\"mixture.covs[0][1][1]\".")
        if name == "noise" and prob.task != "denoising":
            raise _err(source, path, "noise is a denoising parameter; this task is "
                       "classification.")
        vals = _axis_values(spec, path, source)
        if name in ("noise", "cov_scale", "separation"):
            for i, v in enumerate(vals):
                if not v > 0:
                    raise _err(source, f"{path}[{i}]", f"must be > 0, got {v}.")
        if name == "L":
            vals = tuple(_int_at_least(v, f"{path}[{i}]", 2, source) for i, v in enumerate(vals))
        if name == "d":
            vals = tuple(_int_at_least(v, f"{path}[{i}]", prob.dim, source)
                         for i, v in enumerate(vals))
            for i, v in enumerate(vals):
                if v > MAX_AXIS_DIM:
                    raise _err(source, f"{path}[{i}]", f"at most {MAX_AXIS_DIM} (the head "
                               f"searches have 2 M d^2 parameters), got {v}.")
        if _PATH.match(name):
            for v in vals:  # every value must give a valid problem
                at_point(prob, {name: v}, source=source, path=path)
        out[name] = vals
        total *= len(vals)
    if total > MAX_POINTS:
        raise _err(source, "vary", f"{total:,} points in the product grid (> {MAX_POINTS:,}); "
                   "use fewer values per axis.")
    return out


# ---------------------------------------------------------------------- sweeps
def sweep_points(prob: Problem) -> list[dict]:
    """The product grid of ``prob.vary`` as a list of ``{axis: value}`` (last axis fastest);
    ``[{}]`` without axes."""
    import itertools

    names = list(prob.vary)
    return [dict(zip(names, vals, strict=True))
            for vals in itertools.product(*prob.vary.values())]


def at_point(prob: Problem, point: dict, *, source: str = "", path: str = "") -> Problem:
    """The problem with one sweep point's values applied (axes removed)."""
    w = np.array(prob.weights)
    m = np.array(prob.means)
    c = np.array(prob.covs)
    noise, L = prob.noise, prob.L
    for name, v in point.items():
        if name == "d":
            continue                      # applied last: the other axes index the mixture
        if name == "noise":
            noise = float(v)
        elif name == "L":
            L = int(v)
        elif name == "separation":
            centre = w @ m
            m = centre + float(v) * (m - centre)
        elif name == "cov_scale":
            c = float(v) * c
        else:
            kind, idx = _PATH.match(name).groups()
            idx = [int(i) for i in re.findall(r"\d+", idx)]
            p = path or f'vary."{name}"'
            if kind == "weights":
                if len(idx) != 1 or idx[0] >= w.size:
                    raise _err(source, p, f"index out of range; weights has {w.size} entries.")
                if not 0 <= v < 1 or w.size < 2:
                    raise _err(source, p, f"a weight must lie in [0, 1), got {v}.")
                rest = 1.0 - w[idx[0]]
                w = w * ((1.0 - v) / rest) if rest > 0 else np.full_like(w, (1 - v) / (w.size - 1))
                w[idx[0]] = v
            elif kind == "means":
                if len(idx) != 2 or idx[0] >= m.shape[0] or idx[1] >= m.shape[1]:
                    raise _err(source, p, f"expected mixture.means[k][j] with k < {m.shape[0]}, "
                               f"j < {m.shape[1]}.")
                m[idx[0], idx[1]] = v
            else:
                K, d = m.shape
                if len(idx) == 1 and idx[0] < K:
                    if v < 0:
                        raise _err(source, p, f"a variance must be >= 0, got {v}.")
                    c[idx[0]] = v * np.eye(d)
                elif len(idx) == 3 and idx[0] < K and idx[1] < d and idx[2] < d:
                    c[idx[0], idx[1], idx[2]] = v
                    c[idx[0], idx[2], idx[1]] = v
                    lo = float(np.linalg.eigvalsh(c[idx[0]])[0])
                    if lo < -1e-10 * max(1.0, float(np.abs(c[idx[0]]).max())):
                        raise _err(source, p, f"the value {v} makes mixture.covs[{idx[0]}] "
                                   f"not positive semi-definite (smallest eigenvalue {lo:.3g}).")
                else:
                    raise _err(source, p, f"expected mixture.covs[k] or mixture.covs[k][i][j] "
                               f"with k < {K}, i, j < {d}.")
    if "d" in point:
        m, c = _embed(m, c, int(point["d"]))
    return dataclasses.replace(
        prob, weights=tuple(w.tolist()), means=tuple(map(tuple, m.tolist())),
        covs=tuple(tuple(map(tuple, ck)) for ck in c.tolist()), noise=noise, L=L, vary={})


def _embed(m, c, d):
    """The mixture ``(m, c)`` in ``R^d``: means padded with zeros, each covariance extended
    by its mean variance ``tr(Gamma_k) / d0`` on the new coordinates."""
    K, d0 = m.shape
    if d == d0:
        return m, c
    mm = np.zeros((K, d))
    mm[:, :d0] = m
    cc = np.zeros((K, d, d))
    cc[:, :d0, :d0] = c
    s = np.trace(c, axis1=1, axis2=2) / d0
    cc[:, d0:, d0:] = s[:, None, None] * np.eye(d - d0)
    return mm, cc
