"""Placement of independent work units on the visible devices, through ``jax.sharding``.

The engines shard the axis along which a simulation's units are independent — the models
(seeds) of a batched :func:`gmtheory.training.train`, the prompts of
:func:`gmtheory.problems.prompt_sq_errors`, the pretraining trials of
:func:`gmtheory.icl.g_task_trials` — over every device of this process, so that a
simulation gets the devices without device code of its own.  The same program runs on one
CPU, on one GPU, or on eight GPUs; only the placement of its inputs changes.

In a multi-process job (``jax.distributed``), each process owns different sweep points
(see :func:`gmtheory.simulations.run_simulation`), so placement uses the process's
*local* devices only: no collective spans processes.

When the unit count is not a multiple of the device count, the units stay on one device
(padding would change which random stream a unit sees).
"""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

__all__ = ["local_device_count", "local_mesh", "can_shard", "shard_leading", "replicate"]


def local_device_count() -> int:
    """Number of devices of this process (``XLA_FLAGS=--xla_force_host_platform_device_count=4``
    gives four CPU devices)."""
    return jax.local_device_count()


def local_mesh(axis: str = "units") -> Mesh:
    """A one-dimensional mesh over this process's devices."""
    return Mesh(np.array(jax.local_devices()), (axis,))


def can_shard(tree) -> bool:
    """Whether every leaf has a leading axis that splits evenly over the local devices
    (and there is more than one device)."""
    n = jax.local_device_count()
    leaves = jax.tree.leaves(tree)
    if n == 1 or not leaves:
        return False
    return all(np.ndim(x) >= 1 and np.shape(x)[0] % n == 0 for x in leaves)


def shard_leading(tree):
    """Place every leaf of ``tree`` with its leading axis split over the local devices.

    Returns ``tree`` unchanged on one device, or when some leading axis is not a multiple
    of the device count."""
    if not can_shard(tree):
        return tree
    sharding = NamedSharding(local_mesh(), P("units"))
    return jax.tree.map(lambda x: jax.device_put(x, sharding), tree)


def replicate(tree):
    """Place every leaf of ``tree`` on all local devices (for data that every unit reads)."""
    if jax.local_device_count() == 1 or not jax.tree.leaves(tree):
        return tree
    sharding = NamedSharding(local_mesh(), P())
    return jax.tree.map(lambda x: jax.device_put(x, sharding), tree)
