"""Which registered environments are host environments (stepped outside JAX), and their makers.

A name under one of :data:`HOST_PREFIXES` is built by ``diffrl.envs.registry.make`` as ONE
:class:`~diffrl.envs.host.HostEnv` (its ``spec`` and a numpy ``reset``/``step``); training and
evaluation batch it with :func:`host_env_maker` (worker processes, ``--host-workers``). Importing
this module imports no simulator.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from diffrl.envs.base import EnvSpec


def _make_dmc(task: str):
    from diffrl.envs.dmc import DmControlEnv

    return DmControlEnv(task)


def _make_gym(task: str):
    from diffrl.envs.gymnasium_env import GymnasiumHostEnv

    return GymnasiumHostEnv(task)


def _make_maniskill(task: str):
    from diffrl.envs.maniskill import ManiSkillEnv

    return ManiSkillEnv(task)


_MAKERS: dict[str, Callable[[str], object]] = {"dmc/": _make_dmc, "gym/": _make_gym, "maniskill/": _make_maniskill}
"""Each host suite's ``task -> HostEnv`` (module-level functions: picklable for worker processes)."""

HOST_PREFIXES: tuple[str, ...] = tuple(_MAKERS)
"""Suites of host environments."""


def is_host_env(name: str) -> bool:
    return name.startswith(HOST_PREFIXES)


def single_env_factory(name: str) -> Callable[[], object]:
    """A picklable ``() -> HostEnv`` for ``name`` (worker processes build their own envs with it)."""
    prefix, slash, task = name.partition("/")
    if slash and prefix + "/" in _MAKERS:
        return functools.partial(_MAKERS[prefix + "/"], task)
    raise ValueError(f"{name!r} is not a host environment (suites: {', '.join(HOST_PREFIXES)})")


@dataclass(frozen=True)
class HostEnvMaker:
    """What training needs of a host task before any worker starts: its specs and a batch factory.

    ``spec`` is the batch's ([-1, 1] actions, the run's time limit), ``unwrapped.spec`` the task's
    own (native action bounds), as for wrapped JAX environments."""

    name: str
    make_env: Callable[[], object]
    native_spec: EnvSpec
    spec: EnvSpec
    num_workers: int
    make_batch: Callable[[int, int], object] | None = None
    """``(num_envs, episode_length) -> HostVecEnv`` for a simulator that batches itself (ManiSkill's
    GPU scene); None: ``make_env`` copies in worker processes."""

    @property
    def unwrapped(self):
        return _Unwrapped(self.native_spec)

    def make(self, num_envs: int):
        """A started :class:`~diffrl.envs.host.HostVecEnv` of ``num_envs`` envs (close it after)."""
        if self.make_batch is not None:
            return self.make_batch(num_envs, self.spec.episode_length)
        from diffrl.envs.host import make_vec_env

        return make_vec_env(self.make_env, num_envs, self.num_workers, self.spec.episode_length)


@dataclass(frozen=True)
class _Unwrapped:
    spec: EnvSpec


def maniskill_batch(task: str, sim_backend: str, num_envs: int, episode_length: int):
    """One ManiSkill scene of ``num_envs`` copies (``diffrl.envs.maniskill_batch``)."""
    from diffrl.envs.maniskill_batch import ManiSkillBatchVecEnv

    return ManiSkillBatchVecEnv(task, num_envs, episode_length, sim_backend=sim_backend)


def host_env_maker(name: str, native_spec: EnvSpec, episode_length: int, num_workers: int,
                   maniskill_backend: str = "workers") -> HostEnvMaker:
    """``maniskill_backend`` (resolved: ``workers`` or ``gpu``) chooses how maniskill/* batches."""
    from diffrl.envs.host import batch_spec

    make_batch = None
    if name.startswith("maniskill/") and maniskill_backend == "gpu":
        make_batch = functools.partial(maniskill_batch, name.partition("/")[2], "physx_cuda")
    return HostEnvMaker(name, single_env_factory(name), native_spec, batch_spec(native_spec, episode_length),
                        num_workers, make_batch)
