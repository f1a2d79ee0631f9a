"""The algorithm interface: pure ``init`` / ``act`` / ``update`` functions.

The training core (``diffrl.core.loop``) owns the environment, the observation
normalisers and the rollout; an algorithm owns its parameters and optimiser
states (one pytree, ``AlgoState``) and sees rollouts as a :class:`Rollout` with
``(T, B, ...)`` axes. The ``policy_aux`` field is whatever the policy's ``sample``
handed back (a typed pytree), so new policies plug in without touching the loop.
"""
from __future__ import annotations

from typing import Any, Protocol

import jax
from flax import struct

from diffrl.envs.base import EnvSpec

AlgoState = Any


@struct.dataclass
class Rollout:
    """One iteration of experience, axes (T, B, ...). Observations are normalised
    with the statistics in force during the rollout.

    obs, critic_obs: (T, B, o), (T, B, oc) observations the actions were taken in.
    action: (T, B, d) in [-1, 1].
    reward: (T, B) scaled reward.
    terminated, truncated: (T, B) bool.
    next_obs, next_critic_obs: (T, B, o) TRUE next observations (the final
      observation of an episode that just ended, not the reset one).
    policy_aux: pytree with leading (T, B) from ``policy.sample``.
    """

    obs: jax.Array
    critic_obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    next_obs: jax.Array
    next_critic_obs: jax.Array
    policy_aux: Any


class Algorithm(Protocol):
    name: str
    policy: Any

    def init(self, key: jax.Array, spec: EnvSpec) -> AlgoState: ...

    def act(self, state: AlgoState, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, Any]:
        """(B, o) -> actions (B, d) in [-1, 1] and the policy aux pytree."""
        ...

    def update(self, state: AlgoState, rollout: Rollout, key: jax.Array) -> tuple[AlgoState, dict]:
        """One learning phase on a rollout; metrics are scalars."""
        ...

    def eval_action(self, state: AlgoState, obs: jax.Array, critic_obs: jax.Array,
                    key: jax.Array, sampler: str) -> jax.Array: ...

    @property
    def samplers(self) -> tuple[str, ...]: ...
