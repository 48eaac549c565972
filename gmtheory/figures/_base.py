"""Figure registry: each figure draws from one cached simulation result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Figure", "register_figure", "FIGURES", "get_figure", "load_all", "make_figure",
           "style_path", "figure_summary", "committed_figures"]

FIGURES: dict[str, Figure] = {}


@dataclass(frozen=True)
class Figure:
    name: str
    simulation: str
    caption: str
    draw: Callable  # (arrays, meta) -> matplotlib.figure.Figure
    #: the `gmtheory verify` checks that test this figure's run: each reads the cached
    #: result the figure draws (same simulation, profile and config; one run, two consumers)
    checks: tuple = ()
    #: the checks that test the theory the figure draws (its curves, constructions or
    #: limits) on their own points, not this run
    theory_checks: tuple = ()
    #: why no check reads this run (required when ``checks`` is empty): the figure draws no
    #: theory value to decide (an illustration, trained models beside baselines), or a check
    #: of the run is open, said so
    run_unchecked: str = ""
    #: the captions of the other profiles (``"paper"``, ``"cpu"``), each written for its
    #: own run: ``caption`` is the quick profile's, and its numbers are the quick run's
    captions: dict = field(default_factory=dict)

    def caption_for(self, profile: str = "quick") -> str:
        """The caption of the figure drawn at ``profile``: ``caption`` for quick, the
        profile's own where one is written, else a caption that says there is none (the
        quick one's numbers would be another run's; issue 46)."""
        if profile == "quick":
            return self.caption
        if profile in self.captions:
            return self.captions[profile]
        return (f"{self.name} at the {profile} profile. No caption is written for this "
                "profile yet: the quick profile's caption (figures/README.md) says what is "
                "drawn, but its numbers are the quick run's; this run's are in the summary of "
                f"`gmtheory run {self.simulation} --profile {profile}`.")


def register_figure(fig: Figure) -> Figure:
    """Register ``fig``, with the captions of its larger profiles
    (:data:`gmtheory.figures.captions.PROFILE_CAPTIONS`) laid under its own ``captions``."""
    from dataclasses import replace

    from .captions import PROFILE_CAPTIONS

    extra = PROFILE_CAPTIONS.get(fig.name, {})
    if extra:
        fig = replace(fig, captions={**extra, **fig.captions})
    FIGURES[fig.name] = fig
    return fig


def load_all():
    """Import every figure module (each registers its figures)."""
    from . import (  # noqa: F401
        approx,
        denoising,
        gated_experts,
        gma,
        gma_ablations,
        icl,
        icl_nonlinear,
        icl_softmax,
        lda,
        prompt_convergence,
    )


def get_figure(name: str) -> Figure:
    load_all()
    if name not in FIGURES:
        raise ValueError(f"figure: unknown name {name!r}; choose from {sorted(FIGURES)}.")
    return FIGURES[name]


def figure_summary(name: str, *, profile="quick", results_dir="simulations/results",
                   reuse_stale=False) -> list[str]:
    """Summary lines of the (cached) simulation behind figure ``name``."""
    from ..simulations import get_simulation, make_config, run_simulation

    spec = get_figure(name)
    sim = get_simulation(spec.simulation)
    arrays, _, _ = run_simulation(spec.simulation, profile, results_dir=results_dir,
                                  progress=False, reuse_stale=reuse_stale)
    return list(sim.summary(make_config(sim, profile), arrays)) if sim.summary else []


def wrap_caption(fig, caption: str, *, fontsize: float = 9.0, left: float = 0.01) -> str:
    """``caption`` broken into lines that fit the figure's width right of ``left`` (a
    fraction of it), in the italic ``fontsize`` of the caption: the line length in
    characters comes from one measurement of the whole caption's width, shortened (and
    the lines measured again) while a line is wider than the room.  Matplotlib's own
    ``wrap=True`` measures the text word by word at each of ``savefig``'s two draws (about
    a second a figure, a tenth of a cold ``make reproduce``'s drawing)."""
    import textwrap

    from matplotlib.font_manager import FontProperties

    renderer = fig.canvas.get_renderer()
    prop = FontProperties(size=fontsize, style="italic")
    measure = lambda t: renderer.get_text_width_height_descent(t, prop, ismath=False)[0]  # noqa: E731
    room = fig.get_figwidth() * fig.dpi * (1 - left)
    per_line = max(20, int(len(caption) * room / max(measure(caption), 1.0)))
    while True:     # the average width can underestimate a line of wide letters: re-wrap
        text = textwrap.fill(caption, per_line, break_on_hyphens=False)
        widest = max(measure(line) for line in text.split("\n"))
        if widest <= room or per_line <= 20:
            return text
        per_line = max(20, int(per_line * room / widest) - 1)


def style_path() -> Path:
    return Path(__file__).with_name("gmtheory.mplstyle")


def committed_figures(profile: str) -> tuple[list[str], list[str]]:
    """``(drawable, missing)``: the figures whose simulation has a committed result for
    ``profile``'s current config (drawn from it without computing), and the others."""
    from ..simulations import get_simulation, has_profile
    from ..simulations.committed import load_committed

    load_all()
    drawable, missing, hits = [], [], {}
    for name, fig in FIGURES.items():
        sim = fig.simulation
        if sim not in hits:
            hits[sim] = (has_profile(get_simulation(sim), profile)
                         and load_committed(sim, profile) is not None)
        (drawable if hits[sim] else missing).append(name)
    return drawable, missing


def make_figure(name: str, *, profile="quick", out_dir="figures",
                results_dir="simulations/results",
                force=False, progress=True, reuse_stale=False, committed=True,
                on_note=None) -> Path:
    """Run (or load) the figure's simulation, draw it and save ``<out_dir>/<name>.png``.

    ``reuse_stale`` draws a cached result even if the code that produced it has changed
    (with a :class:`gmtheory.cache.StaleResultWarning` naming the changed files).  For a
    profile other than quick, a committed result of the profile's current config
    (:mod:`gmtheory.simulations.committed`) is drawn instead of computing, unless
    ``committed=False`` or ``force``; ``on_note(text)`` hears where it came from."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ..simulations import run_simulation
    from ..simulations.committed import load_committed

    fig_spec = get_figure(name)
    hit = (load_committed(fig_spec.simulation, profile)
           if committed and not force and profile != "quick" else None)
    if hit is not None:
        arrays, meta, note = hit
        if on_note is not None:
            on_note(note)
    else:
        arrays, meta, _ = run_simulation(fig_spec.simulation, profile, results_dir=results_dir,
                                         force=force, progress=progress,
                                         reuse_stale=reuse_stale)
    with plt.style.context(str(style_path())):
        fig = fig_spec.draw(arrays, meta)
        fig.text(0.01, -0.02, wrap_caption(fig, fig_spec.caption_for(profile)), ha="left",
                 va="top", fontsize=9, style="italic")
        out = Path(out_dir) / f"{name}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp.png")
        fig.savefig(tmp)
        plt.close(fig)
        tmp.replace(out)
    return out
