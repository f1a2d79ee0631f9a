"""Environments by name: ``make("playground/CartpoleSwingup")``.

Names are ``<suite>/<task>`` with suites ``playground`` (MuJoCo Playground DM Control
Suite and locomotion), ``brax``, ``gymnax``, ``toy``, and the host suites ``dmc`` (dm_control), ``gym``
(gymnasium) and ``maniskill`` (ManiSkill3), stepped outside JAX (``diffrl.envs.host``); users add their own with
:func:`register` (a JAX environment) or :func:`register_host` (a simulator stepped outside JAX), or from
outside Python with a ``module:factory`` name or a ``diffrl.envs`` entry point (``diffrl.envs.external``).
``make`` returns the bare, unbatched env (wrap it with
:func:`diffrl.envs.wrappers.wrap` for training; a ``dmc/`` name gives one host env). Listing names imports no simulator;
the suite's library is imported only when one of its envs is made.

Which names are host environments, and the picklable ``() -> HostEnv`` each is built with
(:func:`single_env_factory`), are kept here with the other names; how a host environment is then
batched for training is :mod:`diffrl.envs.host_registry`.
"""
from __future__ import annotations

import difflib
import functools
from typing import Callable

from diffrl.envs import external
from diffrl.envs.base import Env, EnvSpec
from diffrl.envs.brax_envs import BRAX_ENVS
from diffrl.envs.dmc import DMC_TASKS
from diffrl.envs.gymnasium_env import GYM_TASKS
from diffrl.envs.gymnax_envs import GYMNAX_ENVS
from diffrl.envs.maniskill import MANISKILL_TASKS, NEEDS_DOWNLOAD, needs_download_error
from diffrl.envs.playground import DMC_ENVS, LOCOMOTION_ENVS, MANIPULATION_ENVS

EnvFactory = Callable[..., Env]


def _playground(task: str) -> EnvFactory:
    def factory(**kwargs) -> Env:
        from diffrl.envs.playground import PlaygroundEnv

        return PlaygroundEnv(task, **kwargs)

    return factory


def _brax(task: str) -> EnvFactory:
    def factory(**kwargs) -> Env:
        from diffrl.envs.brax_envs import BraxEnv

        return BraxEnv(task, **kwargs)

    return factory


def _gymnax(task: str) -> EnvFactory:
    def factory(**kwargs) -> Env:
        from diffrl.envs.gymnax_envs import GymnaxEnv

        return GymnaxEnv(task, **kwargs)

    return factory


def _toy(cls_name: str) -> EnvFactory:
    def factory(**kwargs) -> Env:
        from diffrl.envs import toy

        return getattr(toy, cls_name)(**kwargs)

    return factory


def _host(name: str) -> EnvFactory:
    """A registry entry that builds ONE host env: ``single_env_factory`` finds a registration that
    overrides a listed name (:func:`register_host`) before the suite's own maker."""
    def factory(**kwargs):
        if kwargs:
            raise ValueError(f"{name} takes no constructor arguments (got {sorted(kwargs)})")
        return single_env_factory(name)()

    return factory


def _builtin() -> dict[str, EnvFactory]:
    table: dict[str, EnvFactory] = {}
    table.update({f"playground/{t}": _playground(t) for t in DMC_ENVS + LOCOMOTION_ENVS})
    table.update({f"brax/{t}": _brax(t) for t in BRAX_ENVS})
    table.update({f"gymnax/{t}": _gymnax(t) for t in GYMNAX_ENVS})
    table.update({f"dmc/{t}": _host(f"dmc/{t}") for t in DMC_TASKS})
    table.update({f"gym/{t}": _host(f"gym/{t}") for t in GYM_TASKS})
    table.update({f"maniskill/{t}": _host(f"maniskill/{t}") for t in MANISKILL_TASKS})
    table["toy/MirrorGoals"] = _toy("MirrorGoals")
    table["toy/BimodalBandit"] = _toy("BimodalBandit")
    table["toy/OctahedronGoals"] = _toy("OctahedronGoals")
    table["toy/CornerBandit"] = _toy("CornerBandit")
    return table


_REGISTRY: dict[str, EnvFactory] = _builtin()
_BUILTIN = frozenset(_REGISTRY)


def is_builtin(name: str) -> bool:
    """Whether ``name`` is one of diffrl's own environments (not one a user registered)."""
    return name in _BUILTIN


def list_envs() -> list[str]:
    """All registered names (built-in and user-registered, in registration order), then the names
    installed packages declare in the ``diffrl.envs`` entry point group."""
    return list(_REGISTRY) + [name for name in external.entry_point_names() if name not in _REGISTRY]


def _prefixes() -> list[str]:
    return sorted({name.split("/", 1)[0] + "/" for name in _REGISTRY if "/" in name})


def _unknown(name: str) -> ValueError:
    task = name.split("/", 1)[-1]
    if name.startswith("playground/") and task in MANIPULATION_ENVS:
        return ValueError(
            f"{name!r} is a Playground manipulation task: not supported (its MuJoCo Menagerie "
            "robots are not packaged for offline use). The DM Control Suite and locomotion "
            "tasks are (see list_envs())."
        )
    if name.startswith("maniskill/") and task in NEEDS_DOWNLOAD:
        return needs_download_error(task)
    close = difflib.get_close_matches(name, list(_REGISTRY), n=5, cutoff=0.6)
    if not close:  # a bare task name ("CartpoleSwingup") still finds its suite
        by_task = {n.split("/", 1)[-1]: n for n in _REGISTRY}
        close = [by_task[t] for t in difflib.get_close_matches(task, list(by_task), n=5, cutoff=0.6)]
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return ValueError(
        f"unknown environment {name!r}.{hint} Names start with one of "
        f"{', '.join(_prefixes())}; see diffrl.envs.list_envs(). Your own environment: "
        "--env module:factory (docs/environments.md)."
    )


def make(name: str, **kwargs) -> Env:
    """Build the bare (unbatched, unwrapped) env registered as ``name``.

    ``kwargs`` go to the env's constructor, e.g. ``make("brax/ant", backend="mjx")``
    or ``make("playground/G1JoystickFlatTerrain", asymmetric=True)``.
    """
    if name in _REGISTRY:
        return _REGISTRY[name](**kwargs)
    factory = external.find_factory(name)  # module:factory, or an installed package's entry point
    if factory is None:
        raise _unknown(name)
    return external.make(name, factory, **kwargs)


def describe(name: str, **kwargs) -> EnvSpec:
    """The :class:`EnvSpec` of ``name`` (builds the env, so it may be slow)."""
    return make(name, **kwargs).spec


def register(name: str, factory: EnvFactory, overwrite: bool = False) -> None:
    """Make ``factory(**kwargs) -> Env`` available as ``make(name, **kwargs)``.

    A ``suite/`` prefix (e.g. ``"my/Task"``) is recommended. Re-registering an
    existing name raises unless ``overwrite=True``.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("env name must be a non-empty string")
    if not callable(factory):
        raise TypeError(f"factory for {name!r} must be callable")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"environment {name!r} is already registered (pass overwrite=True)")
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Remove a registered name (mainly for tests)."""
    if name not in _REGISTRY:
        raise _unknown(name)
    del _REGISTRY[name]


# ----------------------------------------------------------------------------- host environments
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
    if not callable(make_env) or (make_batch is not None and not callable(make_batch)):
        raise TypeError(f"register_host({name!r}): make_env and make_batch must be callable")
    if name in _REGISTERED and not overwrite:
        raise ValueError(f"host environment {name!r} is already registered (pass overwrite=True)")
    # a listed host name (dmc/, gym/, maniskill/) keeps its registry entry, which builds through
    # single_env_factory and so finds this registration first
    listed_host = name.startswith(HOST_PREFIXES) and name in _REGISTRY
    if not listed_host:
        register(name, _host(name), overwrite=overwrite or name in _REGISTERED)
    _REGISTERED[name] = (make_env, make_batch)


def unregister_host(name: str) -> None:
    """Remove a name added with :func:`register_host` (a listed host task it overrode comes back)."""
    if name not in _REGISTERED:
        raise ValueError(f"{name!r} was not added with register_host")
    del _REGISTERED[name]
    if name in _REGISTRY and not (name.startswith(HOST_PREFIXES) and is_builtin(name)):
        unregister(name)


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


def registered_batch_maker(name: str) -> Callable[[int, int], object] | None:
    """The ``make_batch`` :func:`register_host` was given for ``name`` (None: none, or not registered)."""
    return _REGISTERED[name][1] if name in _REGISTERED else None


def is_registered_host(name: str) -> bool:
    """Whether ``name`` was added (or a listed host name overridden) with :func:`register_host`."""
    return name in _REGISTERED
