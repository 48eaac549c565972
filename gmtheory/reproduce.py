"""``gmtheory reproduce``: every check and every figure of the quick profile, and a report.

Two processes share the work: this one draws the figures while a second runs
``gmtheory verify`` and then computes the figures' simulations from the end of the list
(:func:`checks_then_simulations`).  Each simulation point is claimed before it is
computed, so nothing is computed twice, and neither process waits for the other while it
has something else to do.  Each process is pinned to half of the cores
(:func:`pin_processes`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

__all__ = ["cmd_reproduce", "checks_then_simulations", "pin_processes", "figure_order"]


def figure_order() -> list[str]:
    """The figures' process draws the figures whose runs checks read first, the others
    (trained models beside trivial rules, with no theory value to check) last.  The checks'
    process reaches the checks that read a figure's run at its end
    (``--experiments-last``) and finds those runs computed, or shares their points; then it
    computes the figures' simulations from the end of this list, so the two processes end
    on independent runs that they share point by point, not on one check's run that the
    other process holds (a cold run's two processes ended about 20 s apart)."""
    from .figures import all_figures, get_figure

    names = all_figures()
    return sorted(names, key=lambda n: not get_figure(n).checks)   # stable: registry order


def cmd_reproduce(args) -> int:
    from .cache import atomic_write_bytes, provenance
    from .figures import all_figures, figure_summary, get_figure, make_figure
    from .profiling import compile_stats
    from .simulations import PointsHeldElsewhere, run_simulation
    from .tables import checks_report
    from .verify import (
        format_table,
        run_checks,
        select_checks,
        set_results_dir,
        summary_line,
        write_json,
    )

    set_results_dir(args.results)   # --serial: the checks read the figures' runs there
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cache_state = _xla_cache_state()
    print(f"XLA compilation cache: {cache_state}")
    if args.serial:
        print("== checks ==")
        results = run_checks(select_checks(args.checks), progress=not args.no_progress)
        print(format_table(results))
        write_json(results, out / "checks.json")
        verify_proc = None
    else:   # XLA compiles on one thread: the checks run beside the figures
        verify_proc = _start_checks(args, out)
        print(f"== checks: running in a second process (log: {out / 'verify.log'}) ==")
    try:
        print("\n== derivations ==")
        if verify_proc is not None and not args.checks:
            # a full run: the checks' process writes them before its checks, whose sympy
            # checks then reuse them (keeps ~20 s off this process)
            print(f"written by the checks' process into {out / 'derivations'}/")
        else:
            from .derivations import write_all

            print(f"wrote {write_all(out / 'derivations')}/")
        print("\n== figures (profile: quick) ==")
        figs, fig_compiles = [], {}
        t_figs = time.perf_counter()
        queue = figure_order()
        deferred = set()
        while queue:
            n = queue.pop(0)
            t1 = time.perf_counter()
            ran = False   # the simulation run here, not only loaded by make_figure
            with compile_stats() as st:
                if verify_proc is not None and queue and n not in deferred:
                    try:   # points the checks' process holds: draw another figure first
                        run_simulation(get_figure(n).simulation, "quick",
                                       results_dir=args.results, force=args.force,
                                       progress=not args.no_progress, wait=False)
                        ran = True
                    except PointsHeldElsewhere:
                        deferred.add(n)
                        queue.append(n)
                        fig_compiles[n] = _add_stats(fig_compiles.get(n), st,
                                                     time.perf_counter() - t1)
                        continue
                path = make_figure(n, profile="quick", out_dir=out / "figures",
                                   results_dir=args.results,
                                   force=args.force and not ran and n not in deferred,
                                   progress=not args.no_progress)
            secs = time.perf_counter() - t1
            fig_compiles[n] = _add_stats(fig_compiles.get(n), st, secs)
            figs.append((n, path, fig_compiles[n]["s"]))
            print(f"{n:<24} {path}  ({secs:.1f} s, {st.programs} programs compiled in "
                  f"{st.compile_seconds:.1f} s)")
        figs.sort(key=lambda f: all_figures().index(f[0]))
        t_figs = time.perf_counter() - t_figs
    except BaseException:  # an interrupted run leaves no orphan checks process
        if verify_proc is not None:
            verify_proc.terminate()
            verify_proc.wait()
            verify_proc.log.close()
        raise
    if verify_proc is not None:
        results = _finish_checks(verify_proc, out)
        if not args.checks and not (out / "derivations" / "README.md").exists():
            raise RuntimeError(f"the checks' process wrote no derivations into "
                               f"{out / 'derivations'}; its output is in {out / 'verify.log'}.")
        print("\n== checks ==")
        print(format_table(results))
    _write_timings(out / "timings.json", args.results,
                   sorted({get_figure(n).simulation for n in all_figures()}))
    total = time.perf_counter() - t0
    n_prog = (sum(r.compiles.get("programs", 0) for r in results)
              + sum(f["programs"] for f in fig_compiles.values()))
    t_comp = (sum(r.compiles.get("compile_s", 0.0) for r in results)
              + sum(f["compile_s"] for f in fig_compiles.values()))
    atomic_write_bytes(out / "profile.json", json.dumps({
        "total_s": round(total, 1), "xla_cache": cache_state, "programs": n_prog,
        "backend_compile_s": round(t_comp, 1),
        "checks": {r.id: {"s": round(r.seconds, 2), **r.compiles} for r in results},
        "figures": fig_compiles, "provenance": provenance()}, indent=1).encode())
    n_ok = sum(r.passed for r in results)
    lines = [
        "# gmtheory reproduce report", "",
        f"{summary_line(results)} ({len(results)} checks); {len(figs)} figures; "
        f"{total:.0f} s in total.",
        "", "Symbolic derivations: [derivations/README.md](derivations/README.md).",
        "", "## Checks", "",
    ]
    lines += checks_report(results)
    lines += ["", "## Figures", ""]
    for n, path, secs in figs:
        lines += [f"### {n}", "", f"![{n}]({path.relative_to(out)})", "",
                  f"*{get_figure(n).caption}* ({secs:.1f} s, "
                  f"{fig_compiles[n]['programs']} XLA programs compiled)", ""]
        summary = figure_summary(n, results_dir=args.results)
        if summary:
            lines += ["```text", *summary, "```", ""]
    lines += ["## Provenance", "", "```", json.dumps(provenance(), indent=2), "```", ""]
    atomic_write_bytes(out / "report.md", "\n".join(lines).encode())
    t_checks = sum(r.seconds for r in results)
    print(f"\n{summary_line(results)}; figures: {len(figs)}; report: {out / 'report.md'}")
    print(f"time: {total:.0f} s in total (checks {t_checks:.0f} s, figures {t_figs:.0f} s); "
          f"{n_prog} XLA programs compiled in {t_comp:.0f} s (backend only); XLA compilation "
          f"cache {cache_state}; per check and figure: {out / 'profile.json'}")
    return 0 if n_ok == len(results) else 1


def _add_stats(before: dict | None, st, secs: float) -> dict:
    """A figure's seconds and compilations, added over its tries (a figure whose points
    another process held is drawn later)."""
    now = {"s": round(secs, 2), **st.as_dict()}
    if not before:
        return now
    out = dict(now)
    for k in ("s", "programs", "compile_s", "trace_s", "lower_s", "cache_hits"):
        out[k] = round(before[k] + now[k], 3)
    return out


def checks_then_simulations(argv: list, sims: list, results: str,
                             derivations: str | None = None) -> int:
    """The second process of ``reproduce``: the sympy derivations into ``derivations`` (if
    given), ``gmtheory verify``, then, while the first process is still drawing figures,
    the figures' quick simulations from the end of the list.  Each point is claimed
    before it is computed (:func:`gmtheory.simulations.run_simulation`), so the two
    processes meet in the middle and nothing is computed twice (the figures' process
    draws another figure first where this one holds points, rather than wait); a
    simulation that fails here is left to the figure, which reports it.

    The derivations come first: the checks that read a figure's run come last in
    ``verify`` (``--experiments-last``), so work done before them is balanced against the
    figures' process, which computes the runs this process has not reached; written after
    the checks, they ran after both processes' shared work, on the critical path (about
    15 s of a cold run).  The sympy checks then reuse what they derived."""
    from .cli import main

    if derivations is not None:
        from .derivations import write_all

        try:   # a derivation that fails must not keep the checks from running
            print(f"wrote {write_all(derivations)}/", flush=True)
        except Exception as e:  # noqa: BLE001 (reported; the figures' process then raises)
            print(f"derivations: {type(e).__name__}: {e}", flush=True)
    rc = main(argv)
    from .simulations import PointsHeldElsewhere, run_simulation

    for name in sims:
        try:   # what the figures' process holds is left to it: no waiting here either
            run_simulation(name, "quick", results_dir=results, progress=False, wait=False)
        except PointsHeldElsewhere:
            continue
        except Exception as e:  # noqa: BLE001 (the figure process recomputes and raises)
            print(f"precompute {name}: {type(e).__name__}: {e}", flush=True)
    return rc


def _start_checks(args, out: Path):
    """``gmtheory verify`` on the same checks in a second process, writing
    ``out/checks.json`` and ``out/verify.log``; then that process computes the figures'
    simulations from the last figure backwards (:func:`checks_then_simulations`)."""
    import subprocess

    from .figures import get_figure

    argv = ["verify", "--no-progress", "--json", str(out / "checks.json"),
            "--results", str(args.results), "--experiments-last"]
    if args.checks:
        argv += ["--only", args.checks]
    (out / "checks.json").unlink(missing_ok=True)
    log = open(out / "verify.log", "w")  # noqa: SIM115 (closed in _finish_checks)
    sims = list(dict.fromkeys(get_figure(n).simulation for n in reversed(figure_order())))
    deriv = None if args.checks else str(out / "derivations")
    code = ("from gmtheory.reproduce import checks_then_simulations as f; "
            f"raise SystemExit(f({argv!r}, {sims!r}, {str(args.results)!r}, {deriv!r}))")
    cpus = getattr(args, "child_cpus", None)
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None   # noqa: E731
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=pin)
    proc.log = log
    return proc


def _finish_checks(proc, out: Path) -> list:
    """Wait for :func:`_start_checks` and read its results back as ``CheckResult``s."""
    from .verify import read_json

    proc.wait()
    proc.log.close()
    path = out / "checks.json"
    if not path.exists():
        raise RuntimeError(f"the checks' process exited with {proc.returncode} and wrote no "
                           f"{path}; its output is in {out / 'verify.log'}.")
    return read_json(path)


def _xla_cache_state() -> str:
    """'off', 'cold (empty)' or 'warm (N entries)' for the persistent compilation cache."""
    import jax

    path = jax.config.jax_compilation_cache_dir
    if not path:
        return "off (GMTHEORY_NO_JAX_CACHE)"
    p = Path(path)
    n = sum(1 for _ in p.iterdir()) if p.is_dir() else 0
    return f"warm ({n} entries in {path})" if n else f"cold (empty: {path})"


def _write_timings(path: Path, results_dir, names) -> None:
    """Quick-profile run time of the figures' simulations (from their cached sidecars).
    The committed times of simulations/README.md are measured separately, one process per
    simulation: ``python -m gmtheory.tables --measure``."""
    import warnings

    from .cache import StaleResultWarning, atomic_write_bytes
    from .simulations import run_simulation

    times = {}
    for name in names:  # the figures just ran them: load, never recompute (reuse_stale)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StaleResultWarning)
            stem_meta = run_simulation(name, "quick", results_dir=results_dir, progress=False,
                                       reuse_stale=True)[1]
        times[name] = round(float(stem_meta.get("seconds", float("nan"))), 1)
    atomic_write_bytes(path, json.dumps(times, indent=2).encode())


def pin_processes(args) -> None:
    """``reproduce`` runs the checks and the figures in two processes: each gets its own
    half of this process's cores (``args.child_cpus`` for the checks' process), before JAX
    sizes its thread pools.  Unpinned, each process's XLA threads spread over every core
    and spin while the other's work runs (docs/performance.md#where-a-cold-runs-time-goes).
    On one core each, splitting a program's LLVM module for parallel code generation only
    adds work, so that is switched off too.  ``GMTHEORY_REPRODUCE_PIN=0`` leaves both
    alone, and so does a call of :func:`gmtheory.cli.main` with its own ``argv`` (a test,
    a notebook: its process keeps its cores)."""
    args.child_cpus = None
    if (args.command != "reproduce" or args.serial or not hasattr(os, "sched_setaffinity")
            or os.environ.get("GMTHEORY_REPRODUCE_PIN", "1") == "0"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return
    half = len(cpus) // 2
    os.sched_setaffinity(0, cpus[:half])
    args.child_cpus = cpus[half:]
    flags = os.environ.get("XLA_FLAGS", "")
    if half == 1 and "xla_cpu_parallel_codegen_split_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_cpu_parallel_codegen_split_count=1".strip()
