"""Quick profiles are tested; paper profiles are opt-in (-m slow)."""

import re

import numpy as np
import pytest

from gmtheory.simulations import get_simulation, make_config, run_simulation
from gmtheory.stats import fit_loglog


def _check_prompt_convergence(a):
    for name in ("mse_soft", "mse_lin"):
        slope = fit_loglog(a["Ls"], np.sqrt(a[name].mean(1)))[0]
        assert -0.6 <= slope <= -0.4, (name, slope)
    # measured L*MSE increases with u^T Gamma u (the ESS law)
    assert np.all(np.diff(a["lmse"]) > 0)


# the run checks operator.05b and operator.06 read: in their xdist group, computed once
@pytest.mark.xdist_group("prompt-convergence")
def test_prompt_convergence_quick(shared_results):
    a, meta, _ = run_simulation("prompt-convergence", "quick", results_dir=shared_results,
                                progress=False)
    _check_prompt_convergence(a)
    cfg = make_config(get_simulation("prompt-convergence"), "quick")
    assert meta["config"]["reps"] == cfg.reps and meta["seed"] == cfg.seed


@pytest.mark.slow
@pytest.mark.parametrize("name", ["prompt-convergence", "gated-experts"])
def test_paper_profiles(tmp_path, name):
    a, _, _ = run_simulation(name, "paper", results_dir=tmp_path, progress=False)
    if name == "prompt-convergence":
        _check_prompt_convergence(a)
    else:
        np.testing.assert_allclose(a["gates"].sum(-1), 1.0, atol=1e-12)


# ----------------------------------------------------------------- the TOML profiles
# Cheap: they read files and build configs, no simulation runs.

def _registry():
    from gmtheory.simulations import SIMULATIONS, load_all

    load_all()
    return SIMULATIONS


def _exact_type(value, typ):
    import typing

    if typing.get_origin(typ) is tuple:
        inner = typing.get_args(typ)[0]
        return type(value) is tuple and all(type(v) is inner for v in value)
    return type(value) is typ


@pytest.mark.parametrize("name", sorted(_registry()))
def test_profile_file_is_the_typed_schema(name):
    """simulations/NAME.toml has [quick] with every field and [paper] with only the fields
    that differ; both load into the config dataclass with the fields' exact types."""
    import dataclasses
    import typing

    from gmtheory.simulations import load_profile, profile_path
    from gmtheory.simulations._base import tomllib  # tomli before Python 3.11

    sim = _registry()[name]
    path = profile_path(name)
    assert path.parent.name == "simulations" and path.exists(), path
    doc = tomllib.loads(path.read_text())
    assert {"quick", "paper"} <= set(doc) <= {"quick", "paper", "cpu"}, \
        f"{path}: tables {sorted(doc)}"
    fields = [f.name for f in dataclasses.fields(sim.config_cls)]
    assert sorted(doc["quick"]) == sorted(fields), f"{path}: [quick] must list every field"
    hints = typing.get_type_hints(sim.config_cls)
    quick = load_profile(sim, "quick")
    layers = {p: load_profile(sim, p) for p in ("paper", "cpu") if p in doc}
    for p, values in layers.items():
        for k in doc[p]:
            assert values[k] != quick[k], f"{path}: [{p}] repeats quick's {k} = {quick[k]!r}"
    for prof, values in (("quick", quick), *layers.items()):
        cfg = make_config(sim, prof)
        assert dataclasses.asdict(cfg) == values
        for k, v in values.items():
            assert _exact_type(v, hints[k]), f"{path} [{prof}] {k}: {v!r} is not {hints[k]}"


@pytest.mark.parametrize("name", sorted(_registry()))
def test_config_class_holds_no_values(name):
    """Issue 45 item 4: the TOML file is the only source of a profile's values.  The config
    class declares fields and types, not defaults (a default would be a second copy that
    could disagree with the file, as clean-context's steps once did: 1000 in code, 300 in
    its TOML), so a config is built from the file, and one built without it fails."""
    import dataclasses

    cls = _registry()[name].config_cls
    held = [f.name for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING
            or f.default_factory is not dataclasses.MISSING]
    assert not held, f"{cls.__name__} holds values for {held}: move them to the TOML file"
    with pytest.raises(TypeError):
        cls()


def test_a_profile_missing_a_field_is_named(tmp_path, monkeypatch):
    """A [quick] table that lacks a field is refused with the file and the field named,
    not with the dataclass's TypeError."""
    from gmtheory.simulations import _base, get_simulation, make_config

    src = _base.profile_path("gated-experts").read_text()
    (tmp_path / "gated-experts.toml").write_text(src.replace("extent", "# extent", 1))
    monkeypatch.setattr(_base, "profiles_dir", lambda: tmp_path)
    with pytest.raises(ValueError, match=r"gated-experts.toml \[quick\]: missing .*extent"):
        make_config(get_simulation("gated-experts"))


def test_profiles_dir_is_the_checkout_folder():
    from pathlib import Path

    from gmtheory.simulations._base import profiles_dir

    assert profiles_dir() == Path(__file__).resolve().parents[1] / "simulations"


def _fake_profiles(monkeypatch, tmp_path, text, name="gated-experts"):
    import gmtheory.simulations._base as base

    (tmp_path / f"{name}.toml").write_text(text)
    monkeypatch.setattr(base, "profiles_dir", lambda: tmp_path)
    return get_simulation(name)


def test_unknown_key_in_a_profile_is_named(monkeypatch, tmp_path):
    quick = "[quick]\nseed = 0\ngrid = 5\nextent = 4.0\nu_scale = 1.5\ncov_scale = 0.25\n"
    sim = _fake_profiles(monkeypatch, tmp_path, quick + "\n[paper]\ngird = 7\n")
    assert make_config(sim, "quick").grid == 5
    with pytest.raises(ValueError) as e:
        make_config(sim, "paper")
    msg = str(e.value)
    for part in ("gated-experts.toml", "[paper]", "'gird'", "valid keys: seed, grid, extent"):
        assert part in msg, msg


@pytest.mark.parametrize("text, match", [
    ("[quick]\ngrid = 2.5\n", r"\[quick\]: grid: expected int, got 2.5"),
    ("[quick]\nextent = \"far\"\n", "extent: expected float"),
    ("[quick]\n[fast]\n", "unknown table or key 'fast'"),
    ("[quick\n", "not valid TOML"),
])
def test_bad_profile_files(monkeypatch, tmp_path, text, match):
    sim = _fake_profiles(monkeypatch, tmp_path, text)
    with pytest.raises(ValueError, match=match):
        make_config(sim, "quick")


def test_config_file_over_a_profile(tmp_path):
    from gmtheory.simulations import parse_overrides, read_config_file

    sim = get_simulation("denoise-sweep")
    f = tmp_path / "my.toml"
    f.write_text('simulation = "denoise-sweep"\nprofile = "paper"\nstarts = 2\n'
                 'seps = [1, 2]\n')
    profile, over = read_config_file(sim, f)
    assert profile == "paper" and over == {"starts": 2, "seps": (1.0, 2.0)}
    cfg = make_config(sim, profile, {**over, **parse_overrides(sim.config_cls, "starts=3")})
    assert (cfg.starts, cfg.seps, cfg.gh_order) == (3, (1.0, 2.0), 24)  # gh_order: paper
    f.write_text("starts = 2\nstrats = 3\n")
    with pytest.raises(ValueError, match=r"my.toml: unknown key 'strats'.*valid keys: seed"):
        read_config_file(sim, f)
    f.write_text('simulation = "gated-experts"\n')
    with pytest.raises(ValueError, match="written for simulation 'gated-experts'"):
        read_config_file(sim, f)


def test_cli_run_config(tmp_path, monkeypatch, capsys):
    """--config sets the profile and the fields, --set goes on top, --profile must agree."""
    import dataclasses

    import gmtheory.simulations as sims
    from gmtheory.cli import main

    seen = []

    def fake_run(name, profile, overrides, **kw):
        seen.append((name, profile, overrides))
        return {}, {}, tmp_path / "r"

    monkeypatch.setattr(sims, "run_simulation", fake_run)
    monkeypatch.setitem(sims.SIMULATIONS, "gated-experts",
                        dataclasses.replace(get_simulation("gated-experts"), summary=None))
    f = tmp_path / "my.toml"
    f.write_text('profile = "paper"\nextent = 3\ngrid = 11\n')
    assert main(["run", "gated-experts", "--config", str(f), "--set", "grid=9"]) == 0
    assert seen == [("gated-experts", "paper", {"extent": 3.0, "grid": 9})]
    assert "GatedExpertsConfig(seed=0, grid=9, extent=3.0" in capsys.readouterr().out
    assert main(["run", "gated-experts", "--config", str(f), "--profile", "quick"]) == 2
    assert "names profile 'paper'" in capsys.readouterr().err
    assert main(["run", "gated-experts", "--config", str(tmp_path / "none.toml")]) == 2
    assert "--config: no such file" in capsys.readouterr().err
    f.write_text("grid = 11\n")
    assert main(["run", "gated-experts", "--config", str(f)]) == 0
    assert seen[-1] == ("gated-experts", "quick", {"grid": 11})


def test_grid_and_assemble_grid():
    from gmtheory.simulations import assemble_grid, grid

    axes = {"d": [2, 5], "sep": [1.0, 2.0, 3.0]}
    pts = grid(**axes)
    assert pts[:2] == [{"d": 2, "sep": 1.0}, {"d": 2, "sep": 2.0}] and len(pts) == 6
    res = [{"x": np.full(4, 10 * p["d"] + p["sep"]), "s": np.asarray(p["sep"])} for p in pts]
    out = assemble_grid(pts, res, axes)
    assert out["x"].shape == (2, 3, 4) and out["s"].shape == (2, 3)
    assert out["x"][1, 2, 0] == 53.0 and out["s"][0, 1] == 2.0
    with pytest.raises(ValueError, match="not the grid"):
        assemble_grid(pts[::-1], res, axes)
    # a sweep that skips cells: grid(keep=...) and fill
    part = grid(**axes, keep=lambda p: p["sep"] != 2.0)
    assert len(part) == 4
    res = [{"x": np.full(2, p["sep"])} for p in part]
    with pytest.raises(ValueError, match="not the grid"):
        assemble_grid(part, res, axes)
    x = assemble_grid(part, res, axes, fill=np.nan)["x"]
    assert x.shape == (2, 3, 2) and np.isnan(x[:, 1]).all() and (x[:, 2] == 3.0).all()


# ----------------------------------------------------------------- committed results

def test_commit_and_load_a_result(tmp_path, monkeypatch):
    """``run --commit`` copies a run to simulations/committed/NAME/PROFILE; it is used only
    while the profile's config is the one it was run with."""
    import dataclasses

    from gmtheory.simulations import committed

    monkeypatch.setattr(committed, "profiles_dir", lambda: tmp_path / "sims")
    assert committed.load_committed("gated-experts", "quick") is None
    stem = committed.commit_result("gated-experts", "quick", results_dir=tmp_path / "cache",
                                   progress=False)
    assert stem == tmp_path / "sims" / "committed" / "gated-experts" / "quick"
    arrays, meta, note = committed.load_committed("gated-experts", "quick")
    fresh, _, _ = run_simulation("gated-experts", "quick", results_dir=tmp_path / "cache",
                                 progress=False)
    assert sorted(arrays) == sorted(fresh)
    for k in arrays:
        np.testing.assert_array_equal(arrays[k], fresh[k])
    assert meta["committed"]["git"] is not None and "committed result (recorded at commit" in note
    # the commit the run started from (a long run outlives edits and commits)
    assert meta["committed"]["git"] == meta["started_git"]
    # another config (the TOML changed): not used
    real = committed.make_config
    monkeypatch.setattr(committed, "make_config",
                        lambda sim, profile: dataclasses.replace(real(sim, profile), seed=1))
    assert committed.load_committed("gated-experts", "quick") is None
    with pytest.raises(ValueError, match="simulation"):
        committed.committed_stem("no-such-sim")


def test_run_commit_keeps_a_finished_run_after_a_source_edit(tmp_path, monkeypatch, capsys):
    """``gmtheory run NAME --commit`` after the code changed commits the cached run as it is
    (a long run outlives edits) instead of recomputing it first (found committing the
    gma-lm cpu run: the command started training it again)."""
    from gmtheory import cli
    from gmtheory.cache import Fingerprint
    from gmtheory.simulations import _base, committed

    monkeypatch.setattr(committed, "profiles_dir", lambda: tmp_path / "sims")
    args = ["run", "gated-experts", "--results", str(tmp_path / "cache"), "--no-progress"]
    assert cli.main(args) == 0
    sim = _base.get_simulation("gated-experts")
    real = sim.fingerprint()
    monkeypatch.setattr(type(sim), "fingerprint",
                        lambda self: Fingerprint("edited", real.files))  # the source changed
    capsys.readouterr()
    with pytest.warns(Warning, match="stale result reused"):
        assert cli.main(args + ["--commit"]) == 0
    out = capsys.readouterr().out
    assert "loaded from the cache" in out and "committed:" in out


def _committed():
    from gmtheory.simulations.committed import committed_stem

    root = committed_stem("gated-experts").parent.parent
    return sorted(p.with_suffix("") for p in root.glob("*/*.json"))


@pytest.mark.parametrize("stem", _committed(), ids=lambda p: f"{p.parent.name}-{p.name}")
def test_committed_results_match_their_profiles_and_draw(stem):
    """Every committed result still matches its profile's config (else `figures --profile
    paper` would recompute it) and every figure of its simulation draws from it (a
    simulation without a figure, clean-context, is read by the docs' table)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gmtheory.figures import all_figures, get_figure
    from gmtheory.simulations.committed import load_committed

    hit = load_committed(stem.parent.name, stem.name)
    assert hit is not None, f"{stem}: its config is not the current {stem.name} profile"
    arrays, meta, _ = hit
    figs = [n for n in all_figures() if get_figure(n).simulation == stem.parent.name]
    assert figs or stem.parent.name == "clean-context", f"{stem}: no figure draws it"
    for n in figs:
        plt.close(get_figure(n).draw(arrays, meta))


def test_paper_estimates_are_of_uncommitted_profiles():
    """Issue 46: a paper profile that is not committed may carry a measured estimate of its
    run time (a timing pass at a fraction of its steps), which the simulation index
    prints; an estimate of a committed profile is stale, and a GPU-sized one says why."""
    from gmtheory.simulations import SIMULATIONS, load_all
    from gmtheory.simulations.committed import committed_stem
    from gmtheory.tables import paper_estimates, simulations_index

    load_all()
    est = paper_estimates().get("estimates", {})
    assert set(est) <= set(SIMULATIONS), set(est) - set(SIMULATIONS)
    index = simulations_index()
    for name, e in est.items():
        assert not committed_stem(name, "paper").with_suffix(".json").exists(), (
            f"{name}: its paper result is committed, the estimate is stale")
        assert e["estimate_h"] > 0 and e["pass_s"] > 0 and e["scale"] >= 1, name
        assert e["bound"] in ("at most", "stopped") and e["sized_for"] in ("cpu", "gpu"), name
        assert e["sized_for"] == "cpu" or e["note"], f"{name}: a GPU-sized profile says why"
        assert abs(e["estimate_h"] - e["scale"] * e["pass_s"] / 3600) < 0.01, name
        assert f"`--set {e['pass']}`" in index, name


def test_figures_of_a_larger_profile_draw_the_committed_runs_only(monkeypatch, capsys):
    """``gmtheory figures --profile paper`` (no names) is the atlas: it draws every figure
    whose run is committed for the profile and names the others, computing nothing (issue
    46 item 5; measured: the 24 committed paper figures in 41 s on a fresh clone, 2 cores)."""
    from gmtheory import cli, figures
    from gmtheory.simulations import committed

    drawable, missing = figures.committed_figures("paper")
    assert "icl-softmax" in drawable and "approx-trained" in missing
    for name in drawable:
        assert committed.load_committed(figures.get_figure(name).simulation, "paper")
    drawn = []
    monkeypatch.setattr(figures, "make_figure", lambda n, **kw: drawn.append(n) or n)
    monkeypatch.setattr("gmtheory.simulations.run_simulation", None)   # computing fails
    assert cli.main(["figures", "--profile", "paper", "--no-progress"]) == 0
    assert drawn == drawable
    assert "no committed paper run (skipped" in capsys.readouterr().out


def _numbers(text):
    """The decimal numbers a text states (a minus sign included; identifiers such as
    icl.09 and versions are not numbers)."""
    import re

    return [float(t.replace("−", "-"))
            for t in re.findall(r"(?<![\w.])[−-]?\d+\.\d+(?![\w.])", text)]


@pytest.mark.parametrize("profile", ["paper", "cpu"])
def test_larger_profile_captions_are_written_from_their_runs(profile):
    """Every figure drawn from a committed run of a larger profile has a caption of its own
    (the quick one's numbers are another run's), and every decimal number it states is one
    that its run contains: in the simulation's summary of the committed arrays, its config
    or the arrays themselves, at the precision printed (issue 46)."""
    import json

    from gmtheory.figures import committed_figures, get_figure
    from gmtheory.simulations.committed import load_committed

    for name in committed_figures(profile)[0]:
        fig = get_figure(name)
        assert profile in fig.captions, f"{name}: no {profile} caption"
        cap = fig.caption_for(profile)
        assert cap != fig.caption
        arrays, meta, _ = load_committed(fig.simulation, profile)
        sim = get_simulation(fig.simulation)
        text = "\n".join(sim.summary(make_config(sim, profile), arrays)) if sim.summary else ""
        known = np.asarray(_numbers(text + " " + json.dumps(meta.get("config", {}))), float)
        vals = np.concatenate([np.ravel(np.asarray(v, float)) for v in arrays.values()
                               if np.asarray(v).dtype.kind in "fiu"] + [known])
        for tok in re.findall(r"(?<![\w.])[−-]?\d+\.\d+(?![\w.])", cap):
            x, places = float(tok.replace("−", "-")), len(tok.split(".")[1])
            close = np.abs(np.round(vals, places) - x) <= 0.5 * 10.0 ** -places + 1e-12
            assert close.any(), f"{name} [{profile}]: the caption states {tok}, not in its run"


def test_cpu_profile_is_opt_in(monkeypatch, tmp_path):
    """``[cpu]`` lays its fields over ``[quick]`` (not over ``[paper]``); a simulation with
    no ``[cpu]`` table has no cpu profile, and says so."""
    from gmtheory import cli
    from gmtheory.simulations._base import PROFILES

    assert cli.PROFILES == PROFILES
    quick = "[quick]\nseed = 0\ngrid = 5\nextent = 2.0\nu_scale = 1.5\ncov_scale = 0.25\n"
    sim = _fake_profiles(monkeypatch, tmp_path,
                         quick + "\n[paper]\ngrid = 9\n\n[cpu]\nextent = 3.0\n")
    cpu = make_config(sim, "cpu")
    assert (cpu.grid, cpu.extent) == (5, 3.0)
    sim = _fake_profiles(monkeypatch, tmp_path, quick)
    with pytest.raises(ValueError, match="no cpu profile"):
        make_config(sim, "cpu")


def test_caption_is_wrapped_to_the_figure_width():
    """The caption is broken into lines that fit the figure (a few measurements instead of
    matplotlib's word-by-word wrap): every line of every registered caption, and of a
    made-up one, is at most the figure's width, and no word is lost or split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.font_manager import FontProperties

    from gmtheory.figures import all_figures, get_figure
    from gmtheory.figures._base import wrap_caption

    made_up = " ".join(f"word{i} (a longer phrase, σ = {i / 7:.3f})" for i in range(120))
    captions = [made_up] + [get_figure(n).caption for n in all_figures()]
    for width in (6.0, 10.0, 15.0):
        fig = plt.figure(figsize=(width, 3))
        renderer = fig.canvas.get_renderer()
        prop = FontProperties(size=9.0, style="italic")
        for caption in captions:
            text = wrap_caption(fig, caption)
            for line in text.split("\n"):
                w = renderer.get_text_width_height_descent(line, prop, ismath=False)[0]
                assert w <= 0.99 * width * fig.dpi, (width, line)
            assert text.split() == caption.split()
        plt.close(fig)
