"""One point of an exploration: the task's computation (its source is the point's cache
fingerprint: a change here, in :mod:`.denoise`, :mod:`.classify` or the library code they
import recomputes the point)."""

from __future__ import annotations

from .classify import classification_point
from .denoise import denoising_point


def compute_point(prob, key):
    """``(values, comparisons)`` of one problem without axes."""
    fn = denoising_point if prob.task == "denoising" else classification_point
    return fn(prob, key)
