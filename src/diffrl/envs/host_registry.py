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

_REGISTERED: dict[str, tuple[Callable[[], object], Callable[[int, int], object] | None]] = {}
"""Host environments added with :func:`register_host`: name -> (make_env, make_batch)."""


def register_host(name: str, make_env: Callable[[], object], make_batch: Callable[[int, int], object] | None = None,
                  overwrite: bool = False) -> None:
    """Make a simulator stepped outside JAX trainable as ``--env name`` (Python API).

    Args:
      name: e.g. ``"my/Task"``; it may also override a listed one (``maniskill/<Task>`` whose assets you
        downloaded) with ``overwrite=True``.
      make_env: ``() -> HostEnv`` (``diffrl.envs.host``: ``spec``, ``reset(seed)``, ``step(action)``),
        one environment. It gives the spec, and the worker processes (``--host-workers N``) build their
        copies with it, so for N > 0 it must be picklable: a module-level function or a
        ``functools.partial`` of one (``--host-workers 0`` steps the copies in this process and takes
        any callable).
      make_batch: optional ``(num_envs, episode_length) -> HostVecEnv`` for a simulator that batches
        itself (a gymnasium vector env: ``diffrl.envs.gym_vector``; a GPU scene); it then replaces the
        copies of ``make_env``.
    """
    from diffrl.envs import registry

    if not callable(make_env) or (make_batch is not None and not callable(make_batch)):
        raise TypeError(f"register_host({name!r}): make_env and make_batch must be callable")
    if name in _REGISTERED and not overwrite:
        raise ValueError(f"host environment {name!r} is already registered (pass overwrite=True)")
    # a listed host name (dmc/, gym/, maniskill/) keeps its registry entry, which builds through
    # single_env_factory and so finds this registration first
    listed_host = name.startswith(HOST_PREFIXES) and name in registry.list_envs()
    if not listed_host:
        registry.register(name, _registered_factory(name), overwrite=overwrite or name in _REGISTERED)
    _REGISTERED[name] = (make_env, make_batch)


def unregister_host(name: str) -> None:
    """Remove a name added with :func:`register_host` (a listed host task it overrode comes back)."""
    from diffrl.envs import registry

    if name not in _REGISTERED:
        raise ValueError(f"{name!r} was not added with register_host")
    del _REGISTERED[name]
    if name in registry.list_envs() and not _is_builtin(name):
        registry.unregister(name)


def _is_builtin(name: str) -> bool:
    """A task of a host suite's own listing (its registry entry predates any registration)."""
    from diffrl.envs import registry

    return name.startswith(HOST_PREFIXES) and registry.is_builtin(name)


def _registered_factory(name: str):
    def factory(**kwargs):
        if kwargs:
            raise ValueError(f"{name} takes no constructor arguments (got {sorted(kwargs)})")
        return single_env_factory(name)()

    return factory


def is_host_env(name: str) -> bool:
    return name in _REGISTERED or name.startswith(HOST_PREFIXES)


def single_env_factory(name: str) -> Callable[[], object]:
    """A picklable ``() -> HostEnv`` for ``name`` (worker processes build their own envs with it)."""
    if name in _REGISTERED:
        return _REGISTERED[name][0]
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
    make_batch = _REGISTERED[name][1] if name in _REGISTERED else None
    if name not in _REGISTERED and name.startswith("maniskill/") and maniskill_backend == "gpu":
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
