"""gmtheory: attention in the infinite-prompt limit, checked four ways.

Theory checks should run in float64: call ``gmtheory.enable_x64()`` (the
``gmtheory`` command does this for you) before creating arrays.

Pytrees: problems and models are ``eqx.Module``s (:class:`gmtheory.lda.LDAProblem`, the
models of :mod:`gmtheory.gma_models`).  Three kinds stay otherwise, each for a reason:
parameter tuples whose order is the paper's (:class:`gmtheory.lda.LDAParams`,
:class:`gmtheory.lda.Effective`, :class:`gmtheory.gma.GMAParams`) and results records
(``TrainResult``, ``Fit``, ...) are NamedTuples, which unpack as tuples in that order
(optax and BlackJAX keep states and infos so); :class:`GaussianMixture` is a
hand-registered class whose ``tree_unflatten(None, (weights, means, covs))`` is the
unvalidated constructor that traced code uses across the package.
"""

from __future__ import annotations

import os as _os


def use_fast_compile_flags() -> None:
    """Compile with XLA's backend optimisation level 0 and XLA:CPU's legacy elemental
    emitters unless told otherwise.

    A cold run of the checks and figures is mostly compilation, most of it of programs
    that run for milliseconds.  Level 0 compiles them 30-50 % faster than level 1 on CPU,
    and the legacy emitters compile them 35-48 % faster than the MLIR fusion emitters
    (docs/performance.md#where-a-cold-runs-time-goes).  Both run some long kernels
    slower, so the programs that run long ask for level 1 themselves, and a long softmax
    for the fusion emitters too (:data:`gmtheory._xla.LONG_RUNNING`,
    :data:`gmtheory._xla.LONG_FUSED`), and keep their speed.
    ``GMTHEORY_XLA_OPT_LEVEL=default`` (or any level) overrides the level, and so does an
    ``--xla_backend_optimization_level`` already in ``XLA_FLAGS``;
    ``GMTHEORY_XLA_EMITTERS=fusion`` keeps the fusion emitters, and so does an
    ``--xla_cpu_use_fusion_emitters`` already in ``XLA_FLAGS``.

    ``import gmtheory`` changes no process-wide setting: the ``gmtheory`` command and the
    test suite call this, and a library user may (before the first JAX computation, when
    JAX's backend reads ``XLA_FLAGS``)."""
    level = _os.environ.get("GMTHEORY_XLA_OPT_LEVEL", "0")
    flags = _os.environ.get("XLA_FLAGS", "")
    if level != "default" and "xla_backend_optimization_level" not in flags:
        flags = f"{flags} --xla_backend_optimization_level={level}".strip()
    emitters = _os.environ.get("GMTHEORY_XLA_EMITTERS", "legacy")
    if emitters not in ("legacy", "fusion"):
        raise ValueError(f"GMTHEORY_XLA_EMITTERS: 'legacy' or 'fusion', got {emitters!r}.")
    if emitters == "legacy" and "xla_cpu_use_fusion_emitters" not in flags:
        flags = f"{flags} --xla_cpu_use_fusion_emitters=false".strip()
    if flags or "XLA_FLAGS" in _os.environ:
        _os.environ["XLA_FLAGS"] = flags

import jax

from .mixture import GaussianMixture, psd_factor
from .operators import (
    attention_gates,
    effective_sample_size,
    empirical_ess,
    finite_prompt_variance,
    linear_attention,
    linear_attention_limit,
    mixture_decomposition,
    rbf_score,
    softmax_attention,
    softmax_attention_limit,
    softmax_attention_limit_shared,
    softmax_score,
    weighted_attention,
)
from .quadrature import (
    expect_gaussian,
    expect_gaussian_projected,
    expect_mixture,
    expect_mixture_projected,
    gauss_hermite_rule,
    monte_carlo,
)

__version__ = "0.1.0"


def enable_x64() -> None:
    """Turn on float64 in JAX (theory checks need it)."""
    jax.config.update("jax_enable_x64", True)


def limit_blas_threads(n: int = 1) -> None:
    """Limit NumPy/SciPy's BLAS to ``n`` threads for the rest of the process.

    The theory code calls BLAS on small matrices between XLA programs; on a few cores the
    BLAS thread pool then competes with XLA's and slows both (``gmtheory`` and the tests
    call this; :func:`gmtheory.training.minimize_lbfgs` limits it in any case).
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=int(n), user_api="blas")


def enable_compilation_cache(path: str | None = None) -> None:
    """Persist XLA compilations across runs (``~/.cache/gmtheory/jax`` by default).

    Checks and figures compile many small programs; the cache makes a second run of
    ``gmtheory verify`` or of the tests several times faster.  Set the environment
    variable ``GMTHEORY_NO_JAX_CACHE=1`` to disable it.
    """
    import os

    if os.environ.get("GMTHEORY_NO_JAX_CACHE"):
        return
    path = path or os.path.join(os.path.expanduser("~"), ".cache", "gmtheory", "jax")
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


__all__ = [
    "GaussianMixture",
    "psd_factor",
    "attention_gates",
    "softmax_attention_limit",
    "softmax_attention_limit_shared",
    "linear_attention_limit",
    "softmax_attention",
    "linear_attention",
    "weighted_attention",
    "mixture_decomposition",
    "softmax_score",
    "rbf_score",
    "effective_sample_size",
    "empirical_ess",
    "finite_prompt_variance",
    "gauss_hermite_rule",
    "expect_gaussian",
    "expect_mixture",
    "expect_gaussian_projected",
    "expect_mixture_projected",
    "monte_carlo",
    "enable_x64",
    "enable_compilation_cache",
    "limit_blas_threads",
    "use_fast_compile_flags",
    "__version__",
]

_EXPLORE = ("explore", "load_spec", "Problem")


def __getattr__(name):
    """``gmtheory.explore``, ``gmtheory.load_spec`` and ``gmtheory.Problem``: the explore
    application (:mod:`gmtheory.regimes`), imported on first use so that ``import gmtheory``
    stays light and the library imports nothing above it."""
    if name in _EXPLORE:
        from . import regimes

        return getattr(regimes, name)
    raise AttributeError(f"module 'gmtheory' has no attribute {name!r}")
