"""A gymnasium vector env (Towers et al., 2024, "Gymnasium") as a host batch.

diffrl batches host simulators itself (``diffrl.envs.host``: one env per copy, worker processes). A
simulator that comes already batched as a ``gymnasium.vector.VectorEnv`` (gymnasium's
``SyncVectorEnv``/``AsyncVectorEnv``, or a third-party vector env with the same interface: Box spaces,
``reset(seed=[...], options={"reset_mask": mask})``) is served by :class:`GymVectorBatch` instead, with
the semantics of the rest of the training stack: actions in [-1, 1] clipped and mapped to the task's
bounds, the time limit a truncation separate from a termination (a termination on the same step wins),
the true final observation, auto-reset on the same step, episode return and length on the step an
episode ends, and time-limit counters spread uniformly at a training batch's first reset.

Decisions:

* the vector env must be built with ``autoreset_mode=AutoresetMode.DISABLED``: this class resets the
  ended envs itself in the same step (``reset_mask``), which is what gives the final observation and
  lets the run's own time limit end an episode that the env's would not;
* env ``i``'s ``k``-th episode is reset with the seed of ``np.random.SeedSequence([seed, i, k])``,
  exactly as the worker batch seeds its copies, so a vector of the same envs gives the worker batch's
  steps bit for bit (tested);
* observations are flattened to float32 per env; success is not reported (NaN), as for any task
  without a ``success_once``.

Register one for training with :func:`diffrl.envs.host_registry.register_host` (its ``make_batch``);
:func:`vector_batch_maker` builds ``gymnasium.make_vec`` batches of a registered gymnasium id.
"""
from __future__ import annotations

import functools

import numpy as np

from diffrl.envs.gymnasium_env import box_spec, time_limit
from diffrl.envs.host import HostStep, batch_spec, first_step_counts, native_action


class GymVectorBatch:
    """A ``gymnasium.vector.VectorEnv`` behind the :class:`~diffrl.envs.host.HostVecEnv` protocol.

    Args:
      vector_env: built with ``autoreset_mode=gymnasium.vector.AutoresetMode.DISABLED``; closed by
        :meth:`close`.
      episode_length: the batch's time limit (default: the sub-envs' own).
      name: the spec's name.
    """

    def __init__(self, vector_env, episode_length: int | None = None, name: str = "gym/vector"):
        from gymnasium.vector import AutoresetMode

        mode = getattr(vector_env, "metadata", {}).get("autoreset_mode")
        if mode != AutoresetMode.DISABLED:
            vector_env.close()
            raise ValueError(f"{name}: build the vector env with autoreset_mode=AutoresetMode.DISABLED (got {mode}); "
                             "GymVectorBatch resets ended envs itself, in the same step")
        self.env = vector_env
        self.num_envs = int(vector_env.num_envs)
        self.native_spec = box_spec(vector_env.single_observation_space, vector_env.single_action_space,
                                    time_limit(vector_env), name)
        self.spec = batch_spec(self.native_spec, episode_length or self.native_spec.episode_length)
        self._low = np.asarray(self.native_spec.action_low, np.float32)
        self._high = np.asarray(self.native_spec.action_high, np.float32)
        self._act_shape = tuple(vector_env.single_action_space.shape)

    def _seeds(self) -> list[int]:
        """The next episode's seed of every env (only the reset ones are used)."""
        return [int(np.random.SeedSequence([self._seed, i, int(k)]).generate_state(1)[0])
                for i, k in enumerate(self._episode)]

    def _obs(self, obs) -> np.ndarray:
        return np.asarray(obs, np.float32).reshape(self.num_envs, -1)

    def reset(self, seed: int, spread_counters: bool = True) -> HostStep:
        self._seed = int(seed)
        self._episode = np.zeros(self.num_envs, np.int64)
        obs, _ = self.env.reset(seed=self._seeds())
        self._episode += 1
        obs = self._obs(obs)
        self._step_count = (first_step_counts(seed, self.num_envs, self.spec.episode_length) if spread_counters
                            else np.zeros(self.num_envs, np.int64))
        self._ep_length = np.zeros(self.num_envs, np.int64)
        self._ep_return = np.zeros(self.num_envs, np.float64)
        zeros = np.zeros(self.num_envs, np.float32)
        false = np.zeros(self.num_envs, bool)
        self._last_obs = obs
        return HostStep(obs, zeros, false, false, obs.copy(), zeros, zeros.astype(np.int32), zeros, false)

    def step(self, actions) -> HostStep:
        unit = np.asarray(actions, np.float32).reshape(self.num_envs, -1)
        native = native_action(unit, self._low, self._high).reshape((self.num_envs,) + self._act_shape)
        obs, reward, terminated, sim_truncated, _ = self.env.step(native)
        final = self._obs(obs)
        reward = np.asarray(reward, np.float64).reshape(self.num_envs)
        terminated = np.asarray(terminated, bool).reshape(self.num_envs)
        # A non-finite step under a finite action is a finite termination from the last finite observation
        # (wrappers.NonFiniteGuard); a non-finite action is a diverged policy, whose NaN must show.
        nonfinite = ~(np.all(np.isfinite(final), axis=1) & np.isfinite(reward)) & np.all(np.isfinite(unit), axis=1)
        if nonfinite.any():
            final = np.where(nonfinite[:, None], self._last_obs, final)
            reward = np.where(nonfinite, 0.0, reward)
            terminated = terminated | nonfinite
        self._step_count += 1
        self._ep_length += 1
        self._ep_return += reward
        truncated = (np.asarray(sim_truncated, bool).reshape(self.num_envs)
                     | (self._step_count >= self.spec.episode_length)) & ~terminated
        done = terminated | truncated
        ep_return = np.where(done, self._ep_return, 0.0).astype(np.float32)
        ep_length = np.where(done, self._ep_length, 0).astype(np.int32)
        next_obs = final
        if done.any():
            fresh, _ = self.env.reset(seed=self._seeds(), options={"reset_mask": done})
            self._episode[done] += 1
            next_obs = np.where(done[:, None], self._obs(fresh), final)
            self._step_count[done] = 0
            self._ep_length[done] = 0
            self._ep_return[done] = 0.0
        success = np.where(done, np.nan, 0.0).astype(np.float32)
        self._last_obs = next_obs
        return HostStep(next_obs, reward.astype(np.float32), terminated, truncated, final.copy(), ep_return,
                        ep_length, success, nonfinite)

    def close(self) -> None:
        self.env.close()


def _make_vector_batch(env_id: str, vectorization_mode: str, name: str, make_kwargs: dict,
                       num_envs: int, episode_length: int) -> GymVectorBatch:
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode

    vector = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=vectorization_mode,
                          vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED}, **make_kwargs)
    return GymVectorBatch(vector, episode_length, name=name)


def vector_batch_maker(env_id: str, vectorization_mode: str = "async", name: str | None = None, **make_kwargs):
    """``(num_envs, episode_length) -> GymVectorBatch`` of ``gymnasium.make_vec(env_id, ...)``
    (``async``: one process per env, gymnasium's design; ``sync``: in this process)."""
    if vectorization_mode not in ("async", "sync"):
        raise ValueError(f"vectorization_mode must be async or sync (got {vectorization_mode!r})")
    return functools.partial(_make_vector_batch, env_id, vectorization_mode, name or f"gym/{env_id}", make_kwargs)
