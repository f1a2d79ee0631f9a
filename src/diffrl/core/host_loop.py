"""Training and evaluation on host environments (simulators stepped outside JAX).

The JAX loop (``diffrl.core.loop``) rolls out inside one compiled ``lax.scan``; a host simulator
(``diffrl.envs.host``: dm_control in worker processes) cannot run there. Here an iteration is:

1. one compiled call that splits the iteration's keys exactly as the JAX loop does;
2. ``num_steps`` host steps, each calling ONE compiled act function on the whole batch (all seeds
   at once: the batch holds ``num_seeds * num_envs`` envs, seed ``s`` owning the ``s``-th slice)
   and stepping the host batch with its actions;
3. one compiled call that builds the transitions, updates the normalisers and runs the algorithm's
   update: ``diffrl.core.loop.finish_iteration``, the very function the JAX loop calls.

So given the same transitions both loops learn identically (tested against the JAX loop on a JAX
environment stepped through this path). The train state is the same pytree except ``env_state``,
which is ``None``: the simulators' state lives in the workers, so a resumed run starts fresh
episodes while everything learned (parameters, optimiser, normalisers, keys, counters) resumes
exactly.

Evaluation mirrors ``diffrl.core.evaluate``: ``eval_envs`` episodes per seed from fresh resets, each
counted until it first ends, with the same per-step keys.
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from diffrl.core.loop import TrainState, finish_iteration, make_transition, state_shardings
from diffrl.core.stepping import Started, replicated
from diffrl.maths.normalization import init_stats, normalise_obs, update_stats


def host_seed(key: jax.Array) -> int:
    """A reproducible 31-bit integer seed for host simulators from a JAX key."""
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    words = np.asarray(data, np.uint64).ravel()
    return int((words[0] * 2654435761 + words[-1]) % (2**31 - 1))


def _stack_time(values: list) -> jax.Array:
    """(S, B, ...) per step -> (S, T, B, ...) on the device: numpy steps are stacked on the host and
    sent in one transfer, device steps (a GPU simulator's, through DLPack) stay on the device."""
    if isinstance(values[0], jax.Array):
        return jnp.stack(values, axis=1)
    return jnp.asarray(np.stack(values, axis=1))


class HostStepper:
    """The :class:`~diffrl.core.stepping.Stepper` of a run on a host environment.

    ``init(keys)``, ``chunk(state)`` and ``evaluate(...)`` have the call signatures of the compiled
    functions of a JAX environment (leading seed axis everywhere). Holds the host batches (started
    lazily) and the current observation."""

    def __init__(self, config, maker, algo):
        self.config, self.maker, self.algo = config, maker, algo
        self.spec = maker.spec
        self.num_seeds, self.num_envs = config.num_seeds, config.num_envs
        self._train_env = self._eval_env = None
        self._obs = None
        cfg, spec = config, self.spec

        def init_one(key, obs):
            key, key_algo, _key_env, _key_counters = jax.random.split(key, 4)  # as the JAX loop
            return TrainState(
                algo=algo.init(key_algo, spec),
                obs_stats=update_stats(init_stats(spec.obs_size), obs),
                critic_obs_stats=update_stats(init_stats(spec.critic_size), obs),
                env_state=None, key=key, iteration=jnp.zeros((), jnp.int32))

        def begin_one(ts):
            key, key_rollout, key_update = jax.random.split(ts.key, 3)
            return key, key_update, jax.random.split(key_rollout, cfg.num_steps)

        def act_one(algo_state, obs_stats, obs, key):
            return algo.act(algo_state, normalise_obs(obs_stats, obs, cfg), key)

        def finish_one(ts, key, key_update, obs, action, aux, reward, terminated, truncated, final_obs,
                       ended, ep_return, ep_length, nonfinite=None):
            obs_n = normalise_obs(ts.obs_stats, obs, cfg)
            batch = make_transition(ts, cfg, obs_n, obs_n, action, aux, reward, terminated, truncated,
                                    final_obs, final_obs)
            episode = (ended, ep_return, ep_length) + (() if nonfinite is None else (nonfinite,))
            return finish_iteration(cfg, algo, ts, key, key_update, None, batch, episode, (obs, obs, reward))

        def eval_act_one(algo_state, obs_stats, critic_stats, obs, key, sampler):
            return algo.eval_action(algo_state, normalise_obs(obs_stats, obs, cfg),
                                    normalise_obs(critic_stats, obs, cfg), key, sampler)

        def eval_keys_one(key):
            key_reset, key_run = jax.random.split(key)
            return key_reset, jax.random.split(key_run, spec.episode_length)

        self._init = jax.jit(jax.vmap(init_one))
        self._begin = jax.jit(jax.vmap(begin_one))
        self._act = jax.jit(jax.vmap(act_one))
        self._finish = jax.jit(jax.vmap(finish_one), donate_argnums=0)
        self._eval_act = jax.jit(jax.vmap(eval_act_one, in_axes=(0, 0, 0, 0, 0, None)), static_argnums=5)
        self._eval_keys = jax.jit(jax.vmap(eval_keys_one))

    # -- batches ------------------------------------------------------------------
    def _by_seed(self, x: np.ndarray, per_seed: int) -> np.ndarray:
        return x.reshape(self.num_seeds, per_seed, *x.shape[1:])

    def _train_batch(self):
        if self._train_env is None:
            self._train_env = self.maker.make(self.num_seeds * self.num_envs)
        return self._train_env

    def close(self) -> None:
        for env in (self._train_env, self._eval_env):
            if env is not None:
                env.close()
        self._train_env = self._eval_env = None

    # -- the Stepper interface ----------------------------------------------------
    def start(self, keys: jax.Array, mesh: Mesh) -> Started:
        """Start the workers and build the state; the act and update functions compile on their
        first call (inside the first chunk and evaluation)."""
        t0 = time.perf_counter()
        state = self.init(replicated(keys, mesh))
        jax.block_until_ready(state)
        shardings = state_shardings(state, mesh, True)  # env_state is None: all replicated
        return Started(state, self.chunk, self.evaluate, shardings,
                       {"compile/init_s": time.perf_counter() - t0, "compile/chunk_s": 0.0})

    def state_shape(self, keys: jax.Array) -> None:
        """Unknown before the workers report their observations: checked on restore instead."""
        return None

    def init(self, keys: jax.Array) -> TrainState:
        """Reset the host batch (seeded from the run's first key) and build the train state."""
        first = self._train_batch().reset(host_seed(keys[0]))
        self._obs = first.obs
        return self._init(keys, jnp.asarray(self._by_seed(first.obs, self.num_envs)))

    def template(self, keys: jax.Array) -> TrainState:
        """A train state of the right shapes (zero first observations), without starting the
        simulators: the target a checkpoint is restored into."""
        zeros = jnp.zeros((self.num_seeds, self.num_envs, self.spec.obs_size), jnp.float32)
        return self._init(keys, zeros)

    def chunk(self, ts: TrainState) -> tuple[TrainState, dict]:
        """``iterations_per_chunk`` iterations; metrics (num_seeds, iterations)."""
        rows = []
        for _ in range(self.config.iterations_per_chunk):
            ts, metrics = self.iteration(ts)
            rows.append(metrics)
        return ts, jax.tree.map(lambda *xs: jnp.stack(xs, axis=1), *rows)

    def iteration(self, ts: TrainState) -> tuple[TrainState, dict]:
        env, S, B = self._train_batch(), self.num_seeds, self.num_envs
        key, key_update, step_keys = self._begin(ts)
        obs = self._obs
        record = {name: [] for name in ("obs", "reward", "terminated", "truncated", "final_obs", "ended",
                                        "ep_return", "ep_length", "nonfinite")}
        actions, auxes = [], []
        for t in range(self.config.num_steps):
            action, aux = self._act(ts.algo, ts.obs_stats, jnp.asarray(self._by_seed(obs, B)), step_keys[:, t])
            out = env.step(action.reshape(S * B, -1))  # a batch on the device takes it as it is
            actions.append(action)
            auxes.append(aux)
            for name, value in (("obs", obs), ("reward", out.reward), ("terminated", out.terminated),
                                ("truncated", out.truncated), ("final_obs", out.final_obs),
                                ("ended", out.done), ("ep_return", out.episode_return),
                                ("ep_length", out.episode_length), ("nonfinite", out.nonfinite)):
                if value is not None:  # nonfinite: None from a batch that does not check
                    record[name].append(self._by_seed(value, B))
            obs = out.obs
        self._obs = obs
        seq = {name: _stack_time(values) for name, values in record.items() if values}  # (S, T, B, ...)
        stack = lambda *xs: jnp.stack(xs, axis=1)  # noqa: E731
        return self._finish(ts, key, key_update, seq["obs"], stack(*actions), jax.tree.map(stack, *auxes),
                            seq["reward"], seq["terminated"], seq["truncated"], seq["final_obs"], seq["ended"],
                            seq["ep_return"], seq["ep_length"], *([seq["nonfinite"]] if "nonfinite" in seq else []))

    def evaluate(self, algo_state, obs_stats, critic_stats, keys, sampler: str) -> dict:
        """``eval_envs`` episodes per seed; {name: (num_seeds,)} as ``diffrl.core.evaluate``."""
        S, E = self.num_seeds, self.config.eval_envs
        if self._eval_env is None:
            self._eval_env = self.maker.make(S * E)
        key_reset, step_keys = self._eval_keys(keys)
        obs = self._eval_env.reset(host_seed(key_reset[0]), spread_counters=False).obs
        alive = np.ones(S * E, bool)
        ret = np.zeros(S * E, np.float64)
        steps = np.zeros(S * E, np.int32)
        success = np.zeros(S * E, np.float64)  # of each episode, on the step it ends (HostStep)
        for t in range(self.spec.episode_length):
            action = self._eval_act(algo_state, obs_stats, critic_stats, jnp.asarray(self._by_seed(obs, E)),
                                    step_keys[:, t], sampler)
            out = self._eval_env.step(action.reshape(S * E, -1))
            done = np.asarray(out.done)
            ret += np.where(alive, np.asarray(out.reward), 0.0)
            steps += alive
            success = np.where(alive & done, np.asarray(out.episode_success), success)
            alive &= ~done
            obs = out.obs
            if not alive.any():
                break
        ret, steps = self._by_seed(ret, E), self._by_seed(steps, E)
        metrics = {"episode_return": ret.mean(axis=1), "episode_return_std": ret.std(axis=1),
                   "episode_length": steps.astype(np.float64).mean(axis=1)}
        if not np.isnan(success).any():  # the task reports success (ManiSkill): each episode's, until it ends
            metrics["success_rate"] = self._by_seed(success, E).mean(axis=1)
        return metrics

