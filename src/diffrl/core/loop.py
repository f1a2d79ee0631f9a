"""The pure training core: one explicit train state and ``make_train(config) -> train(key)``.

An *iteration* is a rollout of ``num_steps`` steps in ``num_envs`` environments
(``lax.scan``), an update of the observation normalisers, then the algorithm's
update. A *chunk* is ``iterations_per_chunk`` iterations in one ``lax.scan``: the
unit the host loop (``diffrl.core.trainer``) compiles once and calls repeatedly.
Everything here is pure, so ``train`` can be jitted and vmapped over seeds.

Sharding (``diffrl.plumbing.sharding``): traced under a device mesh, every per-env array
(env state, rollout) is constrained to be split along its env axis over the mesh and
everything else is left replicated; outside a mesh the constraints are no-ops.
:func:`state_shardings` says the same of a whole train state, for ``jit``'s in/out shardings.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from diffrl.algos.base import Algorithm, Rollout
from diffrl.envs.base import EnvSpec, EnvState
from diffrl.maths.normalization import RunningStats, init_stats, normalise_obs, update_stats
from diffrl.maths.replay import ReplayBuffer
from diffrl.plumbing.sharding import BATCH_AXIS, shard_env_axis


@struct.dataclass
class TrainState:
    """All mutable state of one seed: the unit that is jitted, vmapped, checkpointed."""

    algo: Any
    obs_stats: RunningStats
    critic_obs_stats: RunningStats
    env_state: EnvState
    key: jax.Array
    iteration: jax.Array  # () int32, completed iterations


@dataclass(frozen=True)
class Components:
    """The pure pieces a run is made of (all closures over static config)."""

    init: Callable[[jax.Array], TrainState]
    iteration: Callable[[TrainState], tuple[TrainState, dict]]
    chunk: Callable[[TrainState], tuple[TrainState, dict]]
    spec: EnvSpec
    rollout: Callable[[TrainState, jax.Array], tuple]
    """``rollout(ts, key) -> (env_state, Rollout batch, episode stats, raw obs/rewards)``: the
    iteration's acting phase alone (``diffrl bench cost`` times the update on its batch)."""


def state_shardings(state_shape: Any, mesh: Mesh, seed_axis: bool) -> Any:
    """Shardings of a TrainState (or its ``jax.eval_shape``): the env state split along its
    env axis (after the leading seed axis when ``seed_axis``), and so are the stored transitions of
    any replay buffer in the algorithm state (``diffrl.maths.replay``: (capacity, B, ...), each device
    keeps its own environments' experience); everything else replicated."""
    replicated = NamedSharding(mesh, P())
    lead = [None] if seed_axis else []
    env = NamedSharding(mesh, P(*lead, BATCH_AXIS))
    stored = NamedSharding(mesh, P(*lead, None, BATCH_AXIS))

    def algo_sharding(node):
        if isinstance(node, ReplayBuffer):
            return ReplayBuffer(data=jax.tree.map(lambda _: stored, node.data), position=replicated, size=replicated)
        return replicated

    out = jax.tree.map(lambda _: replicated, state_shape)
    algo = jax.tree.map(algo_sharding, state_shape.algo, is_leaf=lambda x: isinstance(x, ReplayBuffer))
    return out.replace(env_state=jax.tree.map(lambda _: env, state_shape.env_state), algo=algo)


def _tree_all_finite(tree) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(tree)
              if jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def make_components(config, env, algo: Algorithm) -> Components:
    """Build init/iteration/chunk for a batched, wrapped ``env`` (see envs.wrappers.wrap)."""
    from diffrl.envs.wrappers import randomize_step_counters

    spec: EnvSpec = env.spec
    num_envs, num_steps = config.num_envs, config.num_steps
    episode_length = config.episode_length or spec.episode_length

    def init(key: jax.Array) -> TrainState:
        key, key_algo, key_env, key_counters = jax.random.split(key, 4)
        env_state = shard_env_axis(env.reset(shard_env_axis(jax.random.split(key_env, num_envs))))
        env_state = shard_env_axis(randomize_step_counters(env_state, key_counters, episode_length))
        # Statistics start from the first reset batch (REPPO's NormalizeVec).
        obs_stats = update_stats(init_stats(spec.obs_size), env_state.obs)
        critic_stats = update_stats(init_stats(spec.critic_size), env_state.critic_obs)
        return TrainState(
            algo=algo.init(key_algo, spec),
            obs_stats=obs_stats,
            critic_obs_stats=critic_stats,
            env_state=env_state,
            key=key,
            iteration=jnp.zeros((), jnp.int32),
        )

    def rollout(ts: TrainState, key: jax.Array):
        def step(env_state: EnvState, key_step):
            env_state = shard_env_axis(env_state)
            obs = normalise_obs(ts.obs_stats, env_state.obs, config)
            critic_obs = normalise_obs(ts.critic_obs_stats, env_state.critic_obs, config)
            action, aux = algo.act(ts.algo, obs, key_step)
            nxt = shard_env_axis(env.step(env_state, action))
            transition = make_transition(ts, config, obs, critic_obs, action, aux, nxt.reward, nxt.terminated,
                                         nxt.truncated, nxt.final_obs, nxt.final_critic_obs)
            episode = (nxt.info["returned_episode"], nxt.info["returned_episode_return"],
                       nxt.info["returned_episode_length"], nxt.info["nonfinite_state"])
            raw = (env_state.obs, env_state.critic_obs, nxt.reward)
            return nxt, shard_env_axis((transition, episode, raw))

        env_state, outputs = jax.lax.scan(step, ts.env_state, jax.random.split(key, num_steps))
        batch, episode, raw = shard_env_axis(outputs, axis=1)  # (T, B, ...): B split over devices
        return shard_env_axis(env_state), batch, episode, raw

    def iteration(ts: TrainState) -> tuple[TrainState, dict]:
        key, key_rollout, key_update = jax.random.split(ts.key, 3)
        env_state, batch, episode, raw = rollout(ts, key_rollout)
        return finish_iteration(config, algo, ts, key, key_update, env_state, batch, episode, raw)

    def chunk(ts: TrainState) -> tuple[TrainState, dict]:
        """``iterations_per_chunk`` iterations; metrics stacked along a leading axis."""
        return jax.lax.scan(lambda s, _: iteration(s), ts, None, length=config.iterations_per_chunk)

    return Components(init=init, rollout=rollout, iteration=iteration, chunk=chunk, spec=spec)


def make_transition(ts: TrainState, config, obs, critic_obs, action, aux, reward, terminated, truncated,
                    final_obs, final_critic_obs) -> Rollout:
    """The learner's view of transitions (any leading axes): ``obs``/``critic_obs`` already
    normalised (what the policy acted on), the raw ``final_obs`` normalised with the same
    statistics, the reward scaled. Shared by the JAX rollout and the host loop."""
    return Rollout(
        obs=obs,
        critic_obs=critic_obs,
        action=action,
        reward=reward * config.reward_scale,
        terminated=terminated,
        truncated=truncated,
        next_obs=normalise_obs(ts.obs_stats, final_obs, config),
        next_critic_obs=normalise_obs(ts.critic_obs_stats, final_critic_obs, config),
        policy_aux=aux,
    )


def finish_iteration(config, algo: Algorithm, ts: TrainState, key, key_update, env_state, batch: Rollout,
                     episode: tuple, raw: tuple) -> tuple[TrainState, dict]:
    """After a rollout: update the normalisers and the algorithm, report metrics.

    episode: ``(ended, return, length)`` (T, B) of the episodes that ended, and in the JAX loop a fourth,
    ``nonfinite`` (T, B): the steps whose simulation went non-finite (``envs.wrappers.NonFiniteGuard``);
    raw: the unnormalised ``(obs, critic_obs, reward)`` (T, B, ...) the rollout acted on. Shared by the
    JAX loop and the host loop (``diffrl.core.host_loop``), so both learn identically from the same
    transitions."""
    (ended, ep_return, ep_length), nonfinite = episode[:3], episode[3:]
    raw_obs, raw_cobs, raw_rew = raw
    obs_stats, critic_stats = ts.obs_stats, ts.critic_obs_stats
    if config.normalize_obs:
        obs_stats = update_stats(obs_stats, raw_obs)
        critic_stats = update_stats(critic_stats, raw_cobs)
    algo_state, metrics = algo.update(ts.algo, batch, key_update)
    n_ended = jnp.sum(ended)
    metrics = dict(metrics)
    metrics["train/episode_return"] = jnp.sum(jnp.where(ended, ep_return, 0.0)) / jnp.maximum(n_ended, 1)
    metrics["train/episode_length"] = jnp.sum(jnp.where(ended, ep_length, 0)) / jnp.maximum(n_ended, 1)
    metrics["train/episodes"] = n_ended.astype(jnp.float32)
    metrics["train/reward"] = jnp.mean(raw_rew)
    if nonfinite:
        metrics["train/nonfinite_states"] = jnp.sum(nonfinite[0]).astype(jnp.float32)
    if config.check_finite:
        finite = {
            "observations": _tree_all_finite((raw_obs, raw_cobs)),
            "rewards": _tree_all_finite(raw_rew),
            "losses": _tree_all_finite({k: v for k, v in metrics.items()}),
            "parameters": _tree_all_finite(algo_state),
        }
        for where, ok in finite.items():
            metrics[f"nonfinite/{where}"] = jnp.logical_not(ok).astype(jnp.float32)
    new = TrainState(algo=algo_state, obs_stats=obs_stats, critic_obs_stats=critic_stats,
                     env_state=env_state, key=key, iteration=ts.iteration + 1)
    return new, metrics


def make_train(config) -> Callable[[jax.Array], tuple[TrainState, dict]]:
    """Pure ``train(key) -> (final TrainState, metrics (num_chunks, iters_per_chunk))``.

    Jittable and vmappable over keys (``jax.jit(jax.vmap(make_train(cfg)))(keys)``).
    The host ``Trainer`` runs the same chunk function with I/O in between.
    """
    from diffrl.core.build import build

    env, algo, _ = build(config)
    comps = make_components(config, env, algo)

    def train(key: jax.Array):
        ts = comps.init(key)
        return jax.lax.scan(lambda s, _: comps.chunk(s), ts, None, length=config.num_chunks)

    return train
