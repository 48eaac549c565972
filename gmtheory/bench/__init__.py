"""``gmtheory bench``: throughput measured against baselines in the same process.

One module per benchmark (:mod:`~gmtheory.bench.operator`, :mod:`~gmtheory.bench.gma`,
:mod:`~gmtheory.bench.gma_profile`, :mod:`~gmtheory.bench.lda`, :mod:`~gmtheory.bench.icl`,
:mod:`~gmtheory.bench.denoise`), the shared runner (:mod:`~gmtheory.bench._runner`: timing,
compiled and available memory, whole-process timing of the authors' scripts) and the
figure (:mod:`~gmtheory.bench.plot`).  Methodology: jit, one warm-up call,
``block_until_ready``, median of ``repeats``.

``BENCHES`` is declared here, one :class:`Benchmark` per name.  The package sits beside
the CLI, above the simulations (``denoise`` trains the clean-context simulation's model)
and the figures (``plot_gma`` uses their style); the library does not import it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ._runner import MEMORY_SAFETY, available_memory_bytes, stamped, time_fn
from .denoise import bench_denoise, format_denoise
from .gma import GOAL_N, SLOPE_MIN_N, bench_gma, format_gma, summarise_gma
from .gma_profile import bench_gma_profile, format_gma_profile
from .icl import bench_icl, format_icl
from .lda import bench_lda, format_lda
from .operator import bench_operator, format_operator
from .plot import plot_gma

__all__ = [
    "BENCHES", "Benchmark", "stamped", "time_fn", "available_memory_bytes", "MEMORY_SAFETY",
    "bench_operator", "format_operator", "bench_gma", "format_gma", "summarise_gma",
    "plot_gma", "GOAL_N", "SLOPE_MIN_N", "bench_gma_profile", "format_gma_profile",
    "bench_lda", "format_lda", "bench_icl", "format_icl", "bench_denoise", "format_denoise",
]


class Benchmark(NamedTuple):
    """A benchmark: ``run(quick=..., progress=..., **options) -> dict`` and
    ``format(result) -> str``.  A plain record (unpacks as ``run, format = ...``), not a
    pytree: it holds functions, never arrays."""

    run: Callable[..., dict]
    format: Callable[[dict], str]


BENCHES: dict[str, Benchmark] = {
    "operator": Benchmark(bench_operator, format_operator),
    "gma": Benchmark(bench_gma, format_gma),
    "gma-profile": Benchmark(bench_gma_profile, format_gma_profile),
    "lda": Benchmark(bench_lda, format_lda),
    "icl": Benchmark(bench_icl, format_icl),
    "denoise": Benchmark(bench_denoise, format_denoise),
}
