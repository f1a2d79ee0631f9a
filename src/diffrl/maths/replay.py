"""A replay buffer that lives in the train state: a ring of rollouts, per environment.

Off-policy algorithms (``diffrl.algos.offpolicy``) keep their experience in their algorithm
state, so it is jitted, vmapped over seeds, sharded and checkpointed with everything else
and a resumed run continues from exactly the same buffer.

Layout: every leaf of ``data`` is (capacity, B, ...): ``capacity`` slots of one time step
for each of the B parallel environments (the rollout's own (T, B, ...) axes, so a rollout
of T steps is written as T consecutive slots, oldest overwritten first). The env axis B is
the one split over devices (``diffrl.core.loop.state_shardings``): each device holds
the transitions of its own environments. Sampling draws (slot, env) pairs uniformly over
the filled slots with one global key, so the same key gives the same minibatch whatever
the number of devices.

DECISION: a small ring written here rather than ``flashbax``: flashbax's item buffer keeps
a flat (capacity, ...) layout whose add axis is not the env axis we shard along, and its
state carries Python-side ``chex`` dataclasses; the ring is ~60 lines of ``jnp`` whose
layout the sharding rules and checkpoints already understand.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from diffrl.plumbing.sharding import shard_env_axis


@struct.dataclass
class ReplayBuffer:
    """data: pytree of (capacity, B, ...) arrays; position: () int32, the next slot to write;
    size: () int32, slots filled so far (<= capacity)."""

    data: Any
    position: jax.Array
    size: jax.Array

    @property
    def capacity(self) -> int:
        return jax.tree_util.tree_leaves(self.data)[0].shape[0]

    @property
    def num_envs(self) -> int:
        return jax.tree_util.tree_leaves(self.data)[0].shape[1]

    @property
    def transitions(self) -> jax.Array:
        """() int32, stored transitions (filled slots x envs)."""
        return self.size * self.num_envs


def slots_for(buffer_size: int, num_envs: int) -> int:
    """Slots per environment holding ``buffer_size`` transitions in all (at least one)."""
    return max(1, buffer_size // num_envs)


def init_buffer(example: Any, capacity: int) -> ReplayBuffer:
    """An empty buffer for items shaped like ``example`` (a pytree of (B, ...) arrays, one step
    of B environments), with ``capacity`` slots."""
    data = jax.tree_util.tree_map(lambda x: jnp.zeros((capacity,) + x.shape, x.dtype), example)
    return ReplayBuffer(data=data, position=jnp.zeros((), jnp.int32), size=jnp.zeros((), jnp.int32))


def add(buffer: ReplayBuffer, items: Any) -> ReplayBuffer:
    """Write a rollout (pytree of (T, B, ...) arrays, T <= capacity) into the next T slots,
    wrapping around; the oldest slots are overwritten first."""
    capacity = buffer.capacity
    length = jax.tree_util.tree_leaves(items)[0].shape[0]
    if length > capacity:
        raise ValueError(f"a rollout of {length} steps does not fit a buffer of {capacity} slots per env")
    slots = (buffer.position + jnp.arange(length)) % capacity
    data = jax.tree_util.tree_map(lambda store, new: store.at[slots].set(new.astype(store.dtype)),
                                  buffer.data, items)
    data = shard_env_axis(data, axis=1)  # each device keeps its own environments' transitions
    return ReplayBuffer(data=data, position=(buffer.position + length) % capacity,
                        size=jnp.minimum(buffer.size + length, capacity))


def sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> Any:
    """(batch_size, ...) items drawn uniformly, with replacement, from the filled slots of every
    environment. The buffer must not be empty (the caller waits for ``learning_starts``)."""
    key_slot, key_env = jax.random.split(key)
    slot = jax.random.randint(key_slot, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    env = jax.random.randint(key_env, (batch_size,), 0, buffer.num_envs)
    # The filled slots are [0, size) until the ring wraps, then all of them: oldest-first order
    # does not matter for uniform sampling, so slot indices are used as drawn.
    return jax.tree_util.tree_map(lambda x: x[slot, env], buffer.data)
