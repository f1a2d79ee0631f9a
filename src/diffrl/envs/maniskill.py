"""ManiSkill3 (Tao et al., 2025, "ManiSkill3: GPU Parallelized Robotics Simulation and Rendering for
Generalizable Embodied AI") tasks as host environments.

``maniskill/<Task>`` (for example ``maniskill/PickCube-v1``, ``maniskill/PushCube-v1``) is
``gymnasium.make(Task, obs_mode="state", num_envs=1, sim_backend="physx_cpu")`` stepped by SAPIEN's
PhysX on the host (``diffrl.envs.host``), one environment per copy, in worker processes like
dm_control. Installed with the ``maniskill`` extra (``mani-skill==3.0.1`` over a CPU build of
``torch==2.13.0``, which must be installed first: ``make setup-maniskill``). SAPIEN needs a Vulkan
driver even when nothing is rendered; on Debian 12 the lavapipe of Mesa 22 is refused and Mesa 25's
(bookworm-backports' ``mesa-vulkan-drivers``) works.

Which tasks: :data:`MANISKILL_TASKS` are the tasks of ManiSkill 3.0.1 that build and step offline
with a dense reward (checked by a test). The others either download assets at run time (YCB objects,
PartNet-Mobility, ReplicaCAD and AI2-THOR scenes, the AnymalC, Unitree H1 and Go2 robots:
:data:`NEEDS_DOWNLOAD`, refused before anything starts, naming what is missing) or have no reward to
learn from (``Empty-v1``, drawing tasks, ``PlugCharger-v1``, ``StackPyramid-v1``).

Decisions:
* observations are ManiSkill's flat ``state`` vector (float32); rewards are its
  ``normalized_dense`` reward (in [0, 1] per step);
* the time limit is the task's registered ``max_episode_steps`` (50 for PickCube and PushCube),
  reported as a truncation;
* a task's own termination (success, or failure for some tasks) ends the episode but is reported as
  a truncation by default (``bootstrap_at_termination=True``): both ManiSkill's PPO baseline
  (``bootstrap_at_done="always"``) and REPPO's ManiSkill wrapper bootstrap through it, since the
  dense reward keeps paying at a reached goal and a zero value there would make success look worse
  than hovering next to it;
* each episode is reset with its own seed (``reset(seed=...)``), so episodes are reproducible;
* an episode's success is ManiSkill's ``success`` at any of its steps (``success_once``, as ManiSkill's
  baselines report it); evaluation logs the rate over episodes (``eval/success_rate``, per seed
  ``eval/seed_success_rate``);
* actions are the default controller's (``pd_joint_delta_pos`` for the arms), bounds from the
  action space;
* the environment renders with ``render_mode="rgb_array"`` (videos; ``render`` gives one frame).

On a CUDA GPU, ``--maniskill-backend gpu`` (or ``auto``) simulates a whole batch in ManiSkill's GPU
scene instead, in this process, with DLPack into JAX: ``diffrl.envs.maniskill_batch``.
"""
from __future__ import annotations

import contextlib
import gc
import os

import numpy as np

from diffrl.envs.base import EnvSpec

MANISKILL_TASKS: tuple[str, ...] = (
    "PushCube-v1", "PickCube-v1", "PullCube-v1", "StackCube-v1", "LiftPegUpright-v1", "PegInsertionSide-v1",
    "PushT-v1", "RollBall-v1", "PlaceSphere-v1", "PokeCube-v1", "PullCubeTool-v1", "PickCubeSO100-v1",
    "SO100GraspCube-v1", "RotateValveLevel0-v1", "RotateValveLevel1-v1", "RotateValveLevel2-v1",
    "RotateValveLevel3-v1", "RotateValveLevel4-v1", "TriFingerRotateCubeLevel0-v1",
    "TriFingerRotateCubeLevel1-v1", "TriFingerRotateCubeLevel2-v1", "TriFingerRotateCubeLevel3-v1",
    "TriFingerRotateCubeLevel4-v1", "RotateSingleObjectInHandLevel0-v1", "RotateSingleObjectInHandLevel1-v1",
    "UnitreeG1PlaceAppleInBowl-v1", "UnitreeG1TransportBox-v1", "MS-CartpoleBalance-v1",
    "MS-CartpoleSwingUp-v1", "MS-HopperStand-v1", "MS-HopperHop-v1", "MS-AntWalk-v1", "MS-AntRun-v1",
    "MS-HumanoidStand-v1", "MS-HumanoidWalk-v1", "MS-HumanoidRun-v1",
)
"""ManiSkill 3.0.1's tasks that build and step offline, on the CPU, with a ``normalized_dense``
reward (a test builds and steps each; measured at 1-11 ms per step)."""

NEEDS_DOWNLOAD: dict[str, str] = {
    **{t: "the YCB object models (python -m mani_skill.utils.download_asset ycb)" for t in (
        "PickSingleYCB-v1", "PickClutterYCB-v1", "RotateSingleObjectInHandLevel2-v1",
        "RotateSingleObjectInHandLevel3-v1")},
    **{t: f"PartNet-Mobility models (python -m mani_skill.utils.download_asset {a})" for t, a in (
        ("OpenCabinetDoor-v1", "partnet_mobility_cabinet"), ("OpenCabinetDrawer-v1", "partnet_mobility_cabinet"),
        ("TurnFaucet-v1", "partnet_mobility_faucet"))},
    **{t: "the ReplicaCAD scenes (python -m mani_skill.utils.download_asset ReplicaCAD)" for t in (
        "ReplicaCAD_SceneManipulation-v1", "SceneManipulation-v1", "ReplicaCADPrepareGroceriesTrain_SceneManipulation-v1",
        "ReplicaCADPrepareGroceriesVal_SceneManipulation-v1", "ReplicaCADSetTableTrain_SceneManipulation-v1",
        "ReplicaCADSetTableVal_SceneManipulation-v1", "ReplicaCADTidyHouseTrain_SceneManipulation-v1",
        "ReplicaCADTidyHouseVal_SceneManipulation-v1")},
    "ArchitecTHOR_SceneManipulation-v1": "the AI2-THOR scenes (python -m mani_skill.utils.download_asset AI2THOR)",
    "RoboCasaKitchen-v1": "the RoboCasa scenes (python -m mani_skill.utils.download_asset RoboCasa)",
    "AssemblingKits-v1": "the assembling-kits models (python -m mani_skill.utils.download_asset assembling_kits)",
    "InsertFlower-v1": "the flower and vase models (downloaded by the task at run time)",
    "AnymalC-Reach-v1": "the AnymalC robot (downloaded by the task at run time)",
    "AnymalC-Spin-v1": "the AnymalC robot (downloaded by the task at run time)",
    "UnitreeH1Stand-v1": "the Unitree H1 robot (downloaded by the task at run time)",
    "UnitreeGo2-Reach-v1": "the Unitree Go2 robot (downloaded by the task at run time)",
    "PickCubeWidowXAI-v1": "the WidowX AI robot (downloaded by the task at run time)",
    **{t: "the Bridge real-to-sim scenes (python -m mani_skill.utils.download_asset bridge_v2_real2sim)" for t in (
        "PutCarrotOnPlateInScene-v1", "PutEggplantInBasketScene-v1", "PutSpoonOnTableClothInScene-v1",
        "StackGreenCubeOnYellowCubeBakedTexInScene-v1")},
}
"""ManiSkill 3.0.1 tasks that download assets at run time (they fail offline), with what they need."""

MANISKILL_BACKENDS: tuple[str, ...] = ("auto", "workers", "gpu")
"""``--maniskill-backend``: SAPIEN's CPU PhysX in worker processes, ManiSkill's GPU scene in this
process (``diffrl.envs.maniskill_batch``), or the GPU one where it can run."""

EXTRA = "maniskill"
"""The pip extra (the CPU build of ``torch==2.13.0`` first, then ``pip install 'diffrl[maniskill]'``)."""


class ManiSkillMissing(ValueError):
    """ManiSkill (or the torch it needs) is not installed."""


def needs_download_error(task: str) -> ValueError:
    """The refusal of a task in :data:`NEEDS_DOWNLOAD`, naming what it needs."""
    return ValueError(
        f"maniskill/{task} needs {NEEDS_DOWNLOAD[task]}, which ManiSkill downloads at run time; this "
        "machine may be offline, so diffrl does not list it. Download it first, then register the task "
        "yourself: diffrl.envs.host_registry.register_host(name, functools.partial("
        "diffrl.envs.maniskill.ManiSkillEnv, task, offline_only=False)).")


def check_task(task: str) -> None:
    """Refuse a task that is not offline-ready, before anything is imported or started."""
    if task in MANISKILL_TASKS:
        return
    if task in NEEDS_DOWNLOAD:
        raise needs_download_error(task)
    import difflib

    close = difflib.get_close_matches(task, MANISKILL_TASKS, n=3)
    hint = f" Did you mean: {', '.join('maniskill/' + c for c in close)}?" if close else ""
    raise ValueError(f"unknown ManiSkill task {task!r}.{hint} Supported offline: {', '.join(MANISKILL_TASKS)}")


def _import_maniskill():
    os.environ.setdefault("MS_SKIP_ASSET_DOWNLOAD_PROMPT", "1")  # never wait on a download prompt
    try:
        import gymnasium as gym
        import mani_skill.envs  # noqa: F401  (registers the tasks)
    except ImportError as e:
        raise ManiSkillMissing(
            f"maniskill/ tasks need ManiSkill3, which is not installed ({e}). Install the CPU build of torch "
            "first (`pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu`), then the "
            f"extra (`pip install 'diffrl[{EXTRA}]'`), or run `make setup-maniskill`.") from None
    return gym


@contextlib.contextmanager
def older_objects_left_to_the_collector():
    """Full garbage collections inside skip the objects that existed before (``gc.freeze``).

    ManiSkill builds a scene after a full ``gc.collect()`` (``BaseEnv._clear``, meant to free a
    previous scene's GPU memory), whose cost grows with everything else the process holds: in a
    process that has compiled many JAX programs (a training run's host batch, a test worker) that
    took seconds per environment built, against ~0.05 s for the same build with the older objects
    frozen (3M small objects held: 0.68 -> 0.05 s). The garbage of a new scene is young, so it is
    still collected; the older objects return to the collector's oldest generation at once.
    Someone else's freeze is left alone (nothing is frozen or unfrozen then)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def make_task(task: str, num_envs: int, sim_backend: str, **kwargs):
    """``gymnasium.make`` of a ManiSkill task as diffrl uses it (state observations, the normalised
    dense reward, rgb_array rendering), with a clear error when SAPIEN finds no Vulkan driver."""
    gym = _import_maniskill()
    try:
        with older_objects_left_to_the_collector():
            return gym.make(task, obs_mode="state", num_envs=num_envs, sim_backend=sim_backend,
                            render_mode="rgb_array", reward_mode="normalized_dense", **kwargs)
    except RuntimeError as e:
        if "vulkan" in str(e).lower() or "render" in str(e).lower():
            raise RuntimeError(
                f"maniskill/{task}: SAPIEN found no usable Vulkan driver ({e}). ManiSkill needs one even "
                "without rendering; on Debian 12 install Mesa 25's lavapipe from bookworm-backports "
                "(apt-get install -t bookworm-backports mesa-vulkan-drivers; `make setup-maniskill` does)."
            ) from e
        raise


def close_task(env) -> None:
    """Close a task made by :func:`make_task`: ManiSkill's ``close`` runs the same full ``gc.collect()``
    (``BaseEnv._clear``) as its build, so the older objects are left to the collector here too."""
    with older_objects_left_to_the_collector():
        env.close()


def task_spec(env, task: str) -> EnvSpec:
    """One environment's spec of a made task (batched or not): flat state size, bounded native
    action bounds, the registered time limit."""
    from mani_skill.utils.registration import REGISTERED_ENVS

    from diffrl.envs.gymnasium_env import box_spec

    # ManiSkill's registry holds the time limit (gymnasium's spec of the made env does not); the
    # observation space is known after construction (no extra reset: the batch resets every env).
    base = env.unwrapped
    return box_spec(base.single_observation_space, base.single_action_space,
                    REGISTERED_ENVS[task].max_episode_steps, f"maniskill/{task}")


def _numpy(x) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    return np.asarray(x)


class ManiSkillEnv:
    """One ManiSkill3 task behind the :class:`~diffrl.envs.host.HostEnv` protocol (module docstring).

    Args:
      task: a ManiSkill id (``PickCube-v1``).
      bootstrap_at_termination: report the task's terminations as truncations (module docstring).
      offline_only: refuse tasks outside :data:`MANISKILL_TASKS` (set False for a task whose assets
        you have downloaded).
    """

    def __init__(self, task: str, bootstrap_at_termination: bool = True, offline_only: bool = True):
        if offline_only:
            check_task(task)
        self.env = make_task(task, num_envs=1, sim_backend="physx_cpu")
        self.bootstrap_at_termination = bootstrap_at_termination
        self.spec = task_spec(self.env, task)
        self._shape = self.env.action_space.shape
        self.success_once = False
        """Whether the current episode has reached the task's success (read by the host batch when
        an episode ends: ``HostStep.episode_success``, the evaluation's ``success_rate``)."""

    def reset(self, seed: int) -> np.ndarray:
        obs, _ = self.env.reset(seed=int(seed) % 2**31)
        self.success_once = False
        return _numpy(obs).astype(np.float32).ravel()

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool]:
        obs, reward, terminated, truncated, info = self.env.step(np.asarray(action, np.float32).reshape(self._shape))
        terminated, truncated = bool(_numpy(terminated).any()), bool(_numpy(truncated).any())
        self.success_once = self.success_once or bool(_numpy(info.get("success", False)).any())
        if terminated and self.bootstrap_at_termination:
            terminated, truncated = False, True
        return _numpy(obs).astype(np.float32).ravel(), float(_numpy(reward).ravel()[0]), terminated, truncated

    def render(self) -> np.ndarray:
        """(H, W, 3) uint8 frame of ManiSkill's render camera (512 x 512 for the table-top tasks)."""
        frame = _numpy(self.env.render())
        return frame[0] if frame.ndim == 4 else frame

    def close(self) -> None:
        close_task(self.env)
