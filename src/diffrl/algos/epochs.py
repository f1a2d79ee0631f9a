"""Minibatch epochs over a flattened rollout: the SGD driver shared by all algorithms.

Under a device mesh (``diffrl.plumbing.sharding``) the data is replicated once (one
all-gather of the rollout per update) and every minibatch, gathered with the global
permutation, is split over the devices: the permutation does not depend on the device
count, so results match one device, and each device computes its share of every
minibatch's loss (XLA all-reduces the gradient means).
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp

from diffrl.plumbing.sharding import replicate, shard_env_axis


def flatten_time_batch(tree: Any) -> Any:
    """(T, B, ...) leaves -> (T * B, ...)."""
    return jax.tree_util.tree_map(lambda x: x.reshape((-1,) + x.shape[2:]), tree)


def minibatch_epochs(
    key: jax.Array,
    data: Any,
    carry: Any,
    step_fn: Callable[[Any, Any, jax.Array], tuple[Any, dict]],
    num_epochs: int,
    num_minibatches: int,
) -> tuple[Any, dict]:
    """Run ``num_epochs`` shuffled passes of ``num_minibatches`` minibatches.

    data: pytree with leading axis N (N divisible by num_minibatches).
    step_fn(carry, minibatch, key) -> (carry, metrics of scalars).
    Returns the final carry and the metrics averaged over every step.
    """
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    size = n // num_minibatches
    data = replicate(data)

    def one_step(carry, inputs):
        idx, key_step = inputs
        batch = shard_env_axis(jax.tree_util.tree_map(lambda x: x[idx], data))
        return step_fn(carry, batch, key_step)

    def one_epoch(carry, key_epoch):
        key_perm, key_steps = jax.random.split(key_epoch)
        perm = jax.random.permutation(key_perm, n)[: size * num_minibatches]
        return jax.lax.scan(one_step, carry, (perm.reshape(num_minibatches, size),
                                              jax.random.split(key_steps, num_minibatches)))

    carry, metrics = jax.lax.scan(one_epoch, carry, jax.random.split(key, num_epochs))
    return carry, jax.tree_util.tree_map(jnp.mean, metrics)
