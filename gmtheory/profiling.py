"""Where a cold run's time goes: XLA compilations counted and timed while code runs.

JAX reports every compilation through :mod:`jax.monitoring` (tracing, lowering to MLIR,
backend compilation, persistent-cache hits).  :func:`compile_stats` listens to those events
while its block runs::

    with compile_stats() as st:
        gmtheory.icl.quick_figure(10)
    print(st.programs, st.compile_seconds, st.top(3))

``gmtheory verify`` and ``gmtheory reproduce`` record these per check and per figure
(``checks.json``: ``programs``, ``compile_s``; ``reproduce-out/timings.json``), which is
how the cold-start work of docs/performance.md was found and measured.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["CompileStats", "compile_stats"]

_BACKEND = "/jax/core/compile/backend_compile_duration"
_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_HIT = "/jax/compilation_cache/cache_hits"


@dataclass
class CompileStats:
    """Compilations seen in a block: ``programs`` backend compilations (a persistent-cache
    hit is not one), their ``compile_seconds``, ``trace_seconds`` and ``lower_seconds``
    (tracing and lowering happen for cache hits too), ``cache_hits``, and per function
    name the number of backend compilations and their seconds."""

    programs: int = 0
    compile_seconds: float = 0.0
    trace_seconds: float = 0.0
    lower_seconds: float = 0.0
    cache_hits: int = 0
    by_function: Counter = field(default_factory=Counter)
    seconds_by_function: Counter = field(default_factory=Counter)

    @property
    def overhead_seconds(self) -> float:
        """Tracing + lowering + backend compilation."""
        return self.compile_seconds + self.trace_seconds + self.lower_seconds

    def top(self, n: int = 5) -> list[tuple[str, int]]:
        """The ``n`` functions compiled most often."""
        return self.by_function.most_common(n)

    def costliest(self, n: int = 5) -> list[tuple[str, float]]:
        """The ``n`` functions whose backend compilations took longest, in seconds."""
        return [(f, round(t, 3)) for f, t in self.seconds_by_function.most_common(n)]

    def as_dict(self) -> dict:
        return {"programs": self.programs, "compile_s": round(self.compile_seconds, 3),
                "trace_s": round(self.trace_seconds, 3), "lower_s": round(self.lower_seconds, 3),
                "cache_hits": self.cache_hits, "top": self.top(),
                "costliest": self.costliest()}


_active: list[CompileStats] = []
_lock = threading.Lock()
_installed = False


def _on_duration(event: str, duration: float, **kw) -> None:
    if not _active:
        return
    with _lock:
        for st in _active:
            if event == _BACKEND:
                st.programs += 1
                st.compile_seconds += duration
                name = str(kw.get("fun_name", "?"))
                st.by_function[name] += 1
                st.seconds_by_function[name] += duration
            elif event == _TRACE:
                st.trace_seconds += duration
            elif event == _LOWER:
                st.lower_seconds += duration


def _on_event(event: str, **kw) -> None:
    if event == _HIT and _active:
        with _lock:
            for st in _active:
                st.cache_hits += 1


def _install() -> None:
    global _installed
    if not _installed:
        import jax.monitoring as mon

        mon.register_event_duration_secs_listener(_on_duration)
        mon.register_event_listener(_on_event)
        _installed = True


@contextlib.contextmanager
def compile_stats():
    """Count and time the XLA compilations of the enclosed block (nestable)."""
    _install()
    st = CompileStats()
    with _lock:
        _active.append(st)
    try:
        yield st
    finally:
        with _lock:
            _active.remove(st)
