"""The ``gmtheory`` command: verify, figures, run, explore, reproduce, derive, bench."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import reproduce

RESULTS = "simulations/results"  # the default cache folder (beside simulations/README.md)
PROFILES = ("quick", "paper", "cpu")  # simulations._base.PROFILES (no jax import here)

EPILOG = """examples:
  gmtheory verify                      run every registered check
  gmtheory verify --only lda           the lda.* checks (a group name, else a substring)
  gmtheory figures                     all figures, quick profile, into figures/
  gmtheory figures fig1 fig4 fig5      named figures
  gmtheory figures --profile paper     paper profiles, from simulations/committed/ where kept
  gmtheory run prompt-convergence --set reps=128,Ls=100,1000,10000
  gmtheory run denoise-fig2 --config my.toml   key = value lines over simulations/NAME.toml
  gmtheory run lda-sweep --set pi_pos=0.5,0.7,0.9,separation=1,2,d=2,5
  gmtheory explore my-problem.toml --out my-problem
                                       your own mixture: Bayes vs linear vs softmax heads
  gmtheory reproduce                   all checks + all figures + a Markdown report
  gmtheory derive                      sympy derivations into derivations/ (one page each)
  gmtheory bench operator             (also: gma, gma-profile, lda, icl, denoise)
"""


def _setup():
    import gmtheory

    gmtheory.enable_x64()
    gmtheory.enable_compilation_cache()
    gmtheory.limit_blas_threads()


def cmd_verify(args) -> int:
    from .verify import format_table, run_checks, select_checks, set_results_dir, write_json

    set_results_dir(args.results)   # the checks that share a figure's run read it there
    checks = select_checks(args.only)
    order = list(range(len(checks)))
    if args.experiments_last:   # reproduce: the figures' process computes those runs first
        from .verify import EXPERIMENTS

        order.sort(key=lambda i: (checks[i].id in EXPERIMENTS, i))
    results = run_checks([checks[i] for i in order], progress=not args.no_progress)
    results = [r for _, r in sorted(zip(order, results, strict=True), key=lambda t: t[0])]
    print(format_table(results, verbose=args.verbose))
    for r in results:
        if r.error:
            print(f"\n[{r.id}] raised:\n{r.error}", file=sys.stderr)
    if args.json:
        write_json(results, args.json)
        print(f"wrote {args.json}")
    return 0 if all(r.passed for r in results) else 1


def cmd_figures(args) -> int:
    from .figures import all_figures, committed_figures, get_figure, make_figure

    names = args.names or all_figures()
    for n in names:
        get_figure(n)  # unknown names fail before any work
    if not args.names and args.profile != "quick" and not args.recompute:
        # the atlas: every figure whose run is committed for the profile, drawn without
        # computing; the others are named (a paper run takes hours, and is asked for by name)
        names, missing = committed_figures(args.profile)
        if missing:
            print(f"no committed {args.profile} run (skipped; name a figure to compute it, or "
                  f"`gmtheory run SIMULATION --profile {args.profile} --commit`): "
                  f"{', '.join(missing)}")
    for n in names:
        t0 = time.perf_counter()
        path = make_figure(n, profile=args.profile, out_dir=args.out, results_dir=args.results,
                           force=args.force, progress=not args.no_progress,
                           reuse_stale=args.reuse_stale, committed=not args.recompute,
                           on_note=lambda text: print(f"  drawn from {text}"))
        print(f"{n:<24} {path}  ({time.perf_counter() - t0:.1f} s)")
    return 0


def _distributed(args) -> bool:
    """Join a ``jax.distributed`` job if asked (flags, or JAX_COORDINATOR_ADDRESS,
    JAX_NUM_PROCESSES and JAX_PROCESS_ID); returns whether a job was joined."""
    import os

    addr = args.coordinator or os.environ.get("JAX_COORDINATOR_ADDRESS")
    nproc = args.num_processes or os.environ.get("JAX_NUM_PROCESSES")
    pid = args.process_id if args.process_id is not None else os.environ.get("JAX_PROCESS_ID")
    if addr is None and nproc is None and pid is None:
        return False
    if None in (addr, nproc, pid):
        raise ValueError("--coordinator, --num-processes, --process-id: give all three (or set "
                         "JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID).")
    try:
        nproc, pid = int(nproc), int(pid)
    except ValueError:
        raise ValueError(f"--num-processes, --process-id: expected integers, got {nproc!r} and "
                         f"{pid!r}.") from None
    if not 0 <= pid < nproc:
        raise ValueError(f"--process-id: must lie in [0, {nproc}), got {pid}.")
    import jax

    jax.distributed.initialize(coordinator_address=addr, num_processes=nproc, process_id=pid)
    return True


def cmd_run(args) -> int:
    from .simulations import (
        get_simulation,
        make_config,
        parse_overrides,
        read_config_file,
        run_simulation,
    )

    sim = get_simulation(args.simulation)
    profile, overrides = args.profile, {}
    if args.config:
        named, overrides = read_config_file(sim, args.config)
        if named and profile and named != profile:
            raise ValueError(f"--profile {profile}: {args.config} names profile {named!r}; "
                             "give one of them.")
        profile = profile or named
    profile = profile or "quick"
    overrides = {**overrides, **parse_overrides(sim.config_cls, args.set)}
    if args.commit and overrides:
        raise ValueError("--commit: a committed result stands for a profile; run it without "
                         "--config and --set.")
    cfg = make_config(sim, profile, overrides)
    joined = _distributed(args)
    try:
        # --commit keeps a finished run even if the code changed while it ran (a long run
        # outlives edits; commit_result records the commit it started from), so a cached
        # result of the same config is not recomputed here either
        arrays, meta, stem = run_simulation(args.simulation, profile, overrides,
                                            results_dir=args.results, force=args.force,
                                            progress=not args.no_progress,
                                            reuse_stale=args.commit)
    finally:
        if joined:
            import jax

            jax.distributed.shutdown()
    print(f"{sim.name}: {sim.description}")
    print(f"config: {cfg}")
    if sim.summary:
        for line in sim.summary(cfg, arrays):
            print(line)
    from .simulations import last_run_stats

    st = last_run_stats()
    where = (f"points computed here: {st['computed']}, reused: {st['reused']}" if st
             else "loaded from the cache")
    print(f"results: {stem}.npz (+ .json); {where}")
    if args.commit:
        from .simulations.committed import commit_result

        out = commit_result(args.simulation, profile, results_dir=args.results, progress=False)
        print(f"committed: {out}.npz (+ .json); `gmtheory figures --profile {profile}` "
              "draws from it")
    return 0


def cmd_explore(args) -> int:
    from .regimes import explore, load_spec
    from .regimes.report import columns, data_summary, fmt

    prob = load_spec(args.spec, data=args.data, labels=args.labels, noise=args.noise,
                     dim=args.dim)
    out = Path(args.out) if args.out else Path(f"explore-{prob.name}")
    res = explore(prob, results_dir=args.results, force=args.force,
                  progress=not args.no_progress)
    from .figures.explore import draw_regimes

    out.mkdir(parents=True, exist_ok=True)
    paths = {"figure": draw_regimes(res, out / "regimes.png"), **res.write(out)}
    axes = list(prob.vary)
    cols = columns(res)
    if prob.data:
        print(data_summary(prob))
    print(f"{prob.name}: {prob.task}, d = {prob.dim}, K = {prob.n_components}; "
          f"{len(res.points)} point(s) in {res.seconds:.1f} s")
    print("  ".join(f"{c:>12}" for c in axes + [k for k, _ in cols] + ["verdict"]))
    for p in res.points:
        cells = [fmt(p["params"][a]) for a in axes]
        cells += [fmt(p.get(k), p.get(f"{k}_se")) for k, _ in cols]
        print("  ".join(f"{c:>12}" for c in cells + [p["verdict"]]))
    n = sum(len(p["comparisons"]) for p in res.points) + len(res.sweep_comparisons)
    print(f"comparisons: {n}, verdict {res.verdict}")
    print(f"wrote {paths['json']}, {paths['report']}, {paths['figure']}")
    return 0 if res.verdict != "FAIL" else 1


def cmd_derive(args) -> int:
    from .catalog import problems
    from .derivations import derive_all, failing, format_residual, residuals, write_all

    t0 = time.perf_counter()
    res = residuals()
    for k, v in res.items():
        print(f"{k:<60} {format_residual(v)}")
    bad = failing(res)
    print(f"{len(res)} residuals, {len(res) - len(bad)} zero"
          + (f"; NOT ZERO: {', '.join(bad)}" if bad else ""))
    print(f"wrote {write_all(args.out)}")
    try:  # the four-forms table must name registered checks, simulations and figures
        from .figures import all_figures
        from .simulations import SIMULATIONS, load_all
        from .verify import all_checks

        load_all()
        issues = problems(derivations=derive_all(), checks=[c.id for c in all_checks()],
                          simulations=list(SIMULATIONS), figures=all_figures())
    except ImportError as e:
        issues = []
        print(f"four-forms table not checked against the registries: {e}")
    for msg in issues:
        print(f"four-forms table: {msg}")
    print(f"{time.perf_counter() - t0:.1f} s")
    return 0 if not bad and not issues else 1


def cmd_bench(args) -> int:
    from .bench import BENCHES

    if args.name not in BENCHES:
        raise ValueError(f"bench: unknown name {args.name!r}; choose from {sorted(BENCHES)}.")
    fn, fmt = BENCHES[args.name]
    kw = {} if args.repeats is None else {"repeats": args.repeats}
    if args.sizes is not None:
        if args.name != "gma":
            raise ValueError("--sizes: only the gma benchmark takes sequence lengths; drop it "
                             f"for {args.name!r}.")
        try:
            kw["Ns"] = [int(v) for v in args.sizes.split(",")]
        except ValueError:
            raise ValueError(f"--sizes: expected comma-separated integers such as 8192,16384, "
                             f"got {args.sizes!r}.") from None
        if min(kw["Ns"]) < 1:
            raise ValueError(f"--sizes: sequence lengths must be positive, got {args.sizes!r}.")
    if args.peer is not None:
        if args.name != "icl":
            raise ValueError(f"--peer: only the icl benchmark runs a peer; drop it for "
                             f"{args.name!r}.")
        kw["peer"] = args.peer
    if args.dims is not None:
        if args.name != "icl":
            raise ValueError(f"--dims: only the icl benchmark takes dimensions; drop it for "
                             f"{args.name!r}.")
        try:
            kw["dims"] = tuple(int(v) for v in args.dims.split(","))
        except ValueError:
            raise ValueError(f"--dims: expected comma-separated integers such as 10,32, got "
                             f"{args.dims!r}.") from None
    if args.name == "gma" and args.json:
        kw["partial"] = args.json + ".partial"  # an interrupted run resumes from here
    res = fn(quick=args.quick, progress=not args.no_progress, **kw)
    print(fmt(res))
    if args.json:
        from .bench import stamped
        from .cache import atomic_write_bytes

        atomic_write_bytes(Path(args.json), json.dumps(stamped(res, fn), indent=2).encode())
        print(f"wrote {args.json}")
    if args.figure and args.name == "gma":
        from .bench import plot_gma

        plot_gma(res, args.figure)
        print(f"wrote {args.figure}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gmtheory",
        description="Attention in the infinite-prompt limit: checks, figures, experiments.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sp):
        sp.add_argument("--no-progress", action="store_true", help="hide progress bars")

    sp = sub.add_parser("verify", help="run the registered numerical checks")
    sp.add_argument("--only", metavar="PATTERN",
                    help="comma-separated substrings or globs of check ids")
    sp.add_argument("--json", metavar="PATH", help="also write results as JSON")
    sp.add_argument("--verbose", "-v", action="store_true",
                    help="print every comparison of every check under its row")
    sp.add_argument("--results", default=RESULTS,
                    help="simulation cache folder, shared with `gmtheory figures`: a check "
                         f"that tests a figure's run reads it there (default {RESULTS}/)")
    # reproduce's checks process: the checks that read a figure's run last, so that the
    # figures' process has computed most of those runs by then (the report keeps the order)
    sp.add_argument("--experiments-last", action="store_true", help=argparse.SUPPRESS)
    common(sp)
    sp.set_defaults(func=cmd_verify)

    sp = sub.add_parser("figures", help="draw figures from cached (or fresh) simulations")
    sp.add_argument("names", nargs="*", metavar="NAME",
                    help="figure names (default: all; for --profile paper or cpu, all whose "
                         "run is committed for that profile, drawn without computing)")
    sp.add_argument("--profile", choices=PROFILES, default="quick")
    sp.add_argument("--out", default="figures", help="output folder (default figures/)")
    sp.add_argument("--results", default=RESULTS,
                    help=f"simulation cache folder (default {RESULTS}/)")
    sp.add_argument("--force", action="store_true", help="recompute cached simulations")
    sp.add_argument("--reuse-stale", action="store_true",
                    help="draw cached results even if the code that made them has changed "
                         "(prints a warning naming the changed files)")
    sp.add_argument("--recompute", action="store_true",
                    help="ignore committed results (simulations/committed/; used by default "
                         "for --profile paper where one matches the profile's config)")
    common(sp)
    sp.set_defaults(func=cmd_figures)

    sp = sub.add_parser("run", help="run one simulation (resumable, cached)")
    sp.add_argument("simulation", metavar="SIMULATION")
    sp.add_argument("--profile", choices=PROFILES, default=None,
                    help="the base profile, from simulations/SIMULATION.toml (default: the "
                         "--config file's profile, else quick)")
    sp.add_argument("--config", metavar="FILE.toml",
                    help="your own parameters: key = value lines laid over the profile, "
                         "optionally with profile = \"quick\" or \"paper\"")
    sp.add_argument("--set", action="append", metavar="KEY=VALUE",
                    help="override config fields (after --config); a=1,b=2 and tuples "
                         "Ls=10,100 allowed")
    sp.add_argument("--results", default=RESULTS,
                    help=f"simulation cache folder (default {RESULTS}/)")
    sp.add_argument("--force", action="store_true", help="ignore the cache")
    sp.add_argument("--commit", action="store_true",
                    help="also copy the result to simulations/committed/SIMULATION/PROFILE "
                         "(kept in git; `figures --profile PROFILE` draws from it); profiles "
                         "only, not with --config or --set")
    sp.add_argument("--coordinator", metavar="HOST:PORT",
                    help="join a jax.distributed job (several processes or hosts share the "
                         "sweep's points through the results folder); or JAX_COORDINATOR_ADDRESS")
    sp.add_argument("--num-processes", type=int, metavar="N",
                    help="processes in the job (or JAX_NUM_PROCESSES)")
    sp.add_argument("--process-id", type=int, metavar="I",
                    help="this process, 0..N-1 (or JAX_PROCESS_ID)")
    common(sp)
    sp.set_defaults(func=cmd_run)

    sp = sub.add_parser("explore", help="map your own Gaussian-mixture problem (TOML spec): "
                                        "Bayes, linear attention, softmax heads")
    sp.add_argument("spec", metavar="SPEC.toml", nargs="?", default=None,
                    help="the problem (docs/explore.md); optional with --data")
    sp.add_argument("--data", metavar="FILE.npy", help="your own samples (n, d), fitted by "
                    "a Gaussian mixture in <= 16 dimensions (docs/explore.md#your-own-data)")
    sp.add_argument("--labels", metavar="FILE.npy", help="one class per sample of --data")
    sp.add_argument("--noise", type=float, help="noise level xi (--data without labels)")
    sp.add_argument("--dim", type=int, help="principal components kept of --data (1..16)")
    sp.add_argument("--out", default=None,
                    help="folder for explore.json, report.md and regimes.png "
                         "(default explore-NAME)")
    sp.add_argument("--results", default=RESULTS,
                    help=f"cache folder; points resume from it (default {RESULTS}/)")
    sp.add_argument("--force", action="store_true", help="recompute cached points")
    common(sp)
    sp.set_defaults(func=cmd_explore)

    sp = sub.add_parser("reproduce", help="all checks, then all figures (quick), and a report")
    sp.add_argument("--out", default="reproduce-out", help="output folder")
    sp.add_argument("--results", default=RESULTS,
                    help=f"simulation cache folder (default {RESULTS}/)")
    sp.add_argument("--force", action="store_true", help="recompute cached simulations")
    sp.add_argument("--serial", action="store_true",
                    help="run the checks first in this process instead of in a second process "
                         "beside the figures")
    sp.add_argument("--checks", metavar="PATTERN", default=None,
                    help="only these checks (as verify --only; default: all)")
    common(sp)
    sp.set_defaults(func=reproduce.cmd_reproduce)

    sp = sub.add_parser("derive", help="run the sympy derivations and write them as LaTeX")
    sp.add_argument("--out", default="derivations",
                    help="folder for one Markdown file per derivation, an index and the "
                         "four-forms table (default derivations/); a path ending in .md "
                         "writes everything into that one file")
    sp.set_defaults(func=cmd_derive)

    sp = sub.add_parser("bench", help="throughput benchmarks against same-process baselines")
    sp.add_argument("name", metavar="NAME",
                    help="benchmark: operator, gma, gma-profile, lda, icl or denoise")
    sp.add_argument("--quick", action="store_true", help="smaller sizes")
    sp.add_argument("--repeats", type=int, default=None,
                    help="timed repeats, median reported (default: 5 for operator, 10 for gma "
                         "and gma-profile, 3 for lda, 1 for icl; denoise has none: it "
                         "reports times to targets)")
    sp.add_argument("--json", metavar="PATH",
                    help="also write results as JSON (gma: finished cases go to PATH.partial "
                         "as they finish, and an interrupted run resumes from there)")
    sp.add_argument("--figure", metavar="PATH", help="gma: also draw time/memory vs N (PNG)")
    sp.add_argument("--peer", metavar="DIR",
                    help="icl: also run the authors' quick figure from a temporary copy of "
                         "DIR (their code folder) and print the same-machine ratio")
    sp.add_argument("--dims", metavar="D,D,...",
                    help="icl: dimensions (default 10,32,64; 10,32 with --peer; 10 with "
                         "--quick)")
    sp.add_argument("--sizes", metavar="N,N,...",
                    help="gma: sequence lengths instead of 2^9..2^16 (e.g. 8192,16384)")
    common(sp)
    sp.set_defaults(func=cmd_bench)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import gmtheory

    if argv is None:   # the command itself, not a caller's process (a test, a notebook)
        reproduce.pin_processes(args)     # before JAX starts its CPU client
    gmtheory.use_fast_compile_flags()  # before the first JAX computation starts the backend
    _setup()
    if getattr(args, "no_progress", False):
        from .training import set_progress

        set_progress(False)
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"gmtheory {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
