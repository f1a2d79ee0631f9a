"""Adapter for the continuous-action gymnax tasks (Lange, 2022, "gymnax: A JAX-based
Reinforcement Learning Environment Library").

gymnax 1.x ``step`` auto-resets and returns 6 values (gymnax's ``Environment.step``). We
call ``step_env`` instead, which neither resets nor applies the time limit: in gymnax
1.0.1 its ``done`` is the natural termination only (``is_terminal`` ==
``is_terminated``; ``is_truncated`` is applied by ``step``). For safety the env
params' ``max_steps_in_episode`` is still set very large, and its default value
becomes our ``spec.episode_length`` so that :class:`~diffrl.envs.wrappers.TimeLimit`
does the truncation. Per task: Pendulum-v1, PointRobot-misc, Reacher-misc and
Swimmer-misc never terminate; MountainCarContinuous-v0 terminates at the goal
(position >= 0.45 moving right).

``state.inner`` is ``{"env_state": gymnax state, "key": PRNG key}``: ``step_env`` needs
a key (PointRobot resamples positions, for example), split from that stored one.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.envs.base import EnvSpec, EnvState, check_spec
from diffrl.envs.wrappers import strip_weak_types

GYMNAX_ENVS: tuple[str, ...] = (
    "Pendulum-v1", "MountainCarContinuous-v0", "PointRobot-misc", "Reacher-misc", "Swimmer-misc",
)
_NO_TIME_LIMIT = 1_000_000_000


class GymnaxEnv:
    """One continuous gymnax task behind the :class:`~diffrl.envs.base.Env` protocol.

    Args:
      task: gymnax registry name, e.g. ``"Pendulum-v1"``.
      episode_length: steps until truncation; default: gymnax's own
        ``max_steps_in_episode`` (Pendulum 200, MountainCarContinuous 999, ...).
      **env_kwargs: passed to ``gymnax.make``.
    """

    def __init__(self, task: str, episode_length: int | None = None, **env_kwargs):
        if task not in GYMNAX_ENVS:
            raise ValueError(
                f"unsupported gymnax task {task!r}; continuous tasks: {', '.join(GYMNAX_ENVS)}"
            )
        import gymnax  # lazy

        self.env, default_params = gymnax.make(task, **env_kwargs)
        self.params = default_params.replace(max_steps_in_episode=_NO_TIME_LIMIT)
        space = self.env.action_space(default_params)
        n = int(np.prod(space.shape))
        low = np.broadcast_to(np.asarray(space.low, np.float64), (n,))
        high = np.broadcast_to(np.asarray(space.high, np.float64), (n,))
        length = default_params.max_steps_in_episode if episode_length is None else episode_length
        obs_size = int(np.prod(self.env.observation_space(default_params).shape))
        self.action_shape = tuple(space.shape)
        self.spec = EnvSpec(
            name=f"gymnax/{task}",
            obs_size=obs_size,
            action_size=n,
            action_low=tuple(float(x) for x in low),
            action_high=tuple(float(x) for x in high),
            episode_length=int(length),
        )
        check_spec(self.spec)

    def reset(self, key: jax.Array) -> EnvState:
        key_reset, key_store = jax.random.split(key)
        obs, env_state = self.env.reset_env(key_reset, self.params)
        inner = strip_weak_types({"env_state": env_state, "key": key_store})
        return EnvState.create(inner=inner, obs=jnp.reshape(obs, (-1,)))

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        key_step, key_next = jax.random.split(state.inner["key"])
        action = jnp.reshape(jnp.asarray(action, jnp.float32), self.action_shape)
        obs, env_state, reward, terminated, _ = self.env.step_env(
            key_step, state.inner["env_state"], action, self.params
        )
        obs = jnp.reshape(jnp.asarray(obs, jnp.float32), (-1,))
        return state.replace(
            inner=strip_weak_types({"env_state": env_state, "key": key_next}),
            obs=obs,
            critic_obs=obs,
            final_obs=obs,
            final_critic_obs=obs,
            reward=jnp.reshape(jnp.asarray(reward, jnp.float32), ()),
            terminated=jnp.reshape(jnp.asarray(terminated, jnp.bool_), ()),
        )
