"""ManiSkill3's GPU simulation as one host batch: every env of a batch in one process, DLPack into JAX.

``maniskill/<Task>`` trains on SAPIEN's CPU PhysX by default: one environment per copy, stepped in
worker processes (``diffrl.envs.maniskill``). On a machine with a CUDA GPU, ManiSkill3 (Tao et al.,
2025) simulates thousands of copies of a task in one PhysX GPU scene (``sim_backend="physx_cuda"``),
with observations, rewards and flags as torch tensors on the GPU. :class:`ManiSkillBatchVecEnv` is
that scene behind the :class:`~diffrl.envs.host.HostVecEnv` protocol, with the same semantics as the
worker batch (``diffrl.envs.host``): actions in [-1, 1] clipped and mapped to the task's bounds, the
time limit a truncation separate from a termination, the true final observation, auto-reset on the
same step, episode return, length and success reported on the step an episode ends, and time-limit
counters spread uniformly at the first reset of a training batch.

Nothing crosses the PCIe bus: the bookkeeping is torch on the simulator's device, and every array
of a :class:`~diffrl.envs.host.HostStep` is a JAX array that shares the tensor's memory
(``jax.dlpack.from_dlpack``); the policy's actions go back the same way (``torch.from_dlpack``).
The host loop keeps such arrays on the device (``diffrl.core.host_loop``).

Decisions (where ManiSkill leaves a choice):

* ended envs are reset with ManiSkill's partial reset (``options={"env_idx": ...}``), so the scene
  is built with ``reconfiguration_freq=0`` (a partial reset cannot rebuild it): object geometry is
  fixed per sub-scene, poses and goals are redrawn every episode, as ManiSkill's PPO baseline trains;
* each reset call is seeded with a seed drawn from ``(seed, call index)``: ManiSkill seeds a partial
  reset's torch draws with one seed for the whole call, so a per-env seed (as the worker batch uses)
  would repeat the same initial states; runs are reproducible for a given seed and batch size, up to
  the GPU simulator's own nondeterminism;
* as in the worker batch, a task's own termination is reported as a truncation
  (``bootstrap_at_termination``, ``diffrl.envs.maniskill``), and success is ``success_once``.

``sim_backend="physx_cpu"`` runs the same class on the CPU with one env (ManiSkill refuses more):
that is how the tests check it on machines without a GPU.
"""
from __future__ import annotations

import numpy as np

from diffrl.envs.base import EnvSpec
from diffrl.envs.host import HostStep, batch_spec, first_step_counts
from diffrl.envs.maniskill import check_task, close_task, make_task, task_spec


def resolve_backend(requested: str, run_devices: int) -> str:
    """``--maniskill-backend`` -> ``"workers"`` or ``"gpu"``; ValueError for a gpu request that
    cannot run here (no CUDA in torch or in JAX, or a run over several devices), naming the fix."""
    if requested == "workers":
        return "workers"
    problems = []
    try:
        import torch

        if not torch.cuda.is_available():
            problems.append("torch sees no CUDA GPU (the maniskill extra installs a CPU build of torch; "
                            "install a CUDA build, e.g. `pip install torch==2.13.0`)")
    except ImportError:
        problems.append("torch is not installed (`make setup-maniskill`)")
    import jax

    if jax.default_backend() != "gpu":
        problems.append(f"JAX runs on {jax.default_backend()} (install jax[cuda12])")
    if run_devices > 1:
        problems.append(f"the run uses {run_devices} devices and the GPU scene lives on one (--num-devices 1)")
    if not problems:
        return "gpu"
    if requested == "auto":
        return "workers"
    raise ValueError("--maniskill-backend gpu cannot run here: " + "; ".join(problems))


def _to_jax(x):
    """A torch tensor as a JAX array on the same device, sharing its memory (DLPack)."""
    import jax

    return jax.dlpack.from_dlpack(x.contiguous())


class ManiSkillBatchVecEnv:
    """``num_envs`` copies of a ManiSkill task in one simulator scene (module docstring).

    Args:
      task: a ManiSkill id (``PickCube-v1``).
      num_envs: copies in the scene (1 on ``physx_cpu``).
      episode_length: the batch's time limit (default: the task's registered one).
      sim_backend: ``physx_cuda`` (a GPU) or ``physx_cpu`` (one env; tests).
      bootstrap_at_termination: report the task's terminations as truncations.
      offline_only: refuse tasks outside ``MANISKILL_TASKS``.
    """

    def __init__(self, task: str, num_envs: int, episode_length: int | None = None,
                 sim_backend: str = "physx_cuda", bootstrap_at_termination: bool = True, offline_only: bool = True):
        if offline_only:
            check_task(task)
        if sim_backend == "physx_cpu" and num_envs != 1:
            raise ValueError(f"maniskill/{task}: the CPU simulator holds one env per scene (got {num_envs}); "
                             "use physx_cuda on a GPU, or the worker batch (diffrl.envs.host)")
        import torch

        self.torch = torch
        self.env = make_task(task, num_envs=num_envs, sim_backend=sim_backend, reconfiguration_freq=0)
        self.base = self.env.unwrapped
        self.device = self.base.device
        self.native_spec: EnvSpec = task_spec(self.env, task)
        self.num_envs = num_envs
        self.spec = batch_spec(self.native_spec, episode_length or self.native_spec.episode_length)
        self.bootstrap_at_termination = bootstrap_at_termination
        f32 = dict(device=self.device, dtype=torch.float32)
        self._low = torch.as_tensor(self.native_spec.action_low, **f32)
        self._high = torch.as_tensor(self.native_spec.action_high, **f32)
        self._has_success = None  # known after the first step
        self._seed, self._calls = 0, 0

    # -- bookkeeping ---------------------------------------------------------------
    def _reset_seed(self) -> int:
        self._calls += 1
        return int(np.random.SeedSequence([self._seed, self._calls]).generate_state(1)[0] % 2**31)

    def _obs(self, obs):
        return obs.reshape(self.num_envs, -1).to(self.torch.float32)

    def reset(self, seed: int, spread_counters: bool = True) -> HostStep:
        torch = self.torch
        self._seed, self._calls = int(seed), 0
        obs, _ = self.env.reset(seed=self._reset_seed())
        obs = self._obs(obs)
        counts = (first_step_counts(seed, self.num_envs, self.spec.episode_length) if spread_counters
                  else np.zeros(self.num_envs, np.int64))
        self._step_count = torch.as_tensor(counts, device=self.device, dtype=torch.int32)
        self._ep_length = torch.zeros(self.num_envs, device=self.device, dtype=torch.int32)
        self._ep_return = torch.zeros(self.num_envs, device=self.device, dtype=torch.float32)
        self._success = torch.zeros(self.num_envs, device=self.device, dtype=torch.bool)
        zeros = torch.zeros(self.num_envs, device=self.device)
        false = torch.zeros(self.num_envs, device=self.device, dtype=torch.bool)
        self._last_obs = obs.clone()  # ManiSkill may reuse its buffers
        return self._host_step(obs, zeros, false, false, obs, zeros, zeros.to(torch.int32), zeros, false)

    def step(self, actions) -> HostStep:
        """(B, action_size) actions in [-1, 1] (a JAX array, or anything numpy takes) -> one step."""
        torch = self.torch
        if hasattr(actions, "__dlpack__") and not isinstance(actions, np.ndarray):
            unit = torch.from_dlpack(actions).to(self.device, torch.float32).clone()
        else:
            unit = torch.as_tensor(np.asarray(actions, np.float32), device=self.device)
        unit = unit.reshape(self.num_envs, -1).clamp(-1.0, 1.0)
        native = self._low + (unit + 1.0) * 0.5 * (self._high - self._low)
        obs, reward, terminated, sim_truncated, info = self.env.step(native)
        final = self._obs(obs)  # the observation the transition ended in, before any reset
        reward = torch.as_tensor(reward, device=self.device).reshape(self.num_envs).to(torch.float32)
        terminated = torch.as_tensor(terminated, device=self.device).reshape(self.num_envs).bool()
        sim_truncated = torch.as_tensor(sim_truncated, device=self.device).reshape(self.num_envs).bool()
        if "success" in info:
            self._success |= torch.as_tensor(info["success"], device=self.device).reshape(self.num_envs).bool()
        if self._has_success is None:
            self._has_success = "success" in info
        if self.bootstrap_at_termination:
            sim_truncated, terminated = sim_truncated | terminated, torch.zeros_like(terminated)
        # PhysX can take a scene to NaN (and keeps it there): such a step under a finite action is a termination
        # with reward 0 from the last finite observation, and the env is reset (wrappers.NonFiniteGuard); a
        # non-finite action is a diverged policy, whose NaN must show.
        nonfinite = ~(torch.isfinite(final).all(dim=1) & torch.isfinite(reward)) & torch.isfinite(unit).all(dim=1)
        final = torch.where(nonfinite[:, None], self._last_obs, final)
        reward = torch.where(nonfinite, 0.0, reward)
        terminated, sim_truncated = terminated | nonfinite, sim_truncated & ~nonfinite
        self._step_count += 1
        self._ep_length += 1
        self._ep_return += reward
        truncated = (sim_truncated | (self._step_count >= self.spec.episode_length)) & ~terminated
        done = terminated | truncated
        ep_return = torch.where(done, self._ep_return, 0.0)
        ep_length = torch.where(done, self._ep_length, 0)
        if self._has_success:
            success = torch.where(done, self._success.to(torch.float32), 0.0)
        else:
            success = torch.where(done, torch.full_like(self._ep_return, float("nan")), 0.0)
        next_obs = final
        if bool(done.any()):  # a device sync each step (the policy's act call waits on the step anyway)
            index = torch.nonzero(done).reshape(-1)
            fresh, _ = self.env.reset(seed=self._reset_seed(), options={"env_idx": index})
            next_obs = torch.where(done[:, None], self._obs(fresh), final)
            self._step_count[index] = 0
            self._ep_length[index] = 0
            self._ep_return[index] = 0.0
            self._success[index] = False
        self._last_obs = next_obs.clone()
        return self._host_step(next_obs, reward, terminated, truncated, final, ep_return, ep_length, success,
                               nonfinite)

    def _host_step(self, obs, reward, terminated, truncated, final_obs, ep_return, ep_length, success,
                   nonfinite) -> HostStep:
        """The step as JAX arrays. Each is a copy on the device first: the arrays alias their tensors'
        memory, which neither ManiSkill's buffers nor this class's counters may change afterwards."""
        torch = self.torch

        def out(x, dtype):
            return _to_jax(x.to(dtype).clone())

        return HostStep(obs=out(obs, torch.float32), reward=out(reward, torch.float32),
                        terminated=out(terminated, torch.bool), truncated=out(truncated, torch.bool),
                        final_obs=out(final_obs, torch.float32), episode_return=out(ep_return, torch.float32),
                        episode_length=out(ep_length, torch.int32), episode_success=out(success, torch.float32),
                        nonfinite=out(nonfinite, torch.bool))

    def render(self) -> np.ndarray:
        """(H, W, 3) uint8 frame of the first env's render camera."""
        frame = self.env.render()
        frame = frame.cpu().numpy() if hasattr(frame, "cpu") else np.asarray(frame)
        return frame[0] if frame.ndim == 4 else frame

    def close(self) -> None:
        close_task(self.env)
