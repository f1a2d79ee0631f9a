"""Built-in toy tasks with several equally good behaviour modes.

They exist to show (and test) what an expressive policy buys: a unimodal Gaussian
policy that hedges between two optimal actions lands in the valley between them,
while a diffusion policy can put mass on all of them. Every task reports
``info['mode']`` (int32) so an evaluator can count which mode each episode chose,
and ``spec.modes`` (the number of optima): the index of the optimum the agent *reached* (within
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

With more action dimensions and more than two optima (every optimum has exactly the same
return; the symmetry group maps the optima onto each other and leaves dynamics, start,
reward and the action box unchanged):

* ``toy/OctahedronGoals``: :class:`MirrorGoals`' point mass in 3-D (obs 6, action 3),
  started at rest at the origin, with six goals at the vertices ``+-g e_i`` of an
  octahedron: mode ``2 i`` is ``-g e_i``, mode ``2 i + 1`` is ``+g e_i``. Same reward,
  dynamics and time limit as MirrorGoals; symmetric under every permutation and sign
  flip of the axes (the 48 symmetries of the cube), which permute the goals.
* ``toy/CornerBandit``: one-step episodes with the constant observation ``[1.0]`` and a
  2-D action; four equal peaks at the corners ``(+-c, +-c)`` of a square, reward
  ``prod_i [exp(-(a_i - c)^2 / (2 s^2)) + exp(-(a_i + c)^2 / (2 s^2))]`` (the sum of the
  four Gaussian bumps, written as a product so that flipping or swapping the axes gives
  the bit-identical reward). Mode ``m = [a_0 > 0] + 2 [a_1 > 0]`` if ``a`` is within
  ``mode_radius`` of that corner, else -1.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

from diffrl.envs.base import EnvSpec, EnvState, check_spec


@dataclass(frozen=True)
class MirrorGoalsConfig:
    """Parameters of :class:`MirrorGoals` (and :class:`OctahedronGoals`)."""

    goal_distance: float = 1.0
    """``g``: the goals are at (-g, 0) and (+g, 0) (OctahedronGoals: at +-g e_i)."""
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
    start_spread: float = 0.0
    """Half-width of the box ``[-s, s]^dim`` around the origin that the start position is drawn
    from uniformly (at rest). 0, the default, is the task as defined: a deterministic start at the
    origin, where every optimum is equally good. A spread > 0 is a training aid ("exploring
    starts"): the on-policy data then cover states on every side of the origin, not only those
    toward the goal the policy favours. Measured: it does not keep TruDi or AMDP from committing to
    one goal (benchmarks/results/multimodality/README.md, diagnosis point 8)."""


class _PointMassGoals:
    """A point mass in ``dim`` dimensions started at rest at the origin, with goals
    ``self.goals`` (K, dim); reward, dynamics and modes as described for MirrorGoals.

    obs = (position, velocity); action = acceleration / max_acceleration in [-1, 1]^dim.
    ``info``: ``mode`` (int32, index of the nearest goal if within ``mode_radius``,
    else -1; ties -> the lower index) and ``goal_distance`` (float32, distance to the
    nearest goal).
    """

    def __init__(self, name: str, goals, config: MirrorGoalsConfig):
        if not config.start_spread >= 0:
            raise ValueError(f"{name}: start_spread must be >= 0 (got {config.start_spread})")
        self.config = config
        self.goals = jnp.asarray(goals, jnp.float32)
        num_goals, dim = self.goals.shape
        self.dim = dim
        self.spec = EnvSpec(
            name=name,
            obs_size=2 * dim,
            action_size=dim,
            action_low=(-1.0,) * dim,
            action_high=(1.0,) * dim,
            episode_length=config.episode_length,
            modes=num_goals,
        )
        check_spec(self.spec)

    def _info(self, position: jax.Array) -> dict:
        distances = jnp.linalg.norm(position - self.goals, axis=-1)
        # Nearest goal; at exact ties (e.g. x == 0 in MirrorGoals) argmin picks the lower index.
        nearest = jnp.argmin(distances).astype(jnp.int32)
        reached = jnp.min(distances) < self.config.mode_radius
        return {
            "mode": jnp.where(reached, nearest, -1).astype(jnp.int32),
            "goal_distance": jnp.min(distances).astype(jnp.float32),
        }

    def reset(self, key: jax.Array) -> EnvState:
        # start_spread 0: the start is deterministic, so the mode is the policy's choice alone
        spread = self.config.start_spread
        position = (spread * jax.random.uniform(key, (self.dim,), jnp.float32, -1.0, 1.0) if spread > 0
                    else jnp.zeros((self.dim,), jnp.float32))
        velocity = jnp.zeros((self.dim,), jnp.float32)
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


class MirrorGoals(_PointMassGoals):
    """2-D point mass with two mirror-image goals (see module docstring).

    obs = (x, y, vx, vy); action = acceleration / max_acceleration in [-1, 1]^2.
    """

    def __init__(self, config: MirrorGoalsConfig = MirrorGoalsConfig()):
        g = config.goal_distance
        super().__init__("toy/MirrorGoals", [[-g, 0.0], [g, 0.0]], config)


def axis_goals(dim: int, distance: float) -> list[list[float]]:
    """The 2 dim goals +-distance e_i, ordered -e_0, +e_0, -e_1, +e_1, ..."""
    goals = []
    for i in range(dim):
        for sign in (-1.0, 1.0):
            goal = [0.0] * dim
            goal[i] = sign * distance
            goals.append(goal)
    return goals


class OctahedronGoals(_PointMassGoals):
    """3-D point mass with six goals at +-g e_i (see module docstring).

    obs = (x, y, z, vx, vy, vz); action in [-1, 1]^3; mode 2 i = -g e_i, 2 i + 1 = +g e_i.
    """

    def __init__(self, config: MirrorGoalsConfig = MirrorGoalsConfig()):
        super().__init__("toy/OctahedronGoals", axis_goals(3, config.goal_distance), config)


class _OneStepBandit:
    """What the bandits share: a constant observation (1.0), one step per episode, the reward
    and mode of the clipped action (subclasses define ``spec``, ``reward`` and ``mode``)."""

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


@dataclass(frozen=True)
class BimodalBanditConfig:
    """Parameters of :class:`BimodalBandit`."""

    peak: float = 0.5
    """``c``: the two optimal actions are -c and +c."""
    width: float = 0.1
    """``s``: standard deviation of each Gaussian bump."""
    mode_radius: float = 0.2
    """An action within this distance of a peak counts as taking that mode."""


class BimodalBandit(_OneStepBandit):
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


@dataclass(frozen=True)
class CornerBanditConfig:
    """Parameters of :class:`CornerBandit`."""

    peak: float = 0.5
    """``c``: the four optimal actions are (+-c, +-c)."""
    width: float = 0.1
    """``s``: standard deviation of each Gaussian bump (per dimension)."""
    mode_radius: float = 0.2
    """An action within this (Euclidean) distance of a corner counts as taking that mode."""


class CornerBandit(_OneStepBandit):
    """One-step bandit with a 2-D action and four equal reward peaks at (+-c, +-c)
    (see module docstring).

    Mode of a corner: bit 0 = sign of a_0 > 0, bit 1 = sign of a_1 > 0, i.e. 0 = (-c, -c),
    1 = (+c, -c), 2 = (-c, +c), 3 = (+c, +c); -1 away from every corner (and after a reset).
    """

    def __init__(self, config: CornerBanditConfig = CornerBanditConfig()):
        self.config = config
        self.spec = EnvSpec(
            name="toy/CornerBandit",
            obs_size=1,
            action_size=2,
            action_low=(-1.0, -1.0),
            action_high=(1.0, 1.0),
            episode_length=1,
            modes=4,
        )
        check_spec(self.spec)

    def reward(self, action: jax.Array) -> jax.Array:
        """Reward of actions (..., 2) -> (...): the sum of the four bumps, as a product over axes."""
        c, s = self.config.peak, self.config.width
        bump = lambda x, center: jnp.exp(-jnp.square(x - center) / (2.0 * s * s))
        per_axis = bump(action, c) + bump(action, -c)
        return per_axis[..., 0] * per_axis[..., 1]

    def mode(self, action: jax.Array) -> jax.Array:
        """Mode of actions (..., 2) -> (...) int32 (see the class docstring)."""
        c = self.config.peak
        positive = action > 0
        corner = jnp.where(positive, c, -c)
        near = jnp.linalg.norm(action - corner, axis=-1) < self.config.mode_radius
        index = positive[..., 0].astype(jnp.int32) + 2 * positive[..., 1].astype(jnp.int32)
        return jnp.where(near, index, -1).astype(jnp.int32)
