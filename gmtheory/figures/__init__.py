"""One module per figure; each draws from a cached simulation result."""

from ._base import (
    FIGURES,
    Figure,
    committed_figures,
    figure_summary,
    get_figure,
    make_figure,
    register_figure,
    style_path,
)


def all_figures() -> list[str]:
    from ._base import load_all

    load_all()
    return list(FIGURES)


__all__ = ["FIGURES", "Figure", "figure_summary", "get_figure", "make_figure", "register_figure",
           "style_path", "all_figures", "committed_figures"]
