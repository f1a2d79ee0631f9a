"""Environments that step outside JAX ("host" environments): protocol, wrappers, worker processes.

A host environment is a simulator stepped by Python/C code on the host (dm_control, ManiSkill,
gymnasium), not a JAX function, so it cannot run inside the jitted rollout of
``diffrl.core.loop``. Training with one (``diffrl.core.host_loop``) calls one jitted act function per
step on the whole batch and keeps the update one jitted program.

Two levels:

* :class:`HostEnv`, ONE environment: ``spec``, ``reset(seed) -> obs`` and
  ``step(native_action) -> (obs, reward, terminated, truncated)``, numpy in and out. ``truncated``
  is the simulator's own time limit (dm_control ends every episode after 1000 steps).
* :class:`HostVecEnv`, a BATCH with the semantics of the JAX training stack
  (``diffrl.envs.wrappers.wrap``): actions in [-1, 1] are clipped and mapped affinely to the task's
  bounds; a time limit (``episode_length``) is a truncation, separate from a termination, and a
  termination on the same step wins; an ended episode auto-resets on the same step and
  :attr:`HostStep.final_obs` holds the observation it truly ended in; an episode's return and
  length are reported on the step it ends; the first step counters are drawn uniformly in
  ``[0, episode_length)`` so that the batch does not time out in lockstep. Implementations:
  :class:`SerialVecEnv` (in this process) and :class:`ProcessVecEnv` (worker processes, each
  stepping a contiguous slice of the batch; the batch's order and results do not depend on the
  number of workers).

Seeding: env ``i`` of a batch reset with ``seed`` starts its ``k``-th episode from
``np.random.SeedSequence([seed, i, k])``, so runs are reproducible for a given seed and batch
size, whatever the number of workers.

What cannot be saved: the simulator's physics state lives in the workers, outside the train state,
so a checkpoint does not hold it; a resumed run starts fresh episodes (everything in the train
state, including the observation normaliser, resumes exactly).
"""
from __future__ import annotations

import multiprocessing as mp
from typing import Callable, NamedTuple, Protocol

import numpy as np

from diffrl.envs.base import EnvSpec


class HostEnv(Protocol):
    """One environment stepped on the host (numpy in and out).

    Optional: a task that knows when it succeeded keeps a boolean ``success_once`` attribute (True once
    the current episode has reached success; False again after ``reset``): the batch reports it when
    an episode ends (:attr:`HostStep.episode_success`) and evaluation logs the success rate.
    """

    spec: EnvSpec

    def reset(self, seed: int) -> np.ndarray:
        """Start an episode; returns the observation (obs_size,)."""

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool]:
        """Native action (action_size,) -> (obs, reward, terminated, truncated by the simulator). A simulator
        that went unstable may return a non-finite obs or reward: the batch ends that episode."""


class HostStep(NamedTuple):
    """One batched step (or reset) of a :class:`HostVecEnv`; leading axis B. numpy arrays, or JAX
    arrays for a batch simulated on the accelerator (``diffrl.envs.maniskill_batch``)."""

    obs: np.ndarray
    """(B, obs_size) float32: the observation to act on next (a fresh episode's after a reset)."""
    reward: np.ndarray
    """(B,) float32 reward of the transition (0 after a reset)."""
    terminated: np.ndarray
    """(B,) bool: the transition reached a terminal state (no bootstrapping)."""
    truncated: np.ndarray
    """(B,) bool: the episode was cut by a time limit (bootstrap from ``final_obs``)."""
    final_obs: np.ndarray
    """(B, obs_size) float32: the observation the transition ended in (== obs unless it ended)."""
    episode_return: np.ndarray
    """(B,) float32: the finished episode's return on the step it ends, else 0."""
    episode_length: np.ndarray
    """(B,) int32: the finished episode's length on the step it ends, else 0."""
    episode_success: np.ndarray
    """(B,) float32: on the step an episode ends, 1 if it reached the task's success at any step and
    0 if not, for tasks that report one (a ``success_once`` attribute, e.g. ManiSkill); NaN for tasks
    that do not; 0 on other steps."""
    nonfinite: np.ndarray | None = None
    """(B,) bool: the simulator returned a non-finite observation or reward on this step under a finite
    action, which the batch made a termination with reward 0 whose ``final_obs`` is the last finite
    observation (as ``diffrl.envs.wrappers.NonFiniteGuard``); None from a batch that does not check."""

    @property
    def done(self) -> np.ndarray:
        return self.terminated | self.truncated


def native_action(action: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """[-1, 1] -> [low, high] after clipping, as ``diffrl.envs.wrappers.RescaleAction``."""
    unit = np.clip(np.asarray(action, np.float32), -1.0, 1.0)
    return low + (unit + 1.0) * 0.5 * (high - low)


class _Slot:
    """One env of a batch with the training stack's bookkeeping (time limit, auto-reset, stats).

    ``step_count`` drives the time limit (randomised once at the first reset, as
    ``randomize_step_counters``); ``ep_length``/``ep_return`` are the episode's own totals, so the
    first, shortened episodes report the steps they really took (as ``EpisodeStats``)."""

    def __init__(self, env: HostEnv, index: int, episode_length: int):
        self.env, self.index, self.limit = env, index, episode_length
        self.low = np.asarray(env.spec.action_low, np.float32)
        self.high = np.asarray(env.spec.action_high, np.float32)

    def _new_episode(self) -> np.ndarray:
        seed = np.random.SeedSequence([self.seed, self.index, self.episode]).generate_state(1)[0]
        self.episode += 1
        self.step_count, self.ep_length, self.ep_return = 0, 0, 0.0
        self.obs = np.asarray(self.env.reset(int(seed)), np.float32)
        return self.obs

    def reset(self, seed: int, first_step_count: int) -> tuple:
        self.seed, self.episode = int(seed), 0
        obs = self._new_episode()
        self.step_count = int(first_step_count)
        return obs, 0.0, False, False, obs, 0.0, 0, 0.0, False

    def step(self, action: np.ndarray) -> tuple:
        obs, reward, terminated, sim_truncated = self.env.step(native_action(action, self.low, self.high))
        final = np.asarray(obs, np.float32)
        # A finite action whose step is not finite: a finite termination from the last finite observation
        # (wrappers.NonFiniteGuard); a non-finite action is a diverged policy, whose NaN must show.
        nonfinite = bool(np.all(np.isfinite(action))) and not (np.all(np.isfinite(final)) and np.isfinite(reward))
        if nonfinite:
            final, reward, terminated, sim_truncated = self.obs, 0.0, True, False
        self.obs = final
        self.step_count += 1
        self.ep_length += 1
        self.ep_return += float(reward)
        terminated = bool(terminated)
        truncated = (bool(sim_truncated) or self.step_count >= self.limit) and not terminated
        if terminated or truncated:
            ep_return, ep_length = self.ep_return, self.ep_length
            success = getattr(self.env, "success_once", None)  # read before the reset clears it
            success = float("nan") if success is None else float(bool(success))
            return (self._new_episode(), float(reward), terminated, truncated, final, ep_return, ep_length,
                    success, nonfinite)
        return final, float(reward), False, False, final, 0.0, 0, 0.0, False


def _stack(rows: list[tuple]) -> HostStep:
    cols = list(zip(*rows))
    return HostStep(
        obs=np.stack(cols[0]).astype(np.float32),
        reward=np.asarray(cols[1], np.float32),
        terminated=np.asarray(cols[2], bool),
        truncated=np.asarray(cols[3], bool),
        final_obs=np.stack(cols[4]).astype(np.float32),
        episode_return=np.asarray(cols[5], np.float32),
        episode_length=np.asarray(cols[6], np.int32),
        episode_success=np.asarray(cols[7], np.float32),
        nonfinite=np.asarray(cols[8], bool),
    )


def first_step_counts(seed: int, num_envs: int, episode_length: int) -> np.ndarray:
    """The batch's first time-limit counters, uniform in [0, episode_length) (reproducible)."""
    return np.random.default_rng([seed, 2**31 - 1]).integers(0, episode_length, num_envs)


def _counts(seed: int, num_envs: int, episode_length: int, spread: bool) -> np.ndarray:
    return first_step_counts(seed, num_envs, episode_length) if spread else np.zeros(num_envs, np.int64)


class HostVecEnv(Protocol):
    """A batch of host environments with the training stack's semantics (see the module doc)."""

    spec: EnvSpec
    """The batch's spec: actions in [-1, 1], ``episode_length`` the time limit."""
    num_envs: int

    def reset(self, seed: int, spread_counters: bool = True) -> HostStep:
        """Start every env's first episode; ``spread_counters`` draws the time-limit counters
        uniformly (training), else they start at 0 (evaluation: full episodes)."""

    def step(self, actions: np.ndarray) -> HostStep:
        """(B, action_size) actions in [-1, 1] (a JAX array: a batch on the host converts it) -> the
        batch's step (auto-reset included)."""

    def close(self) -> None:
        """Stop the workers."""



def batch_spec(spec: EnvSpec, episode_length: int) -> EnvSpec:
    """The spec a batch reports: [-1, 1] actions and its time limit (as ``wrap``)."""
    import dataclasses

    ones = (1.0,) * spec.action_size
    return dataclasses.replace(spec, action_low=tuple(-x for x in ones), action_high=ones,
                               episode_length=int(episode_length))


class SerialVecEnv:
    """``num_envs`` host environments stepped one after the other in this process."""

    def __init__(self, make_env: Callable[[], HostEnv], num_envs: int, episode_length: int | None = None):
        envs = [make_env() for _ in range(num_envs)]
        length = episode_length or envs[0].spec.episode_length
        self._slots = [_Slot(env, i, length) for i, env in enumerate(envs)]
        self.num_envs, self.spec = num_envs, batch_spec(envs[0].spec, length)

    def reset(self, seed: int, spread_counters: bool = True) -> HostStep:
        counts = _counts(seed, self.num_envs, self.spec.episode_length, spread_counters)
        return _stack([slot.reset(seed, c) for slot, c in zip(self._slots, counts)])

    def step(self, actions: np.ndarray) -> HostStep:
        actions = np.asarray(actions, np.float32).reshape(self.num_envs, -1)
        return _stack([slot.step(a) for slot, a in zip(self._slots, actions)])

    def close(self) -> None:
        for slot in self._slots:
            close = getattr(slot.env, "close", None)
            if close:
                close()


def _worker(pipe, make_env, first_index: int, count: int, episode_length: int | None) -> None:
    """Worker process: owns envs ``first_index .. first_index + count - 1`` of the batch (time limit
    ``episode_length``, or the env's own when None)."""
    try:
        envs = [make_env() for _ in range(count)]
        length = episode_length or envs[0].spec.episode_length
        slots = [_Slot(env, first_index + i, length) for i, env in enumerate(envs)]
        pipe.send(("ready", slots[0].env.spec))
        while True:
            command, payload = pipe.recv()
            if command == "reset":
                seed, counts = payload
                pipe.send(("ok", [slot.reset(seed, c) for slot, c in zip(slots, counts)]))
            elif command == "step":
                pipe.send(("ok", [slot.step(a) for slot, a in zip(slots, payload)]))
            elif command == "close":
                break
    except Exception as e:  # reported to the parent with the worker's own message
        import traceback

        pipe.send(("error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        pipe.close()


class HostEnvError(RuntimeError):
    """A worker process of a :class:`ProcessVecEnv` failed (its message and traceback included)."""


class ProcessVecEnv:
    """``num_envs`` host environments in ``num_workers`` worker processes (contiguous slices).

    Workers start with the ``spawn`` method (forking a process that has started JAX's threads is
    unsafe), so ``make_env`` must be picklable: a module-level function or a ``functools.partial``
    of one. Results are identical to :class:`SerialVecEnv`'s for the same seed and batch.
    """

    def __init__(self, make_env: Callable[[], HostEnv], num_envs: int, num_workers: int,
                 episode_length: int | None = None):
        if not 1 <= num_workers <= num_envs:
            raise ValueError(f"num_workers must be in [1, num_envs={num_envs}] (got {num_workers})")
        context = mp.get_context("spawn")
        sizes = [num_envs // num_workers + (w < num_envs % num_workers) for w in range(num_workers)]
        self._pipes, self._procs, first = [], [], 0
        for size in sizes:
            parent, child = context.Pipe()
            proc = context.Process(target=_worker, args=(child, make_env, first, size, episode_length),
                                   daemon=True)
            proc.start()
            child.close()
            self._pipes.append(parent)
            self._procs.append(proc)
            first += size
        self._sizes = sizes
        spec = [self._receive(p) for p in self._pipes][0]
        self.num_envs, self.spec = num_envs, batch_spec(spec, episode_length or spec.episode_length)

    def _receive(self, pipe):
        try:
            status, payload = pipe.recv()
        except EOFError:
            raise HostEnvError("a host environment worker process died (see its output above)") from None
        if status == "error":
            self.close()
            raise HostEnvError(f"host environment worker failed: {payload}")
        return payload

    def _gather(self) -> HostStep:
        rows = []
        for pipe in self._pipes:
            rows.extend(self._receive(pipe))
        return _stack(rows)

    def reset(self, seed: int, spread_counters: bool = True) -> HostStep:
        counts = _counts(seed, self.num_envs, self.spec.episode_length, spread_counters)
        start = 0
        for pipe, size in zip(self._pipes, self._sizes):
            pipe.send(("reset", (seed, counts[start:start + size])))
            start += size
        return self._gather()

    def step(self, actions: np.ndarray) -> HostStep:
        actions = np.asarray(actions, np.float32).reshape(self.num_envs, -1)
        start = 0
        for pipe, size in zip(self._pipes, self._sizes):
            pipe.send(("step", actions[start:start + size]))
            start += size
        return self._gather()

    def close(self) -> None:
        for pipe in self._pipes:
            try:
                pipe.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
        self._pipes, self._procs = [], []

    def __del__(self):
        if getattr(self, "_procs", None):
            self.close()


def make_vec_env(make_env: Callable[[], HostEnv], num_envs: int, num_workers: int,
                 episode_length: int | None = None) -> HostVecEnv:
    """:class:`SerialVecEnv` for ``num_workers == 0``, else :class:`ProcessVecEnv`."""
    if num_workers == 0:
        return SerialVecEnv(make_env, num_envs, episode_length)
    return ProcessVecEnv(make_env, num_envs, min(num_workers, num_envs), episode_length)


class JaxHostEnv:
    """One (unbatched) JAX environment stepped from the host as a :class:`HostEnv`.

    Runs a JAX task through the host path, in this process or in worker processes; the tests use
    it to check the host loop against the JAX loop on the same task. ``reset(seed)`` starts from
    ``PRNGKey(seed)``; a termination is the env's ``terminated``; the env has no time limit of its
    own (the batch's applies)."""

    def __init__(self, env):
        import jax

        self.env, self.spec = env, env.spec
        self._reset = jax.jit(env.reset)
        self._step = jax.jit(env.step)
        self._state = None

    def reset(self, seed: int) -> np.ndarray:
        import jax

        self._state = self._reset(jax.random.PRNGKey(seed))
        return np.asarray(self._state.obs)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool]:
        self._state = self._step(self._state, np.asarray(action, np.float32))
        return (np.asarray(self._state.obs), float(self._state.reward), bool(self._state.terminated), False)
