"""One point of an exploration: the task's computation (its source is the point's cache
fingerprint: a change here, in :mod:`.denoise`, :mod:`.classify` or the library code they
import recomputes the point).

The infinite-prompt part of a point does not depend on the prompt length ``L``: it is
computed once per process for all the ``L`` of a sweep (same key, same values), and only
the finite-prompt part is computed per ``L``.
"""

from __future__ import annotations

import dataclasses
import json

import jax

from .classify import classification_limit, classification_prompt
from .denoise import denoising_limit, denoising_prompt

_LIMITS: dict[str, tuple] = {}
_MAX_LIMITS = 64


def compute_point(prob, key):
    """``(values, comparisons)`` of one problem without axes; ``key`` must not depend on
    ``prob.L`` (the prompt part folds ``L`` in)."""
    limit_fn, prompt_fn = ((denoising_limit, denoising_prompt) if prob.task == "denoising"
                           else (classification_limit, classification_prompt))
    base = dataclasses.replace(prob, L=None)
    tag = json.dumps([base.as_dict(), jax.random.key_data(key).tolist()], sort_keys=True,
                     default=str)
    if tag not in _LIMITS:
        if len(_LIMITS) >= _MAX_LIMITS:
            _LIMITS.pop(next(iter(_LIMITS)))
        _LIMITS[tag] = limit_fn(base, key)
    out, cmp = _LIMITS[tag]
    out = dict(out)
    if prob.L is not None:
        out.update(prompt_fn(prob, out, jax.random.fold_in(key, prob.L)))
    return out, list(cmp)
