"""The environment interface: unbatched ``reset(key)`` / ``step(state, action)``.

An environment is anything with the attributes and two methods of :class:`Env`.
It works on ONE environment instance (no batch axis). Batching, time limits,
auto-reset, action rescaling and episode statistics are wrappers
(:mod:`diffrl.envs.wrappers`), so a user-written environment only has to say what
its physics does.

All environments exchange one state type, :class:`EnvState`. An adapter fills the
simulator fields (``inner``, ``obs``, ``critic_obs``, ``reward``, ``terminated``);
the bookkeeping fields (``truncated``, step counter, episode statistics, the true
final observation, the auto-reset key) start at neutral values and are owned by the
wrappers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct


@dataclass(frozen=True)
class EnvSpec:
    """Static description of an environment (no arrays that JAX traces).

    ``action_low``/``action_high`` are the simulator's native bounds; policies
    always act in [-1, 1] and :class:`diffrl.envs.wrappers.RescaleAction` maps.
    """

    name: str
    obs_size: int
    action_size: int
    action_low: tuple[float, ...]
    action_high: tuple[float, ...]
    episode_length: int
    """Steps until truncation by the time limit wrapper."""
    critic_obs_size: int | None = None
    """Size of the privileged critic observation; ``None`` means same as ``obs``."""
    modes: int = 0
    """Number of behaviour modes the task defines (0 = none); see ``EnvState.info['mode']``."""

    @property
    def critic_size(self) -> int:
        return self.obs_size if self.critic_obs_size is None else self.critic_obs_size


@struct.dataclass
class EnvState:
    """State of one environment (or, after ``VmapWrapper``, a batch of them).

    Fields (shapes for one environment):
      inner: the simulator's own state pytree.
      obs: (obs_size,) float32 actor observation.
      critic_obs: (critic_size,) float32 critic observation (== obs unless asymmetric).
      reward: () float32 reward of the last transition.
      terminated: () bool, the MDP reached a terminal state (no bootstrapping).
      truncated: () bool, the episode was cut by a time limit (bootstrap from final obs).
      step_count: () int32 steps since the episode began.
      final_obs / final_critic_obs: observation the last transition really ended in.
        Equals ``obs`` unless the auto-reset wrapper just replaced ``obs`` by a reset.
      episode_return / episode_length: running statistics of the current episode.
      info: dict of extra per-env arrays; wrappers add ``returned_episode`` (bool),
        ``returned_episode_return`` and ``returned_episode_length`` on episode ends, and
        ``nonfinite_state`` (bool) on a step whose simulation went non-finite.
      key: () PRNG key used for auto-resets.
    """

    inner: Any
    obs: jax.Array
    critic_obs: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    step_count: jax.Array
    final_obs: jax.Array
    final_critic_obs: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array
    info: dict
    key: jax.Array

    @classmethod
    def create(
        cls,
        inner: Any,
        obs: jax.Array,
        reward: jax.Array | float = 0.0,
        terminated: jax.Array | bool = False,
        critic_obs: jax.Array | None = None,
        info: dict | None = None,
        key: jax.Array | None = None,
    ) -> "EnvState":
        """Build a state from the simulator fields; bookkeeping starts neutral."""
        obs = jnp.asarray(obs, jnp.float32)
        critic_obs = obs if critic_obs is None else jnp.asarray(critic_obs, jnp.float32)
        return cls(
            inner=inner,
            obs=obs,
            critic_obs=critic_obs,
            reward=jnp.asarray(reward, jnp.float32),
            terminated=jnp.asarray(terminated, jnp.bool_),
            truncated=jnp.zeros((), jnp.bool_),
            step_count=jnp.zeros((), jnp.int32),
            final_obs=obs,
            final_critic_obs=critic_obs,
            episode_return=jnp.zeros((), jnp.float32),
            episode_length=jnp.zeros((), jnp.int32),
            info={} if info is None else dict(info),
            key=jax.random.PRNGKey(0) if key is None else key,
        )

    @property
    def done(self) -> jax.Array:
        return jnp.logical_or(self.terminated, self.truncated)


@runtime_checkable
class Env(Protocol):
    """What an environment provides. Unbatched: one instance, no leading axis.

    ``step`` receives actions in the native bounds of ``spec`` and must return an
    :class:`EnvState` whose pytree structure equals the one ``reset`` returns (so it
    can be carried through ``lax.scan``). It must not reset itself on termination:
    the auto-reset wrapper does that.
    """

    spec: EnvSpec

    def reset(self, key: jax.Array) -> EnvState: ...

    def step(self, state: EnvState, action: jax.Array) -> EnvState: ...


def check_spec(spec: EnvSpec) -> None:
    """Reject inconsistent specs with a clear message."""
    low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
    if low.shape != (spec.action_size,) or high.shape != (spec.action_size,):
        raise ValueError(f"{spec.name}: action bounds must have shape ({spec.action_size},)")
    if not np.all(high > low):
        raise ValueError(f"{spec.name}: every action_high must exceed action_low")
    if spec.episode_length <= 0:
        raise ValueError(f"{spec.name}: episode_length must be positive")
