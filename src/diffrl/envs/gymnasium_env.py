"""Gymnasium environments (Towers et al., 2024, "Gymnasium") as host environments.

``gym/<Id>`` is ``gymnasium.make(Id)`` stepped on the host (``diffrl.envs.host``), in worker processes
like dm_control: the 11 MuJoCo v5 tasks (``gym/HalfCheetah-v5``, ``gym/Humanoid-v5``, ...; MuJoCo's C
engine, the pinned mujoco 3.17.0, and ``imageio``, which gymnasium's MuJoCo module imports) and the two
continuous classic-control tasks. :class:`GymnasiumHostEnv` also wraps any gymnasium ``Env`` with Box
observation and action spaces (``GymnasiumHostEnv(my_env)``).

Decisions:
* the observation is flattened to float32; the action bounds are the action space's (they must be
  finite);
* ``terminated``/``truncated`` are gymnasium's own (its ``TimeLimit``: 1000 steps for most MuJoCo
  tasks, 50 for Reacher, 100 for Pusher, 200 for Pendulum, 999 for MountainCarContinuous) and the
  spec's episode length is that limit;
* each episode is reset with its own seed (``reset(seed=...)``), so episodes are reproducible.
"""
from __future__ import annotations

import numpy as np

from diffrl.envs.base import EnvSpec, check_spec

GYM_TASKS: tuple[str, ...] = (
    "Ant-v5", "HalfCheetah-v5", "Hopper-v5", "Humanoid-v5", "HumanoidStandup-v5", "InvertedDoublePendulum-v5",
    "InvertedPendulum-v5", "Pusher-v5", "Reacher-v5", "Swimmer-v5", "Walker2d-v5",
    "Pendulum-v1", "MountainCarContinuous-v0",
)
"""Gymnasium 1.3's continuous-control tasks that build offline with diffrl's dependencies."""


def time_limit(env) -> int | None:
    """A gymnasium env's (or vector env's) registered ``max_episode_steps``, None without one."""
    spec = getattr(env, "spec", None)
    return spec.max_episode_steps if spec is not None else None


def box_spec(obs_space, act_space, episode_length: int | None, name: str) -> EnvSpec:
    """One env's spec from gymnasium spaces: Box observation and bounded Box action spaces refused
    otherwise; the time limit is ``episode_length`` (1000 when None)."""
    import gymnasium as gym

    if not isinstance(obs_space, gym.spaces.Box) or not isinstance(act_space, gym.spaces.Box):
        raise ValueError(f"{name}: diffrl needs Box observation and action spaces "
                         f"(got {type(obs_space).__name__}, {type(act_space).__name__})")
    low, high = np.asarray(act_space.low, np.float64).ravel(), np.asarray(act_space.high, np.float64).ravel()
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
        raise ValueError(f"{name}: the action space must be bounded (got {act_space})")
    spec = EnvSpec(name=name, obs_size=int(np.prod(obs_space.shape)), action_size=int(low.size),
                   action_low=tuple(float(x) for x in low), action_high=tuple(float(x) for x in high),
                   episode_length=int(episode_length or 1000))
    check_spec(spec)
    return spec


class GymnasiumHostEnv:
    """One gymnasium environment behind the :class:`~diffrl.envs.host.HostEnv` protocol.

    Args:
      env: a gymnasium id (made with ``gymnasium.make(env, **make_kwargs)``) or an ``Env``.
      name: the spec's name (default ``gym/<id>``).
    """

    def __init__(self, env, name: str | None = None, **make_kwargs):
        import gymnasium as gym

        if isinstance(env, str):
            if env not in GYM_TASKS and name is None:
                import difflib

                close = difflib.get_close_matches(env, GYM_TASKS, n=3)
                hint = f" Did you mean: {', '.join('gym/' + c for c in close)}?" if close else ""
                raise ValueError(f"unknown gymnasium task {env!r}.{hint} Supported: {', '.join(GYM_TASKS)}")
            name = name or f"gym/{env}"
            env = gym.make(env, **make_kwargs)
        self.env, self._shape = env, env.action_space.shape
        self.spec = box_spec(env.observation_space, env.action_space, time_limit(env), name or "gym/custom")

    def reset(self, seed: int) -> np.ndarray:
        obs, _ = self.env.reset(seed=int(seed))
        return np.asarray(obs, np.float32).ravel()

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool]:
        obs, reward, terminated, truncated, _ = self.env.step(np.asarray(action).reshape(self._shape))
        return np.asarray(obs, np.float32).ravel(), float(reward), bool(terminated), bool(truncated)

    def close(self) -> None:
        self.env.close()
