import os

# Compile for speed in the test processes (the xdist workers, and the subprocesses they
# start, inherit this): XLA:CPU's legacy elemental emitters instead of its MLIR fusion
# emitters, as the gmtheory command now does too (gmtheory.use_fast_compile_flags; a long
# softmax asks for the fusion emitters itself, gmtheory._xla.LONG_FUSED).  Most of the
# suite's time is compilation; with them, programs compiled 35-48 % faster and the cold
# suite took 248-323 s instead of 361 s, every check still passing
# (docs/performance.md#where-a-cold-runs-time-goes, "The test suite").  And each program's
# LLVM module in one piece: a worker has one core (below), so splitting it for parallel
# code generation only adds work (three compile-bound checks on one core: 24.7-26.3 CPU-s
# against 26.7-30.0).  GMTHEORY_TEST_XLA=default leaves both to the library (and
# GMTHEORY_XLA_EMITTERS=fusion runs the fusion emitters everywhere).
_TEST_FLAGS = {"xla_cpu_use_fusion_emitters": "false", "xla_cpu_parallel_codegen_split_count": "1"}
if os.environ.get("GMTHEORY_TEST_XLA") != "default":
    for _flag, _value in _TEST_FLAGS.items():
        _flags = os.environ.get("XLA_FLAGS", "")
        if _flag not in _flags:
            os.environ["XLA_FLAGS"] = f"{_flags} --{_flag}={_value}".strip()

# One core per xdist worker (round robin), set before JAX starts its CPU client, which sizes
# its thread pool by this affinity.  Unpinned, every worker's XLA threads spread over all
# cores and spin while waiting on each other's work; pinned, four workers on two cores
# took 390 s cold and 771 CPU-s, against 408 s and 805 CPU-s unpinned
# (docs/performance.md, "The test suite").  The subprocesses a test starts inherit it.
# GMTHEORY_TEST_PIN=0 leaves the affinity alone.
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if (_worker.startswith("gw") and hasattr(os, "sched_setaffinity")
        and os.environ.get("GMTHEORY_TEST_PIN", "1") != "0"):
    _cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {_cpus[int(_worker[2:]) % len(_cpus)]})

import jax  # noqa: E402
import pytest  # noqa: E402

import gmtheory  # noqa: E402

gmtheory.use_fast_compile_flags()  # as the gmtheory command does (import changes nothing)
jax.config.update("jax_enable_x64", True)
gmtheory.enable_compilation_cache()
gmtheory.limit_blas_threads()


@pytest.fixture(scope="session")
def shared_results(tmp_path_factory):
    """One simulation results folder per xdist worker, shared by every test module: a test
    that needs an experiment's quick run reads the run that the checks reading the same
    experiment compute (tests/test_checks.py puts each such check in the xdist group named
    after its experiment; a test that joins that group computes nothing twice)."""
    return tmp_path_factory.mktemp("shared-results")


@pytest.fixture
def key():
    return jax.random.key(1234)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup`` on pytest >= 9.2: pytest-xdist (3.8) tags a grouped test by
    assigning ``item._nodeid``, which pytest 9.2 no longer reads (``nodeid`` comes from
    ``item._id``), so ``xdist_group`` was silently ignored.  Tag it the way xdist means to:
    ``<nodeid>@<group>``, which its loadgroup scheduler sends to a single worker."""
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:      # older pytest: xdist's own tagging works
        return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                        for m in item.iter_markers("xdist_group")})
        if names and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")
