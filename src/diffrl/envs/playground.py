"""Adapter for MuJoCo Playground (Zakka et al., 2025, "MuJoCo Playground").

Only the DeepMind Control Suite tasks (25, ``mujoco_playground.dm_control_suite``) are
supported: their XML ships with the wheel. Locomotion and manipulation tasks download
MuJoCo Menagerie from GitHub when loaded and fail offline (research notes envs.md §3),
so asking for one gives a clear error instead of a ``git clone`` failure.

Decisions (envs.md §8):
* always ``config_overrides={"impl": "jax"}``: Playground 0.2.0 defaults to Warp,
  which is slow on the CPU and not installed here;
* Playground's own ``EpisodeWrapper``/auto-reset are not used; our wrappers do that,
  so ``terminated`` is exactly Playground's ``done`` (for DMC: the state became NaN);
* dictionary observations put ``state`` in ``obs`` and, when ``asymmetric=True``,
  ``privileged_state`` in ``critic_obs`` (as in REPPO, algorithms.md §1.7);
* Playground's reset and step outputs differ in weak types for some tasks; both are
  made strongly typed so a ``jit``-ed step loop compiles once.

``mujoco_playground`` is imported lazily (the import takes about 5 s).
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from diffrl.envs.base import EnvSpec, EnvState, check_spec
from diffrl.envs.wrappers import strip_weak_types

DMC_ENVS: tuple[str, ...] = (
    "AcrobotSwingup", "AcrobotSwingupSparse", "BallInCup", "CartpoleBalance",
    "CartpoleBalanceSparse", "CartpoleSwingup", "CartpoleSwingupSparse", "CheetahRun",
    "FingerSpin", "FingerTurnEasy", "FingerTurnHard", "FishSwim", "HopperHop",
    "HopperStand", "HumanoidStand", "HumanoidWalk", "HumanoidRun", "PendulumSwingup",
    "PointMass", "ReacherEasy", "ReacherHard", "SwimmerSwimmer6", "WalkerRun",
    "WalkerStand", "WalkerWalk",
)
"""Mirror of ``mujoco_playground.dm_control_suite.ALL_ENVS`` (checked by a test), kept
here so that listing names does not import Playground."""

MENAGERIE_ENVS: tuple[str, ...] = (
    # locomotion
    "ApolloJoystickFlatTerrain", "BarkourJoystick", "BerkeleyHumanoidJoystickFlatTerrain",
    "BerkeleyHumanoidJoystickRoughTerrain", "G1JoystickFlatTerrain", "G1JoystickRoughTerrain",
    "Go1JoystickFlatTerrain", "Go1JoystickRoughTerrain", "Go1Getup", "Go1Handstand",
    "Go1Footstand", "H1InplaceGaitTracking", "H1JoystickGaitTracking", "Op3Joystick",
    "SpotFlatTerrainJoystick", "SpotGetup", "SpotJoystickGaitTracking",
    "T1JoystickFlatTerrain", "T1JoystickRoughTerrain",
    # manipulation
    "AlohaHandOver", "AlohaSinglePegInsertion", "PandaPickCube", "PandaPickCubeOrientation",
    "PandaPickCubeCartesian", "PandaOpenCabinet", "PandaRobotiqPushCube", "LeapCubeReorient",
    "LeapCubeRotateZAxis", "AeroCubeRotateZAxis",
)
"""Playground tasks that need MuJoCo Menagerie (downloaded at load time): not supported yet."""


def _split_obs(obs: Any, asymmetric: bool) -> tuple[jax.Array, jax.Array]:
    """Playground observation (array or dict) -> (actor obs, critic obs), float32."""
    if isinstance(obs, dict):
        actor = obs["state"]
        critic = obs["privileged_state"] if asymmetric else actor
    else:
        actor = critic = obs
    return jnp.asarray(actor, jnp.float32), jnp.asarray(critic, jnp.float32)


class PlaygroundEnv:
    """One MuJoCo Playground DMC task behind the :class:`~diffrl.envs.base.Env` protocol.

    Args:
      task: Playground registry name, e.g. ``"CartpoleSwingup"``.
      asymmetric: use ``privileged_state`` as the critic observation when the task's
        observation is a dict (ignored for plain array observations).
      config_overrides: extra Playground config overrides (``impl`` is forced to "jax"
        unless given explicitly).

    ``state.inner`` is Playground's own ``State`` (its ``metrics`` stay there).
    """

    def __init__(
        self, task: str, asymmetric: bool = False, config_overrides: dict | None = None
    ):
        if task in MENAGERIE_ENVS:
            raise ValueError(
                f"playground/{task} needs MuJoCo Menagerie, which Playground downloads from "
                "GitHub when the task is loaded; diffrl supports only the DM Control Suite "
                f"tasks for now: {', '.join(DMC_ENVS)}"
            )
        if task not in DMC_ENVS:
            raise ValueError(
                f"unknown Playground task {task!r}; supported: {', '.join(DMC_ENVS)}"
            )
        from mujoco_playground import registry  # lazy: slow import

        overrides = {"impl": "jax", **(config_overrides or {})}
        self.env = registry.load(task, config_overrides=overrides)
        self.asymmetric = asymmetric
        self.spec = self._make_spec(task)
        check_spec(self.spec)

    def _make_spec(self, task: str) -> EnvSpec:
        size = self.env.observation_size
        if isinstance(size, dict):
            obs_size = int(np.prod(size["state"]))
            critic_size = int(np.prod(size["privileged_state"])) if self.asymmetric else None
        else:
            obs_size, critic_size = int(size), None
        model = self.env.mj_model
        n = int(self.env.action_size)
        low, high = -np.ones(n), np.ones(n)
        # MuJoCo clamps ctrl to ctrlrange for limited actuators; others: assume [-1, 1].
        limited = np.asarray(model.actuator_ctrllimited[:n], bool)
        ranges = np.asarray(model.actuator_ctrlrange[:n])
        low[limited], high[limited] = ranges[limited, 0], ranges[limited, 1]
        return EnvSpec(
            name=f"playground/{task}",
            obs_size=obs_size,
            action_size=n,
            action_low=tuple(float(x) for x in low),
            action_high=tuple(float(x) for x in high),
            episode_length=int(self.env._config.episode_length),
            critic_obs_size=critic_size,
        )

    def reset(self, key: jax.Array) -> EnvState:
        inner = strip_weak_types(self.env.reset(key))
        obs, critic_obs = _split_obs(inner.obs, self.asymmetric)
        return EnvState.create(
            inner=inner,
            obs=obs,
            critic_obs=critic_obs,
            reward=inner.reward,
            terminated=inner.done > 0.5,
        )

    def step(self, state: EnvState, action: jax.Array) -> EnvState:
        inner = strip_weak_types(self.env.step(state.inner, action))
        obs, critic_obs = _split_obs(inner.obs, self.asymmetric)
        return state.replace(
            inner=inner,
            obs=obs,
            critic_obs=critic_obs,
            final_obs=obs,
            final_critic_obs=critic_obs,
            reward=jnp.asarray(inner.reward, jnp.float32),
            terminated=inner.done > 0.5,
        )
