"""Markdown tables generated from the registries, so that the docs cannot drift from the code.

* :func:`checks_table` — every registered check: id, claim, reference section;
* :func:`figures_index` — every registered figure: caption, the command that redraws it,
  its simulation and the checks that back its claim;
* :func:`simulations_index` — every simulation: what it runs, its quick and paper
  configurations (``simulations/NAME.toml``), its measured quick run time
  (``docs/measured/simulations.json``, :func:`measure_simulations`) and its committed result.

These belong to the application layer (like :mod:`gmtheory.cli`): they import the
registries; the library modules never import them.

Length: one module because every table shares the registries, the ``docs/measured``
records and the README/docs writers at its end; the GMA claim table lives in
:mod:`gmtheory.figures.gma_claims` and is only dispatched from here.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path

__all__ = ["checks_table", "figures_index", "simulations_index", "write_indexes", "readme_map",
           "update_readme", "measured_block", "update_blocks", "reference_links",
           "simulation_timings", "measure_simulations"]

# recorded measurements (benchmarks, cold runs, simulation times): see "measured blocks" below
MEASURED = Path("docs/measured")
SIM_TIMES = "simulations.json"  # in MEASURED: quick-profile run time of every simulation
#: in MEASURED: timing passes of the paper profiles that are not committed (issue 46)
PAPER_ESTIMATES = "paper-estimates.json"


def _cell(text) -> str:
    """One table cell: whitespace collapsed, pipes and brackets escaped (``T[mu](z)`` in a
    claim is mathematics, not a Markdown link)."""
    text = " ".join(str(text).split())
    return text.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")


CHECKS_INTRO = (
    "# Checks\n\n"
    "Every check of `gmtheory verify` (generated from the check registry by `python -m "
    "gmtheory.tables`). Each check returns comparisons of declared kinds: *agreement* (two "
    "independent computations, discrepancy ≤ tolerance), *upper_bound* / *lower_bound* (a "
    "measured quantity against a proven or stated bound) and *count* (an exact integer). "
    "The verdict is PASS when every comparison holds, FINDING when the only comparisons "
    "that fail test a claim printed in a paper that does not reproduce here (the report "
    "quotes the claim and gives the expectation and the measurement; the expected ones "
    "are pinned in `tests/expected_findings.json`), and FAIL otherwise: two of our "
    "computations disagreeing is always a FAIL. A comparison whose measured value or "
    "threshold is NaN or infinite never holds, whatever its kind; a worst case over many "
    "cases is taken with `gmtheory.comparisons.largest`/`smallest`, which keep a NaN and "
    "count the cases (`--verbose` and `checks.json` show the count), and a worst case "
    "over no case fails. A claim that a simulation equals a theory value (or the authors' "
    "numbers) is decided with power, in the equivalence form of "
    "`gmtheory.comparisons.equivalence`: the worst (|diff| + t SE) / scale must be at most "
    "a tolerance fixed from the claim, and the noise alone, t SE / scale, at most half of it, "
    "so a check too noisy to decide does not pass; an identity checked by Monte Carlo uses "
    "1 % (`IDENTITY_TOL`). Each such comparison states its **resolution**: the smallest "
    "relative error in the theory value that it is sure to detect, (tol - t SE + |diff|) x "
    "scale / |theory| at its best case; a deterministic relative agreement states tol + "
    "|diff|. The table's resolution column is the largest one a check states (from the "
    "last `gmtheory verify` run, `docs/measured/checks.json`); a dash: the check states "
    "none (bounds, counts, absolute agreements), or it still tests |diff| against t SE "
    "(icl.04 and icl.06: issue 41 item 2). Python's `max(0.0, nan)` is `0.0`, `np.nanmax` "
    "skips NaN, and "
    "XLA:CPU's `jnp.max` drops a NaN from an array of 4096 or more elements (measured with "
    "jax 0.10.2), so the check modules use none of them on measured values "
    "(`tests/test_verdicts.py` scans for them). `gmtheory verify` exits 0 on PASS and "
    "FINDING. A check whose id ends in `-paper` makes the same comparisons on the "
    "committed paper-profile result of its check's simulation (`simulations/committed/`; "
    "it is never rerun there, and without it the check is an ERROR that says how to make "
    "it). The verdicts and every comparison of a real run are in the "
    "[report](report.md), and so is the perturbation test (`pytest -m mutation`, "
    "gmtheory/verify/mutation.py): the output of each public theory function, made wrong "
    "by a factor 1 + delta, must turn a check FAIL, and so must a NaN or a sign flip in "
    "it (FAIL or ERROR), and, for the composition rules of `gmtheory.approx_compose`, a "
    "certified bound made 2 % smaller; the functions no check catches are listed there "
    "with the reason and the unit tests that verify it.\n\n")

REPORT_JSON = Path("docs/measured/checks.json")


def checks_report(results, *, links: bool = False) -> list[str]:
    """Markdown lines of the checks section of a report: every check with its verdict, all
    its comparisons (kind, expectation, measurement, whether it holds, and why the
    threshold is right), then the findings with the paper claim and reference.  ``links``
    turns ``docs/...`` references into links relative to ``docs/`` (for docs/report.md)."""
    from .verify import summary_line

    def cell(text):
        return " ".join(str(text).split()).replace("|", "\\|")

    ref = reference_links if links else cell
    lines = [f"{summary_line(results)} ({len(results)} checks).", "",
             "Verdicts: PASS (every comparison holds), FINDING (our computations agree, but a "
             "claim printed in a paper is not what was measured; the claim is quoted), FAIL "
             "(any other comparison does not hold, or the check raised). The comparison in "
             "bold is the one the verify table shows: the first failing one of a FAIL or "
             "FINDING, else the first.", "",
             "| check | claim | reference | comparisons (kind: expectation, measured; why) | "
             "verdict | s (XLA programs compiled) |", "|---|---|---|---|---|---|"]
    for r in results:
        parts = []
        for i, c in enumerate(r.comparisons):
            m = (f"{int(c['measured'])}" if c["kind"] == "count"
                 else f"{c['measured']:.3g}")
            if c.get("power") is not None:
                m += f", t SE {c['power']:.3g}"
            if c.get("resolution") is not None:
                m += f", resolution {c['resolution']:.2g}"
            head = f"{c['kind']}: {cell(c['expectation'])}, measured {m}" + (
                "" if c.get("holds") else " (**not met**)")
            if i == r.headline:
                head = f"**{head}**"
            parts.append(f"{head}; {cell(c['why'])}")
        comps = "<br>".join(parts) or cell((r.error or "").splitlines()[0] if r.error else "")
        lines.append(f"| `{r.id}` | {cell(r.claim)} | {ref(r.reference)} | {comps} | "
                     f"{r.verdict} | {r.seconds:.1f} ({r.compiles.get('programs', 0)}) |")
    finds = [r for r in results if r.verdict == "FINDING"]
    lines += ["", "### Findings", ""]
    if not finds:
        lines.append("None: no claim printed in a paper failed to reproduce in this run.")
    for r in finds:
        for f in r.findings:
            lines.append(f"* `{r.id}` ({ref(r.reference)}): the paper's claim, "
                         f"{cell(f['reason'])}; tested as {cell(f['expectation'])}, measured "
                         f"{f['measured']:.3g}.")
    return lines


def report_page(path=REPORT_JSON) -> str:
    """``docs/report.md``: :func:`checks_report` of the committed ``checks.json`` of a real
    ``gmtheory verify --json`` run, with its provenance."""
    from .verify import read_json

    path = Path(path)
    results = read_json(path)
    prov = json.loads(path.read_text()).get("provenance", {})
    return "\n".join([
        "# Report", "",
        f"Generated by `python -m gmtheory.tables` from `{path.as_posix()}`, the output of "
        f"`gmtheory verify --json {path.as_posix()}` (git {prov.get('git') or 'unknown'}, "
        f"jax {prov.get('jax')}, jaxlib {prov.get('jaxlib') or 'not recorded'}, "
        f"{prov.get('platform')}); `gmtheory reproduce` writes the same section, with the "
        "figures, to `reproduce-out/report.md`. Claims and references of every check: "
        "[the checks page](checks.md).", "",
        "## Checks", "", *checks_report(results, links=True), "",
        *mutation_report(), "",
        "## Provenance", "", "```json", json.dumps(prov, indent=2), "```", ""])


MUTATION_JSON = MEASURED / "mutation.json"


def mutation_report(path=None) -> list[str]:
    """The perturbation test's section of ``docs/report.md``, from the committed result of
    ``python -m gmtheory.verify.mutation`` (:mod:`gmtheory.verify.mutation`): for each
    public function of the theory modules, the checks that call it, the smallest relative
    error of its output that turns a check FAIL, and the unchecked functions with why."""
    from .verify.mutation import TESTED_BY, UNCHECKED

    path = Path(path or MUTATION_JSON)
    if not path.exists():
        return ["## Perturbation test", "", f"No `{path.as_posix()}` yet: run "
                "`python -m gmtheory.verify.mutation map` and `... run`.", ""]
    data = json.loads(path.read_text())
    funcs = data.get("functions", {})
    status = {}
    for q, e in funcs.items():
        status.setdefault(e.get("status", "pending"), []).append(q)
    caught = status.get("caught", [])
    by_res = {}
    for q in caught:
        by_res.setdefault(funcs[q]["resolution"], []).append(q)
    prov = data.get("provenance", {})
    lines = [
        "## Perturbation test", "",
        f"Generated from `{path.as_posix()}` (`python -m gmtheory.verify.mutation map`, then "
        f"`run`; call map at git {prov.get('git') or 'unknown'}): the output of each public "
        "function of the theory modules (" + ", ".join(f"`{m}`" for m in data.get("modules", []))
        + ") is multiplied by 1 + delta (a proven bound, `*_bound`, by 1 - delta: a larger "
        "bound is still a bound), one function at a time, in a fresh interpreter, "
        "and the checks that call it (measured by a counted run of every check) run until "
        "one FAILs. delta = 1e-3 first; when it is not caught, 2e-2, the resolution every "
        "function must have (*caught* at 2e-2 or finer); when that is not caught either, "
        "1e-1 (*coarse*: caught at 1e-1 only). A run records the checks it tried, and is "
        "redone when the call map gives the function another set. A FINDING or an "
        "ERROR does not count as caught. Then two breaks (`python -m gmtheory.verify.mutation "
        "breaks`): the output multiplied by NaN, and by -1 (and, for `approx_compose`, the "
        "certified bound of its expressions by 0.98); a break is caught when a check "
        "FAILs or raises (a check that refuses a NaN has done its job). The call map's own "
        "run, every function wrapped and its output unchanged, is the delta = 0 trial.", "",
        f"{len(funcs)} functions: {len(caught)} caught ("
        + ", ".join(f"{len(v)} at delta = {k:g}" for k, v in sorted(by_res.items()))
        + f"), {len(status.get('coarse', []))} coarse (caught at 1e-1 only), "
        f"{len(status.get('unchecked', []))} unchecked, "
        f"{len(status.get('not-called', []))} called by no check, "
        f"{len(status.get('pending', []))} not yet run.", "",
        *_breaks_summary(data), "",
        "| function | status | smallest delta caught | caught by | NaN | sign flip | "
        "checks calling it |",
        "|---|---|---|---|---|---|---|"]
    for q in sorted(funcs):
        e = funcs[q]
        res = e.get("resolution")
        by = f"`{e['caught_by']}`: {_cell(e.get('comparison', ''))}" if e.get("caught_by") else ""
        brk = [_break_cell(e.get("breaks", {}).get(k)) for k in ("nan", "flip")]
        lines.append(f"| `{q}` | {e.get('status', 'pending')} | "
                     f"{'' if res is None else f'{res:g}'} | {by} | {brk[0]} | {brk[1]} | "
                     f"{len(e.get('checks', []))} |")
    un = sorted(q for q in funcs
                if funcs[q].get("status") in ("unchecked", "coarse", "not-called"))
    if un:
        lines += ["", "### Unchecked functions", "",
                  "No check FAILs when the output of these functions is off by 2 % (a "
                  "*coarse* one is caught at 10 %, an *unchecked* one not even there). Each "
                  "reason is verified by the unit tests named beside it, which call the "
                  "function and compare it with a second computation "
                  "(`gmtheory.verify.mutation_reasons.TESTED_BY`; tests/test_mutation.py "
                  "checks that they exist and call it); *open* marks a gap that its issue "
                  "still holds:", "",
                  "| function | why | verified by |", "|---|---|---|"]
        lines += [f"| `{q}` | {_cell(UNCHECKED.get(q, 'no reason recorded'))} | "
                  f"{'<br>'.join(f'`{t}`' for t in TESTED_BY.get(q, ())) or 'open'} |"
                  for q in un]
    return lines


def _break_cell(run) -> str:
    if not run:
        return ""
    if not run.get("caught"):
        return "**not caught**" if run.get("ran") else _cell(run.get("error", "not run"))
    last = run["ran"][-1]
    return f"{last['verdict']} (`{last['check']}`)"


def _breaks_summary(data) -> list[str]:
    from .verify.mutation import FLIP_SURVIVES, NO_FLOAT

    funcs = data.get("functions", {})
    called = [q for q, e in funcs.items() if e.get("checks") and q not in NO_FLOAT]
    out = []
    for k, what in (("nan", "NaN"), ("flip", "a sign flip")):
        runs = [funcs[q].get("breaks", {}).get(k) for q in called]
        done = [r for r in runs if r]
        caught = [r for r in done if r.get("caught")]
        out.append(f"- {what}: {len(caught)} of {len(called)} called functions caught "
                   f"({sum(r['ran'][-1]['verdict'] == 'FAIL' for r in caught)} by a FAIL, "
                   f"{sum(r['ran'][-1]['verdict'] == 'ERROR' for r in caught)} by an ERROR), "
                   f"{len(done) - len(caught)} not caught"
                   + (" (each listed with its reason in `FLIP_REASONS`)" if k == "flip"
                      and all(q in FLIP_SURVIVES for q in called
                              if not (funcs[q].get("breaks", {}).get(k) or {}).get("caught"))
                      else "")
                   + f", {len(called) - len(done)} not run.")
    from .verify.mutation import BOUND, BOUND_MODULES, BOUND_REASONS

    bq = [q for q in called if q.split(".")[0] in BOUND_MODULES]
    bruns = {q: funcs[q].get("breaks", {}).get(BOUND) for q in bq}
    bcaught = [q for q, r in bruns.items() if r and r.get("caught")]
    if bq:
        out.append(f"- a 2 % smaller certified bound ({', '.join(f'`{m}`' for m in BOUND_MODULES)}"
                   f": the expressions each function returns, carried into those composed on "
                   f"them): {len(bcaught)} of {len(bq)} caught"
                   + "".join(f"; `{q}` not caught: {BOUND_REASONS.get(q, 'no reason recorded')}"
                             for q, r in bruns.items()
                             if r and r.get("ran") and not r.get("caught"))
                   + f"; {sum(not (r and r.get('ran')) for r in bruns.values())} not run.")
    out.append("- Not broken (no floating-point output): "
               + ", ".join(f"`{q}`" for q in sorted(NO_FLOAT)) + ".")
    fp = (data.get("map") or {}).get("fingerprint")
    out.append(f"- Call map fingerprint: `{fp['digest']}`." if fp else
               "- The call map has no fingerprint (measured before issue 41).")
    return out


def reference_links(text) -> str:
    """A check's reference as a Markdown table cell for a page in ``docs/``: each
    ``docs/<page>.md#<anchor>`` pointer becomes a link relative to ``docs/`` (e.g.
    ``[thm-35-local-convergence](topics/lda.md#thm-35-local-convergence)``); other text
    is escaped as in a claim cell."""
    parts = re.split(r"(docs/[\w./-]+?\.md(?:#[\w-]+)?)", " ".join(str(text).split()))
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            target = part.removeprefix("docs/")
            out.append(f"[{target.partition('#')[2] or target}]({target})")
        elif part:
            out.append(part.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]"))
    return "".join(out)


def checks_page() -> str:
    """``docs/checks.md``: the introduction and :func:`checks_table`."""
    return CHECKS_INTRO + checks_table()


def checks_table(path=REPORT_JSON) -> str:
    """Markdown table of every registered check, with the resolution that the last
    recorded run (``path``) measured for it."""
    from .verify import all_checks, read_json

    res = {}
    if Path(path).exists():
        res = {r.id: r.resolution for r in read_json(path)}
    rows = ["| check | claim | reference | resolution |", "|---|---|---|---|"]
    for c in all_checks():
        r = res.get(c.id)
        cell = "—" if r is None else f"{r:.2g}"
        rows.append(f"| `{c.id}` | {_cell(c.claim)} | {reference_links(c.reference)} | "
                    f"{cell} |")
    return "\n".join(rows) + "\n"


def figures_index(png_prefix: str = "", report_link: str = "../docs/report.md") -> str:
    """Every registered figure with its caption, command, simulation and backing checks
    (with their verdicts in the committed ``checks.json``, linked to ``report_link``), then
    the figures of committed cpu and paper runs (:func:`committed_figures_index`), then
    the benchmark figures (:func:`gmtheory.bench.plot.bench_figures_index`)."""
    from .bench.plot import bench_figures_index
    from .figures import all_figures, get_figure
    from .verify import all_checks

    all_checks()
    verdicts = ({r["id"]: r["verdict"] for r in json.loads(REPORT_JSON.read_text())["checks"]}
                if REPORT_JSON.exists() else {})

    def check(c):
        v = verdicts.get(c)
        return f"`{c}`" + (f" ({v} in the [report]({report_link}))" if v else "")

    out = ["# Figures", "",
           "Every figure of `gmtheory figures` (generated from the figure registry), then the "
           "benchmark figures. Redraw one with the command shown; `gmtheory figures --out "
           "figures` redraws all of the former (quick profile).", ""]
    for name in all_figures():
        f = get_figure(name)
        run = (", ".join(check(c) for c in f.checks) if f.checks
               else f"none: {_cell(f.run_unchecked)}")
        theory = ", ".join(check(c) for c in f.theory_checks)
        out += [f"## {name}", "", f"![{name}]({png_prefix}{name}.png)", "",
                f"*{_cell(f.caption)}*", "",
                f"* command: `gmtheory figures {name}` (paper profile: "
                f"`gmtheory figures {name} --profile paper`)",
                f"* simulation: `{f.simulation}` (`gmtheory run {f.simulation}`)",
                f"* checks that read this run: {run}",
                *([f"* checks of the theory it draws (on their own points): {theory}"]
                  if theory else []), ""]
    return "\n".join(out + committed_figures_index(png_prefix) +
                     bench_figures_index(png_prefix, report_link))


COMMITTED_PROFILES = ("cpu", "paper")


def committed_figures_index(png_prefix: str = "", figures_dir=Path("figures")) -> list[str]:
    """The Markdown lines of the figures drawn from committed runs (``--profile cpu`` and
    ``--profile paper``: :mod:`gmtheory.simulations.committed`), each where its PNG is
    committed under ``figures/PROFILE/``."""
    from .figures import all_figures, get_figure
    from .simulations.committed import committed_stem

    out = []
    for prof in COMMITTED_PROFILES:
        for name in all_figures():
            f = get_figure(name)
            stem = committed_stem(f.simulation, prof)
            if not (stem.with_suffix(".json").exists()
                    and (Path(figures_dir) / prof / f"{name}.png").exists()):
                continue
            out += [f"## {name} ({prof} profile)", "",
                    f"![{name}, {prof} profile]({png_prefix}{prof}/{name}.png)", "",
                    f"*{_cell(f.caption_for(prof))}*", "",
                    f"* command: `gmtheory figures {name} --profile {prof} --out "
                    f"figures/{prof}`",
                    f"* drawn from the committed run `simulations/committed/{f.simulation}/"
                    f"{prof}.npz` (`gmtheory run {f.simulation} --profile {prof} --commit`)",
                    ""]
    if out:
        out = ["Figures drawn from committed runs of larger profiles (opt-in; each run's "
               "time and machine are in its `.json`).", ""] + out
    return out


def _config_text(values: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items())


def _changed(quick: dict, paper: dict) -> str:
    diff = [f"{k}={v!r}" for k, v in paper.items() if v != quick[k]]
    return ", ".join(diff) or "same as quick"


def simulation_timings(measured_dir=MEASURED) -> dict:
    """The recorded quick-profile run times: ``{"how": ..., "seconds": {name: s}}`` from
    ``docs/measured/simulations.json`` (``{}`` when it is missing)."""
    path = Path(measured_dir) / SIM_TIMES
    return json.loads(path.read_text()) if path.exists() else {}


def paper_estimates(measured_dir=MEASURED) -> dict:
    """The estimated run times of the paper profiles that are not committed: ``{"how": ...,
    "estimates": {name: {"pass", "pass_s", "scale", "estimate_h", "bound", "sized_for",
    "note"}}}`` from ``docs/measured/paper-estimates.json`` (``{}`` when it is missing).
    ``bound``: "at most" (a finished pass, its compilation counted ``scale`` times) or
    "stopped" (a pass stopped unfinished: ``scale`` times its time where the training steps
    dominate the run, not a bound)."""
    path = Path(measured_dir) / PAPER_ESTIMATES
    return json.loads(path.read_text()) if path.exists() else {}


def _estimate_text(e: dict) -> str:
    """One estimate of :func:`paper_estimates`, as the simulation index prints it."""
    if e["bound"] == "stopped":
        text = (f"a timing pass `--set {e['pass']}` (1/{e['scale']:g} of the steps) was "
                f"stopped unfinished after {e['pass_s']:.0f} s: about "
                f"{math.floor(10 * e['estimate_h']) / 10:.1f} h or more on 2 cores where the "
                "training steps dominate the run (not a bound)")
    else:
        text = (f"estimated at most {e['estimate_h']:.1f} h on 2 cores ({e['scale']:g} x a "
                f"timing pass `--set {e['pass']}`, which took {e['pass_s']:.0f} s, every "
                "compilation included)")
    if e.get("sized_for") == "gpu":
        text += "; sized for one GPU"
    return text + (f": {e['note']}" if e.get("note") else "")


def simulations_index(timings: dict | None = None) -> str:
    """Every simulation: description, profile file, quick config, paper changes and quick
    run time (``timings`` as :func:`simulation_timings` returns it, read when ``None``)."""
    from .simulations import SIMULATIONS, load_all
    from .simulations._base import load_profile, profiles_dir

    load_all()
    timings = simulation_timings() if timings is None else timings
    secs = timings.get("seconds", {})
    how = timings.get("how", "not measured yet")
    estimates = paper_estimates().get("estimates", {})
    out = ["# Simulations", "",
           "One entry per simulation of `gmtheory run NAME [--profile quick|paper] [--config "
           "my.toml] [--set key=value ...]` (generated from the simulation registry by `python "
           "-m gmtheory.tables`). Each simulation's parameters are in `simulations/NAME.toml`: "
           "the `[quick]` table lists every field, the `[paper]` table only the fields whose "
           "value differs from quick (the paper profile is quick with those replaced); the "
           "fields' types are those of the simulation's config dataclass, named in the file's "
           "header, which declares fields and types but holds no values: the file is their "
           "only source. `--config my.toml` lays a file of your own over a profile: the same "
           "`key = value` lines at the top level, and optionally `profile = \"paper\"` as "
           "the base (default quick); `--set` applies on top of both. Results are cached in "
           "`simulations/results/<name>/` (the default `--results` folder) as `.npz` + JSON "
           "sidecar, keyed by the config and by a fingerprint of the source code that "
           "produced them. Runs too long for the tests (paper profiles) are kept in git: "
           "`gmtheory run NAME --profile paper --commit` copies the result to "
           "`simulations/committed/NAME/paper.npz` (+ `.json`, with the commit, the run's "
           "wall time and the machine), and `gmtheory figures --profile paper` draws from it "
           "while its config is the profile's (`--recompute` ignores it). Quick run times: "
           f"{how}", ""]
    for name in sorted(SIMULATIONS):
        sim = SIMULATIONS[name]
        order = [f.name for f in dataclasses.fields(sim.config_cls)]
        quick, paper = load_profile(sim, "quick"), load_profile(sim, "paper")
        quick = {k: quick[k] for k in order if k in quick}
        t = secs.get(name)
        try:
            cpu = [f"* cpu (opt-in, 2 cores): `{_changed(quick, load_profile(sim, 'cpu'))}`",
                   f"* cpu result: {_committed_text(name, 'cpu')}"]
        except ValueError:                       # no [cpu] table
            cpu = []
            old = profiles_dir() / "committed" / name / "retired" / "cpu.json"
            if old.exists():                     # a dropped cpu profile's record
                c = json.loads(old.read_text()).get("committed", {})
                cpu = [f"* cpu: dropped; its record is `simulations/committed/{name}/retired/"
                       f"cpu.npz` (commit {str(c.get('git'))[:10]}), reasons in "
                       f"`simulations/{name}.toml`"]
        out += [f"## {name}", "", _cell(sim.description), "",
                f"* profiles: `simulations/{name}.toml`",
                f"* quick: `{_config_text(quick)}`",
                f"* paper: `{_changed(quick, paper)}`", *cpu,
                f"* quick run time: {f'{t:.0f} s' if t is not None else 'not measured'}",
                f"* paper result: {_committed_text(name, estimate=estimates.get(name))}", ""]
    return "\n".join(out)


def _committed_text(name: str, profile: str = "paper", estimate: dict | None = None) -> str:
    """The committed ``profile`` result of ``name``: its commit, run time and machine; where
    none is committed, the measured ``estimate`` of its run time if there is one."""
    from .simulations.committed import committed_stem, load_committed

    js = committed_stem(name, profile).with_suffix(".json")
    if not js.exists():
        return (f"not committed (`gmtheory run NAME --profile {profile} --commit`)"
                + (f"; {_estimate_text(estimate)}" if estimate else ""))
    c = json.loads(js.read_text()).get("committed", {})
    stale = "" if load_committed(name, profile) else "; **stale: the profile changed, rerun**"
    return (f"`simulations/committed/{name}/{profile}.npz`, commit {str(c.get('git'))[:10]}, "
            f"{(c.get('run_seconds') or 0) / 60:.1f} min on {c.get('cpu_count')} "
            f"{'core' if c.get('cpu_count') == 1 else 'cores'} "
            f"({c.get('machine')}){stale}")


def measure_simulations(names=None, measured_dir=MEASURED, results_dir=None) -> dict:
    """Time ``gmtheory run NAME --force --no-progress`` (quick profile) for every simulation
    (or ``names``), one fresh process each, one after the other, into an empty results
    folder with the persistent XLA cache off (``GMTHEORY_NO_JAX_CACHE=1``), so each time
    includes the interpreter's start, the imports and every compilation; writes
    ``docs/measured/simulations.json`` after each run (an interrupted measurement keeps
    what it has), with the 1-minute load average at the start and now, and returns its
    content."""
    import os
    import platform
    import subprocess
    import sys
    import tempfile
    import time

    from .simulations import SIMULATIONS, load_all

    load_all()
    names = sorted(SIMULATIONS) if names is None else list(names)
    path = Path(measured_dir) / SIM_TIMES
    old = simulation_timings(measured_dir).get("seconds", {})
    env = {**os.environ, "GMTHEORY_NO_JAX_CACHE": "1"}
    res = {"how": (f"wall-clock time of `gmtheory run NAME --force --no-progress`, one fresh "
                   f"process per simulation run one after the other, persistent XLA cache "
                   f"off (every compilation included), {os.cpu_count()}-core CPU "
                   f"({platform.machine()}, no accelerator), {time.strftime('%Y-%m-%d')}; "
                   "measured by `python -m gmtheory.tables --measure` (load_average: the "
                   "machine's 1-minute load at its start and end; above the core count, "
                   "other processes shared the CPU and the times are upper bounds)."),
           "seconds": dict(old)}
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "gmtheory.cli", "run", name, "--force",
                            "--no-progress", "--results", results_dir or tmp], env=env,
                           check=True, stdout=subprocess.DEVNULL)
            res["seconds"][name] = round(time.perf_counter() - t0, 1)
            res["load_average"] = [round(load0, 1), round(os.getloadavg()[0], 1)]
            print(f"{name:<24} {res['seconds'][name]:8.1f} s", flush=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    return res


def write_indexes(figures_dir="figures", simulations_dir="simulations",
                  docs_dir="docs") -> list[Path]:
    """Write ``figures/README.md``, ``simulations/README.md`` and ``docs/checks.md`` (the
    committed indexes)."""
    figures_dir, simulations_dir = Path(figures_dir), Path(simulations_dir)
    out = []
    for path, text in ((figures_dir / "README.md", figures_index()),
                       (simulations_dir / "README.md", simulations_index()),
                       (Path(docs_dir) / "checks.md", checks_page())):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        out.append(path)
    return out


TOPICS = (  # (title, catalog reference prefix, modules, check groups, docs page)
    ("The operator on Gaussian mixtures", ("SGM docs/topics/operator.md",), "`gmtheory` "
     "(operators, quadrature)", ("operator",), "docs/topics/operator.md"),
    ("Attention-based LDA", ("SGM docs/topics/lda.md",), "`gmtheory.lda`", ("lda",),
     "docs/topics/lda.md"),
    ("Denoising", ("SGM docs/topics/denoising.md",), "`gmtheory.denoising`", ("denoising",),
     "docs/topics/denoising.md"),
    ("Linear-attention ICL, Hermite equivalence", ("ICL",), "`gmtheory.icl`, "
     "`gmtheory.hermite`", ("icl", "hermite"), "docs/topics/icl.md"),
    ("ReLU → softmax constructions", ("R2S",), "`gmtheory.approx`", ("approx",),
     "docs/topics/approx.md"),
    ("Gaussian Mixture Attention", ("GMA",), "`gmtheory.gma`", ("gma",), "docs/topics/gma.md"),
)


def readme_map() -> str:
    """The README's map: for each topic, the paper results, the module, the checks, the
    figures and the simulations (from :mod:`gmtheory.catalog` and the check registry)."""
    from .catalog import RESULTS
    from .verify import all_checks

    ids = [c.id for c in all_checks()]
    rows = ["| topic | paper results | code | checks | figures | simulations |",
            "|---|---|---|---|---|---|"]
    for title, prefixes, code, groups, page in TOPICS:
        res = [r for r in RESULTS if r.reference.startswith(prefixes)]
        labels = "; ".join(dict.fromkeys(r.label for r in res)) or "the layer (tests, bench)"
        n = sum(i.split(".")[0] in groups for i in ids)
        figs = sorted({f for r in res for f in r.figures})
        sims = sorted({s for r in res for s in r.trained.names})
        only = ",".join(groups)
        rows.append(f"| [{title}]({page}) | {labels} | {code} | `verify --only {only}`: {n} "
                    f"| {', '.join(figs) or '—'} | {', '.join(sims) or '—'} |")
    return "\n".join(rows) + "\n"


MAP_START, MAP_END = "<!-- map: generated by `python -m gmtheory.tables` -->", "<!-- map end -->"


def update_readme(path="README.md") -> bool:
    """Rewrite the README's map block from the code; returns whether it changed."""
    path = Path(path)
    text = path.read_text()
    head, rest = text.split(MAP_START, 1)
    _, tail = rest.split(MAP_END, 1)
    new = head + MAP_START + "\n" + readme_map() + MAP_END + tail
    path.write_text(new)
    return new != text


# ------------------------------------------------------------------ measured blocks
# Blocks of Markdown between ``<!-- measured: NAME -->`` and ``<!-- measured end -->`` are
# rendered from recorded measurements in ``docs/measured/`` (a benchmark's ``--json``
# output, or the log of a cold ``make reproduce``) by the code that printed them, so that
# the README and docs/performance.md show real output and cannot drift from it.

BLOCK_START, BLOCK_END = "<!-- measured: ", "<!-- measured end -->"


def _bench_formatters() -> dict:
    from .bench import BENCHES

    return {k: b.format for k, b in BENCHES.items()}


def _reproduce_excerpt(log: str, rows: int = 2, checks=None) -> str:
    """A cold ``make reproduce`` log trimmed for the README: the cache state, the table's
    header and first rows, its FAIL and FINDING rows, the summary, the first figures and
    the totals.  With ``checks`` (results of a later ``gmtheory verify --json`` run, e.g.
    docs/measured/checks.json) the checks table and the verdict counts come from them,
    printed by today's :func:`gmtheory.verify.format_table`, and a line says so."""
    if checks is not None:
        from .verify import format_table, summary_line

        table = format_table(checks).splitlines()
        table = [t for t in table if t and not t.startswith(("findings", "  "))
                 and " passed, " not in t]
        src = ["(checks table and verdicts: docs/measured/checks.json, a `gmtheory verify "
               "--json` run of this code; figures and times: the cold reproduce log)"]
        new, skipping = [], False
        for ln in log.splitlines():
            if ln.startswith("check "):
                new += src + table + [""]
                skipping = True
                continue
            if skipping and (not ln.strip() or ln.startswith(("findings", "  "))
                             or " PASS " in ln or " FINDING " in ln or " FAIL" in ln
                             or " ERROR " in ln):
                continue
            skipping = False
            if " passed, " in ln and "failed" in ln and not ln.startswith(" "):
                ln = summary_line(checks) + (ln[ln.index(";"):] if ";" in ln else "")
            new.append(ln)
        log = "\n".join(new)
    lines = [ln.rstrip() for ln in log.splitlines()]
    out, i = [], 0
    while i < len(lines):
        ln = lines[i]
        if ln.startswith(("XLA compilation cache", "== ", "(checks table")) \
                and "derivations" not in ln:
            out.append(ln)
        elif ln.startswith("check "):
            out.append(ln)
            body = []
            i += 1
            while i < len(lines) and lines[i] and not lines[i].startswith("findings"):
                body.append(lines[i])
                i += 1
            shown = body[:rows] + [b for b in body[rows:] if " FINDING " in b or " FAIL" in b]
            out += shown + (["..."] if len(shown) < len(body) else [])
            continue
        elif ln.startswith("findings"):   # the FINDING rows above name them
            while i + 1 < len(lines) and lines[i + 1].startswith("  "):
                i += 1
        elif " passed, " in ln and "failed" in ln and not ln.startswith(" "):
            if "figures:" in ln or not any(" passed, " in o for o in out):
                out = [o for o in out if " passed, " not in o] + [ln]
        elif ln.startswith("time: "):
            out.append(ln)
        i += 1
    figs = [ln for ln in lines if ln.endswith(")") and "/figures/" in ln]
    if figs:
        at = next(k for k, ln in enumerate(out) if ln.startswith("== figures"))
        out[at + 1:at + 1] = figs[:rows] + (["..."] if len(figs) > rows else [])
    return "\n".join(out)


def measured_block(name: str, measured_dir=MEASURED) -> str:
    """The Markdown of block ``name``: ``bench-X`` renders ``bench-X.json`` with benchmark
    X's own formatter; ``reproduce`` trims ``reproduce-cold.log``; ``two-commands`` renders
    ``two-commands.json`` (times of ``make reproduce`` and ``make test``, cold and warm)."""
    d = Path(measured_dir)
    if name.startswith("bench-"):
        res = json.loads((d / f"{name}.json").read_text())
        return "```text\n" + _bench_formatters()[name[6:]](res) + "\n```\n"
    if name == "reproduce":
        checks = None
        if (d / "checks.json").exists():
            from .verify import read_json

            checks = read_json(d / "checks.json")
        log = (d / "reproduce-cold.log").read_text()
        return "```text\n" + _reproduce_excerpt(log, checks=checks) + "\n```\n"
    if name == "two-commands":
        t = json.loads((d / "two-commands.json").read_text())
        rows = ["| command | cold (no XLA cache) | warm | limit |", "|---|---|---|---|"]
        def mins(v):
            return "not measured" if v is None else f"{v / 60:.1f} min"

        for cmd, r in t["commands"].items():
            rows.append(f"| `{cmd}` | {mins(r.get('cold_s'))} | {mins(r.get('warm_s'))} "
                        f"| {r['limit_min']} min |")
        return "\n".join(rows) + f"\n\n{t['how']}\n"
    if name == "profile":
        return _profile_table(json.loads((d / "reproduce-profile.json").read_text()))
    if name == "gma-bench":                          # docs/bench-gma.json
        from .bench.gma import markdown_gma

        return markdown_gma(json.loads((d.parent / "bench-gma.json").read_text()))
    if name in ("gma-claims", "gma-cpu-runs"):    # from simulations/committed/*/cpu.*
        from .figures import gma_claims as G
        if name == "gma-claims":
            return G.claims_table(bench=str(d.parent / "bench-gma.json"))
        return G.runs_table()
    raise ValueError(f"name: unknown measured block {name!r}; use bench-NAME, reproduce, "
                     "profile or two-commands.")


def _profile_table(prof: dict, rows: int = 12) -> str:
    """The slowest checks and figures of a cold ``make reproduce`` with the XLA programs each
    compiled (``reproduce-out/profile.json``)."""
    items = [("check", k, v) for k, v in prof["checks"].items()]
    items += [("figure", k, v) for k, v in prof["figures"].items()]
    items.sort(key=lambda t: -t[2]["s"])
    n_c = sum(v["programs"] for _, _, v in items)
    out = [f"XLA cache {prof['xla_cache']}: {prof['total_s'] / 60:.1f} min in total (checks and "
           "figures run in two processes, so their times overlap), "
           f"{prof['programs']} XLA programs compiled, {prof['backend_compile_s']:.0f} s of "
           f"backend compilation (tracing and lowering not included). The {rows} slowest "
           "steps:", "",
           "| step | s | programs | backend compile s | most compiled | costliest to compile |",
           "|---|---|---|---|---|---|"]
    for kind, k, v in items[:rows]:
        top = ", ".join(f"`{f}` x{c}" for f, c in v["top"][:2])
        cost = ", ".join(f"`{f}` {t:.1f} s" for f, t in v.get("costliest", [])[:2])
        out.append(f"| {kind} `{k}` | {v['s']:.1f} | {v['programs']} | {v['compile_s']:.1f} "
                   f"| {top} | {cost or 'not recorded'} |")
    rest = items[rows:]
    out.append(f"| {len(rest)} others | {sum(v['s'] for *_, v in rest):.1f} | "
               f"{sum(v['programs'] for *_, v in rest)} | "
               f"{sum(v['compile_s'] for *_, v in rest):.1f} | | |")
    assert n_c == prof["programs"]
    return "\n".join(out) + "\n"


def update_blocks(path, measured_dir=MEASURED) -> bool:
    """Re-render every measured block of the Markdown file ``path``; returns whether it
    changed.  A block whose measurement file is missing is left as it is."""
    path = Path(path)
    text = path.read_text()
    parts, rest = [], text
    while BLOCK_START in rest:
        head, tail = rest.split(BLOCK_START, 1)
        name, tail = tail.split(" -->", 1)
        _, tail = tail.split(BLOCK_END, 1)
        try:
            body = measured_block(name.strip(), measured_dir)
        except FileNotFoundError:
            body = rest[len(head) + len(BLOCK_START) + len(name) + 4:].split(BLOCK_END, 1)[0]
            body = body.lstrip("\n")
        parts += [head, f"{BLOCK_START}{name} -->\n{body}{BLOCK_END}"]
        rest = tail
    new = "".join(parts) + rest
    path.write_text(new)
    return new != text


if __name__ == "__main__":  # python -m gmtheory.tables: regenerate the committed indexes
    import sys

    import gmtheory

    gmtheory.enable_x64()
    if sys.argv[1:2] == ["--measure"]:  # [NAME ...]: time the quick simulations first
        measure_simulations(sys.argv[2:] or None)
    update_readme()
    for p in write_indexes():
        print(f"wrote {p}")
    if REPORT_JSON.exists():
        Path("docs/report.md").write_text(report_page())
        print(f"wrote docs/report.md from {REPORT_JSON}")
    print("updated README.md map")
    for p in ("README.md", "docs/performance.md", "docs/topics/gma.md"):
        if Path(p).exists() and update_blocks(p):
            print(f"updated measured blocks in {p}")
