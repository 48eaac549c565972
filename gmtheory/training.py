"""The one training engine: optax inside ``lax.scan``, a NaN guard, checkpoints, L-BFGS.

Every gradient-trained model in gmtheory — population gradient descent on a closed-form
risk, SGD on sampled data, Adam on finite prompts — runs through :func:`train`; every
quasi-Newton fit runs through :func:`minimize_lbfgs`.

How :func:`train` runs
----------------------
``steps`` optimiser steps are grouped into *records* of ``record_every`` steps (one
``lax.scan``) and records into *blocks* of ``block_records`` records (a second
``lax.scan``, one compiled program).  After each block, in Python:

* the NaN guard is read: the first step whose loss or new parameters are not finite is
  not applied, the run stops, and :class:`NonFiniteError` names the step and keeps the
  last finite parameters (``err.params``);
* a checkpoint (parameters, optimiser state, step and history so far) is written
  atomically, so a killed run resumes from its last block and reaches the same numbers
  as an uninterrupted one: step ``t`` always draws its randomness from
  ``fold_in(key, t)``, wherever the run was interrupted;
* ``callback(info)`` is called and the progress bar advances.

At the end of each record, ``metrics_fn(params, data)`` is evaluated inside the compiled
program and stacked into ``TrainResult.history`` (one row per record), beside the mean
training loss over the record.

``batched=True`` trains several independent models at once (seeds in ``vmap``): every
leaf of ``params`` has a leading axis, ``key`` is an array of keys of that length, and
``data`` is shared (or batched too, with ``batched_data=True``).

What a run compiles, and when it compiles again
-----------------------------------------------
One training program per kind of run: the engine caches it on the loss (a plain function
by identity; an ``eqx.Module`` by its static fields, its arrays passed in as data), the
optimiser and the layout (``record_every``, ``block_records``, batching).  Hyperparameters
are data: ``hyper(optax.adam, learning_rate=lr)`` keeps the learning rate in the
optimiser state (``optax.inject_hyperparams``), and a loss module keeps its shape settings
(batch size, prompt length, quadrature order) as static fields.  So a second run with
another learning rate, another problem (passed as ``data``) or another seed compiles
nothing; a new batch size or order compiles once.  A plain ``optax.adam(lr)`` built anew
on each call compiles anew on each call.

Population gradient descent (the paper's protocol for its figures) is
``train(value_and_grad_fn=..., optimizer=optax.sgd(lr))`` with no key: the analytic
gradient of a closed-form risk, no sampling.

Why scipy for L-BFGS
--------------------
:func:`minimize_lbfgs` runs SciPy's L-BFGS-B on a jitted ``value_and_grad``: the
objectives fitted here have at most a few hundred parameters, each evaluation is one
compiled call, and SciPy's line search and stopping rules (``gtol`` on the projected
gradient, ``ftol``) are the reference implementation in float64.  ``optax.lbfgs`` would
keep the loop on the device, which only pays when many starts are ``vmap``-ed at scale.

Length: one piece because :func:`train`, its program cache, the checkpoint signature and
the hyperparameter types share private state (what keys a program is what keys a
checkpoint); L-BFGS is the one other fitting engine, kept beside it so that "how a model is
fitted" has one home.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import inspect
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from . import sharding as _sharding
from ._xla import LONG_RUN_STEPS, jit_long
from .cache import atomic_write_bytes

__all__ = ["train", "clear_programs", "TrainResult", "NonFiniteError", "checkpoint_scope",
           "minimize_lbfgs", "LBFGSResult", "set_progress", "quiet", "Hyper", "hyper"]

_PROGRESS = True


def set_progress(enabled: bool) -> None:
    """Show (default) or hide the progress bars of :func:`train`."""
    global _PROGRESS
    _PROGRESS = bool(enabled)


_QUIET: contextvars.ContextVar = contextvars.ContextVar("gmtheory_train_quiet", default=False)


@contextlib.contextmanager
def quiet(enabled: bool = True):
    """Inside this block :func:`train` shows no progress bar unless a call asks for one
    (``progress=True``); ``run_simulation(progress=False)`` opens one."""
    token = _QUIET.set(bool(enabled))
    try:
        yield
    finally:
        _QUIET.reset(token)


class Hyper(eqx.Module):
    """An optax optimiser whose numeric hyperparameters are data, not code.

    ``factory(**static, **values)`` under :func:`optax.inject_hyperparams`: the floats in
    ``values`` (learning rates, weight decays, clipping norms) live in the optimiser state,
    so two ``Hyper`` with the same factory, the same static arguments and the same names
    share one compiled training program, whatever the values.  Build it with
    :func:`hyper`.
    """

    factory: Callable = eqx.field(static=True)
    static: tuple = eqx.field(static=True)    #: sorted ``(name, value)``: shapes, lengths
    values: dict                              #: name -> float: the data hyperparameters

    def transform(self) -> optax.GradientTransformation:
        """The optax transformation (its ``init`` stores ``values`` in the state)."""
        names = tuple(n for n, _ in self.static)
        return optax.inject_hyperparams(self.factory, static_args=names)(
            **dict(self.static), **self.values)

    def program_key(self):
        """What the compiled program depends on: the factory, the static arguments and the
        names (not the values) of the data hyperparameters."""
        return ("hyper", self.factory, self.static, tuple(sorted(self.values)))


def hyper(factory: Callable, /, **kwargs) -> Hyper:
    """``factory(**kwargs)`` with its float arguments as data (:class:`Hyper`).

    Floats (and float arrays of shape ``()``) are data; everything else (ints such as a
    schedule's length, strings, bools, callables) is static, part of the program.  For
    example ``hyper(optax.sgd, learning_rate=lr)``, or for a schedule a module-level factory
    ``hyper(adam_cosine, learning_rate=lr, decay_steps=steps)``.
    """
    if not callable(factory):
        raise TypeError(f"factory: expected an optax optimiser factory, got {factory!r}.")
    params = inspect.signature(factory).parameters
    unknown = sorted(set(kwargs) - set(params))
    if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        raise TypeError(f"{unknown[0]}: not a parameter of {getattr(factory, '__name__', factory)}"
                        f"; it takes {', '.join(params)}.")
    values, static = {}, []
    for name, v in kwargs.items():
        if isinstance(v, float) or (isinstance(v, (np.ndarray, jax.Array)) and v.shape == ()
                                    and jnp.issubdtype(v.dtype, jnp.floating)):
            values[name] = float(v)
        else:
            static.append((name, v))
    return Hyper(factory, tuple(sorted(static, key=lambda kv: kv[0])), values)


class _Keyed:
    """An object that the program cache keys on ``key`` instead of its identity."""

    __slots__ = ("key", "obj")

    def __init__(self, key, obj):
        self.key, self.obj = key, obj

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _Keyed) and self.key == other.key


class TrainResult(NamedTuple):
    params: Any                     #: final parameters (leading seed axis if batched)
    opt_state: Any                  #: final optimiser state
    history: dict[str, np.ndarray]  #: metrics_fn at the end of every record, (records, ...)
    loss: np.ndarray                #: mean training loss per record, (records,) or (records, S)
    steps: np.ndarray               #: number of steps done at each record, (records,)
    initial: dict[str, np.ndarray]  #: metrics_fn at the initial parameters
    resumed_from: int               #: step the run resumed from (0 when it started afresh)


class NonFiniteError(FloatingPointError):
    """A loss or parameter became NaN or infinite.

    ``step`` is the first offending step (0-based: the update that would have produced
    it was not applied), ``seeds`` the indices of the affected models when batched, and
    ``params`` the last finite parameters of every model.
    """

    def __init__(self, step: int, params, seeds=None, desc: str = "train"):
        self.step, self.params, self.seeds = int(step), params, seeds
        where = "" if seeds is None else f" (models {list(seeds)})"
        super().__init__(
            f"{desc}: the loss or the parameters became non-finite at step {step}{where}; "
            f"the update was not applied and the last finite parameters are kept in "
            f"err.params.  Lower the learning rate, clip the gradients, or check the data.")


# ------------------------------------------------------------------ checkpoint scope ----

_SCOPE: contextvars.ContextVar = contextvars.ContextVar("gmtheory_ckpt_scope", default=None)


@contextlib.contextmanager
def checkpoint_scope(folder):
    """Inside this block, every :func:`train` call without an explicit ``checkpoint``
    checkpoints to ``folder/train-NNN.npz`` (NNN counts the calls in the block, so a
    rerun of the same code finds its own files).  ``gmtheory run`` opens one per sweep
    point and deletes it once the point is saved."""
    token = _SCOPE.set({"folder": Path(folder), "count": 0})
    try:
        yield Path(folder)
    finally:
        _SCOPE.reset(token)


def _scoped_checkpoint():
    scope = _SCOPE.get()
    if scope is None:
        return None
    path = scope["folder"] / f"train-{scope['count']:03d}.npz"
    scope["count"] += 1
    return path


# ------------------------------------------------------------------ helpers --------------

def _tree_finite(tree):
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
              if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _choose_block(n_records: int, block_records: int | None) -> int:
    if block_records is not None:
        b = int(block_records)
        if b < 1 or n_records % b:
            raise ValueError(f"block_records: must divide the number of records "
                             f"({n_records}), got {block_records}.")
        return b
    target = max(1, n_records // 20)      # about 20 blocks: progress and checkpoints
    return max(d for d in range(1, target + 1) if n_records % d == 0)


def _key_data(key):
    if key is None:
        return b""
    try:
        return np.asarray(jax.random.key_data(key)).tobytes()
    except TypeError:                     # a raw uint32 key
        return np.asarray(key).tobytes()


def _signature(params, opt_state, key, data, steps, record_every, block, batched, tag):
    """Identifies a run's checkpoint: the initial parameters and optimiser state (with a
    :class:`Hyper`'s values), the data (with a loss module's arrays), key and layout."""
    h = hashlib.sha256()
    h.update(str(jax.tree.structure((params, opt_state))).encode())
    for leaf in jax.tree.leaves((params, opt_state)):
        a = np.asarray(leaf)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    for leaf in jax.tree.leaves(data):
        a = np.asarray(leaf)
        h.update(f"{a.shape}{a.dtype}".encode())
        h.update(a.tobytes())
    h.update(_key_data(key))
    h.update(json.dumps([steps, record_every, block, batched, str(tag)]).encode())
    return h.hexdigest()[:24]


def _save_ckpt(path: Path, sig, step, params, opt_state, hist, losses):
    arrays = {"signature": np.array(sig), "step": np.array(step)}
    for i, leaf in enumerate(jax.tree.leaves(params)):
        arrays[f"p{i}"] = np.asarray(leaf)
    for i, leaf in enumerate(jax.tree.leaves(opt_state)):
        arrays[f"s{i}"] = np.asarray(leaf)
    for k, v in hist.items():
        arrays[f"h/{k}"] = np.asarray(v)
    arrays["losses"] = np.asarray(losses)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


def _load_ckpt(path: Path, sig, params, opt_state):
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["signature"]) != sig:
                return None
            pl, pdef = jax.tree.flatten(params)
            sl, sdef = jax.tree.flatten(opt_state)
            p = jax.tree.unflatten(pdef, [jnp.asarray(z[f"p{i}"], dtype=jnp.asarray(x).dtype)
                                          for i, x in enumerate(pl)])
            s = jax.tree.unflatten(sdef, [jnp.asarray(z[f"s{i}"], dtype=jnp.asarray(x).dtype)
                                          for i, x in enumerate(sl)])
            hist = {k[2:]: z[k] for k in z.files if k.startswith("h/")}
            return int(z["step"]), p, s, hist, z["losses"]
    except Exception:  # missing, truncated or foreign: start afresh
        return None


# ------------------------------------------------------------------ the engine -----------

@functools.lru_cache(maxsize=32)
def _programs(fns_static, optimizer, record_every, block, batched, batched_data, has_key,
              long_run=False):
    """The compiled block and the metrics of a training run (the block compiled with
    :data:`gmtheory._xla.LONG_RUNNING` for a ``long_run``).

    Cached on what the program depends on: the static part of ``(loss_fn,
    value_and_grad_fn, metrics_fn)`` (plain functions by identity; an ``eqx.Module`` loss by
    its static fields, its arrays travelling as an argument, see :func:`_split_fns`), the
    optimiser (a :class:`Hyper` by its factory and hyperparameter names, any other by
    identity) and the static layout.  So a sweep that calls :func:`train` with the same
    loss and the same kind of optimiser traces and compiles its program once; arrays that
    differ between the calls travel in ``data``, in the loss module or in the optimiser
    state.
    """
    opt = optimizer.obj

    def fns_of(dyn):
        loss_fn, value_and_grad_fn, metrics_fn = eqx.combine(dyn, fns_static.obj)
        vg = (value_and_grad_fn if value_and_grad_fn is not None
              else jax.value_and_grad(loss_fn))
        return vg, (metrics_fn if metrics_fn is not None else _no_metrics)

    def one_record(carry, data, k, rec, dyn):
        vg, metrics = fns_of(dyn)

        def step(c, t):
            p, s, alive, bad = c
            kk = jax.random.fold_in(k, t) if has_key else None
            val, g = vg(p, data, kk)
            upd, s_new = opt.update(g, s, p)
            p_new = optax.apply_updates(p, upd)
            ok = alive & jnp.isfinite(val) & _tree_finite(p_new)
            p = jax.tree.map(lambda a, b: jnp.where(ok, a, b), p_new, p)
            s = jax.tree.map(lambda a, b: jnp.where(ok, a, b), s_new, s)
            bad = jnp.where(alive & ~ok, t, bad).astype(bad.dtype)
            return (p, s, ok, bad), jnp.where(ok, val, jnp.nan)

        ts = (rec * record_every + jnp.arange(record_every)).astype(jnp.int32)
        carry, vals = jax.lax.scan(step, carry, ts)
        return carry, (jnp.nanmean(vals), metrics(carry[0], data))

    def one_block(p, s, alive, bad, data, k, first_record, dyn):
        def body(c, r):
            return one_record(c, data, k, r, dyn)
        recs = first_record + jnp.arange(block)
        (p, s, alive, bad), (losses, hist) = jax.lax.scan(body, (p, s, alive, bad), recs)
        return p, s, alive, bad, losses, hist

    def metrics_of(p, data, dyn):
        return fns_of(dyn)[1](p, data)

    jit = jit_long if long_run else jax.jit

    if batched == "map":
        axes = (0, 0, 0, 0, 0 if batched_data else None, 0 if has_key else None, None, None)
        run_block = jit(_map_models(one_block, axes, (0, 0, 0, 0, 1, 1)))
        init_metrics = jax.jit(jax.vmap(metrics_of,
                                        in_axes=(0, 0 if batched_data else None, None)))
    elif batched:
        axes = (0, 0, 0, 0, 0 if batched_data else None, 0 if has_key else None, None, None)
        run_block = jit(jax.vmap(one_block, in_axes=axes, out_axes=(0, 0, 0, 0, 1, 1)))
        init_metrics = jax.jit(jax.vmap(metrics_of,
                                        in_axes=(0, 0 if batched_data else None, None)))
    else:
        run_block = jit(one_block)
        init_metrics = jax.jit(metrics_of)
    return run_block, init_metrics


def _map_models(fn, in_axes, out_axes):
    """``jax.vmap(fn, in_axes, out_axes)`` computed one model after another
    (``jax.lax.map``): each model runs the unbatched program."""
    idx = [i for i, a in enumerate(in_axes) if a == 0]

    def mapped(*args):
        def one(xs):
            full = list(args)
            for i, x in zip(idx, xs, strict=True):
                full[i] = x
            return fn(*full)

        out = jax.lax.map(one, tuple(args[i] for i in idx))
        return tuple(o if ax == 0 else jax.tree.map(lambda a, ax=ax: jnp.moveaxis(a, 0, ax), o)
                     for o, ax in zip(out, out_axes, strict=True))
    return mapped


def clear_programs() -> None:
    """Forget the training programs this module traced and compiled (with
    :func:`jax.clear_caches` for JAX's own caches), so the next :func:`train` recompiles."""
    _programs.cache_clear()


def _strong(x):
    return jnp.asarray(x, dtype=x.dtype) if getattr(x, "weak_type", False) else x


def _no_metrics(p, d):
    return {}


def _split_fns(loss_fn, value_and_grad_fn, metrics_fn):
    """``(dynamic, static)`` of the three functions: an ``eqx.Module`` loss (or metrics)
    contributes its arrays to ``dynamic``, which the program takes as an argument, and its
    static fields to ``static``, which keys the program; plain functions are static."""
    dyn, static = eqx.partition((loss_fn, value_and_grad_fn, metrics_fn), eqx.is_array)
    leaves, treedef = jax.tree.flatten(static)
    key = (tuple(leaves), treedef)
    try:
        hash(key)
    except TypeError:         # an unhashable static part: no cache (compiles anew)
        key = None
    return dyn, _Keyed(key, static)


def _optimizer_parts(optimizer):
    """``(program key, per-call transform)`` of ``optimizer``."""
    if isinstance(optimizer, Hyper):
        tx = optimizer.transform()
        return _Keyed(optimizer.program_key(), tx), tx
    if not (hasattr(optimizer, "init") and hasattr(optimizer, "update")):
        raise TypeError(f"optimizer: expected an optax GradientTransformation or "
                        f"training.hyper(...), got {type(optimizer).__name__}.")
    try:
        hash(optimizer)
        key = optimizer
    except TypeError:         # unhashable: no cache (an id could be reused after collection)
        key = None
    return _Keyed(key, optimizer), optimizer


def train(loss_fn: Callable | None, params, optimizer, *, steps: int, key=None, data=None,
          value_and_grad_fn: Callable | None = None, record_every: int | None = None,
          metrics_fn: Callable | None = None, block_records: int | None = None,
          batched: bool | str = False, batched_data: bool = False, checkpoint=None,
          callback: Callable | None = None, progress: bool | None = None,
          desc: str = "train", tag=None) -> TrainResult:
    """Train ``params`` with an optax ``optimizer`` for ``steps`` steps.

    Parameters
    ----------
    loss_fn:
        ``loss_fn(params, data, key) -> scalar``; ``key`` is ``fold_in(key, step)``
        (``None`` when no ``key`` is given).  Differentiated with ``jax.value_and_grad``.
    value_and_grad_fn:
        Instead of ``loss_fn``: ``(params, data, key) -> (loss, grads)`` (for analytic
        gradients, as in population gradient descent).
    optimizer:
        An ``optax.GradientTransformation`` (the compiled program is cached on its
        identity), or :func:`hyper` ``(factory, **hyperparameters)``, whose float
        hyperparameters are data: a second run with another learning rate reuses the
        program.  ``loss_fn`` (or ``value_and_grad_fn``, ``metrics_fn``) may be an
        ``eqx.Module``: its static fields key the program and its arrays are data.
    steps, record_every, block_records:
        ``steps`` must be a multiple of ``record_every`` (default: ``steps``, one record);
        ``block_records`` records are compiled as one program (default: about 20 blocks),
        with XLA's optimisation level 1 for a run of at least
        :data:`gmtheory._xla.LONG_RUN_STEPS` steps (the process's level otherwise).
    metrics_fn:
        ``metrics_fn(params, data) -> dict`` of arrays, recorded after every record.
    batched, batched_data:
        Train a leading axis of independent models (``key`` then holds one key per
        model); ``batched_data`` says that ``data`` has that axis too.  ``batched=True``
        trains them together under ``vmap``; ``batched="map"`` one after another inside the
        same compiled block (``jax.lax.map``), each with the unbatched program: on one CPU
        device faster where each model's matmuls are already large (three GMA recall
        models of width 64 at N = 256: 0.21 s a step against 0.31 s under ``vmap``).
        With several devices the models are sharded and ``"map"`` falls back to ``vmap``.
    checkpoint:
        Path of the checkpoint file; default: a file inside the active
        :func:`checkpoint_scope`, else no checkpoint.  ``False`` disables it.
    callback:
        ``callback(info)`` after every block, with ``info`` a dict holding ``step``,
        ``block``, ``params`` and ``loss``.  An exception raised there stops the run
        (the checkpoint of that block is already written).
    tag:
        Any JSON-able value that distinguishes runs sharing a checkpoint file.

    Returns
    -------
    TrainResult
    """
    if (loss_fn is None) == (value_and_grad_fn is None):
        raise ValueError("loss_fn, value_and_grad_fn: give exactly one of them.")
    steps = int(steps)
    if steps < 1:
        raise ValueError(f"steps: must be a positive integer, got {steps}.")
    record_every = steps if record_every is None else int(record_every)
    if record_every < 1 or steps % record_every:
        raise ValueError(f"record_every: must divide steps={steps}, got {record_every}.")
    n_records = steps // record_every
    block = _choose_block(n_records, block_records)
    n_blocks = n_records // block
    if batched and key is not None and jnp.ndim(key) != 1:
        raise ValueError("key: with batched=True, pass one key per model (an array of keys).")

    has_key = key is not None
    fn_dyn, fn_key = _split_fns(loss_fn, value_and_grad_fn, metrics_fn)
    opt_key, tx = _optimizer_parts(optimizer)
    if batched not in (False, True, "map"):
        raise ValueError(f"batched: True, False or 'map', got {batched!r}.")
    if batched == "map" and _sharding.local_device_count() > 1:
        batched = True                    # models sharded over the devices: vmap per device
    build = (_programs.__wrapped__ if fn_key.key is None or opt_key.key is None
             else _programs)
    run_block, init_metrics = build(fn_key, opt_key, record_every, block, batched,
                                    batched_data, has_key, steps >= LONG_RUN_STEPS)
    n_models = jax.tree.leaves(params)[0].shape[0] if batched else None

    # strongly typed leaves: a weak-typed leaf (a Python float in an initialiser) comes back
    # strong from the first block, and the changed input type would compile the block again
    params = jax.tree.map(_strong, params)
    opt_state = jax.tree.map(_strong, (jax.vmap(tx.init) if batched else tx.init)(params))
    initial = {k: np.asarray(v) for k, v in init_metrics(params, data, fn_dyn).items()}

    path = _scoped_checkpoint() if checkpoint is None else (checkpoint or None)
    sig = None
    done, hist_rows, loss_rows = 0, {}, []
    if path is not None:
        path = Path(path)
        sig = _signature(params, opt_state, key, (data, fn_dyn), steps, record_every, block,
                         batched, [tag, sorted(initial)])
        hit = _load_ckpt(path, sig, params, opt_state) if path.exists() else None
        if hit is not None:
            done, params, opt_state, hist0, losses0 = hit
            hist_rows = {k: [v] for k, v in hist0.items()}
            loss_rows = [losses0] if losses0.size else []
    resumed_from = done

    shape = () if n_models is None else (n_models,)
    alive = jnp.ones(shape, bool)
    bad = jnp.full(shape, -1, jnp.int32)
    if batched and _sharding.local_device_count() > 1:
        # independent models: split them over the devices (jax.sharding; see gmtheory.sharding)
        units = (params, opt_state, alive, bad) + ((key,) if has_key else ())
        if _sharding.can_shard(units) and (not batched_data or _sharding.can_shard(data)):
            params, opt_state, alive, bad = _sharding.shard_leading((params, opt_state, alive,
                                                                     bad))
            key = _sharding.shard_leading(key) if has_key else key
            data = _sharding.shard_leading(data) if batched_data else _sharding.replicate(data)
    show = (_PROGRESS and not _QUIET.get()) if progress is None else progress
    bar = tqdm(total=steps, initial=done, desc=desc, disable=not show, leave=False,
               unit="step", unit_scale=True)
    try:
        for b in range(done // (block * record_every), n_blocks):
            first = jnp.asarray(b * block, jnp.int32)
            new_p, new_s, alive, bad, losses, hist = run_block(params, opt_state, alive, bad,
                                                               data, key, first, fn_dyn)
            alive_np = np.asarray(alive)
            if not np.all(alive_np):
                bad_np = np.atleast_1d(np.asarray(bad))
                seeds = None if n_models is None else np.flatnonzero(~alive_np).tolist()
                raise NonFiniteError(int(bad_np[~np.atleast_1d(alive_np)].min()), new_p,
                                     seeds, desc)
            params, opt_state = new_p, new_s
            done = (b + 1) * block * record_every
            loss_rows.append(np.asarray(losses))
            for k, v in hist.items():
                hist_rows.setdefault(k, []).append(np.asarray(v))
            if path is not None:
                _save_ckpt(path, sig, done, params, opt_state,
                           {k: np.concatenate(v) for k, v in hist_rows.items()},
                           np.concatenate(loss_rows))
            bar.update(block * record_every)
            last = np.asarray(losses)[-1]
            bar.set_postfix_str(f"loss {np.mean(last):.4g}")
            if callback is not None:
                callback({"step": done, "block": b, "params": params, "loss": last})
    finally:
        bar.close()

    history = {k: np.concatenate(v) for k, v in hist_rows.items()}
    losses = np.concatenate(loss_rows) if loss_rows else np.zeros((0,) + shape)
    rec_steps = record_every * np.arange(1, n_records + 1)
    return TrainResult(params, opt_state, history, losses, rec_steps, initial, resumed_from)


# ------------------------------------------------------------------ L-BFGS ---------------

class LBFGSResult(NamedTuple):
    x: Any             #: best parameters (same pytree structure as ``x0``)
    fun: float         #: objective at ``x``
    nit: int           #: iterations of the best start
    success: bool      #: SciPy's convergence flag for the best start
    funs: np.ndarray   #: final objective of every start


@functools.lru_cache(maxsize=64)
def _lbfgs_objective(fun, treedef, leaf_specs):
    """The jitted flat value-and-grad of ``fun``, built once per function and structure (a
    sweep that calls :func:`minimize_lbfgs` with the same ``fun`` traces it once)."""
    from jax.flatten_util import ravel_pytree

    example = jax.tree.unflatten(treedef, [jnp.zeros(sh, dt) for sh, dt in leaf_specs])
    _, unravel = ravel_pytree(example)
    # called once per L-BFGS iteration, thousands of times: compiled to run fast
    return jit_long(jax.value_and_grad(lambda v, d: fun(unravel(v), d)))


def minimize_lbfgs(fun: Callable, x0, data=None, *, starts=None, maxiter: int = 500,
                   gtol: float = 1e-10, ftol: float = 2.2e-9, bounds=None) -> LBFGSResult:
    """Minimise ``fun(x, data)`` by SciPy's L-BFGS-B on a jitted ``value_and_grad``.

    ``x0`` is a pytree of arrays (the first start); ``starts`` optionally lists further
    starts of the same structure.  The best start is returned.  The objective is
    compiled once for all starts (``data`` is passed as an argument, not baked in).
    """
    import scipy.optimize
    from jax.flatten_util import ravel_pytree

    flat0, unravel = ravel_pytree(x0)
    vg = _lbfgs_objective(fun, jax.tree.structure(x0),
                          tuple((jnp.shape(a), jnp.result_type(a)) for a in jax.tree.leaves(x0)))
    dtype = flat0.dtype

    def f(v):
        val, g = vg(jnp.asarray(v, dtype), data)
        val = float(val)
        if not np.isfinite(val):
            return np.inf, np.zeros_like(v)
        return val, np.asarray(g, dtype=float)

    all_starts = [flat0] + [ravel_pytree(s)[0] for s in (starts or [])]
    best, funs = None, []
    # SciPy's BLAS threads only fight XLA's for the cores on vectors this small (measured:
    # 70 small fits 12.5 s with 2 OpenBLAS threads, 0.08 s with 1)
    with threadpool_limits(limits=1, user_api="blas"):
        for s in all_starts:
            res = scipy.optimize.minimize(f, np.asarray(s, float), jac=True,
                                          method="L-BFGS-B", bounds=bounds,
                                          options={"maxiter": maxiter, "gtol": gtol,
                                                   "ftol": ftol})
            funs.append(float(res.fun))
            if best is None or res.fun < best.fun:
                best = res
    return LBFGSResult(unravel(jnp.asarray(best.x, dtype)), float(best.fun), int(best.nit),
                       bool(best.success), np.asarray(funs))
