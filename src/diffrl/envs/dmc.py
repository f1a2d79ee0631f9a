"""dm_control's suite (Tassa et al., 2018, "DeepMind Control Suite") as host environments.

``dmc/<domain>-<task>`` (for example ``dmc/dog-run``, ``dmc/humanoid_CMU-stand``,
``dmc/cartpole-balance``) is ``dm_control.suite.load(domain, task)`` stepped by MuJoCo's C engine
on the host (``diffrl.envs.host``): the Dog model does not load in MJX (ellipsoid-box collisions
are not implemented there), and dm_control's own tasks are the reference the AMDP and DIME papers
report on. Installed with the ``dmc`` extra (``dm_control==1.0.50`` next to the pinned
``mujoco==3.17.0``; left alone it would pull a MuJoCo that breaks every task).

Decisions:
* the observation is dm_control's observation dict flattened in its own (ordered) key order, as
  float32; scalars count as one entry;
* rewards are dm_control's, in [0, 1] per step; episodes last 1000 steps (the suite's time limit,
  reported as a truncation: dm_control ends them with discount 1); a termination is a last step
  with discount 0 (no suite task terminates early today, but the protocol keeps the difference);
* actions are the actuators' controls; bounds from ``action_spec()``;
* a step on which MuJoCo finds the state invalid (dm_control raises ``PhysicsError``; MuJoCo has reset its
  data) returns a NaN observation and reward with ``terminated``: the host batch turns that into a finite
  termination and a reset (``diffrl.envs.host``), so one unstable episode does not end the run;
* the task's random state is seeded per episode (``task_kwargs={"random": seed}`` at construction,
  then reseeded on every reset) so that episodes are reproducible from the batch seed.

``dm_control`` is imported lazily, and with ``MUJOCO_GL=egl`` unless set (it would otherwise probe
GLFW and warn that there is no display).
"""
from __future__ import annotations

import os

import numpy as np

from diffrl.envs.base import EnvSpec, check_spec

DMC_TASKS: tuple[str, ...] = (
    "acrobot-swingup", "acrobot-swingup_sparse", "ball_in_cup-catch", "cartpole-balance",
    "cartpole-balance_sparse", "cartpole-swingup", "cartpole-swingup_sparse", "cartpole-two_poles",
    "cartpole-three_poles", "cheetah-run", "dog-stand", "dog-walk", "dog-trot", "dog-run", "dog-fetch",
    "finger-spin", "finger-turn_easy", "finger-turn_hard", "fish-upright", "fish-swim", "hopper-stand",
    "hopper-hop", "humanoid-stand", "humanoid-walk", "humanoid-run", "humanoid-run_pure_state",
    "humanoid_CMU-stand", "humanoid_CMU-walk", "humanoid_CMU-run", "lqr-lqr_2_1", "lqr-lqr_6_2",
    "manipulator-bring_ball", "manipulator-bring_peg", "manipulator-insert_ball", "manipulator-insert_peg",
    "pendulum-swingup", "point_mass-easy", "point_mass-hard", "quadruped-walk", "quadruped-run",
    "quadruped-escape", "quadruped-fetch", "reacher-easy", "reacher-hard", "stacker-stack_2",
    "stacker-stack_4", "swimmer-swimmer6", "swimmer-swimmer15", "walker-stand", "walker-walk", "walker-run",
)
"""Mirror of ``dm_control.suite.ALL_TASKS`` 1.0.50 as ``domain-task`` (checked by a test), kept
here so that listing names does not import dm_control."""

EXTRA = "dmc"
"""The pip extra that installs dm_control (``pip install 'diffrl[dmc]'``; ``make test`` does)."""


class DmControlMissing(ValueError):
    """dm_control is not installed."""


def _import_suite():
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        from dm_control import suite
    except ImportError as e:
        raise DmControlMissing(
            f"dmc/ tasks need dm_control, which is not installed ({e}). Install the extra: "
            f"`pip install 'diffrl[{EXTRA}]'` (dm_control==1.0.50 with mujoco==3.17.0), or run "
            "`make setup-host`.") from None
    return suite


def flatten_observation(observation) -> np.ndarray:
    """dm_control's observation dict -> one float32 vector, in the dict's order."""
    return np.concatenate([np.asarray(v, np.float32).ravel() for v in observation.values()])


class DmControlEnv:
    """One dm_control suite task behind the :class:`~diffrl.envs.host.HostEnv` protocol."""

    def __init__(self, task: str):
        if task not in DMC_TASKS:
            import difflib

            close = difflib.get_close_matches(task, DMC_TASKS, n=3)
            hint = f" Did you mean: {', '.join('dmc/' + c for c in close)}?" if close else ""
            raise ValueError(f"unknown dm_control task {task!r}.{hint} Names are dmc/<domain>-<task>.")
        suite = _import_suite()
        from dm_control.rl.control import PhysicsError

        self._physics_error = PhysicsError  # caught in step; resolved once, not on every step
        domain, name = task.split("-", 1)
        self.env = suite.load(domain, name, task_kwargs={"random": 0})
        action = self.env.action_spec()
        observation = self.env.observation_spec()
        obs_size = int(sum(int(np.prod(s.shape)) for s in observation.values()))
        limit = self.env._step_limit  # dm_control's time limit in steps (1000 in the suite)
        self.spec = EnvSpec(
            name=f"dmc/{task}",
            obs_size=obs_size,
            action_size=int(action.shape[0]),
            action_low=tuple(float(x) for x in np.broadcast_to(action.minimum, action.shape)),
            action_high=tuple(float(x) for x in np.broadcast_to(action.maximum, action.shape)),
            episode_length=int(limit) if np.isfinite(limit) else 1000,
        )
        check_spec(self.spec)

    @property
    def physics(self):
        """dm_control's ``Physics`` (rendering: ``physics.render(height, width, camera_id)``)."""
        return self.env.physics

    def reset(self, seed: int) -> np.ndarray:
        self.env.task._random = np.random.RandomState(seed % 2**32)
        return flatten_observation(self.env.reset().observation)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool]:
        try:
            step = self.env.step(action)
        except self._physics_error:
            # MuJoCo found the state invalid (NaN, inf or huge qpos/qvel/qacc; it resets its data) and
            # dm_control raised. Reported as a non-finite step, which the host batch makes a termination
            # from the last finite observation and resets (diffrl.envs.host), instead of a crashed run.
            return np.full(self.spec.obs_size, np.nan, np.float32), float("nan"), True, False
        last = step.last()
        terminated = bool(last and step.discount == 0.0)
        return flatten_observation(step.observation), float(step.reward or 0.0), terminated, bool(last and not terminated)
