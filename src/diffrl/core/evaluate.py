"""Evaluation: parallel episodes with a named sampler, and the behaviour-entropy metric.

Each of ``eval_envs`` environments runs exactly one episode (from a fresh reset,
step counter 0, no auto-reset) for at most ``episode_length`` steps; returns are the
environment's unscaled rewards. For tasks that define behaviour modes
(``spec.modes > 0``, e.g. toy/MirrorGoals), the mode each episode ends in is read
from ``info["mode"]`` (-1 = reached no mode) and summarised by the normalised entropy
of the histogram of reached modes, ``eval/behaviour_entropy`` in [0, 1] (0 = every
episode that reached a mode took the same one, 1 = modes taken equally often), and by
``eval/mode_reached``, the fraction of episodes that reached any mode. A policy that
keeps several optima has both high; one that hedges between them has a low
``mode_reached``; one that collapsed has entropy 0.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.maths.normalization import normalise_obs


def wrap_for_eval(env, episode_length: int):
    """Batched env with action rescaling, the non-finite guard and a time limit but NO auto-reset
    (an episode whose simulation goes non-finite ends there, with the return it had)."""
    from diffrl.envs.wrappers import NonFiniteGuard, RescaleAction, TimeLimit, VmapWrapper

    return VmapWrapper(TimeLimit(NonFiniteGuard(RescaleAction(env)), episode_length))


def behaviour_entropy(modes: jax.Array, num_modes: int, valid: jax.Array | None = None) -> jax.Array:
    """(E,) int mode per episode -> () entropy of the mode histogram / log(num_modes)."""
    if num_modes < 2:
        return jnp.zeros(())
    valid = jnp.ones(modes.shape, bool) if valid is None else valid
    counts = jnp.sum(jax.nn.one_hot(modes, num_modes) * valid[:, None], axis=0)
    p = counts / jnp.maximum(jnp.sum(counts), 1.0)
    ent = -jnp.sum(jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0))
    return ent / jnp.log(float(num_modes))


def entropy_where_reached(entropy, mode_reached) -> np.ndarray:
    """Host side: ``eval/behaviour_entropy`` values (any shape) as float64, NaN where ``mode_reached`` is 0.

    :func:`behaviour_entropy` of an empty histogram is 0, the same number as "every episode took one mode";
    where no episode reached a mode the entropy is undefined, and tables and medians must leave it out.
    """
    return np.where(np.asarray(mode_reached, np.float64) > 0, np.asarray(entropy, np.float64), np.nan)


def make_evaluate(config, eval_env, algo) -> Callable:
    """``evaluate(algo_state, obs_stats, critic_stats, key, sampler) -> metrics dict``.

    ``sampler`` must be a Python string (it is static; jit with static_argnums=4).
    """
    spec = eval_env.spec
    n = config.eval_envs
    length = config.episode_length or spec.episode_length

    def evaluate(algo_state, obs_stats, critic_stats, key, sampler: str):
        key_reset, key_run = jax.random.split(key)
        state = eval_env.reset(jax.random.split(key_reset, n))

        def step(carry, key_step):
            state, alive, ret, steps, mode = carry
            obs = normalise_obs(obs_stats, state.obs, config)
            cobs = normalise_obs(critic_stats, state.critic_obs, config)
            action = algo.eval_action(algo_state, obs, cobs, key_step, sampler)
            nxt = eval_env.step(state, action)
            ret = ret + jnp.where(alive, nxt.reward, 0.0)
            steps = steps + alive.astype(jnp.int32)
            if spec.modes:
                mode = jnp.where(alive, nxt.info["mode"], mode)
            alive = jnp.logical_and(alive, jnp.logical_not(nxt.done))
            return (nxt, alive, ret, steps, mode), None

        init = (state, jnp.ones((n,), bool), jnp.zeros((n,)), jnp.zeros((n,), jnp.int32),
                jnp.full((n,), -1, jnp.int32))
        (_, _, ret, steps, mode), _ = jax.lax.scan(step, init, jax.random.split(key_run, length))
        out = {
            "episode_return": jnp.mean(ret),
            "episode_return_std": jnp.std(ret),
            "episode_length": jnp.mean(steps.astype(jnp.float32)),
        }
        if spec.modes:
            reached = mode >= 0
            out["behaviour_entropy"] = behaviour_entropy(mode, spec.modes, reached)
            out["mode_reached"] = jnp.mean(reached.astype(jnp.float32))
        return out

    return evaluate
