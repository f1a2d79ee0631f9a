"""Built-in toy tasks with two equally good behaviour modes.

They exist to show (and test) what an expressive policy buys: a unimodal Gaussian
policy that hedges between two optimal actions lands in the valley between them,
while a diffusion policy can put mass on both. Both tasks report
``info['mode']`` (int32) so an evaluator can count which mode each episode chose,
and ``spec.modes == 2``: the index of the optimum the agent *reached* (within
``mode_radius``), or -1 when it reached none. Counting only reached modes is what
separates a policy that takes both optima from one that hedges between them: a wide
Gaussian centred between the goals picks a side at random too, but mostly lands in
the valley, which counts as no mode.

* ``toy/MirrorGoals``: a 2-D point mass starts at rest at the origin; goals sit at
  ``(-g, 0)`` (mode 0) and ``(+g, 0)`` (mode 1). Reward per step is
  ``exp(-min_k |p - goal_k|^2 / width) - action_cost * |a|^2``. The dynamics, start
  and reward are symmetric under ``x -> -x``, so the mirror image of an optimal
  policy is optimal with bit-identical return. There is no termination: the agent
  collects reward for staying at a goal until the time limit.
* ``toy/BimodalBandit``: one-step episodes with a constant observation ``[1.0]``;
  reward ``exp(-(a - c)^2 / (2 s^2)) + exp(-(a + c)^2 / (2 s^2))`` with peaks at
  ``a = -c`` (mode 0) and ``a = +c`` (mode 1), ``c = 0.5``.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from diffrl.envs.base import EnvSpec, EnvState, check_spec


@dataclass(frozen=True)
class MirrorGoalsConfig:
    """Parameters of :class:`MirrorGoals`."""

    goal_distance: float = 1.0
    """``g``: the goals are at (-g, 0) and (+g, 0)."""
    dt: float = 0.1
    """Integration step (semi-implicit Euler) in seconds."""
    max_acceleration: float = 2.0
    """Acceleration for a unit action; with the defaults a goal is reached in ~15 steps."""
    damping: float = 0.0
    """Fraction of velocity lost per step (0 = frictionless)."""
    reward_width: float = 0.1
    """``width`` of the Gaussian goal reward ``exp(-d^2 / width)``."""
    action_cost: float = 0.01
    """Weight of the quadratic action cost (actions in [-1, 1])."""
    mode_radius: float = 0.3
    """A goal counts as reached (``info['mode']``) within this distance."""
    episode_length: int = 40
    """Steps until truncation."""


class MirrorGoals:
    """2-D point mass with two mirror-image goals (see module docstring).

    obs = (x, y, vx, vy); action = acceleration / max_acceleration in [-1, 1]^2.
    ``info``: ``mode`` (int32, index of the nearest goal if within ``mode_radius``,
    else -1; ties -> 0) and ``goal_distance`` (float32, distance to the nearest goal).
    """

    def __init__(self, config: MirrorGoalsConfig = MirrorGoalsConfig()):
        self.config = config
        self.spec = EnvSpec(
            name="toy/MirrorGoals",
            obs_size=4,
            action_size=2,
            action_low=(-1.0, -1.0),
            action_high=(1.0, 1.0),
            episode_length=config.episode_length,
            modes=2,
        )
        check_spec(self.spec)
        g = config.goal_distance
        self.goals = jnp.array([[-g, 0.0], [g, 0.0]], jnp.float32)

    def _info(self, position: jax.Array) -> dict:
        distances = jnp.linalg.norm(position - self.goals, axis=-1)
        # Nearest goal; at exact ties (x == 0) argmin picks mode 0.
        nearest = jnp.argmin(distances).astype(jnp.int32)
        reached = jnp.min(distances) < self.config.mode_radius
        return {
            "mode": jnp.where(reached, nearest, -1).astype(jnp.int32),
            "goal_distance": jnp.min(distances).astype(jnp.float32),
        }

    def reset(self, key: jax.Array) -> EnvState:
        del key  # the start is deterministic: the mode is the policy's choice alone
        position = jnp.zeros((2,), jnp.float32)
        velocity = jnp.zeros((2,), jnp.float32)
        inner = {"position": position, "velocity": velocity}
        obs = jnp.concatenate([position, velocity])
        return EnvState.create(inner=inner, obs=obs, info=self._info(position))

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        c = self.config
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        velocity = state.inner["velocity"] * (1.0 - c.damping) + c.dt * c.max_acceleration * action
        position = state.inner["position"] + c.dt * velocity
        info = self._info(position)
        reward = jnp.exp(-jnp.square(info["goal_distance"]) / c.reward_width)
        reward = reward - c.action_cost * jnp.sum(jnp.square(action))
        obs = jnp.concatenate([position, velocity])
        return state.replace(
            inner={"position": position, "velocity": velocity},
            obs=obs,
            critic_obs=obs,
            final_obs=obs,
            final_critic_obs=obs,
            reward=reward.astype(jnp.float32),
            terminated=jnp.zeros((), jnp.bool_),
            info=info,
        )


@dataclass(frozen=True)
class BimodalBanditConfig:
    """Parameters of :class:`BimodalBandit`."""

    peak: float = 0.5
    """``c``: the two optimal actions are -c and +c."""
    width: float = 0.1
    """``s``: standard deviation of each Gaussian bump."""
    mode_radius: float = 0.2
    """An action within this distance of a peak counts as taking that mode."""


class BimodalBandit:
    """One-step bandit with two equal reward peaks (see module docstring).

    ``info['mode']`` is 0 if the action is within ``mode_radius`` of -c, 1 if within
    ``mode_radius`` of +c, else -1 (also -1 after a reset).
    """

    def __init__(self, config: BimodalBanditConfig = BimodalBanditConfig()):
        self.config = config
        self.spec = EnvSpec(
            name="toy/BimodalBandit",
            obs_size=1,
            action_size=1,
            action_low=(-1.0,),
            action_high=(1.0,),
            episode_length=1,
            modes=2,
        )
        check_spec(self.spec)

    def reward(self, action: jax.Array) -> jax.Array:
        """Reward of an action (..., 1) -> (...)."""
        a = action[..., 0]
        c, s = self.config.peak, self.config.width
        bump = lambda center: jnp.exp(-jnp.square(a - center) / (2.0 * s * s))
        return bump(c) + bump(-c)

    def mode(self, action: jax.Array) -> jax.Array:
        """Mode of an action (..., 1) -> (...) int32: 0 near -c, 1 near +c, else -1."""
        a = action[..., 0]
        c, r = self.config.peak, self.config.mode_radius
        return jnp.where(jnp.abs(a + c) < r, 0, jnp.where(jnp.abs(a - c) < r, 1, -1)).astype(jnp.int32)

    def reset(self, key: jax.Array) -> EnvState:
        del key
        return EnvState.create(
            inner=jnp.zeros((), jnp.int32),
            obs=jnp.ones((1,), jnp.float32),
            info={"mode": jnp.full((), -1, jnp.int32)},
        )

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        obs = jnp.ones((1,), jnp.float32)
        return state.replace(
            inner=state.inner + 1,
            obs=obs,
            critic_obs=obs,
            final_obs=obs,
            final_critic_obs=obs,
            reward=self.reward(action).astype(jnp.float32),
            terminated=jnp.ones((), jnp.bool_),
            info={"mode": self.mode(action)},
        )
