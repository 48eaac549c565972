"""Multiply a function's output by ``1 + delta``, whatever its kind (the perturbation of
:mod:`gmtheory.verify.mutation`): every floating-point leaf of arrays, scalars, tuples,
dicts, dataclasses and pytrees; a returned function or callable object perturbed when
called; an emulated expression of :mod:`gmtheory.approx_compose` in its emulated values
(or, for the *bound* break, in its certified bound alone)."""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect

__all__ = ["perturb", "wrap", "Tally"]


class Tally:
    perturbed = 0      # calls whose output had a floating-point leaf
    untouched = 0      # calls whose output had none (ints, bools, strings)


def _is_float(x) -> bool:
    import numpy as np

    if _is_array(x):                        # not any object with a dtype attribute
        return bool(np.issubdtype(np.dtype(x.dtype), np.inexact))
    return isinstance(x, (float, complex)) and not isinstance(x, bool)


def _is_array(x) -> bool:
    import jax
    import numpy as np
    return isinstance(x, (np.ndarray, np.generic, jax.Array))


def _scale(x, factor):
    import numpy as np

    if isinstance(x, np.ndarray):
        return (x * factor).astype(x.dtype)
    if isinstance(x, np.generic):
        return type(x)(x * factor)
    return x * factor


def perturb(out, delta: float, _tally: type[Tally] | None = None, *, bound: bool = False):
    """``out`` with every floating-point leaf multiplied by ``1 + delta``.  With ``bound``,
    only the certified bound of each emulated expression of
    :mod:`gmtheory.approx_compose` in ``out`` (the *bound* break of
    :mod:`gmtheory.verify.mutation`: a composition rule that adds too little error), and
    nothing else."""
    import jax

    from ..approx_compose import Expr
    from ..mixture import GaussianMixture

    _tally = Tally if _tally is None else _tally
    factor = 1.0 + delta
    seen = [False]

    def go(x):
        if x is None or isinstance(x, (bool, int, str, bytes)):
            return x
        if isinstance(x, Expr):             # an emulated expression: its emulated values,
            seen[0] = True                  # also where a composition reads it as a term,
            y = copy.copy(x)                # or (``bound``) its certified bound, which the
            if bound:                       # compositions built on it add up
                y.bound = x.bound * factor
            else:
                y._emulate = lambda vals, z, f=x._emulate: _scale(f(vals, z), factor)
            return y
        if bound:                           # the bound break touches expressions only
            if isinstance(x, tuple) and hasattr(x, "_fields"):
                return type(x)(*(go(v) for v in x))
            if isinstance(x, (list, tuple)):
                return type(x)(go(v) for v in x)
            return {k: go(v) for k, v in x.items()} if isinstance(x, dict) else x
        if _is_float(x):
            seen[0] = True
            return _scale(x, factor)
        if _is_array(x):                    # an integer or boolean array
            return x
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return type(x)(*(go(v) for v in x))
        if isinstance(x, (list, tuple)):
            return type(x)(go(v) for v in x)
        if isinstance(x, dict):
            return {k: go(v) for k, v in x.items()}
        if isinstance(x, GaussianMixture):  # weights stay on the simplex (it is validated)
            return GaussianMixture(x.weights, go(x.means), go(x.covs))
        leaves, tdef = jax.tree_util.tree_flatten(x)
        if not (len(leaves) == 1 and leaves[0] is x):  # a registered pytree
            return jax.tree_util.tree_unflatten(tdef, [go(v) for v in leaves])
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            kw = {f.name: go(getattr(x, f.name)) for f in dataclasses.fields(x) if f.init}
            return dataclasses.replace(x, **kw)
        if inspect.isfunction(x) or isinstance(x, functools.partial):
            seen[0] = True                   # the returned function is perturbed when called
            return wrap(x, delta, None)
        if callable(x) and hasattr(x, "__dict__"):
            try:                             # a callable object: a copy whose calls are
                cls = type(x)                # perturbed, its attributes kept
                sub = type(cls.__name__, (cls,), {"__call__": lambda self, *a, **k: perturb(
                    cls.__call__(self, *a, **k), delta)})
                y = object.__new__(sub)
                y.__dict__.update(x.__dict__)
            except TypeError:                # a type that cannot be subclassed
                y = wrap(x, delta, None)
            seen[0] = True
            return y
        return x                             # another object: left as it is

    res = go(out)
    if seen[0]:
        _tally.perturbed += 1
    else:
        _tally.untouched += 1
    return res


def wrap(fn, delta: float, counter: dict | None, name: str = "", bound: bool = False):
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        if counter is not None:
            counter[name] = counter.get(name, 0) + 1
        out = fn(*args, **kwargs)
        return perturb(out, delta, bound=bound) if delta else out

    return wrapped
