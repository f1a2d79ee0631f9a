"""Wrappers that turn a bare :class:`~diffrl.envs.base.Env` into a training env.

Each wrapper is itself an ``Env`` (a ``spec``, ``reset(key)``, ``step(state, action)``)
and works on ONE environment; only :class:`VmapWrapper` adds the batch axis. The
composition used for training is (see :func:`wrap`)::

    VmapWrapper(AutoReset(EpisodeStats(TimeLimit(NonFiniteGuard(RescaleAction(env))))))

Order matters: ``NonFiniteGuard`` must sit inside ``TimeLimit`` so that a non-finite step is a
termination, never a truncation to bootstrap from; ``TimeLimit`` must sit inside ``EpisodeStats``
so that the statistics see the truncation flag, and both must sit inside ``AutoReset`` so that the
reset state (step counter 0, statistics 0) comes from the same stack's ``reset``.

Bookkeeping ownership: every wrapper reads the fields it owns (``step_count``,
``episode_return``/``episode_length``, ``key``, ``final_obs``) from the INPUT state
and writes them onto the output. An environment's ``step`` may therefore build its
result with ``EnvState.create`` (neutral bookkeeping) or with ``state.replace``.

Semantics follow the REPPO reference code (github.com/cvoelcker/reppo) with
the correction recommended in §7: a time-out is a *truncation*, separate from a
*termination*; ``final_obs`` holds the observation the transition truly ended in
so that a learner can bootstrap from it; initial step counters can be randomised.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from diffrl.envs.base import Env, EnvSpec, EnvState


def strip_weak_types(tree: Any) -> Any:
    """Make every array leaf strongly typed (same dtype, ``weak_type=False``).

    Simulators often return weakly typed leaves from ``reset`` and strong ones from
    ``step`` (or the reverse), which makes ``lax.scan``/``jit`` see two different
    carry types. PRNG-key-typed leaves are left alone.
    """

    def strong(x):
        if hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return x
        return jnp.asarray(x, dtype=jnp.asarray(x).dtype)

    return jax.tree.map(strong, tree)


def _select(pred: jax.Array, on_true: Any, on_false: Any) -> Any:
    """Leafwise ``where(pred, on_true, on_false)`` for an unbatched scalar ``pred``."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


class Wrapper:
    """Base: forwards ``spec``, ``reset`` and ``step`` to ``self.env``."""

    def __init__(self, env: Env):
        self.env = env

    @property
    def spec(self) -> EnvSpec:
        return self.env.spec

    @property
    def unwrapped(self) -> Env:
        return getattr(self.env, "unwrapped", self.env)

    def reset(self, key: jax.Array) -> EnvState:
        return self.env.reset(key)

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        return self.env.step(state, action)


class RescaleAction(Wrapper):
    """Policy actions in [-1, 1] -> the env's native ``[action_low, action_high]``.

    Actions are clipped to [-1, 1] first (Gaussian samples can leave the box), then
    mapped affinely: ``native = low + (a + 1) / 2 * (high - low)``.
    """

    def __init__(self, env: Env):
        super().__init__(env)
        inner = env.spec
        self._low = jnp.asarray(inner.action_low, jnp.float32)
        self._high = jnp.asarray(inner.action_high, jnp.float32)
        ones = (1.0,) * inner.action_size
        self._spec = dataclasses.replace(
            inner, action_low=tuple(-x for x in ones), action_high=ones
        )

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    def native_action(self, action: jax.Array) -> jax.Array:
        """Map an action (d,) in [-1, 1] to the native bounds (d,)."""
        unit = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        return self._low + (unit + 1.0) * 0.5 * (self._high - self._low)

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        return self.env.step(state, self.native_action(action))


class NonFiniteGuard(Wrapper):
    """Ends the episode on a step whose simulation went non-finite, before NaN/inf reaches a learner.

    MJX can integrate a state to NaN even under bounded actions (humanoids especially:
    google-deepmind/mujoco_playground#81 and #153). Playground's DM Control tasks then report
    ``done``, but that step's reward and observation are NaN, and one NaN transition among a
    batch's thousands makes every loss of the update NaN: the whole seed is lost to one
    environment. On a step whose reward or observation (actor or critic) is not finite, this
    wrapper returns instead a finite *termination*: reward 0, ``terminated`` True, and as the
    observation the one the step started from (the last finite one), which becomes the
    transition's ``final_obs``; ``info['nonfinite_state']`` is True on that step (the trainer
    counts them as ``train/nonfinite_states``). :class:`AutoReset` then resets the environment,
    since the episode is done. A step whose values are all finite is returned unchanged, and so is
    a step taken with a non-finite action: that is a policy that diverged, not a simulator, and
    its NaN must reach the finiteness check (training) and the evaluation's return.
    """

    def reset(self, key: jax.Array) -> EnvState:
        state = self.env.reset(key)
        return state.replace(info={**state.info, "nonfinite_state": jnp.zeros((), jnp.bool_)})

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        out = self.env.step(state, action)
        bad = ~(jnp.all(jnp.isfinite(out.obs)) & jnp.all(jnp.isfinite(out.critic_obs))
                & jnp.isfinite(out.reward)) & jnp.all(jnp.isfinite(action))
        return out.replace(
            obs=jnp.where(bad, state.obs, out.obs),
            critic_obs=jnp.where(bad, state.critic_obs, out.critic_obs),
            final_obs=jnp.where(bad, state.obs, out.final_obs),
            final_critic_obs=jnp.where(bad, state.critic_obs, out.final_critic_obs),
            reward=jnp.where(bad, jnp.zeros_like(out.reward), out.reward),
            terminated=out.terminated | bad,
            info={**out.info, "nonfinite_state": bad},
        )


class TimeLimit(Wrapper):
    """Counts steps and truncates at ``episode_length``.

    ``truncated = (step_count >= episode_length) & ~terminated``: when a time-out and
    a termination coincide, termination wins (the value of a terminal state is 0, so
    bootstrapping would be wrong).
    """

    def __init__(self, env: Env, episode_length: int | None = None):
        super().__init__(env)
        length = env.spec.episode_length if episode_length is None else int(episode_length)
        self._spec = dataclasses.replace(env.spec, episode_length=length)

    @property
    def spec(self) -> EnvSpec:
        return self._spec

    def reset(self, key: jax.Array) -> EnvState:
        state = self.env.reset(key)
        return state.replace(
            step_count=jnp.zeros((), jnp.int32), truncated=jnp.zeros((), jnp.bool_)
        )

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        out = self.env.step(state, action)
        step_count = state.step_count + 1
        truncated = (step_count >= self._spec.episode_length) & ~out.terminated
        return out.replace(step_count=step_count, truncated=truncated)


EPISODE_INFO_KEYS = ("returned_episode", "returned_episode_return", "returned_episode_length")


def _neutral_episode_info() -> dict:
    return {
        "returned_episode": jnp.zeros((), jnp.bool_),
        "returned_episode_return": jnp.zeros((), jnp.float32),
        "returned_episode_length": jnp.zeros((), jnp.int32),
    }


class EpisodeStats(Wrapper):
    """Running return/length; reports them in ``info`` on the step that ends an episode.

    ``info['returned_episode']`` is True on that step, and
    ``info['returned_episode_return'|'returned_episode_length']`` hold the finished
    episode's totals (0 otherwise). The keys are always present so that the state's
    pytree structure never changes. The running counters are not zeroed here: the
    reset that :class:`AutoReset` selects does that.
    """

    def reset(self, key: jax.Array) -> EnvState:
        state = self.env.reset(key)
        return state.replace(
            episode_return=jnp.zeros((), jnp.float32),
            episode_length=jnp.zeros((), jnp.int32),
            info={**state.info, **_neutral_episode_info()},
        )

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        out = self.env.step(state, action)
        episode_return = state.episode_return + out.reward
        episode_length = state.episode_length + 1
        done = out.done
        info = {
            **out.info,
            "returned_episode": done,
            "returned_episode_return": jnp.where(done, episode_return, 0.0),
            "returned_episode_length": jnp.where(done, episode_length, 0),
        }
        return out.replace(episode_return=episode_return, episode_length=episode_length, info=info)


class AutoReset(Wrapper):
    """Resets an environment on the step that ends its episode.

    On such a step the returned state is the reset state (``inner``, ``obs``,
    ``critic_obs``, ``step_count``, running statistics), but ``reward``,
    ``terminated``, ``truncated`` and ``info`` still describe the transition just
    taken, and ``final_obs``/``final_critic_obs`` hold the observation it truly
    ended in (on other steps they equal ``obs``/``critic_obs``). The reset key is
    split from ``state.key`` and the other half is stored back.

    Both branches are computed and selected with ``jnp.where`` (under ``vmap`` a
    ``lax.cond`` would do the same), so every step pays for one ``reset``.
    """

    def reset(self, key: jax.Array) -> EnvState:
        key_reset, key_store = jax.random.split(key)
        state = self.env.reset(key_reset)
        state = state.replace(
            final_obs=state.obs, final_critic_obs=state.critic_obs, key=key_store
        )
        return strip_weak_types(state)

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        key_next, key_reset = jax.random.split(state.key)
        stepped = self.env.step(state, action)
        fresh = self.env.reset(key_reset)
        done = stepped.done
        out = stepped.replace(
            inner=_select(done, fresh.inner, stepped.inner),
            obs=jnp.where(done, fresh.obs, stepped.obs),
            critic_obs=jnp.where(done, fresh.critic_obs, stepped.critic_obs),
            step_count=jnp.where(done, fresh.step_count, stepped.step_count),
            episode_return=jnp.where(done, fresh.episode_return, stepped.episode_return),
            episode_length=jnp.where(done, fresh.episode_length, stepped.episode_length),
            final_obs=stepped.obs,
            final_critic_obs=stepped.critic_obs,
            key=key_next,
        )
        return strip_weak_types(out)


class VmapWrapper(Wrapper):
    """Batches an unbatched env: ``reset(keys (B, 2))``, ``step(states, actions (B, d))``."""

    def __init__(self, env: Env):
        super().__init__(env)
        self._reset = jax.vmap(env.reset)
        self._step = jax.vmap(env.step)

    def reset(self, keys: jax.Array) -> EnvState:
        return self._reset(keys)

    def step(self, states: EnvState, actions: jax.Array) -> EnvState:
        return self._step(states, actions)


def randomize_step_counters(state: EnvState, key: jax.Array, episode_length: int) -> EnvState:
    """Set a batched state's ``step_count`` (B,) uniformly in [0, episode_length).

    Called once after the first reset so that the environments of a batch do not
    all time out on the same step (which would make every rollout window contain
    either no episode end or a synchronised one). Only the counter changes: the
    first episodes are simply cut short by the time limit.
    """
    counters = jax.random.randint(
        key, state.step_count.shape, 0, episode_length, dtype=state.step_count.dtype
    )
    return state.replace(step_count=counters)


def wrap(env: Env, episode_length: int | None = None) -> VmapWrapper:
    """Compose the training stack around an unbatched env.

    ``VmapWrapper(AutoReset(EpisodeStats(TimeLimit(NonFiniteGuard(RescaleAction(env)), L))))`` with
    ``L = episode_length or env.spec.episode_length``. The result acts in [-1, 1],
    takes ``(B, 2)`` keys and ``(B, d)`` actions, and its ``spec`` reports bounds
    (-1, 1) and the effective episode length.
    """
    return VmapWrapper(AutoReset(EpisodeStats(TimeLimit(NonFiniteGuard(RescaleAction(env)), episode_length))))
