"""How a host environment (stepped outside JAX) is batched for training: :func:`host_env_maker`.

A name under one of :data:`~diffrl.envs.registry.HOST_PREFIXES`, or added with
:func:`~diffrl.envs.registry.register_host`, is built by ``diffrl.envs.registry.make`` as ONE
:class:`~diffrl.envs.host.HostEnv` (its ``spec`` and a numpy ``reset``/``step``); training and
evaluation batch it with :func:`host_env_maker` (worker processes, ``--host-workers``, or a simulator
that batches itself). Which names are host environments is the registry's, with every other name;
``register_host`` and ``unregister_host`` can be imported from here as well (the path
docs/environments.md shows). Importing this module imports no simulator.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

from diffrl.envs.base import EnvSpec
from diffrl.envs.registry import (is_registered_host, register_host, registered_batch_maker, single_env_factory,
                                  unregister_host)

__all__ = ["HostEnvMaker", "host_env_maker", "maniskill_batch", "register_host", "unregister_host"]


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
    GPU scene, a registered ``make_batch``); None: ``make_env`` copies in worker processes."""

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
    """``maniskill_backend`` (resolved: ``workers`` or ``gpu``) chooses how maniskill/* batches; a
    name added with :func:`register_host` is batched as registered."""
    from diffrl.envs.host import batch_spec

    make_env = single_env_factory(name)
    make_batch = registered_batch_maker(name)
    if not is_registered_host(name) and name.startswith("maniskill/") and maniskill_backend == "gpu":
        make_batch = functools.partial(maniskill_batch, name.partition("/")[2], "physx_cuda")
    if make_batch is None and num_workers > 0:
        import pickle

        try:
            pickle.dumps(make_env)
        except Exception as e:  # noqa: BLE001 (pickle raises several types)
            raise ValueError(f"{name}: its make_env cannot be sent to worker processes ({e}); register a "
                             "module-level function or a functools.partial of one, or train with "
                             "--host-workers 0") from None
    return HostEnvMaker(name, make_env, native_spec, batch_spec(native_spec, episode_length), num_workers,
                        make_batch)
