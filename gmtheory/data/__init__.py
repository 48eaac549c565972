"""Data shipped with the package.

``lu2025_quick_figure/``: the saved results of the "quick figure" published with the code
of Lu, Letey, Zavatone-Veth, Maiti, Pehlevan (PNAS 2025), MIT licence (see its LICENSE and
README): g_task of the ridge-pretrained model and of dMMSE at d = 10, 32, 64.  External
reference data: nobody in this project produced them.
"""

from __future__ import annotations

import csv
from importlib.resources import files

__all__ = ["lu2025_quick_figure"]


def lu2025_quick_figure(d: int) -> dict:
    """``{"gamma": rows, "dmmse": rows}`` (each row a dict of floats) for d in 10, 32, 64."""
    if d not in (10, 32, 64):
        raise ValueError(f"d: the authors saved d = 10, 32 and 64 only, got {d}.")
    out = {}
    for kind in ("gamma", "dmmse"):
        text = files(__name__).joinpath("lu2025_quick_figure", f"d{d}_{kind}.csv").read_text()
        out[kind] = [{k: float(v) for k, v in row.items()}
                     for row in csv.DictReader(text.splitlines())]
    return out
