"""Adapter for MuJoCo Playground (Zakka et al., 2025, "MuJoCo Playground").

Supported: the 25 DeepMind Control Suite tasks (their XML ships with the wheel; Reacher needs
the shim in ``diffrl.envs.compat``) and the 19 locomotion tasks, whose robots come from
MuJoCo Menagerie. Playground would ``git clone`` Menagerie at load time, which fails offline;
``diffrl.envs.menagerie`` points it at a local copy first (two EnvPool asset packages on PyPI
hold every robot the locomotion tasks use) or raises a clear error naming the missing robot.
Manipulation tasks are not supported.

Decisions:
* physics ``impl`` is a parameter (``TrainConfig.physics_impl``), default "jax":
  Playground 0.2.0 defaults to Warp, which is 2-150x slower on the CPU (measured here, docs/environments.md), is
  a 392 MB dependency diffrl does not install, and is not what the REPPO reference
  results (G1/T1 included) were produced with; MJX's JAX implementation runs unchanged
  on CPUs, GPUs and TPUs and is differentiable;
* Playground's own ``EpisodeWrapper``/auto-reset are not used; our wrappers do that,
  so ``terminated`` is exactly Playground's ``done`` (DMC: the state became NaN;
  locomotion: the robot fell);
* dictionary observations put ``state`` in ``obs`` and, when ``asymmetric=True``,
  ``privileged_state`` in ``critic_obs`` (as in REPPO's reference code, github.com/cvoelcker/reppo); asking for
  an asymmetric critic on a task without ``privileged_state`` is an error;
* locomotion actions are offsets from the default pose in units of the task's
  ``action_scale``, so their bounds are [-1, 1] (not the actuators' ``ctrlrange``, the
  joint-angle range the targets are clamped to); DMC actions are the controls;
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
from diffrl.envs.menagerie import ROBOT_OF_TASK, MenagerieMissing
from diffrl.envs.compat import patch_mjspec_find_body
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

LOCOMOTION_ENVS: tuple[str, ...] = tuple(ROBOT_OF_TASK)
"""Mirror of ``mujoco_playground._src.locomotion.ALL_ENVS`` (checked by a test)."""

PRIVILEGED_OBS_ENVS: frozenset[str] = frozenset({
    "ApolloJoystickFlatTerrain", "BerkeleyHumanoidJoystickFlatTerrain",
    "BerkeleyHumanoidJoystickRoughTerrain", "G1JoystickFlatTerrain", "G1JoystickRoughTerrain",
    "Go1JoystickFlatTerrain", "Go1JoystickRoughTerrain", "Go1Getup", "Go1Handstand", "Go1Footstand",
    "SpotFlatTerrainJoystick", "T1JoystickFlatTerrain", "T1JoystickRoughTerrain",
})
"""Locomotion tasks whose observation is a dict with ``privileged_state`` (the others,
and all DMC tasks, give one array), so they can train an asymmetric critic. Known
without loading the task, so presets can be chosen from the name (checked by a test)."""

MANIPULATION_ENVS: tuple[str, ...] = (
    "AlohaHandOver", "AlohaSinglePegInsertion", "PandaPickCube", "PandaPickCubeOrientation",
    "PandaPickCubeCartesian", "PandaOpenCabinet", "PandaRobotiqPushCube", "LeapCubeReorient",
    "LeapCubeRotateZAxis", "AeroCubeRotateZAxis",
)
"""Playground manipulation tasks: not supported (Menagerie robots not packaged)."""

PHYSICS_IMPLS: tuple[str, ...] = ("jax", "warp")
"""MJX implementations Playground can run on (``impl`` config field)."""


class EnvBuildError(RuntimeError):
    """Playground raised while building a task (not a bad override, not a missing robot)."""


def _split_obs(obs: Any, asymmetric: bool) -> tuple[jax.Array, jax.Array]:
    """Playground observation (array or dict) -> (actor obs, critic obs), float32."""
    if isinstance(obs, dict):
        actor = obs["state"]
        critic = obs["privileged_state"] if asymmetric else actor
    else:
        actor = critic = obs
    return jnp.asarray(actor, jnp.float32), jnp.asarray(critic, jnp.float32)


class PlaygroundEnv:
    """One MuJoCo Playground task (DMC or locomotion) behind the :class:`~diffrl.envs.base.Env` protocol.

    Args:
      task: Playground registry name, e.g. ``"CartpoleSwingup"`` or ``"G1JoystickFlatTerrain"``.
      asymmetric: use ``privileged_state`` as the critic observation; the task must
        have one (:data:`PRIVILEGED_OBS_ENVS`), else ``ValueError``.
      physics_impl: MJX implementation, "jax" (default) or "warp" (needs warp-lang).
      config_overrides: extra Playground config overrides (an ``impl`` here wins over
        ``physics_impl``).

    ``state.inner`` is Playground's own ``State`` (its ``metrics`` stay there).
    """

    def __init__(self, task: str, asymmetric: bool = False, physics_impl: str = "jax",
                 config_overrides: dict | None = None):
        if task in MANIPULATION_ENVS:
            raise ValueError(
                f"playground/{task} is a manipulation task; diffrl supports the DM Control Suite "
                "and locomotion tasks of Playground (see `diffrl envs --suite playground`)")
        if task not in DMC_ENVS and task not in LOCOMOTION_ENVS:
            raise ValueError(f"unknown Playground task {task!r}; supported: "
                             f"{', '.join(DMC_ENVS + LOCOMOTION_ENVS)}")
        if physics_impl not in PHYSICS_IMPLS:
            raise ValueError(f"physics_impl must be one of {', '.join(PHYSICS_IMPLS)} (got {physics_impl!r})")
        if asymmetric and task not in PRIVILEGED_OBS_ENVS:
            raise ValueError(
                f"playground/{task} has no privileged observation for an asymmetric critic; tasks "
                f"that have one: {', '.join(sorted(PRIVILEGED_OBS_ENVS))}")
        self.locomotion = task in LOCOMOTION_ENVS
        if self.locomotion:
            from diffrl.envs.menagerie import use_menagerie_for

            use_menagerie_for(task)  # before Playground's loader would try to git clone
        from diffrl.envs.quiet_import import import_mjx_quietly

        import_mjx_quietly()
        patch_mjspec_find_body()  # Reacher's model builder; see diffrl.envs.compat
        from mujoco_playground import registry  # lazy: slow import

        overrides = {"impl": physics_impl, **(config_overrides or {})}
        # The overrides are applied to the task's default config before building, so that only their
        # own errors (ml_collections: unknown key or wrong type) are reported as such; an error while
        # building the task is reported as that, with its real type and message.
        config = registry.get_default_config(task)
        try:
            config.update_from_flattened_dict(overrides)
        except (KeyError, AttributeError, TypeError, ValueError) as e:
            raise ValueError(f"playground/{task}: invalid config override in {overrides}: {e}") from None
        try:
            self.env = registry.load(task, config=config)
        except MenagerieMissing:
            raise
        except Exception as e:
            raise EnvBuildError(f"playground/{task} failed to build in mujoco_playground: "
                                f"{type(e).__name__}: {e}") from e
        self.asymmetric = asymmetric
        # Playground computes observation_size by tracing reset (seconds for a locomotion task) and does not
        # cache it: read once. observation_groups keeps what it said: the names of a dict observation's
        # parts ("state", "privileged_state", ...), () for a flat one.
        size = self.env.observation_size
        self.observation_groups: tuple[str, ...] = tuple(sorted(size)) if isinstance(size, dict) else ()
        self.spec = self._make_spec(task, size)
        check_spec(self.spec)

    def _make_spec(self, task: str, size) -> EnvSpec:
        """The spec from Playground's ``observation_size`` (``size``: an int, or a dict of shapes)."""
        if isinstance(size, dict):
            obs_size = int(np.prod(size["state"]))
            critic_size = int(np.prod(size["privileged_state"])) if self.asymmetric else None
        elif self.asymmetric:
            raise ValueError(f"playground/{task} returned no privileged_state observation")
        else:
            obs_size, critic_size = int(size), None
        model = self.env.mj_model
        n = int(self.env.action_size)
        low, high = -np.ones(n), np.ones(n)
        if not self.locomotion:
            # DMC: the action is the control. MuJoCo clamps ctrl to ctrlrange for limited
            # actuators; others: assume [-1, 1].
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
