"""Data-parallel sharding: one device mesh, the environment batch axis split over it.

Design (GSPMD, ``jax.jit`` + ``jax.sharding``; no ``pmap``): training is ONE global
program. A 1-D mesh ``("batch",)`` spans ``num_devices`` devices (across every process
in a multi-host run). The env state, the rollout and every per-env array carry a
sharding constraint that splits the env axis ``B`` over the mesh; parameters,
optimiser states, duals and the observation statistics are replicated. XLA's SPMD
partitioner then

* runs each device's slice of the environments (reset, step, policy sampling) locally;
* turns every mean over the batch (losses, observation statistics, metrics) into a
  local partial sum plus an all-reduce, so gradients are averaged over the global
  batch and every replica applies the same update;
* draws random numbers for a sharded array on the device that owns it
  (``jax_threefry_partitionable``), so the draws are those of the 1-device program.

The program is therefore the same for any device count and its results agree with
one device to float rounding (summation order). No per-device or per-process key is
folded in: that would make results depend on the device count.

Minibatch SGD (``algos.epochs``) keeps the global shuffle over the flattened ``T * B``
rollout: the rollout is all-gathered (replicated) once per update, and each
minibatch, gathered from the local replica by the global permutation, is itself
sharded over the mesh, so the learner's forward/backward passes are split too. The
cost is one all-gather of the rollout per iteration and a replica of it per device;
shuffling within device shards would avoid it but would tie the permutation to the
device count.

Functions here are no-ops when no mesh is active, so pure functions can still be
called (and tested) outside a mesh; the trainer traces everything under
``jax.set_mesh(mesh)``. Which parts of a train state are split and which replicated is the
train state's own business (``diffrl.core.loop.state_shardings``): this module knows meshes
and constraints, not what diffrl keeps in its state, so the replay buffer and the algorithms
can build on it.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any

import jax
import numpy as np
from jax.sharding import AxisType, Mesh
from jax.sharding import PartitionSpec as P

BATCH_AXIS = "batch"
MATMUL_PRECISIONS = ("default", "high", "highest")


def make_mesh(num_devices: int | None = None) -> Mesh:
    """1-D mesh over the first ``num_devices`` of ``jax.devices()`` (None: all, every process)."""
    devices = jax.devices()
    n = len(devices) if num_devices is None else int(num_devices)
    if not 1 <= n <= len(devices):
        raise ValueError(f"--num-devices {n}: only {len(devices)} device(s) available ({devices[0].platform})")
    return Mesh(np.array(devices[:n]), (BATCH_AXIS,), axis_types=(AxisType.Auto,))


def local_mesh() -> Mesh:
    """A mesh of this process's first device: for host-side work of one process (export)."""
    return Mesh(np.array(jax.local_devices()[:1]), (BATCH_AXIS,), axis_types=(AxisType.Auto,))


def wait_for_all_processes(name: str) -> None:
    """Barrier across the processes of a multi-process run (no-op with one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def _active() -> bool:
    mesh = jax.sharding.get_abstract_mesh()
    return not mesh.empty and BATCH_AXIS in mesh.axis_names


def shard_env_axis(tree: Any, axis: int = 0) -> Any:
    """Constrain every leaf's ``axis`` (the env axis: 0 for env states, 1 for (T, B) rollouts)
    to be split over the mesh. Leaves with fewer dimensions are left alone."""
    if not _active():
        return tree
    spec = P(*([None] * axis + [BATCH_AXIS]))

    def constrain(x):
        return jax.lax.with_sharding_constraint(x, spec) if getattr(x, "ndim", 0) > axis else x

    return jax.tree.map(constrain, tree)


def replicate(tree: Any) -> Any:
    """Constrain every leaf to be replicated on every device of the mesh."""
    if not _active():
        return tree
    return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, P()), tree)


def matmul_precision(name: str):
    """Context manager for the matmul precision of everything traced inside it.

    default: the backend's default (on GPUs with TF32/bf16 units, fast reduced-precision
    passes); high: bf16_3x / TF32-class; highest: full float32.
    """
    if name not in MATMUL_PRECISIONS:
        raise ValueError(f"matmul precision must be one of {', '.join(MATMUL_PRECISIONS)} (got {name!r})")
    return contextlib.nullcontext() if name == "default" else jax.default_matmul_precision(name)


def to_host(tree: Any) -> Any:
    """Numpy copy of a pytree of (possibly multi-process, non-addressable) global arrays.

    Every process must call this (gathering a sharded array across processes is a
    collective). Replicated arrays are read from a local replica.
    """
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    def fetch(x):
        if not isinstance(x, jax.Array) or x.is_fully_addressable:
            return jax.device_get(x)
        if x.sharding.is_fully_replicated:
            return np.asarray(x.addressable_data(0))
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))

    return jax.tree.map(fetch, tree)


def initialize_distributed(coordinator_address: str | None, num_processes: int | None,
                           process_id: int | None) -> bool:
    """Join a multi-process run (``jax.distributed.initialize``) when a coordinator is given,
    either as an argument or as ``DIFFRL_COORDINATOR_ADDRESS`` (with ``DIFFRL_NUM_PROCESSES``
    and ``DIFFRL_PROCESS_ID``). Must run before JAX touches a device. Returns True if joined.

    On CPUs the cross-process collectives use gloo (``jax_cpu_collectives_implementation``).
    """
    env = os.environ
    coordinator_address = coordinator_address or env.get("DIFFRL_COORDINATOR_ADDRESS")
    if not coordinator_address:
        return False
    if num_processes is None and "DIFFRL_NUM_PROCESSES" in env:
        num_processes = int(env["DIFFRL_NUM_PROCESSES"])
    if process_id is None and "DIFFRL_PROCESS_ID" in env:
        process_id = int(env["DIFFRL_PROCESS_ID"])
    if jax.distributed.is_initialized():
        return True
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id)
    return True
