"""Compile levels: most programs are short, a few run long.

A cold run compiles thousands of programs, and most of them are short: eager operations,
small jitted functions and training runs of a few dozen steps take longer to compile
than to run.  So the ``gmtheory`` command and the test suite compile at XLA's backend
optimisation level 0 (:func:`gmtheory.use_fast_compile_flags`).  The programs that run
long ask for level 1 through ``compiler_options``, which overrides the process's level for
that program alone.  Level 1 compiles them about twice as slowly and runs them up to
twice as fast.  These programs are: the training blocks of runs of at least
:data:`LONG_RUN_STEPS` steps, the ICL ridge solves by conjugate gradients and the
paired nonlinear trials, the dMMSE posteriors over task pools, the L-BFGS objectives,
the sampling and attention of prompts with at least :data:`LONG_RUN_TOKENS` tokens in
one call, and the Monte Carlo evaluations over many prompts (icl.03, denoising.32, gma.01,
icl-softmax's evaluation; docs/performance.md#where-a-cold-runs-time-goes).

The process also compiles with XLA:CPU's legacy elemental emitters rather than its MLIR
fusion emitters (:func:`gmtheory.use_fast_compile_flags`): they compile 35-48 % faster
and ran every long program measured as fast, except a softmax over many tokens, which
asks for the fusion emitters too (``jit_long(..., fused=True)``: the online softmax over
at least :data:`LONG_RUN_TOKENS` tokens and the benchmarked kernels).

The level changes no formula, only the machine code.  Two levels (or emitters) may round
a reduction in another order, so a run's numbers may differ at the level of float64
round-off from those of the same run compiled otherwise.
"""

from __future__ import annotations

import jax

__all__ = ["LONG_RUNNING", "LONG_FUSED", "LONG_RUN_STEPS", "LONG_RUN_TOKENS", "jit_long",
           "traced"]

#: ``compiler_options`` of a program that runs long enough to repay a slower compile
LONG_RUNNING = {"xla_backend_optimization_level": 1}
#: and of a long softmax over many tokens, which the process's legacy emitters run about
#: 2.5x slower than XLA:CPU's MLIR fusion emitters (docs/performance.md); the other long
#: programs measured (training blocks, ICL trials, Monte Carlo sums) ran as fast or
#: faster with the legacy emitters, which compile faster
LONG_FUSED = {**LONG_RUNNING, "xla_cpu_use_fusion_emitters": True}
#: a training run of at least this many steps compiles its blocks with LONG_RUNNING
LONG_RUN_STEPS = 100
#: sampling or attention over at least this many prompt tokens in one call does too
LONG_RUN_TOKENS = 1 << 20


def jit_long(fun, *, fused: bool = False, **jit_kwargs):
    """``jax.jit(fun, **jit_kwargs)`` compiled with :data:`LONG_RUNNING`, or with
    :data:`LONG_FUSED` if ``fused`` (a softmax over many tokens; a benchmarked kernel)."""
    return jax.jit(fun, compiler_options=LONG_FUSED if fused else LONG_RUNNING, **jit_kwargs)


def traced(*args) -> bool:
    """Whether any leaf of ``args`` is a JAX tracer: the caller is being traced (inside an
    outer ``jit``, ``vmap`` or ``grad``).  Inside an outer ``jit`` the options of a
    :func:`jit_long` cannot change its program (JAX refuses ``compiler_options`` on a
    nested ``jit``), so the callers pick their plain program there; under an eager
    ``vmap`` or ``grad`` they lose the long program's speed, not their numbers.  An outer
    ``jit`` whose arguments are all closed-over concrete arrays is not seen."""
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(args))
